package reload

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"

	"github.com/sweepgate/sweepgate/config"
)

// Certificate is the certificate a TLS listener presents (tls_cert_file,
// tls_key_file). A reload swaps it; a connection keeps the certificate of
// its handshake.
type Certificate struct {
	cert atomic.Pointer[tls.Certificate]
}

// LoadCertificate reads cfg's certificate and key.
func LoadCertificate(cfg *config.Config) (*Certificate, error) {
	cert, err := readPair(cfg)
	if err != nil {
		return nil, err
	}
	c := new(Certificate)
	c.cert.Store(cert)
	return c, nil
}

func readPair(cfg *config.Config) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls_cert_file/tls_key_file: %w", err)
	}
	return &cert, nil
}

// Get is the listener's tls.Config.GetCertificate.
func (c *Certificate) Get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cert.Load(), nil
}

// Reload is the certificate's Part: it reads the pair the new
// configuration names, and keeps the one in effect when that fails.
// Turning TLS off or on waits for a restart.
func (c *Certificate) Reload(cfg *config.Config) (func(), error) {
	if cfg.TLSListen == "" {
		return func() {}, nil
	}
	cert, err := readPair(cfg)
	if err != nil {
		return nil, err
	}
	return func() { c.cert.Store(cert) }, nil
}
