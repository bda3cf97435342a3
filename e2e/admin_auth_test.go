//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// adminToken is the admin token of TestAdminAuth's gateway.
const adminToken = "e2e-admin-token-0123456789abcdef"

// TestAdminAuth runs the real binary with admin.token set: the admin API
// refuses requests without the token (or with another one) while the
// probes and /metrics stay open, and the sweepgate commands work once
// SWEEPGATE_ADMIN_TOKEN (or --token-file) gives them the token. The token
// never shows in the gateway's log.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"admin": map[string]any{"token": adminToken},
	}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint

	get := func(path, authorization string) (int, http.Header, []byte) {
		t.Helper()
		return getWithAuthorization(t, admin+path, authorization)
	}

	t.Run("the API refuses without the token", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer not-the-admin-token-at-all"} {
			for _, path := range []string{"/admin/v1/sessions", "/admin/v1/reclaim/status", "/admin/v1/no-such-endpoint"} {
				status, h, body := get(path, auth)
				var doc struct {
					Error struct{ Code string } `json:"error"`
				}
				if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") ||
					json.Unmarshal(body, &doc) != nil || doc.Error.Code != "unauthorized" {
					t.Errorf("GET %s with Authorization %q: %d %v %s, want 401 unauthorized with a Bearer challenge", path, auth, status, h, body)
				}
			}
		}
		if status, _, body := get("/admin/v1/sessions", "Bearer "+adminToken); status != http.StatusOK {
			t.Errorf("with the token: %d %s", status, body)
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if status, _, body := get(path, ""); status != http.StatusOK {
				t.Errorf("GET %s without a token: %d %s, want it open", path, status, body)
			}
		}
	})

	t.Run("the commands send the token", func(t *testing.T) {
		sdk := e.SDK(t)
		bucket := e.Bucket(t)
		const key = "auth/upload.bin"
		id := createUpload(t, sdk, bucket, key)

		code, out, errOut := runSweepgate(t, nil, "sessions", "list", "--admin", admin)
		if code != 5 || !strings.Contains(errOut, "requires a token") || !strings.Contains(errOut, "SWEEPGATE_ADMIN_TOKEN") {
			t.Errorf("sessions list without a token: exit %d, want 5 and a clear message\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		code, _, errOut = runSweepgate(t, []string{"SWEEPGATE_ADMIN_TOKEN=not-the-admin-token-at-all"}, "sessions", "list", "--admin", admin)
		if code != 5 || !strings.Contains(errOut, "refused the token from $SWEEPGATE_ADMIN_TOKEN") {
			t.Errorf("sessions list with a wrong token: exit %d, stderr:\n%s", code, errOut)
		}

		env := []string{"SWEEPGATE_ADMIN_TOKEN=" + adminToken}
		code, out, errOut = runSweepgate(t, env, "sessions", "list", "--admin", admin, "--bucket", bucket)
		if code != 0 || !strings.Contains(out, id) {
			t.Errorf("sessions list with SWEEPGATE_ADMIN_TOKEN: exit %d, want 0 and upload %s\nstdout:\n%s\nstderr:\n%s", code, id, out, errOut)
		}
		code, out, errOut = runSweepgate(t, env, "sessions", "show", bucket, id, "--admin", admin)
		if code != 0 || !strings.Contains(out, key) {
			t.Errorf("sessions show with SWEEPGATE_ADMIN_TOKEN: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		file := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(file, []byte(adminToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = runSweepgate(t, nil, "reclaim", "status", "--json", "--admin", admin, "--token-file", file)
		if code == 5 || !strings.Contains(out, `"reclaimer"`) {
			t.Errorf("reclaim status with --token-file: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}

		// The client's abort leaves its audit line, with its request id.
		if _, err := sdk.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
		}); err != nil {
			t.Fatal(err)
		}
		eventually(t, reclaimCLITimeout, func() (bool, string) {
			logs, _ := os.ReadFile(e.Gateway.LogFile)
			for _, line := range bytes.Split(logs, []byte("\n")) {
				var l map[string]any
				if json.Unmarshal(line, &l) == nil && l["msg"] == "audit" && l["action"] == "abort_upload" &&
					strings.Contains(l["what"].(string), id) && l["principal"] != nil && l["id"] != nil {
					return true, ""
				}
			}
			return false, "no abort_upload audit line naming the upload, its principal and request id"
		})
	})

	logs, err := os.ReadFile(e.Gateway.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(logs, []byte(adminToken)) {
		t.Error("the gateway's log holds the admin token")
	}
}

// getWithAuthorization GETs url with the Authorization header set unless
// authorization is empty, and returns the answer's status, header and body.
func getWithAuthorization(t *testing.T, url, authorization string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
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
	return resp.StatusCode, resp.Header, body
}
