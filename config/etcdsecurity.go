package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// validateEtcdSecurity checks the external cluster's TLS and
// authentication settings: they belong to etcd.endpoints (the embedded
// etcd listens on loopback in the clear), come in pairs, and need https
// endpoints, so that a certificate or a password is never sent in the
// clear.
func (c *Config) validateEtcdSecurity() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	e := c.Etcd
	tlsSet := e.CAFile != "" || e.CertFile != "" || e.KeyFile != ""
	if c.UsesEmbeddedEtcd() {
		for _, s := range []struct{ key, value string }{
			{"etcd.ca_file", e.CAFile}, {"etcd.cert_file", e.CertFile}, {"etcd.key_file", e.KeyFile},
			{"etcd.username", e.Username}, {"etcd.password_file", e.PasswordFile},
		} {
			if s.value != "" {
				bad(s.key, "applies to an external cluster (etcd.endpoints); the embedded etcd serves loopback without TLS or users")
			}
		}
		return errs
	}
	if (e.CertFile == "") != (e.KeyFile == "") {
		bad("etcd.cert_file", "etcd.cert_file and etcd.key_file go together")
	}
	if (e.Username == "") != (e.PasswordFile == "") {
		bad("etcd.username", "etcd.username and etcd.password_file go together")
	}
	if tlsSet || e.Username != "" {
		for _, ep := range e.Endpoints {
			if !strings.HasPrefix(ep, "https://") && !strings.HasPrefix(ep, "unixs://") {
				bad("etcd.endpoints", "%q: TLS or a password is configured, so every endpoint must be https://", ep)
			}
		}
	}
	return errs
}

// EtcdCredentials reads the external cluster's CA, client certificate and
// password from their files. It is the zero value (in the clear,
// anonymous) when none is configured and no endpoint is https, and uses
// the system's roots for https endpoints without etcd.ca_file.
func (c *Config) EtcdCredentials() (etcdstore.Credentials, error) {
	e := c.Etcd
	var creds etcdstore.Credentials
	https := false
	for _, ep := range e.Endpoints {
		https = https || strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://")
	}
	if https {
		creds.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return creds, fmt.Errorf("etcd.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return creds, fmt.Errorf("etcd.ca_file %s: no PEM certificate in it", e.CAFile)
		}
		creds.TLS.RootCAs = pool
	}
	if e.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return creds, fmt.Errorf("etcd.cert_file and etcd.key_file: %w", err)
		}
		creds.TLS.Certificates = []tls.Certificate{cert}
	}
	if e.Username != "" {
		pw, err := readSecretFile("password file", e.PasswordFile)
		if err != nil {
			return creds, fmt.Errorf("etcd.password_file: %w", err)
		}
		creds.Username, creds.Password = e.Username, pw
	}
	return creds, nil
}
