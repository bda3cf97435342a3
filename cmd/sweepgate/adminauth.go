package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/sweepgate/sweepgate/config"
)

// codeUnauthorized answers an admin API request without the admin token.
const codeUnauthorized = "unauthorized"

// requireAdmin returns the middleware that every /admin/v1 route goes
// through. With a token configured, a request must carry
// "Authorization: Bearer TOKEN"; any other is answered 401 with the API's
// error document and WWW-Authenticate: Bearer, and goes no further.
// Without a token it lets every request through, as before tokens existed
// (serve warns at start when such a listener is reachable beyond loopback).
// /metrics, /healthz and /readyz are registered outside it, for scrapers
// and probes.
func requireAdmin(token config.Secret, log *slog.Logger) func(http.Handler) http.Handler {
	if token == "" {
		return func(next http.Handler) http.Handler { return next }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
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
				writeAPIError(w, http.StatusUnauthorized, codeUnauthorized,
					"the admin API needs the admin token: send Authorization: Bearer TOKEN (the sweepgate commands send $"+adminTokenEnv+" or the content of --token-file)")
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			writeAPIError(w, http.StatusUnauthorized, codeUnauthorized,
				"the bearer token is not this gateway's admin token (admin.token or admin.token_file)")
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

// isLoopback reports whether a bound listener address accepts only local
// connections. An unspecified address (":9001", "0.0.0.0:9001") accepts
// every network's.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// The command-line clients' side: where the token comes from.
const (
	// adminTokenEnv holds the token the admin commands send. It is also
	// the environment variable of the admin.token setting, so that one
	// variable configures a gateway and the commands run beside it.
	adminTokenEnv = config.EnvPrefix + "ADMIN_TOKEN"
	// adminTokenFileEnv names a file holding it, as admin.token_file does
	// for serve.
	adminTokenFileEnv = config.EnvPrefix + "ADMIN_TOKEN_FILE"
)

// adminFlag registers the flags that say which admin API to talk to and
// how to prove the right to: --admin URL and --token-file FILE. There is
// deliberately no --token: a token in a command line is visible to every
// user in the process list.
func (c *cli) adminFlag(fs *flag.FlagSet, admin *string) {
	fs.StringVar(admin, "admin", "", "")
	fs.StringVar(&c.adminTokenFile, "token-file", "", "")
}

// adminToken returns the token to send and where it came from: the
// --token-file flag's file, else $SWEEPGATE_ADMIN_TOKEN, else the file
// $SWEEPGATE_ADMIN_TOKEN_FILE names; empty when none is set (a gateway
// without a token needs none).
func (c *cli) adminToken() (token, from string, err error) {
	if c.adminTokenFile != "" {
		tok, err := config.ReadTokenFile(c.adminTokenFile)
		return tok, "--token-file " + c.adminTokenFile, err
	}
	if tok := strings.TrimSpace(envValue(c.environ, adminTokenEnv)); tok != "" {
		return tok, "$" + adminTokenEnv, nil
	}
	if path := envValue(c.environ, adminTokenFileEnv); path != "" {
		tok, err := config.ReadTokenFile(path)
		return tok, "$" + adminTokenFileEnv + " (" + path + ")", err
	}
	return "", "", nil
}

// unauthorized reports a 401 of the admin API and returns its exit code:
// either no token was sent, or the one sent is not the gateway's.
func (c *cli) unauthorized(name, u string) int {
	_, from, _ := c.adminToken()
	if from == "" {
		fmt.Fprintf(c.stderr, "sweepgate %s: the admin API at %s requires a token (the gateway sets admin.token); "+
			"set %s, or pass --token-file FILE\n", name, u, adminTokenEnv)
	} else {
		fmt.Fprintf(c.stderr, "sweepgate %s: the admin API at %s refused the token from %s: it is not the gateway's admin token\n", name, u, from)
	}
	return exitUnauthorized
}
