package admin

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sweepgate/sweepgate/logbuf"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
)

const testToken = "s3cr3t-admin-token-0123456789"

// newTokenAdminServer serves the real admin handler over store (nil:
// sessions off) with token required, and returns its base URL and the
// handler's log.
func newTokenAdminServer(t *testing.T, store *etcdstore.Store, token config.Secret) (string, *logbuf.Buffer) {
	t.Helper()
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	a := &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{store: store, log: log},
		token:    token,
		hosts:    loopbackHosts(),
		log:      log,
	}
	srv := httptest.NewServer(a.mux())
	t.Cleanup(srv.Close)
	return srv.URL, logs
}

func adminRequestWith(t *testing.T, method, u, authorization string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestRequireAdminToken(t *testing.T) {
	t.Parallel()
	base, logs := newTokenAdminServer(t, nil, testToken)

	// With sessions off, an authenticated request reaches the API and gets
	// its 503 sessions_disabled: anything but 401 proves it got through.
	tests := []struct {
		name, method, path, auth string
		want                     int
		challenge                string
	}{
		{"no header", "GET", "/admin/v1/sessions", "", 401, "Bearer"},
		{"wrong token", "GET", "/admin/v1/sessions", "Bearer not-the-admin-token-at-all", 401, `Bearer error="invalid_token"`},
		{"token prefix", "GET", "/admin/v1/sessions", "Bearer " + testToken[:20], 401, `Bearer error="invalid_token"`},
		{"token and more", "GET", "/admin/v1/sessions", "Bearer " + testToken + "x", 401, `Bearer error="invalid_token"`},
		{"another scheme", "GET", "/admin/v1/sessions", "Basic " + testToken, 401, "Bearer"},
		{"bare token", "GET", "/admin/v1/sessions", testToken, 401, "Bearer"},
		{"empty bearer", "GET", "/admin/v1/sessions", "Bearer ", 401, "Bearer"},
		{"right token", "GET", "/admin/v1/sessions", "Bearer " + testToken, 503, ""},
		{"scheme in lower case", "GET", "/admin/v1/sessions", "bearer " + testToken, 503, ""},
		{"a POST without token", "POST", "/admin/v1/reclaim/run", "", 401, "Bearer"},
		{"a reload without token", "POST", "/admin/v1/reload", "", 401, "Bearer"},
		{"a reload by GET", "GET", "/admin/v1/reload", "Bearer " + testToken, 405, ""},
		{"unknown endpoint without token", "GET", "/admin/v1/nothing-here", "", 401, "Bearer"},
		{"unknown endpoint with token", "GET", "/admin/v1/nothing-here", "Bearer " + testToken, 404, ""},
		{"wrong method with token", "DELETE", "/admin/v1/sessions", "Bearer " + testToken, 405, ""},
		{"healthz stays open", "GET", "/healthz", "", 200, ""},
		{"readyz stays open", "GET", "/readyz", "", 200, ""},
		{"metrics stay open", "GET", "/metrics", "", 200, ""},
		{"healthz ignores a wrong token", "GET", "/healthz", "Bearer wrong", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := adminRequestWith(t, tt.method, base+tt.path, tt.auth)
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, resp.StatusCode, body, tt.want)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.challenge)
			}
			if tt.want != http.StatusUnauthorized {
				return
			}
			var doc adminapi.ErrorBody
			if err := json.Unmarshal(body, &doc); err != nil || doc.Error.Code != adminapi.CodeUnauthorized || doc.Error.Message == "" {
				t.Errorf("body %s is not the API's error document with code %s (%v)", body, adminapi.CodeUnauthorized, err)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
	if strings.Contains(logs.String(), testToken[:20]) {
		t.Errorf("the log holds (part of) the token:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "admin API: request refused") {
		t.Errorf("refusals are not logged:\n%s", logs)
	}
}

// TestRequireAdminWithoutToken: a handler without a token refuses every
// admin request, whatever it carries; the probes stay open.
func TestRequireAdminWithoutToken(t *testing.T) {
	t.Parallel()
	base, _ := newTokenAdminServer(t, nil, "")
	for _, auth := range []string{"", "Bearer anything-at-all-here", "Bearer "} {
		for _, path := range []string{"/admin/v1/sessions", "/", "/status"} {
			resp, body := adminRequestWith(t, "GET", base+path, auth)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with Authorization %q: %d %s; without a token every admin request is refused", path, auth, resp.StatusCode, body)
			}
		}
	}
	if resp, body := adminRequestWith(t, "GET", base+"/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d %s", resp.StatusCode, body)
	}
}
