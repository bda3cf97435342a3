//go:build e2e

package e2e

// Security: the admin API and the status page need the admin token.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestSecurityAdminToken: with admin.token set, every admin API route and
// the status page refuse a request without the token, with a wrong one, or
// with the token anywhere but an Authorization: Bearer header, and the
// refused calls have no effect (no pass runs, no orphan is deleted or
// adopted, no frontier is recorded); /metrics, /healthz and /readyz stay
// open; the command-line clients need the token too.
func TestSecurityAdminToken(t *testing.T) {
	t.Parallel()
	token := "sgadm-" + randomToken(t, 24)
	nearMiss := token[:len(token)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", token[len(token)-1])+1)%16])
	e := harness.Start(t, harness.Options{Config: map[string]any{"admin": map[string]any{"token": token}}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	direct := e.DirectSDK(t)
	store := newSessionStore(t, e)
	bucket := e.Bucket(t)
	// An upload with a session, and an orphan made on MinIO directly.
	id := createUpload(t, e.SDK(t), bucket, "with-session")
	orphan := createUpload(t, direct, bucket, "orphan")

	call := newTokenCaller(admin)
	bearer := "Bearer " + token
	status := func(t *testing.T) reclaimStatus { t.Helper(); return adminTokenStatus(t, call, bearer) }
	eventually(t, 30*time.Second, func() (bool, string) {
		return status(t).Reclaimer.Leading, "the gateway does not lead the reclaimer election"
	})
	passes := status(t).Pass

	t.Run("probes and metrics stay open", func(t *testing.T) {
		for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
			if code, _, b := call(t, http.MethodGet, p, nil, ""); code != http.StatusOK {
				t.Errorf("GET %s without a token: %d %s", p, code, b)
			}
		}
	})

	orphanRef, _ := json.Marshal(map[string]any{"refs": []map[string]string{{"bucket": bucket, "key": "orphan", "upload_id": orphan}}, "confirm": true, "principal": "mallory"})
	routes := adminTokenRoutes(bucket, id, orphanRef)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+token))
	leaks := func(b []byte) bool { return bytes.Contains(b, []byte(id)) || bytes.Contains(b, []byte(orphan)) }
	for _, auth := range []struct{ name, header, query string }{
		{"no token", "", ""},
		{"wrong token", "Bearer " + nearMiss, ""},
		{"token with a suffix", bearer + "x", ""},
		{"token prefix", "Bearer " + token[:len(token)/2], ""},
		{"empty bearer", "Bearer ", ""},
		{"token without a scheme", token, ""},
		{"token as basic auth", basic, ""},
		{"token under another scheme", "Token " + token, ""},
		{"token in the query", "", "token=" + token},
		{"token in the query as access_token", "", "access_token=" + token},
	} {
		t.Run(auth.name, func(t *testing.T) {
			for _, rt := range routes {
				path := rt.path
				if auth.query != "" {
					sep := "?"
					if strings.Contains(path, "?") {
						sep = "&"
					}
					path += sep + auth.query
				}
				code, hdr, b := call(t, rt.method, path, rt.body, auth.header)
				requireAdminRefusal(t, rt.method+" "+path+" with "+auth.name, code, hdr, b, leaks,
					func(loc string) (int, http.Header, []byte) { return call(t, rt.method, loc, rt.body, auth.header) })
			}
		})
	}

	t.Run("status page sign-in", func(t *testing.T) { adminTokenSignIn(t, call, admin, token, nearMiss, routes, leaks) })

	t.Run("refused calls had no effect", func(t *testing.T) {
		if got := status(t).Pass; got != passes {
			t.Errorf("the pass count went from %d to %d: a refused run ran", passes, got)
		}
		if ids := backendUploads(t, direct, bucket); !slices.Contains(ids, orphan) {
			t.Errorf("the orphan %s is gone from MinIO: a refused delete deleted it", orphan)
		}
		if _, _, _, found := store.lookup(t, bucket, orphan); found {
			t.Errorf("the orphan %s has a session: a refused adopt adopted it", orphan)
		}
		if code, _, b := call(t, http.MethodGet, "/admin/v1/frontiers", nil, bearer); code != http.StatusOK || bytes.Contains(b, []byte("mallory-plane")) {
			t.Errorf("frontiers with the token: %d %s; want no mallory-plane", code, b)
		}
	})

	t.Run("with the token", func(t *testing.T) {
		for _, rt := range routes[:4] {
			if code, _, b := call(t, rt.method, rt.path, rt.body, bearer); code != http.StatusOK {
				t.Errorf("%s %s with the token: %d %s", rt.method, rt.path, code, b)
			}
		}
		if code, _, b := call(t, http.MethodGet, "/status", nil, "bearer "+token); code != http.StatusOK {
			t.Errorf("the status page with a lower-case scheme: %d %s", code, b)
		}
		if code, _, b := call(t, http.MethodPost, "/admin/v1/reclaim/run", []byte(`{}`), bearer); code != http.StatusOK {
			t.Fatalf("a pass with the token: %d %s", code, b)
		}
		if got := status(t).Pass; got <= passes {
			t.Errorf("the pass count is %d after a run with the token, was %d", got, passes)
		}
	})

	t.Run("command-line clients", func(t *testing.T) { adminTokenCommands(t, admin, token, nearMiss) })
}

