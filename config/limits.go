package config

import (
	"fmt"
	"time"

	"github.com/sweepgate/sweepgate/clientip"
)

// DefaultBodyReadTimeout is limits.body_read_timeout's default: far longer
// than any pause of a client that is still sending, short enough that a
// client that stopped does not hold a connection and a backend request for
// long.
const DefaultBodyReadTimeout = 2 * time.Minute

// Limits bound what one gateway serves at once.
type Limits struct {
	// MaxInFlight is the most S3 requests served at once; 0 is no limit.
	MaxInFlight int64
	// MaxInFlightPerCredential is the most served at once for one access
	// key; 0 is no limit.
	MaxInFlightPerCredential int64
	// BodyReadTimeout is the longest wait for the next bytes of a request
	// body; 0 waits forever.
	BodyReadTimeout time.Duration
}

// Trusted returns the trusted proxies (trusted_proxies), which
// validateLimits has checked.
func (c *Config) Trusted() (clientip.Trusted, error) {
	t, err := clientip.ParseTrusted(c.TrustedProxies)
	if err != nil {
		return clientip.Trusted{}, fmt.Errorf("%s: %w", describe("trusted_proxies"), err)
	}
	return t, nil
}

// validateLimits checks trusted_proxies, proxy_protocol and the limits.
func (c *Config) validateLimits() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	if _, err := c.Trusted(); err != nil {
		errs = append(errs, err)
	}
	if c.ProxyProtocol && len(c.TrustedProxies) == 0 {
		bad("proxy_protocol", "needs trusted_proxies: a PROXY header is only read from a trusted proxy")
	}
	if c.Limits.MaxInFlight < 0 {
		bad("limits.max_in_flight", "must not be negative (0 is no limit), got %d", c.Limits.MaxInFlight)
	}
	if c.Limits.MaxInFlightPerCredential < 0 {
		bad("limits.max_in_flight_per_credential", "must not be negative (0 is no limit), got %d", c.Limits.MaxInFlightPerCredential)
	}
	if c.Limits.BodyReadTimeout < 0 {
		bad("limits.body_read_timeout", "must not be negative (0 waits forever), got %s", c.Limits.BodyReadTimeout)
	}
	return errs
}
