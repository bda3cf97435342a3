package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// The fixtures of the commands' tests: real admin handlers (package admin)
// over an embedded etcd, and over MinIO with a reclaimer, as the admin
// package's own tests build them.

// newAPITestStore starts an embedded etcd for one test and returns a store
// over it.
func newAPITestStore(t *testing.T) *etcdstore.Store {
	t.Helper()
	return etcdtest.NewStore(t, etcdstore.DefaultPrefix)
}

// newAdminServer serves the real admin handler over store (nil: sessions
// off) and returns its base URL.
func newAdminServer(t *testing.T, store *etcdstore.Store) string {
	t.Helper()
	srv := httptest.NewServer(testAdminHandler(admin.Config{Store: store}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// seedSessions writes a small set of sessions, as the multipart service
// would have left them.
func seedSessions(t *testing.T, st *etcdstore.Store) {
	t.Helper()
	ctx := t.Context()
	put := func(s etcdstore.Session) {
		t.Helper()
		if _, err := st.CreateSession(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	active := etcdstore.Session{Bucket: "photos", Key: "2030/big.iso", UploadID: "up-active", Owner: "alice", Created: t0, LastActivity: t0}
	active.Transition(etcdstore.StateActive, t0, "gateway", "created")
	put(active)

	expired := etcdstore.Session{Bucket: "photos", Key: "old\tkey", UploadID: "up-expired", Owner: "bob", Created: t0, LastActivity: t0}
	expired.Transition(etcdstore.StateActive, t0, "gateway", "created")
	exp := t2
	expired.ExpiredAt = &exp
	expired.Transition(etcdstore.StateExpired, t2, "reclaimer", "idle past the grace period")
	expired.History[1].Term = 42
	put(expired)

	done := etcdstore.Session{Bucket: "backups", Key: "db.dump", UploadID: "up/done+1", Owner: "alice", Created: t0, LastActivity: t1,
		ExpectedETag: `"abc-2"`, PartsDigest: "d1",
		Completion: &etcdstore.Completion{Location: "http://x/backups/db.dump", Bucket: "backups", Key: "db.dump", ETag: `"abc-2"`, VersionID: "v1", At: t3}}
	done.Transition(etcdstore.StateActive, t0, "gateway", "created")
	done.Transition(etcdstore.StateCompleting, t2, "gateway", "complete")
	done.Transition(etcdstore.StateCompleted, t3, "gateway", "backend completed")
	put(done)

	pending := etcdstore.Session{Bucket: "backups", Key: "x", UploadID: "up-pending", Owner: "carol", Created: t0, Uncertain: "abort response lost", AbortAttempts: 2}
	pending.Transition(etcdstore.StateActive, t0, "gateway", "created")
	pending.Transition(etcdstore.StateCleanupPending, t1, "gateway", "abort outcome unknown")
	put(pending)

	for i, size := range []int64{5 << 20, 1 << 20} {
		p := etcdstore.Part{Number: i + 1, ETag: `"e` + string(rune('1'+i)) + `"`, Size: size, SHA256: "sha", At: t1}
		if err := st.PutPart(ctx, "up/done+1", p); err != nil {
			t.Fatal(err)
		}
	}
	// The active upload's latest activity is on its activity key, later
	// than the session record says.
	if _, err := st.Client().Put(ctx, st.Keys().Activity("up-active"), `{"at":"`+t3.Format(time.RFC3339)+`","what":"UploadPart","part":7}`); err != nil {
		t.Fatal(err)
	}
}

const testToken = "s3cr3t-admin-token-0123456789"

// newTokenAdminServer serves the real admin handler over store (nil:
// sessions off) with token required, and returns its base URL and the
// handler's log.
func newTokenAdminServer(t *testing.T, store *etcdstore.Store, token config.Secret) (string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
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

// Digests of the trash tests.
var (
	dA = "sha256:" + strings.Repeat("a", 64)
	dB = "sha256:" + strings.Repeat("b", 64)
	dC = "sha256:" + strings.Repeat("c", 64)
)

// digestNow is the digest API's clock in the tests.
var digestNow = time.Date(2030, 5, 6, 7, 0, 0, 0, time.UTC)

// newDigestServer serves the real admin handler with the digest API over
// store (nil: sessions off) with planes configured, and returns its URL.
func newDigestServer(t *testing.T, store *etcdstore.Store, planes ...string) string {
	t.Helper()
	srv := httptest.NewServer(testAdminHandler(admin.Config{Store: store, Planes: planes, Now: func() time.Time { return digestNow }}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// trashed records the references of bucket/key to digests as a committed
// write, then deletes the object into the trash at deletedAt.
func trashed(t *testing.T, st *etcdstore.Store, bucket, key, principal string, deletedAt, expires time.Time, digests ...string) {
	t.Helper()
	ctx := t.Context()
	id := "w-" + deletedAt.Format(time.RFC3339Nano)
	if err := st.BeginRefWrite(ctx, bucket, key, etcdstore.RefWrite{ID: id, Digests: digests, At: deletedAt}); err != nil {
		t.Fatal(err)
	}
	if err := st.EndRefWrite(ctx, bucket, key, id, etcdstore.WriteCommitted, `"etag"`, deletedAt); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.TrashRefSource(ctx, bucket, key, principal, deletedAt, expires); err != nil || !ok {
		t.Fatalf("trash %s/%s: %t, %v", bucket, key, ok, err)
	}
}

// Trash records of the trash tests: reg/manifests/app was deleted twice,
// once long ago (expired); lfs/p/x once.
var (
	tOld = digestNow.Add(-10 * 24 * time.Hour).Add(123456789 * time.Nanosecond)
	tNew = digestNow.Add(-time.Hour).Add(987654321 * time.Nanosecond)
	tLFS = digestNow.Add(-2 * time.Hour)
)

func seedTrash(t *testing.T, st *etcdstore.Store) {
	t.Helper()
	week := 7 * 24 * time.Hour
	trashed(t, st, "reg", "manifests/app", "alice", tOld, tOld.Add(week), dA, dB)
	trashed(t, st, "reg", "manifests/app", "bob", tNew, tNew.Add(week), dB, dC)
	trashed(t, st, "lfs", "p/x", "", tLFS, tLFS.Add(week), dC)
}

func adminRequestWith(t *testing.T, method, u, authorization string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
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
	return resp, body
}

var (
	t0 = time.Date(2030, 5, 6, 7, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
	t3 = t0.Add(3 * time.Minute)
)

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
