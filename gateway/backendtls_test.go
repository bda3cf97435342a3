//go:build integration

package gateway

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

// TestBackendRootCAs: a backend serving HTTPS with a certificate of a
// private CA is reached when BackendRootCAs trusts that CA, for the
// readiness check and for a client's request alike; without it every
// call fails the certificate check, and a client gets an error answer,
// never a request sent to a backend the gateway could not verify.
func TestBackendRootCAs(t *testing.T) {
	m := harness.StartMinIOTLS(t)
	creds := []sigv4.Credential{{AccessKey: "client", SecretKey: "client-secret-1", Principal: "client"}}
	gateway := func(roots *x509.CertPool) *httptest.Server {
		ids, err := backend.NewIdentities(map[string]backend.Key{backend.DefaultIdentity: {AccessKey: m.AccessKey, SecretKey: m.SecretKey}}, "", m.Region, nil)
		if err != nil {
			t.Fatal(err)
		}
		be, err := backend.New(backend.Config{Endpoint: m.Endpoint, RootCAs: roots, Identities: ids})
		if err != nil {
			t.Fatal(err)
		}
		g, err := New(Config{Backend: be, Credentials: creds})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(g)
		t.Cleanup(srv.Close)
		if err := g.CheckBackend(t.Context()); (err == nil) != (roots != nil) {
			t.Errorf("CheckBackend with roots %v: %v", roots != nil, err)
		} else if err != nil && !strings.Contains(err.Error(), "certificate") {
			t.Errorf("CheckBackend without the CA: %v, want a certificate error", err)
		}
		return srv
	}
	listBuckets := func(srv *httptest.Server) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := harness.SignV4(t.Context(), req, "client", "client-secret-1", m.Region, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := listBuckets(gateway(m.Cert.Pool)); got != http.StatusOK {
		t.Errorf("ListBuckets through a gateway that trusts the backend's CA: %d, want 200", got)
	}
	if got := listBuckets(gateway(nil)); got < 500 {
		t.Errorf("ListBuckets through a gateway that does not trust the backend's CA: %d, want an error answer", got)
	}
}
