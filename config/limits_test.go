package config

import (
	"strings"
	"testing"
)

// TestValidateLimits: trusted_proxies must parse, proxy_protocol needs
// trusted proxies, and no limit is negative.
func TestValidateLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string // part of the error; empty for none
	}{
		{"defaults", func(*Config) {}, ""},
		{"trusted", func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"} }, ""},
		{"bad prefix", func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/40"} }, "trusted_proxies"},
		{"a name", func(c *Config) { c.TrustedProxies = []string{"lb.example"} }, "trusted_proxies"},
		{"proxy protocol alone", func(c *Config) { c.ProxyProtocol = true }, "proxy_protocol"},
		{"proxy protocol", func(c *Config) { c.ProxyProtocol, c.TrustedProxies = true, []string{"10.0.0.1"} }, ""},
		{"negative total", func(c *Config) { c.Limits.MaxInFlight = -1 }, "limits.max_in_flight"},
		{"negative per key", func(c *Config) { c.Limits.MaxInFlightPerCredential = -1 }, "limits.max_in_flight_per_credential"},
		{"negative timeout", func(c *Config) { c.Limits.BodyReadTimeout = -1 }, "limits.body_read_timeout"},
	} {
		var c Config
		tc.set(&c)
		errs := c.validateLimits()
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", tc.name, errs)
		case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("%s: %v, want one error naming %s", tc.name, errs, tc.want)
		}
	}
}
