package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sweepgate/sweepgate/config"
)

// codeUnauthorized answers an admin API request without the admin token.
const codeUnauthorized = "unauthorized"

// requireAdmin returns the middleware that every /admin/v1 route and the
// status page go through. A request must carry "Authorization: Bearer
// TOKEN" (or, for a read of the status page, the sign-in cookie); any
// other is answered 401 with the API's error document and
// WWW-Authenticate: Bearer, and goes no further. Without a token every
// such request is refused: serve always has one, configured or generated,
// and no mistake may leave the API open. /metrics, /healthz and /readyz
// are registered outside it, for scrapers and probes.
func requireAdmin(token config.Secret, log *slog.Logger) func(http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if token == "" {
		return func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				log.Error("admin API: request refused: this process has no admin token", "method", r.Method, "path", r.URL.Path)
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeAPIError(w, http.StatusUnauthorized, codeUnauthorized, "this admin listener has no admin token, so it serves no admin request")
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
				writeAPIError(w, http.StatusUnauthorized, codeUnauthorized,
					"the admin API needs the admin token: send Authorization: Bearer TOKEN (the sweepgate commands send $"+adminTokenEnv+", the content of --token-file, "+
						"or the token serve generated in the file "+config.AdminTokenFileName+" of its etcd.embedded.data_dir)")
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			writeAPIError(w, http.StatusUnauthorized, codeUnauthorized,
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
// how to prove the right to: --admin URL, --token-file FILE and --config
// FILE. There is deliberately no --token: a token in a command line is
// visible to every user in the process list.
func (c *cli) adminFlag(fs *flag.FlagSet, admin *string) {
	fs.StringVar(admin, "admin", "", "")
	fs.StringVar(&c.adminTokenFile, "token-file", "", "")
	fs.StringVar(&c.adminConfig, "config", "", "")
}

// clientConfig returns the configuration a serve started with this
// environment and --config (else $SWEEPGATE_CONFIG) would have, loaded on
// first use: the admin commands take the admin listener's address and the
// admin token's sources from it.
func (c *cli) clientConfig() (*config.Config, error) {
	c.clientMu.Lock()
	defer c.clientMu.Unlock()
	if c.clientCfg == nil && c.clientCfgErr == nil {
		c.clientCfg, c.clientCfgErr = config.LoadClient(c.adminConfig, c.environ)
		if c.clientCfgErr != nil {
			c.clientCfgErr = fmt.Errorf("the configuration: %w", c.clientCfgErr)
		}
	}
	return c.clientCfg, c.clientCfgErr
}

// adminToken returns the token to send and where it came from. The sources,
// first one set wins: the --token-file flag's file, $SWEEPGATE_ADMIN_TOKEN,
// the file $SWEEPGATE_ADMIN_TOKEN_FILE names, admin.token or
// admin.token_file of the configuration file (clientConfig), and last the
// token serve generated in the data directory of that configuration, the
// one serve uses when none of the others is set. Empty when there is none.
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
	cfg, err := c.clientConfig()
	if err != nil {
		return "", "", err
	}
	switch {
	case cfg.Admin.Token != "":
		return string(cfg.Admin.Token), "admin.token of the configuration", nil
	case cfg.Admin.TokenFile != "":
		tok, err := config.ReadTokenFile(cfg.Admin.TokenFile)
		return tok, "admin.token_file of the configuration (" + cfg.Admin.TokenFile + ")", err
	}
	path := cfg.GeneratedAdminTokenPath()
	tok, err := config.ReadTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	return tok, "the token file serve generated (" + path + ")", err
}

// unauthorized reports a 401 of the admin API and returns its exit code:
// either no token was sent, or the one sent is not the gateway's.
func (c *cli) unauthorized(name, u string) int {
	_, from, _ := c.adminToken()
	if from != "" {
		fmt.Fprintf(c.stderr, "sweepgate %s: the admin API at %s refused the token from %s: it is not the gateway's admin token\n", name, u, from)
		return exitUnauthorized
	}
	looked := "the file " + config.AdminTokenFileName + " in etcd.embedded.data_dir"
	if cfg, err := c.clientConfig(); err == nil {
		looked = cfg.GeneratedAdminTokenPath()
	}
	fmt.Fprintf(c.stderr, "sweepgate %s: the admin API at %s requires a token, and none was found: "+
		"set %s, pass --token-file FILE, or run the command with the gateway's configuration "+
		"(--config FILE or $%s, and its SWEEPGATE_* environment) so that it finds the token serve generated "+
		"(looked for %s)\n", name, u, adminTokenEnv, config.ConfigEnv, looked)
	return exitUnauthorized
}
