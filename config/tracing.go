package config

import (
	"crypto/x509"
	"fmt"
	"net"
)

// Tracing configures the OpenTelemetry traces serve exports over OTLP/gRPC.
// With Endpoint empty (the default) tracing is off: no exporter, no
// goroutine, and the request path only checks that it is off.
type Tracing struct {
	// Endpoint is the collector's host:port; empty turns tracing off.
	Endpoint string
	// Insecure sends spans over plain gRPC, without TLS.
	Insecure bool
	// CAFile names the certificate authorities the collector's certificate
	// must chain to; empty uses the system's roots.
	CAFile string
	// SampleRatio is the fraction of traces started at the gateway that
	// are recorded; a client's traceparent decides for its own trace.
	SampleRatio float64
}

// DefaultTracingSampleRatio records every trace: tracing is off unless an
// operator turns it on, who then wants to see the requests.
const DefaultTracingSampleRatio = 1.0

// TracingRootCAs returns the certificate authorities of tracing.ca_file;
// nil (the system's roots) when it is not set.
func (c *Config) TracingRootCAs() (*x509.CertPool, error) {
	if c.Tracing.CAFile == "" {
		return nil, nil
	}
	return readCAFile("tracing.ca_file", c.Tracing.CAFile)
}

// validateTracing checks the tracing settings: a host:port endpoint, a
// ratio between 0 and 1, and one way of reaching the collector.
func (c *Config) validateTracing() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	t := c.Tracing
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		bad("tracing.sample_ratio", "must be between 0 and 1, got %v", t.SampleRatio)
	}
	if t.Endpoint == "" {
		if t.Insecure || t.CAFile != "" {
			bad("tracing.endpoint", "empty, so tracing is off, but tracing.insecure or tracing.ca_file is set")
		}
		return errs
	}
	if _, _, err := net.SplitHostPort(t.Endpoint); err != nil {
		bad("tracing.endpoint", "%q: want the collector's OTLP/gRPC host:port, such as 127.0.0.1:4317", t.Endpoint)
	}
	if t.Insecure && t.CAFile != "" {
		bad("tracing.ca_file", "set together with tracing.insecure: choose plain gRPC or TLS with this CA")
	}
	if _, err := c.TracingRootCAs(); err != nil {
		bad("tracing.ca_file", "%v", err)
	}
	return errs
}
