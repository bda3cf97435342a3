package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
)

// requireAdmin returns the middleware that every /admin/v1 route and the
// status page go through. A request must carry "Authorization: Bearer
// TOKEN" (or, for a read of the status page, the sign-in cookie); any
// other is answered 401 with the API's error document and
// WWW-Authenticate: Bearer, and goes no further. Without a token every
// such request is refused: serve always has one, configured or generated,
// and no mistake may leave the API open. /metrics and the probes
// (/healthz, /readyz, /etcdz) are registered outside it, for scrapers and
// probes.
func requireAdmin(token config.Secret, log *slog.Logger) func(http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if token == "" {
		return func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				log.Error("admin API: request refused: this process has no admin token", "method", r.Method, "path", r.URL.Path)
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeAPIError(w, http.StatusUnauthorized, adminapi.CodeUnauthorized, "this admin listener has no admin token, so it serves no admin request")
			})
		}
	}
	// Comparing digests keeps the comparison's time independent of how
	// much of the token a guess gets right, and of the token's length.
	want := sha256.Sum256([]byte(token))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, sent := bearerToken(r.Header)
			sum := sha256.Sum256([]byte(got))
			if sent && subtle.ConstantTimeCompare(sum[:], want[:]) == 1 || !sent && statusCookieOK(r, token) {
				next.ServeHTTP(w, r)
				return
			}
			if !sent && statusPaths[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
				// A browser asking for the status page signs in first.
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			// What was sent is never logged: a near miss is half a token.
			log.Warn("admin API: request refused without the admin token",
				"method", r.Method, "path", r.URL.Path, "client", remoteHost(r), "token_sent", sent)
			if !sent {
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeAPIError(w, http.StatusUnauthorized, adminapi.CodeUnauthorized,
					"the admin API needs the admin token: send Authorization: Bearer TOKEN (the sweepgate commands send $"+tokenEnv+", the content of --token-file, "+
						"or the token serve generated in the file "+config.AdminTokenFileName+" of its etcd.embedded.data_dir)")
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			writeAPIError(w, http.StatusUnauthorized, adminapi.CodeUnauthorized,
				"the bearer token is not this gateway's admin token (admin.token, admin.token_file, or the generated file "+config.AdminTokenFileName+" in etcd.embedded.data_dir)")
		})
	}
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN"
// header; sent is false when there is no such header. The scheme is
// case-insensitive (RFC 9110, 11.1).
func bearerToken(h http.Header) (token string, sent bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// tokenEnv is the environment variable of the admin.token setting, which
// the sweepgate commands send too; the refusals name it.
const tokenEnv = config.EnvPrefix + "ADMIN_TOKEN"
