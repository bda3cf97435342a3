//go:build integration

package cli

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/logbuf"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// The fixtures of the commands' tests: the real admin handler (package
// admin) served over what package admintest builds, and stubs' answers.

// newAdminServer serves the real admin handler over store (nil: sessions
// off) and returns its base URL.
func newAdminServer(t *testing.T, store *etcdstore.Store) string {
	t.Helper()
	srv := httptest.NewServer(testAdminHandler(admin.Config{Store: store}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const testToken = "s3cr3t-admin-token-0123456789"

// newTokenAdminServer serves the real admin handler over store (nil:
// sessions off) with token required, and returns its base URL and the
// handler's log.
func newTokenAdminServer(t *testing.T, store *etcdstore.Store, token config.Secret) (string, *logbuf.Buffer) {
	t.Helper()
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg := loopback(admin.Config{Store: store, Token: token, Logger: log})
	srv := httptest.NewServer(admin.New(cfg))
	t.Cleanup(srv.Close)
	return srv.URL, logs
}

// apiTestToken is the admin token of the handlers testAdminHandler serves.
const apiTestToken = "api-test-admin-token-0123456789"

// loopback gives cfg the Host check of an admin listener on 127.0.0.1,
// which httptest servers listen on, that also answers example.com.
func loopback(cfg admin.Config) admin.Config {
	cfg.Listen, cfg.Addr, cfg.Hosts = "127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, []string{"example.com"}
	return cfg
}

// testAdminHandler returns the admin handler of cfg as serve runs it, with
// a token and the Host check of a loopback listener, for the tests of what
// the commands make of the API's answers: requests without an
// Authorization header are given the token on their way in.
func testAdminHandler(cfg admin.Config) http.Handler {
	cfg = loopback(cfg)
	cfg.Token = apiTestToken
	h := admin.New(cfg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+apiTestToken)
		}
		h.ServeHTTP(w, r)
	})
}

// newDigestServer serves the real admin handler with the digest API over
// store (nil: sessions off) with planes configured, and returns its URL.
func newDigestServer(t *testing.T, store *etcdstore.Store, planes ...string) string {
	t.Helper()
	srv := httptest.NewServer(testAdminHandler(admin.Config{Store: store, Planes: planes, Now: func() time.Time { return admintest.DigestNow }}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// currentRevision is etcd's revision now.
func currentRevision(t *testing.T, st *etcdstore.Store) int64 {
	t.Helper()
	_, rev, err := st.ListFrontiers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// writeJSON answers as the admin API does, for the stubs of the API.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, adminapi.ErrorBody{Error: adminapi.ErrorDetail{Code: code, Message: msg}})
}