// adminTokenStatus reads the reclaimer's status through call with the
// Authorization header bearer.
func adminTokenStatus(t *testing.T, call tokenCaller, bearer string) reclaimStatus {
	t.Helper()
	code, _, b := call(t, http.MethodGet, "/admin/v1/reclaim/status", nil, bearer)
	var st reclaimStatus
	if code != http.StatusOK || json.Unmarshal(b, &st) != nil {
		t.Fatalf("reclaim status with the token: %d %s", code, b)
	}
	return st
}

// tokenCaller sends a request to the admin listener, with a JSON body
// unless body is nil, the Authorization header unless authorization is
// empty, and cookies, without following redirects; it returns the answer's
// status, header and body.
type tokenCaller func(t *testing.T, method, path string, body []byte, authorization string, cookies ...*http.Cookie) (int, http.Header, []byte)

// newTokenCaller returns a tokenCaller of the admin listener at admin.
func newTokenCaller(admin string) tokenCaller {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(t *testing.T, method, path string, body []byte, authorization string, cookies ...*http.Cookie) (int, http.Header, []byte) {
		t.Helper()
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, admin+path, r)
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
}

// adminRoute is a request to the admin listener.
type adminRoute struct {
	method, path string
	body         []byte
}

// adminTokenRoutes are the admin listener's routes, and other spellings of
// them; the session routes name upload id in bucket, the orphan routes
// take orphanRef.
func adminTokenRoutes(bucket, id string, orphanRef []byte) []adminRoute {
	return []adminRoute{
		{http.MethodGet, "/admin/v1/sessions", nil},
		{http.MethodGet, "/admin/v1/sessions?state=active", nil},
		{http.MethodGet, "/admin/v1/sessions/" + bucket + "/" + url.PathEscape(id), nil},
		{http.MethodGet, "/admin/v1/reclaim/status", nil},
		{http.MethodPost, "/admin/v1/reclaim/run", []byte(`{}`)},
		{http.MethodGet, "/admin/v1/reclaim/plan", nil},
		{http.MethodGet, "/admin/v1/reclaim/reports", nil},
		{http.MethodGet, "/admin/v1/reclaim/orphans", nil},
		{http.MethodPost, "/admin/v1/reclaim/orphans/adopt", orphanRef},
		{http.MethodPost, "/admin/v1/reclaim/orphans/delete", orphanRef},
		{http.MethodGet, "/admin/v1/frontiers", nil},
		{http.MethodPost, "/admin/v1/frontiers/mallory-plane", []byte(`{"revision":999999}`)},
		{http.MethodGet, "/admin/v1/trash", nil},
		{http.MethodPost, "/admin/v1/trash/restore", []byte(`{"bucket":"` + bucket + `","key":"x"}`)},
		{http.MethodGet, "/", nil},
		{http.MethodGet, "/status", nil},
		{http.MethodGet, "/admin/v1/no-such-route", nil},
		{http.MethodDelete, "/admin/v1/sessions", nil},
		{http.MethodPut, "/admin/v1/reclaim/run", nil},
		// Other spellings of the same paths.
		{http.MethodGet, "/admin/v1/%73essions", nil},
		{http.MethodGet, "/admin/v1/sessions/", nil},
		{http.MethodGet, "/admin/v1/reclaim/../sessions", nil},
		{http.MethodGet, "//admin/v1/sessions", nil},
		{http.MethodPost, "/admin/v1/reclaim//run", []byte(`{}`)},
	}
}

