package harness

import (
	"crypto/tls"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

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
