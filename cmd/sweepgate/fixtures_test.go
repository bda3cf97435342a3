package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
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

// testClock is the reclaimer's injected clock: time moves only when a
// test says so.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// reclaimEnv is a real MinIO and a real etcd with a running reclaimer
// (the leader) and the admin API over it.
type reclaimEnv struct {
	t       *testing.T
	direct  minio.Core
	backend multipart.Backend
	store   *etcdstore.Store
	svc     *multipart.Service
	clock   *testClock
	leader  *reclaim.Reclaimer
	// base is the leader's admin API.
	base string
}

const testPartSize = 1024

func newReclaimEnv(t *testing.T) *reclaimEnv {
	t.Helper()
	e := &reclaimEnv{t: t, clock: &testClock{now: time.Now().UTC().Truncate(time.Second)}}
	m := harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.direct = minio.Core{Client: mc}
	if e.backend, err = gateway.NewBackendClient(m.Endpoint, m.Region, m.AccessKey, m.SecretKey); err != nil {
		t.Fatal(err)
	}
	e.store = newAPITestStore(t)
	if e.svc, err = multipart.New(multipart.Config{Store: e.store, Backend: e.backend, Now: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	e.leader = e.reclaimer("leader@test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.leader.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if _, err := e.leader.Elector().AwaitLeader(wctx); err != nil {
		t.Fatalf("the reclaimer did not win the election: %v", err)
	}
	e.base = e.serveAPI(e.leader, admin.ReclaimerInfo{ID: "leader@test", Enabled: true})
	return e
}

// reclaimer builds a reclaimer over the environment, not running.
func (e *reclaimEnv) reclaimer(id string) *reclaim.Reclaimer {
	e.t.Helper()
	r, err := reclaim.New(reclaim.Config{
		Store: e.store, Sessions: e.svc, Backend: e.backend, ID: id,
		Grace: 24 * time.Hour, DeleteAfter: 24 * time.Hour, StuckLimit: time.Hour,
		MaxDelete: 1000, MaxDeleteFraction: 1,
		Interval: 24 * time.Hour, ElectionTTL: 60 * time.Second,
		Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// serveAPI serves the real admin handler with r as its reclaimer.
func (e *reclaimEnv) serveAPI(r *reclaim.Reclaimer, info admin.ReclaimerInfo) string {
	e.t.Helper()
	srv := httptest.NewServer(testAdminHandler(admin.Config{Store: e.store, Reclaimer: r, ReclaimerInfo: info}))
	e.t.Cleanup(srv.Close)
	return srv.URL
}

func (e *reclaimEnv) bucket(name string) {
	e.t.Helper()
	if err := e.direct.MakeBucket(e.t.Context(), name, minio.MakeBucketOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// upload creates an upload with n parts directly on MinIO.
func (e *reclaimEnv) upload(bucket, key string, n int) string {
	e.t.Helper()
	ctx := e.t.Context()
	id, err := e.direct.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for p := 1; p <= n; p++ {
		data := bytes.Repeat([]byte{byte(p)}, testPartSize)
		if _, err := e.direct.PutObjectPart(ctx, bucket, key, id, p, bytes.NewReader(data), testPartSize, minio.PutObjectPartOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}

// session records an active session as the gateway would have, last
// active at last.
func (e *reclaimEnv) session(bucket, key, id string, last time.Time) {
	e.t.Helper()
	s := &etcdstore.Session{Bucket: bucket, Key: key, UploadID: id, Owner: "alice", Created: last, LastActivity: last}
	s.Transition(etcdstore.StateActive, last, "gateway", "created")
	if _, err := e.store.CreateSession(e.t.Context(), s); err != nil {
		e.t.Fatal(err)
	}
}

// partsOnMinIO counts an upload's parts on MinIO; -1 means NoSuchUpload.
func (e *reclaimEnv) partsOnMinIO(bucket, key, id string) int {
	e.t.Helper()
	res, err := e.direct.ListObjectParts(e.t.Context(), bucket, key, id, 0, 1000)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
			return -1
		}
		e.t.Fatal(err)
	}
	return len(res.ObjectParts)
}

func (e *reclaimEnv) state(bucket, id string) etcdstore.SessionState {
	e.t.Helper()
	v, err := e.store.GetSession(e.t.Context(), bucket, id)
	if err != nil {
		e.t.Fatalf("session %s/%s: %v", bucket, id, err)
	}
	return v.Value.State
}

// scenario is a bucket with an abandoned upload (A, 2 parts, idle 30h), a
// live one (K, 1 part, active 10 minutes ago) and two orphans (O1, O2, 1
// part each, no session).
type scenario struct {
	bucket                string
	a, k, o1, o2          string
	keyA, keyK, keyO1, k2 string
}

func (e *reclaimEnv) scenario() scenario {
	e.t.Helper()
	now := e.clock.Now()
	s := scenario{bucket: "reclaim-api", keyA: "abandoned.bin", keyK: "live.bin", keyO1: "orphan/one.bin", k2: "orphan/two.bin"}
	e.bucket(s.bucket)
	s.a = e.upload(s.bucket, s.keyA, 2)
	s.k = e.upload(s.bucket, s.keyK, 1)
	s.o1 = e.upload(s.bucket, s.keyO1, 1)
	s.o2 = e.upload(s.bucket, s.k2, 1)
	e.session(s.bucket, s.keyA, s.a, now.Add(-30*time.Hour))
	e.session(s.bucket, s.keyK, s.k, now.Add(-10*time.Minute))
	return s
}

// explainEnv is a real MinIO and a real etcd with a leading reclaimer that
// sweeps uploads and the CAS bucket (one plane, "backup", gates deletes),
// and the admin API over it.
type explainEnv struct {
	t      *testing.T
	direct minio.Core
	store  *etcdstore.Store
	clock  *testClock
	r      *reclaim.Reclaimer
	cfg    reclaim.Config
	base   string
}

const (
	exBucket    = "uploads"
	exCAS       = "cas"
	exBlobs     = "blobs/sha256/"
	exManifests = "manifests/"
)

func newExplainEnv(t *testing.T) *explainEnv {
	t.Helper()
	e := &explainEnv{t: t, clock: &testClock{now: time.Now().UTC().Truncate(time.Second)}}
	m := harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.direct = minio.Core{Client: mc}
	backend, err := gateway.NewBackendClient(m.Endpoint, m.Region, m.AccessKey, m.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	e.store = newAPITestStore(t)
	svc, err := multipart.New(multipart.Config{Store: e.store, Backend: backend, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{exBucket, exCAS} {
		if err := e.direct.MakeBucket(t.Context(), b, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := cas.NewNamespace("blobs", exCAS, exBlobs, "", false)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", exCAS, exManifests, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = reclaim.Config{
		Store: e.store, Sessions: svc, Backend: backend, ID: "leader@test",
		Grace: 24 * time.Hour, DeleteAfter: 12 * time.Hour, StuckLimit: time.Hour,
		MaxDelete: 1000, MaxDeleteFraction: 1,
		Interval: 24 * time.Hour, ElectionTTL: 60 * time.Second,
		Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
		Digests: &reclaim.DigestsConfig{
			Layout:         &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}},
			PlacementGrace: 24 * time.Hour, Planes: []string{"backup"}, MaxDelete: 1000, MaxDeleteFraction: 1,
		},
	}
	if e.r, err = reclaim.New(e.cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if _, err := e.r.Elector().AwaitLeader(wctx); err != nil {
		t.Fatalf("the reclaimer did not win the election: %v", err)
	}
	e.base = e.serve(e.r)
	return e
}

// serve serves the real admin handler with r as its reclaimer (nil: none).
func (e *explainEnv) serve(r *reclaim.Reclaimer) string {
	e.t.Helper()
	srv := httptest.NewServer(testAdminHandler(admin.Config{Store: e.store, Reclaimer: r, ReclaimerInfo: admin.ReclaimerInfo{ID: "leader@test", Enabled: true}}))
	e.t.Cleanup(srv.Close)
	return srv.URL
}

// upload creates an upload of n parts directly on MinIO and, unless the
// state is "", its session, created 31 hours ago and last active at last.
func (e *explainEnv) upload(key string, n int, st etcdstore.SessionState, last time.Time) string {
	e.t.Helper()
	ctx := e.t.Context()
	id, err := e.direct.NewMultipartUpload(ctx, exBucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for p := 1; p <= n; p++ {
		if _, err := e.direct.PutObjectPart(ctx, exBucket, key, id, p, bytes.NewReader(bytes.Repeat([]byte{1}, testPartSize)), testPartSize, minio.PutObjectPartOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	if st != "" {
		e.session(key, id, st, last)
	}
	return id
}

func (e *explainEnv) session(key, id string, st etcdstore.SessionState, last time.Time) {
	e.t.Helper()
	created := e.clock.Now().Add(-31 * time.Hour)
	s := &etcdstore.Session{Bucket: exBucket, Key: key, UploadID: id, Owner: "alice", Created: created, LastActivity: last}
	s.Transition(etcdstore.StateActive, created, "gateway", "created")
	if st != etcdstore.StateActive {
		s.Transition(st, last, "gateway", "test")
	}
	if _, err := e.store.CreateSession(e.t.Context(), s); err != nil {
		e.t.Fatal(err)
	}
}

// blob stores the blob called name directly on MinIO and returns its
// digest and its modification time as the backend lists it.
func (e *explainEnv) blob(name string) (string, time.Time) {
	e.t.Helper()
	body := []byte("content of blob " + name)
	sum := sha256.Sum256(body)
	dg := "sha256:" + hex.EncodeToString(sum[:])
	key := exBlobs + hex.EncodeToString(sum[:])
	if _, err := e.direct.Client.PutObject(e.t.Context(), exCAS, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		e.t.Fatal(err)
	}
	var modified time.Time
	for o := range e.direct.Client.ListObjects(e.t.Context(), exCAS, minio.ListObjectsOptions{Prefix: key}) {
		if o.Err != nil {
			e.t.Fatal(o.Err)
		}
		if o.Key == key {
			modified = o.LastModified
		}
	}
	if modified.IsZero() {
		e.t.Fatalf("blob %s is not listed", key)
	}
	return dg, modified
}

// manifest writes a manifest naming digests the way the gateway does.
func (e *explainEnv) manifest(key string, digests ...string) {
	e.t.Helper()
	ctx := e.t.Context()
	now := e.clock.Now()
	if err := e.store.BeginRefWrite(ctx, exCAS, exManifests+key, etcdstore.RefWrite{ID: "w-" + key, Digests: digests, At: now}); err != nil {
		e.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"layers": digests})
	info, err := e.direct.Client.PutObject(ctx, exCAS, exManifests+key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.EndRefWrite(ctx, exCAS, exManifests+key, "w-"+key, etcdstore.WriteCommitted, info.ETag, now); err != nil {
		e.t.Fatal(err)
	}
}

// pass runs one pass on the leader.
func (e *explainEnv) pass() reclaim.Report {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	rep, err := e.r.Trigger(ctx)
	if err != nil {
		e.t.Fatalf("pass: %v (%+v)", err, rep)
	}
	return rep
}

// explainWorld is what the API and CLI tests explain: an idle upload, an
// orphan, a referenced blob and an unreferenced old blob whose tombstone
// waits for the backup plane after one pass.
type explainWorld struct {
	idle, orphan     string
	refd, unrefd     string
	tombstoneRequire int64
}

func (e *explainEnv) world() explainWorld {
	e.t.Helper()
	now := e.clock.Now()
	w := explainWorld{
		idle:   e.upload("idle/object", 2, etcdstore.StateActive, now.Add(-30*time.Hour)),
		orphan: e.upload("orphan/object", 3, "", time.Time{}),
	}
	var at time.Time
	w.refd, _ = e.blob("referenced")
	w.unrefd, at = e.blob("unreferenced")
	e.manifest("app/v1", w.refd)
	// Both blobs are old by the time the pass runs.
	e.clock.mu.Lock()
	e.clock.now = at.Add(25 * time.Hour).Truncate(time.Second)
	e.clock.mu.Unlock()
	rep := e.pass()
	if rep.Digests == nil || rep.Digests.NewPending != 1 {
		e.t.Fatalf("the pass did not tombstone the unreferenced blob: %+v", rep.Digests)
	}
	var tomb etcdstore.Tombstone
	resp, err := e.store.Client().Get(e.t.Context(), e.store.Keys().Tombstone(w.unrefd))
	if err != nil || len(resp.Kvs) != 1 || json.Unmarshal(resp.Kvs[0].Value, &tomb) != nil || tomb.State != etcdstore.TombstonePending {
		e.t.Fatalf("tombstone of the unreferenced blob: %v %+v", err, tomb)
	}
	w.tombstoneRequire = tomb.Frontier
	return w
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
