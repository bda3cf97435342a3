package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/sweepgate/sweepgate/config"
)

// AdminCAEnv names the PEM file of the certificate authorities that the
// admin commands trust for an https admin listener when --admin-ca is not
// given.
const AdminCAEnv = config.EnvPrefix + "ADMIN_CA"

// adminCAFile returns the CA file the commands verify the admin listener
// with: --admin-ca, else $SWEEPGATE_ADMIN_CA; empty for the system's
// roots.
func (c *Client) adminCAFile() string {
	if c.adminCA != "" {
		return c.adminCA
	}
	return envValue(c.Environ, AdminCAEnv)
}

// adminHTTP returns the client of the admin API, made on first use: one
// that verifies an https listener's certificate against the CA file
// (adminCAFile), else the system's roots. There is no way to skip the
// verification: the admin token goes over this connection.
func (c *Client) adminHTTP() (*http.Client, error) {
	c.httpMu.Lock()
	defer c.httpMu.Unlock()
	if c.httpClient != nil {
		return c.httpClient, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if path := c.adminCAFile(); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("the admin listener's CA (--admin-ca, $%s): %w", AdminCAEnv, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the admin listener's CA (--admin-ca, $%s): %s holds no PEM certificate", AdminCAEnv, path)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	c.httpClient = &http.Client{Transport: tr}
	return c.httpClient, nil
}

// certificateProblem explains err when it is the admin listener's
// certificate failing verification, and returns "" otherwise.
func (c *Client) certificateProblem(err error) string {
	var verr *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	if !errors.As(err, &verr) && !errors.As(err, &unknown) && !errors.As(err, &host) && !errors.As(err, &invalid) {
		return ""
	}
	trusted := "the system's roots"
	if path := c.adminCAFile(); path != "" {
		trusted = "the CA in " + path
	}
	return fmt.Sprintf("the admin listener's certificate is not trusted (checked against %s): %v\n"+
		"Give the CA that signed admin.tls_cert_file with --admin-ca FILE or $%s, and reach the listener by a name its certificate holds.",
		trusted, err, AdminCAEnv)
}
