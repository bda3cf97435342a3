package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// TestReloadAPI: POST /admin/v1/reload runs the process's reload and
// answers its outcome: the settings that need a restart, or 422
// reload_failed with the reason; a request that is not a JSON document
// reloads nothing.
func TestReloadAPI(t *testing.T) {
	t.Parallel()
	var calls int
	var fail error
	restart := []string{"listen"}
	srv := httptest.NewServer(New(Config{
		Token: testToken,
		Hosts: []string{"127.0.0.1"},
		Reload: func(context.Context) (adminapi.ReloadResult, error) {
			calls++
			return adminapi.ReloadResult{RestartNeeded: restart}, fail
		},
	}))
	t.Cleanup(srv.Close)
	post := func(contentType string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/admin/v1/reload", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}

	if status, body := post("text/plain"); status != http.StatusUnsupportedMediaType || calls != 0 {
		t.Errorf("a form-like POST: %d %s, %d reloads; want 415 and none", status, body, calls)
	}
	status, body := post("application/json")
	var res adminapi.ReloadResult
	if err := json.Unmarshal(body, &res); status != http.StatusOK || err != nil || len(res.RestartNeeded) != 1 || res.RestartNeeded[0] != "listen" || calls != 1 {
		t.Errorf("a reload: %d %s (%v), %d reloads; want 200 naming listen", status, body, err, calls)
	}
	fail = errors.New("credentials_file: broken")
	status, body = post("application/json")
	var doc adminapi.ErrorBody
	if err := json.Unmarshal(body, &doc); status != http.StatusUnprocessableEntity || err != nil ||
		doc.Error.Code != adminapi.CodeReloadFailed || !strings.Contains(doc.Error.Message, "credentials_file") {
		t.Errorf("a refused reload: %d %s; want 422 reload_failed with the reason", status, body)
	}
}
