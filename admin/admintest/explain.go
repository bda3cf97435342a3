package admintest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// ExplainEnv is a real MinIO and a real etcd with a leading reclaimer that
// sweeps uploads and the CAS bucket (one plane, "backup", gates deletes),
// and the admin API over it.
type ExplainEnv struct {
	t      *testing.T
	Direct minio.Core
	Store  *etcdstore.Store
	Clock  *Clock
	// R is the running reclaimer, leading; Cfg its configuration.
	R   *reclaim.Reclaimer
	Cfg reclaim.Config
	// Base is its admin API.
	Base string
}

// The buckets and prefixes of the explain environment: ExplainBucket
// holds the uploads, the CAS bucket the blobs and manifests.
const (
	ExplainBucket    = "uploads"
	ExplainCAS       = "cas"
	explainBlobs     = "blobs/sha256/"
	ExplainManifests = "manifests/"
)

// NewExplainEnv starts MinIO, etcd and the leading reclaimer with the
// digest sweep, which runs until the test ends, and sets Base to what
// serve returns for it.
func NewExplainEnv(t *testing.T, serve func(store *etcdstore.Store, leader *reclaim.Reclaimer) string) *ExplainEnv {
	t.Helper()
	e := &ExplainEnv{t: t, Clock: newClock()}
	m := harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Direct = minio.Core{Client: mc}
	backend, err := backend.NewStatic(m.Endpoint, m.Region, m.AccessKey, m.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	e.Store = NewStore(t)
	svc, err := multipart.New(multipart.Config{Store: e.Store, Backend: backend, Now: e.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{ExplainBucket, ExplainCAS} {
		if err := e.Direct.MakeBucket(t.Context(), b, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := cas.NewNamespace("blobs", ExplainCAS, explainBlobs, "", false)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", ExplainCAS, ExplainManifests, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.Cfg = reclaim.Config{
		Store: e.Store, Sessions: svc, Backend: e.Clock.Dated(backend), ID: "leader@test",
		Grace: 24 * time.Hour, DeleteAfter: 12 * time.Hour, StuckLimit: time.Hour,
		MaxDelete: 1000, MaxDeleteFraction: 1, MaxDeleteUploadsFraction: 1, MaxMarkFraction: 1,
		Interval: 24 * time.Hour, ElectionTTL: 60 * time.Second,
		Now: e.Clock.Now, Monotonic: e.Clock.Mono, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
		Digests: &digestsweep.SweepConfig{
			Layout:         &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}},
			PlacementGrace: 24 * time.Hour, Planes: []string{"backup"}, MaxDelete: 1000, MaxDeleteFraction: 1,
			MaxMarkFraction: 1,
		},
	}
	if e.R, err = reclaim.New(e.Cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.R.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if _, err := e.R.Elector().AwaitLeader(wctx); err != nil {
		t.Fatalf("the reclaimer did not win the election: %v", err)
	}
	e.Base = serve(e.Store, e.R)
	return e
}

// Upload creates an upload of n parts directly on MinIO and, unless the
// state is "", its session, created 31 hours ago and last active at last.
func (e *ExplainEnv) Upload(key string, n int, st etcdstore.SessionState, last time.Time) string {
	e.t.Helper()
	ctx := e.t.Context()
	id, err := e.Direct.NewMultipartUpload(ctx, ExplainBucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for p := 1; p <= n; p++ {
		if _, err := e.Direct.PutObjectPart(ctx, ExplainBucket, key, id, p, bytes.NewReader(bytes.Repeat([]byte{1}, PartSize)), PartSize, minio.PutObjectPartOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	if st != "" {
		e.Session(key, id, st, last)
	}
	return id
}

// Session records a session of the upload in state st.
func (e *ExplainEnv) Session(key, id string, st etcdstore.SessionState, last time.Time) {
	e.t.Helper()
	created := e.Clock.Now().Add(-31 * time.Hour)
	s := &etcdstore.Session{Bucket: ExplainBucket, Key: key, UploadID: id, Owner: "alice", Created: created, LastActivity: last}
	s.Transition(etcdstore.StateActive, created, "gateway", "created")
	if st != etcdstore.StateActive {
		s.Transition(st, last, "gateway", "test")
	}
	if _, err := e.Store.CreateSession(e.t.Context(), s); err != nil {
		e.t.Fatal(err)
	}
}

// Blob stores the blob called name directly on MinIO and returns its
// digest and its modification time as the backend lists it.
func (e *ExplainEnv) Blob(name string) (string, time.Time) {
	e.t.Helper()
	body := []byte("content of blob " + name)
	sum := sha256.Sum256(body)
	dg := "sha256:" + hex.EncodeToString(sum[:])
	key := explainBlobs + hex.EncodeToString(sum[:])
	if _, err := e.Direct.Client.PutObject(e.t.Context(), ExplainCAS, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		e.t.Fatal(err)
	}
	var modified time.Time
	for o := range e.Direct.Client.ListObjects(e.t.Context(), ExplainCAS, minio.ListObjectsOptions{Prefix: key}) {
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

// Manifest writes a manifest naming digests the way the gateway does.
func (e *ExplainEnv) Manifest(key string, digests ...string) {
	e.t.Helper()
	ctx := e.t.Context()
	now := e.Clock.Now()
	if err := e.Store.BeginRefWrite(ctx, ExplainCAS, ExplainManifests+key, etcdstore.RefWrite{ID: "w-" + key, Digests: digests, At: now}); err != nil {
		e.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"layers": digests})
	info, err := e.Direct.Client.PutObject(ctx, ExplainCAS, ExplainManifests+key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.Store.EndRefWrite(ctx, ExplainCAS, ExplainManifests+key, "w-"+key, etcdstore.WriteCommitted, info.ETag, now); err != nil {
		e.t.Fatal(err)
	}
}

// Pass runs one pass on the leader.
func (e *ExplainEnv) Pass() reclaim.Report {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	rep, err := e.R.Trigger(ctx)
	if err != nil {
		e.t.Fatalf("pass: %v (%+v)", err, rep)
	}
	return rep
}

// ExplainWorld is what the API and CLI tests explain: an idle upload, an
// orphan, a referenced blob and an unreferenced old blob whose tombstone
// waits for the backup plane after one pass.
type ExplainWorld struct {
	// Idle is an upload the pass marked expired, Orphan one without a
	// session.
	Idle, Orphan string
	// Refd is the digest of a referenced blob, Unrefd that of one the pass
	// tombstoned, waiting for the backup plane to pass TombstoneRequire.
	Refd, Unrefd     string
	TombstoneRequire int64
}

// World builds an ExplainWorld, running one pass.
func (e *ExplainEnv) World() ExplainWorld {
	e.t.Helper()
	now := e.Clock.Now()
	w := ExplainWorld{
		Idle:   e.Upload("idle/object", 2, etcdstore.StateActive, now.Add(-30*time.Hour)),
		Orphan: e.Upload("orphan/object", 3, "", time.Time{}),
	}
	var at time.Time
	w.Refd, _ = e.Blob("referenced")
	w.Unrefd, at = e.Blob("unreferenced")
	e.Manifest("app/v1", w.Refd)
	// Both blobs are old by the time the pass runs (at is on MinIO's
	// clock, which the test clock runs ahead of).
	e.Clock.set(at.Add(25*time.Hour + backendLag).Truncate(time.Second))
	rep := e.Pass()
	if rep.Digests == nil || rep.Digests.NewPending != 1 {
		e.t.Fatalf("the pass did not tombstone the unreferenced blob: %+v", rep.Digests)
	}
	var tomb etcdstore.Tombstone
	resp, err := e.Store.Client().Get(e.t.Context(), e.Store.Keys().Tombstone(w.Unrefd))
	if err != nil || len(resp.Kvs) != 1 || json.Unmarshal(resp.Kvs[0].Value, &tomb) != nil || tomb.State != etcdstore.TombstonePending {
		e.t.Fatalf("tombstone of the unreferenced blob: %v %+v", err, tomb)
	}
	w.TombstoneRequire = tomb.Frontier
	return w
}
