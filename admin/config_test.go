package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
)

// TestConfigAPI: GET /admin/v1/config answers every setting of the
// configuration in effect, marked reloadable or not, behind the admin
// token, and no secret's value.
func TestConfigAPI(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Backend.SecretKey = "backend-secret-value"
	cfg.Credentials = []config.Credential{{AccessKey: "AKAPP", SecretKey: "client-secret-value", Principal: "app"}}
	cfg.Admin.Token = "admin-token-value-0123456789"
	cfg.Listen = ":9123"
	srv := httptest.NewServer(New(Config{
		Token:  testToken,
		Hosts:  []string{"127.0.0.1"},
		Config: func() *config.Config { return cfg },
	}))
	t.Cleanup(srv.Close)
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/admin/v1/config", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := get(""); status != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", status)
	}
	status, body := get(testToken)
	var doc adminapi.ConfigDoc
	if err := json.Unmarshal([]byte(body), &doc); status != http.StatusOK || err != nil {
		t.Fatalf("GET: %d %s (%v)", status, body, err)
	}
	if len(doc.Settings) != len(config.Settings()) {
		t.Errorf("%d settings, want every one (%d)", len(doc.Settings), len(config.Settings()))
	}
	got := make(map[string]adminapi.ConfigSetting)
	for _, s := range doc.Settings {
		got[s.Key] = s
	}
	if s := got["listen"]; s.Value != `":9123"` || s.Reloadable {
		t.Errorf("listen: %+v, want \":9123\", not reloadable", s)
	}
	if s := got["backend.secret_key"]; s.Value != `"[redacted]"` || !s.Secret || !s.Reloadable {
		t.Errorf("backend.secret_key: %+v, want redacted, secret, reloadable", s)
	}
	if s := got["credentials"]; !strings.Contains(s.Value, "AKAPP") {
		t.Errorf("credentials: %+v, want the access key shown", s)
	}
	for _, secret := range []string{"backend-secret-value", "client-secret-value", "admin-token-value"} {
		if strings.Contains(body, secret) {
			t.Errorf("the document shows the secret %q", secret)
		}
	}
}
