package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPprofRoutes: /debug/pprof/ is there only with admin.pprof, and only
// for requests that carry the admin token.
func TestPprofRoutes(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := httptest.NewServer(New(Config{Token: testToken, Listen: "127.0.0.1:9001", Pprof: on}))
		t.Cleanup(srv.Close)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
			resp, body := adminRequestWith(t, http.MethodGet, srv.URL+path, "Bearer "+testToken)
			switch {
			case !on && resp.StatusCode != http.StatusNotFound:
				t.Errorf("admin.pprof off: GET %s answered %d, want 404", path, resp.StatusCode)
			case on && resp.StatusCode != http.StatusOK:
				t.Errorf("admin.pprof on: GET %s answered %d, want 200: %s", path, resp.StatusCode, body)
			}
			if resp, _ := adminRequestWith(t, http.MethodGet, srv.URL+path, ""); on && resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("admin.pprof on: GET %s without the token answered %d, want 401", path, resp.StatusCode)
			}
		}
		if on {
			_, body := adminRequestWith(t, http.MethodGet, srv.URL+"/debug/pprof/", "Bearer "+testToken)
			if !strings.Contains(string(body), "goroutine") {
				t.Errorf("the pprof index names no goroutine profile: %.200s", body)
			}
		}
	}
}
