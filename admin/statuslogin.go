package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/sweepgate/sweepgate/config"
)

// A browser cannot send a bearer header from its address bar, so the
// status page has a sign-in form: the admin token posted once sets a
// cookie that lets GET and HEAD requests of the status page through. The
// cookie holds a digest of the token, never the token, and is refused for
// anything that changes state, so a forged cross-site request cannot use
// it.
const statusCookie = "sweepgate_status"

// statusCookieValue is the cookie a browser gets for token.
func statusCookieValue(token config.Secret) string {
	sum := sha256.Sum256([]byte("sweepgate status page\x00" + string(token)))
	return hex.EncodeToString(sum[:])
}

// statusPaths are the pages a signed-in browser may read.
var statusPaths = map[string]bool{"/": true, "/status": true}

// statusCookieOK reports whether r is a read of the status page carrying
// the cookie of token.
func statusCookieOK(r *http.Request, token config.Secret) bool {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || !statusPaths[r.URL.Path] {
		return false
	}
	c, err := r.Cookie(statusCookie)
	if err != nil {
		return false
	}
	want := statusCookieValue(token)
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(want)) == 1
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sweepgate: sign in</title>
<style>body{font-family:system-ui,sans-serif;margin:3em auto;max-width:28em;color:#222}
input{font:inherit;padding:.3em;width:100%;box-sizing:border-box;margin:.5em 0}p.err{color:#a00}</style></head>
<body><h1>sweepgate status</h1>
<p>This gateway's admin listener needs its admin token: admin.token or admin.token_file, or, when neither is set, the one sweepgate generated in the file admin-token of its etcd.embedded.data_dir.</p>
{{if .Failed}}<p class="err">That is not this gateway's admin token.</p>{{end}}
<form method="post" action="/login"><label>Admin token<input type="password" name="token" autocomplete="current-password" autofocus></label>
<input type="submit" value="Sign in"></form></body></html>
`))

// loginRoutes serves the sign-in form; without a token (which serve never
// runs without) there is nothing to sign in with.
func (a *handler) loginRoutes(mux *http.ServeMux) {
	if a.token == "" {
		return
	}
	log := a.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		a.writeLogin(w, http.StatusOK, false)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		got := sha256.Sum256([]byte(r.PostFormValue("token")))
		want := sha256.Sum256([]byte(a.token))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			log.Warn("status page: sign-in refused", "client", remoteHost(r))
			a.writeLogin(w, http.StatusUnauthorized, true)
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: statusCookie, Value: statusCookieValue(a.token), Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
}

func (a *handler) writeLogin(w http.ResponseWriter, status int, failed bool) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct{ Failed bool }{failed})
}
