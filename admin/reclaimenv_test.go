package admin

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The fixture of the reclaim API's tests: real MinIO and etcd with a
// running reclaimer and the admin handler over it.

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
	e.base = e.serveAPI(e.leader, ReclaimerInfo{ID: "leader@test", Enabled: true})
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
func (e *reclaimEnv) serveAPI(r *reclaim.Reclaimer, info ReclaimerInfo) string {
	e.t.Helper()
	a := &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{store: e.store, log: slog.New(slog.DiscardHandler)},
		reclaim:  reclaimAPI{r: r, store: e.store, info: info, progress: NewProgressHub(), log: slog.New(slog.DiscardHandler)},
	}
	srv := httptest.NewServer(testAdminHandler(a))
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
