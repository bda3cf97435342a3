package admin

import (
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// TestStatusPageSignIn: with a token configured, a browser reading the
// status page is sent to the sign-in form; the right token sets a cookie
// that lets it read the page, the wrong one does not; and the cookie opens
// nothing else: the JSON API still wants the bearer token.
func TestStatusPageSignIn(t *testing.T) {
	t.Parallel()
	base, logs := newTokenAdminServer(t, nil, testToken)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	browser := &http.Client{Jar: jar, CheckRedirect: noFollow}
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := browser.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	post := func(token string) *http.Response {
		t.Helper()
		resp, err := browser.PostForm(base+"/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	if resp := get("/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("status page without sign-in: %s to %q, want 303 to /login", resp.Status, resp.Header.Get("Location"))
	}
	if resp := get("/login"); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in form: %s", resp.Status)
	}
	if resp := post("not-the-token"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %s with cookies %v", resp.Status, resp.Cookies())
	}
	resp := post(testToken)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("right token: %s with cookies %v", resp.Status, resp.Cookies())
	}
	if c := resp.Cookies()[0]; strings.Contains(c.Value, testToken) || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v: must be HttpOnly, SameSite=Strict and not hold the token", c)
	}
	for _, path := range []string{"/", "/status"} {
		if resp := get(path); resp.StatusCode != http.StatusOK {
			t.Fatalf("status page %s after sign-in: %s", path, resp.Status)
		}
	}
	// The cookie is not a key to the API, for reads or writes.
	if resp := get("/admin/v1/sessions"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API read with only the cookie: %s, want 401", resp.Status)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/admin/v1/reclaim/run", nil)
	r2, err := browser.Do(req)
	if err != nil && !errors.Is(err, http.ErrUseLastResponse) {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API write with only the cookie: %s, want 401", r2.Status)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the token reached the log")
	}
}
