package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The fixtures of the reclaim and explain commands' tests: real MinIO and
// etcd with a reclaimer, and the admin handler over them.

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