// adminTokenSignIn checks the status page's sign-in: a browser posts the
// token once and gets a cookie that lets it read the page, and nothing
// else (none of routes); a near miss of the token gets no cookie.
func adminTokenSignIn(t *testing.T, call tokenCaller, admin, token, nearMiss string, routes []adminRoute, leaks func([]byte) bool) {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := func(tok string) (int, http.Header, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, admin+"/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	for _, tok := range []string{nearMiss, "", token + " ", strings.ToUpper(token)} {
		code, hdr, b := form(tok)
		if code < 400 || len(hdr.Values("Set-Cookie")) != 0 {
			t.Fatalf("sign-in with a wrong token: %d, cookies %q; body:\n%s", code, hdr.Values("Set-Cookie"), b)
		}
	}
	code, hdr, b := form(token)
	cookies := (&http.Response{Header: hdr}).Cookies()
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		t.Logf("no sign-in form on this build (%d): nothing more to check", code)
		return
	}
	if code >= 400 || len(cookies) == 0 {
		t.Fatalf("sign-in with the token: %d, cookies %q; body:\n%s", code, hdr.Values("Set-Cookie"), b)
	}
	for _, c := range cookies {
		if strings.Contains(c.Value, token) || strings.Contains(c.Value, base64.StdEncoding.EncodeToString([]byte(token))) {
			t.Errorf("cookie %s holds the token", c.Name)
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s: HttpOnly %v, SameSite %v; want HttpOnly and SameSite=Strict", c.Name, c.HttpOnly, c.SameSite)
		}
	}
	if code, _, b := call(t, http.MethodGet, "/status", nil, "", cookies...); code != http.StatusOK {
		t.Fatalf("the status page with the sign-in cookie: %d %s", code, b)
	}
	// The cookie is for reading the page: not the API, not a change.
	for _, rt := range routes {
		if statusPage := rt.method == http.MethodGet && (rt.path == "/" || rt.path == "/status"); statusPage {
			continue
		}
		code, hdr, b := call(t, rt.method, rt.path, rt.body, "", cookies...)
		requireAdminRefusal(t, rt.method+" "+rt.path+" with the sign-in cookie", code, hdr, b, leaks,
			func(loc string) (int, http.Header, []byte) { return call(t, rt.method, loc, rt.body, "", cookies...) })
	}
	// A cookie that is not the gateway's is no sign-in.
	forged := *cookies[0]
	forged.Value = strings.Repeat("0", len(forged.Value))
	code, hdr, b = call(t, http.MethodGet, "/status", nil, "", &forged)
	requireAdminRefusal(t, "the status page with a forged cookie", code, hdr, b, leaks, nil)
}

// adminTokenCommands checks that the command-line clients need the token,
// do not quote a wrong one, and work with it, from the environment or a
// file.
func adminTokenCommands(t *testing.T, admin, token, nearMiss string) {
	for _, args := range [][]string{{"reclaim", "status"}, {"sessions", "list"}, {"reclaim", "run"}} {
		args = append(args, "--admin", admin)
		code, out, errOut := runSweepgate(t, nil, args...)
		if code != 5 || !strings.Contains(errOut, "SWEEPGATE_ADMIN_TOKEN") {
			t.Errorf("sweepgate %s without a token: exit %d, want 5 naming SWEEPGATE_ADMIN_TOKEN\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
		code, out, errOut = runSweepgate(t, []string{"SWEEPGATE_ADMIN_TOKEN=" + nearMiss}, args...)
		if code != 5 || strings.Contains(out+errOut, nearMiss) {
			t.Errorf("sweepgate %s with a wrong token: exit %d, want 5 without quoting the token\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if code, out, errOut := runSweepgate(t, []string{"SWEEPGATE_ADMIN_TOKEN=" + token}, "reclaim", "status", "--admin", admin); code != 0 {
		t.Errorf("sweepgate reclaim status with the token: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runSweepgate(t, nil, "sessions", "list", "--admin", admin, "--token-file", file); code != 0 {
		t.Errorf("sweepgate sessions list --token-file: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// requireAdminRefusal checks an admin listener's answer to a request
// without the right token: 401 with WWW-Authenticate: Bearer and the API's
// error code, or a redirect (to the status page's sign-in form, or to the
// clean form of a path) whose target refuses in turn or is the sign-in
// form; never data. follow requests a redirect's target (nil: none
// expected).
func requireAdminRefusal(t *testing.T, what string, code int, hdr http.Header, b []byte, leaks func([]byte) bool, follow func(loc string) (int, http.Header, []byte)) {
	t.Helper()
	if leaks(b) {
		t.Errorf("%s: answered with upload data: %s", what, b)
	}
	switch {
	case code == http.StatusUnauthorized:
		if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 with WWW-Authenticate %q", what, hdr.Get("WWW-Authenticate"))
		}
		if !strings.Contains(string(b), `"unauthorized"`) && !strings.Contains(string(b), `action="/login"`) {
			t.Errorf("%s: 401 with body %s", what, b)
		}
	case code == http.StatusSeeOther && hdr.Get("Location") == "/login":
		// The status page sends a browser to its sign-in form.
	case code >= 300 && code < 400 && follow != nil:
		loc := hdr.Get("Location")
		c2, h2, b2 := follow(loc)
		if c2 == http.StatusOK && strings.Contains(string(b2), `action="/login"`) && !leaks(b2) {
			return
		}
		requireAdminRefusal(t, what+" redirected to "+loc, c2, h2, b2, leaks, nil)
	default:
		t.Errorf("%s: %d %s, want 401", what, code, b)
	}
}
