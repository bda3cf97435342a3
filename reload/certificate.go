package reload

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"

	"github.com/sweepgate/sweepgate/config"
)

// CertFiles names the certificate and key files of one TLS listener in a
// configuration.
type CertFiles struct {
	// Keys names the two settings in errors: "tls_cert_file/tls_key_file".
	Keys string
	// Files returns the certificate and key files cfg configures; an empty
	// certificate file means the listener serves no TLS.
	Files func(cfg *config.Config) (certFile, keyFile string)
}

// S3Files are the S3 TLS listener's (tls_listen) certificate and key.
var S3Files = CertFiles{
	Keys: "tls_cert_file/tls_key_file",
	Files: func(cfg *config.Config) (string, string) {
		if cfg.TLSListen == "" {
			return "", ""
		}
		return cfg.TLSCertFile, cfg.TLSKeyFile
	},
}

// AdminFiles are the admin listener's (admin.listen) certificate and key.
var AdminFiles = CertFiles{
	Keys: "admin.tls_cert_file/admin.tls_key_file",
	Files: func(cfg *config.Config) (string, string) {
		if cfg.Admin.Listen == "" {
			return "", ""
		}
		return cfg.Admin.TLSCertFile, cfg.Admin.TLSKeyFile
	},
}

// Certificate is the certificate a TLS listener presents. A reload swaps
// it; a connection keeps the certificate of its handshake.
type Certificate struct {
	files CertFiles
	cert  atomic.Pointer[tls.Certificate]
}

// LoadCertificate reads the certificate and key that files name in cfg.
func LoadCertificate(cfg *config.Config, files CertFiles) (*Certificate, error) {
	cert, err := files.read(cfg)
	if err != nil {
		return nil, err
	}
	c := &Certificate{files: files}
	c.cert.Store(cert)
	return c, nil
}

// CheckCertificates reads every certificate and key pair cfg configures,
// as serve's start does, and returns the first that fails: what `config
// check` asks without starting a listener.
func CheckCertificates(cfg *config.Config) error {
	for _, files := range []CertFiles{S3Files, AdminFiles} {
		if cert, _ := files.Files(cfg); cert == "" {
			continue
		}
		if _, err := files.read(cfg); err != nil {
			return err
		}
	}
	return nil
}

func (f CertFiles) read(cfg *config.Config) (*tls.Certificate, error) {
	certFile, keyFile := f.Files(cfg)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Keys, err)
	}
	return &cert, nil
}

// Get is the listener's tls.Config.GetCertificate.
func (c *Certificate) Get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cert.Load(), nil
}

// Reload is the certificate's Part: it reads the pair the new
// configuration names, and keeps the one in effect when that fails.
// Turning TLS off or on waits for a restart (config.RestartNeeded), so a
// configuration that names no pair changes nothing.
func (c *Certificate) Reload(cfg *config.Config) (func(), error) {
	if certFile, _ := c.files.Files(cfg); certFile == "" {
		return func() {}, nil
	}
	cert, err := c.files.read(cfg)
	if err != nil {
		return nil, err
	}
	return func() { c.cert.Store(cert) }, nil
}
