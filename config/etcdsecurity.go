package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
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
		pool, err := readCAFile("etcd.ca_file", e.CAFile)
		if err != nil {
			return creds, err
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

// readCAFile reads the PEM certificates of the file at path into a pool;
// key names the setting in errors.
func readCAFile(key, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", key, path)
	}
	return pool, nil
}

// BackendRootCAs returns the certificate authorities of backend.ca_file,
// which an https backend's certificate must chain to; nil (the system's
// roots) when it is not set.
func (c *Config) BackendRootCAs() (*x509.CertPool, error) {
	if c.Backend.CAFile == "" {
		return nil, nil
	}
	return readCAFile("backend.ca_file", c.Backend.CAFile)
}

// checkEtcdEndpoint checks one of etcd.endpoints: a URL of a scheme etcd
// serves, or host:port.
func checkEtcdEndpoint(ep string) error {
	if ep == "" || strings.ContainsAny(ep, " \t\r\n") {
		return errors.New("empty or contains spaces")
	}
	if !strings.Contains(ep, "://") {
		if _, _, err := net.SplitHostPort(ep); err != nil {
			return errors.New("want a URL such as http://10.0.0.1:2379, or host:port")
		}
		return nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return errors.New("not a URL")
	}
	switch u.Scheme {
	case "http", "https", "unix", "unixs":
	default:
		return errors.New("scheme must be http, https, unix or unixs")
	}
	if u.Host == "" && u.Path == "" {
		return errors.New("no host")
	}
	return nil
}
