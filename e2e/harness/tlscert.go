package harness

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"
)

// TLSCert is a self-signed certificate for the loopback names, written to
// files for a server and trusted by Pool for clients.
type TLSCert struct {
	CertFile string
	KeyFile  string
	Pool     *x509.CertPool
}

// NewTLSCert creates a self-signed ECDSA certificate valid for 127.0.0.1,
// ::1, localhost and *.localhost (the latter for virtual-hosted-style
// requests), and writes it and its key into dir.
func NewTLSCert(t testing.TB, dir string) *TLSCert {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "sweepgate e2e", Organization: []string{"sweepgate tests"}},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost", "*.localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	c := &TLSCert{Pool: x509.NewCertPool()}
	c.CertFile, c.KeyFile = issueFiles(t, dir, "tls", tmpl, nil, nil)
	raw, err := os.ReadFile(c.CertFile)
	if err != nil || !c.Pool.AppendCertsFromPEM(raw) {
		t.Fatalf("harness: read back %s: %v", c.CertFile, err)
	}
	return c
}

// startTLSProxy serves HTTPS in-process and passes every request unchanged,
// Host header included, to backend. It stands in for the gateway's TLS
// listener in direct mode, so that TLS tests can be checked against MinIO.
func startTLSProxy(t testing.TB, backend string) (string, *tls.Config) {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
	}
	srv := httptest.NewUnstartedServer(proxy)
	cert := NewTLSCert(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, &tls.Config{RootCAs: cert.Pool, MinVersion: tls.VersionTLS12}
}

// AdminTLS is the admin listener's certificate and key files, and the
// roots a client verifies it with.
type AdminTLS struct {
	CertFile, KeyFile string
	Roots             *x509.CertPool
}

// AdminClient returns an HTTP client of the admin listener: one that
// trusts Options.AdminTLS's roots when it serves HTTPS.
func (g *Gateway) AdminClient() *http.Client {
	if g.adminTLS == nil {
		return &http.Client{}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: g.adminTLS.Roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}
}

// Metrics fetches the admin listener's /metrics text.
func (g *Gateway) Metrics() (string, error) {
	resp, err := g.AdminClient().Get(g.AdminEndpoint + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), errors.New("metrics: " + resp.Status)
	}
	return string(b), nil
}
