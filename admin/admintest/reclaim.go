package admintest

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// Clock is the injected clock of the test's world, wall and monotonic:
// time moves only when a test says so, and then for everyone (the
// gateway's stamps, the reclaimer, the backend's Date through Dated).
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	mono time.Duration
}

// Mono is the monotonic clock: the time the test has moved on.
func (c *Clock) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// set moves the clock to t; a move forward is time passing.
func (c *Clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.mono += t.Sub(c.now)
	}
	c.now = t
}

// Dated is a backend whose answers carry the clock's time as their Date,
// as a backend sharing the test's clock would (MinIO's own clock is the
// machine's, which the test does not move).
func (c *Clock) Dated(b multipart.Backend) multipart.Backend { return datedBackend{b, c} }

type datedBackend struct {
	multipart.Backend
	c *Clock
}

func (b datedBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.Backend.RoundTrip(req)
	if err == nil {
		resp.Header.Set("Date", b.c.Now().UTC().Format(http.TimeFormat))
	}
	return resp, err
}

// backendLag is how far a test clock starts ahead of MinIO's: the parts a
// test writes on MinIO while setting the scene are then older than any
// activity it records in the past of the clock, as they would be had the
// scene been played out in time, instead of reading as activity around the
// gateway.
const backendLag = 72 * time.Hour

func newClock() *Clock {
	return &Clock{now: time.Now().UTC().Truncate(time.Second).Add(backendLag)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.mono += d
}

// ReclaimEnv is a real MinIO and a real etcd with a running reclaimer
// (the leader), and the admin API over it (Base).
type ReclaimEnv struct {
	t *testing.T
	// Direct reaches MinIO without the gateway; Backend is the gateway's
	// client of it.
	Direct  minio.Core
	Backend multipart.Backend
	Store   *etcdstore.Store
	Svc     *multipart.Service
	Clock   *Clock
	// Leader is the running reclaimer, leading.
	Leader *reclaim.Reclaimer
	// Base is the leader's admin API.
	Base string
}

// PartSize is the size of every part the environment uploads.
const PartSize = 1024

// NewReclaimEnv starts MinIO, etcd and the leading reclaimer, which
// runs until the test ends, and sets Base to what serve returns for it.
func NewReclaimEnv(t *testing.T, serve func(store *etcdstore.Store, leader *reclaim.Reclaimer) string) *ReclaimEnv {
	t.Helper()
	e := &ReclaimEnv{t: t, Clock: newClock()}
	m := harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Direct = minio.Core{Client: mc}
	if e.Backend, err = backend.NewStatic(m.Endpoint, m.Region, m.AccessKey, m.SecretKey); err != nil {
		t.Fatal(err)
	}
	e.Store = NewStore(t)
	if e.Svc, err = multipart.New(multipart.Config{Store: e.Store, Backend: e.Backend, Now: e.Clock.Now}); err != nil {
		t.Fatal(err)
	}
	e.Leader = e.Reclaimer("leader@test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Leader.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if _, err := e.Leader.Elector().AwaitLeader(wctx); err != nil {
		t.Fatalf("the reclaimer did not win the election: %v", err)
	}
	e.Base = serve(e.Store, e.Leader)
	return e
}

// Reclaimer builds a reclaimer over the environment, not running.
func (e *ReclaimEnv) Reclaimer(id string) *reclaim.Reclaimer {
	e.t.Helper()
	r, err := reclaim.New(reclaim.Config{
		Store: e.Store, Sessions: e.Svc, Backend: e.Clock.Dated(e.Backend), ID: id,
		Grace: 24 * time.Hour, DeleteAfter: 24 * time.Hour, StuckLimit: time.Hour,
		MaxDelete: 1000, MaxDeleteFraction: 1, MaxDeleteUploadsFraction: 1, MaxMarkFraction: 1,
		Interval: 24 * time.Hour, ElectionTTL: 60 * time.Second,
		Now: e.Clock.Now, Monotonic: e.Clock.Mono, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// Bucket creates a bucket directly on MinIO.
func (e *ReclaimEnv) Bucket(name string) {
	e.t.Helper()
	if err := e.Direct.MakeBucket(e.t.Context(), name, minio.MakeBucketOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// Upload creates an upload with n parts directly on MinIO.
func (e *ReclaimEnv) Upload(bucket, key string, n int) string {
	e.t.Helper()
	ctx := e.t.Context()
	id, err := e.Direct.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for p := 1; p <= n; p++ {
		data := bytes.Repeat([]byte{byte(p)}, PartSize)
		if _, err := e.Direct.PutObjectPart(ctx, bucket, key, id, p, bytes.NewReader(data), PartSize, minio.PutObjectPartOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}

// Session records an active session as the gateway would have, last
// active at last.
func (e *ReclaimEnv) Session(bucket, key, id string, last time.Time) {
	e.t.Helper()
	s := &etcdstore.Session{Bucket: bucket, Key: key, UploadID: id, Owner: "alice", Created: last, LastActivity: last}
	s.Transition(etcdstore.StateActive, last, "gateway", "created")
	if _, err := e.Store.CreateSession(e.t.Context(), s); err != nil {
		e.t.Fatal(err)
	}
}

// PartsOnMinIO counts an upload's parts on MinIO; -1 means NoSuchUpload.
func (e *ReclaimEnv) PartsOnMinIO(bucket, key, id string) int {
	e.t.Helper()
	res, err := e.Direct.ListObjectParts(e.t.Context(), bucket, key, id, 0, 1000)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
			return -1
		}
		e.t.Fatal(err)
	}
	return len(res.ObjectParts)
}

// State reads the state of a session.
func (e *ReclaimEnv) State(bucket, id string) etcdstore.SessionState {
	e.t.Helper()
	v, err := e.Store.GetSession(e.t.Context(), bucket, id)
	if err != nil {
		e.t.Fatalf("session %s/%s: %v", bucket, id, err)
	}
	return v.Value.State
}

// Scenario is a bucket with an abandoned upload (A, 2 parts, idle 30h), a
// live one (K, 1 part, active 10 minutes ago) and two orphans (O1, O2, 1
// part each, no session).
type Scenario struct {
	Bucket string
	// A is abandoned, K live, O1 and O2 orphans; KeyA, KeyK, KeyO1 and K2
	// are their keys.
	A, K, O1, O2          string
	KeyA, KeyK, KeyO1, K2 string
}

// Scenario builds a Scenario.
func (e *ReclaimEnv) Scenario() Scenario {
	e.t.Helper()
	now := e.Clock.Now()
	s := Scenario{Bucket: "reclaim-api", KeyA: "abandoned.bin", KeyK: "live.bin", KeyO1: "orphan/one.bin", K2: "orphan/two.bin"}
	e.Bucket(s.Bucket)
	s.A = e.Upload(s.Bucket, s.KeyA, 2)
	s.K = e.Upload(s.Bucket, s.KeyK, 1)
	s.O1 = e.Upload(s.Bucket, s.KeyO1, 1)
	s.O2 = e.Upload(s.Bucket, s.K2, 1)
	e.Session(s.Bucket, s.KeyA, s.A, now.Add(-30*time.Hour))
	e.Session(s.Bucket, s.KeyK, s.K, now.Add(-10*time.Minute))
	return s
}
