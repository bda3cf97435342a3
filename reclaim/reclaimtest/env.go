//go:build integration

package reclaimtest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// Env is one test's world: a real MinIO, a real etcd, the session service
// and the clock. Everything it starts stops when the test ends.
type Env struct {
	// T is the test the world belongs to; helpers fail it.
	T *testing.T
	// MinIO is the running MinIO; Direct reaches it without the gateway
	// (to set the scene and to look at what is stored).
	MinIO  *harness.MinIO
	Direct minio.Core
	// Backend is the client of MinIO that the session service and the
	// reclaimer of Config use, its answers dated by the clock.
	Backend *CountingBackend
	// Etcd is the embedded etcd; Cli a client of it; Store the store over
	// it, under the key prefix /sweepgate-test/.
	Etcd  *etcdstore.Embedded
	Cli   *clientv3.Client
	Store *etcdstore.Store
	// Svc is the session service, as the gateway runs it, on the clock.
	Svc   *multipart.Service
	Clock *Clock
}

// NewEnv starts MinIO and etcd for t, with the clock ahead of MinIO's by
// a few days (so that what a test stores on MinIO is older than anything
// it records), and builds the session service over them.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	e := &Env{T: t, Clock: newClock()}
	e.MinIO = harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(e.MinIO.Endpoint, e.MinIO.Region, e.MinIO.AccessKey, e.MinIO.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Direct = minio.Core{Client: mc}
	be, err := backend.NewStatic(e.MinIO.Endpoint, e.MinIO.Region, e.MinIO.AccessKey, e.MinIO.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	e.Backend = &CountingBackend{Backend: be}
	e.SetBackendDate(e.Clock.Now)

	e.Etcd, e.Cli = etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/sweepgate-test/")
	if err != nil {
		t.Fatal(err)
	}
	e.Store = etcdstore.NewStore(e.Cli, keys)
	e.Svc, err = multipart.New(multipart.Config{Store: e.Store, Backend: e.Backend, Now: e.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// SetBackendDate makes the backend's answers carry now's time as their
// Date.
func (e *Env) SetBackendDate(now func() time.Time) { e.Backend.date.Store(&now) }

// Scoped wraps be, a client of the same MinIO (under another identity), as
// the environment's own backend is wrapped: counted, and its answers dated
// as the environment's backend dates them now.
func (e *Env) Scoped(be multipart.Backend) *CountingBackend {
	scoped := &CountingBackend{Backend: be}
	scoped.date.Store(e.Backend.date.Load())
	return scoped
}

// logger logs at debug level to stderr when the test runs verbose, and
// nowhere otherwise.
func (e *Env) logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// Config is the reclaimer configuration of the acceptance scenarios.
func (e *Env) Config() reclaim.Config {
	return reclaim.Config{
		Store: e.Store, Sessions: e.Svc, Backend: e.Backend,
		Grace: 24 * time.Hour, DeleteAfter: 12 * time.Hour, StuckLimit: time.Hour, ClockSkew: 5 * time.Minute,
		MaxDelete: 1000, MaxDeleteFraction: 0.5,
		// A test's few uploads are often all marked or deleted at once.
		MaxDeleteUploadsFraction: 0.5, MaxMarkFraction: 1,
		// Passes run on Trigger only, and guards are settled by passes
		// only unless a test sets a shorter GuardCheck.
		Interval:    24 * time.Hour,
		GuardCheck:  24 * time.Hour,
		BatchSize:   2,
		ElectionTTL: 60 * time.Second,
		Now:         e.Clock.Now, Monotonic: e.Clock.Mono, Logger: e.logger(),
	}
}

// Start runs a reclaimer until the test ends and waits until it leads.
func (e *Env) Start(cfg reclaim.Config) *reclaim.Reclaimer {
	e.T.Helper()
	r := e.Run(cfg)
	ctx, cancel := context.WithTimeout(e.T.Context(), 30*time.Second)
	defer cancel()
	if _, err := r.Elector().AwaitLeader(ctx); err != nil {
		e.T.Fatalf("reclaimer did not win the election: %v", err)
	}
	return r
}

// Run runs a reclaimer until the test ends, without waiting for it to
// lead.
func (e *Env) Run(cfg reclaim.Config) *reclaim.Reclaimer {
	e.T.Helper()
	r, err := reclaim.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	e.T.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// Explainer builds a reclaimer that only explains: it never campaigns.
func (e *Env) Explainer(cfg reclaim.Config) *reclaim.Reclaimer {
	e.T.Helper()
	r, err := reclaim.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// Trigger runs one pass and returns its report and error.
func (e *Env) Trigger(r *reclaim.Reclaimer) (reclaim.Report, error) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.T.Context(), 60*time.Second)
	defer cancel()
	return r.Trigger(ctx)
}

// MustPass runs one pass and returns its report, failing the test if the
// pass failed.
func (e *Env) MustPass(r *reclaim.Reclaimer) reclaim.Report {
	e.T.Helper()
	rep, err := e.Trigger(r)
	if err != nil {
		e.T.Fatalf("pass failed: %v (report: %+v)", err, rep)
	}
	return rep
}

// Bucket creates a bucket directly on MinIO.
func (e *Env) Bucket(name string) {
	e.T.Helper()
	if err := e.Direct.MakeBucket(e.T.Context(), name, minio.MakeBucketOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// PartSize is the size of every part the tests upload; MinIO checks the
// 5 MiB minimum only on complete.
const PartSize = 1024

// Upload creates an upload with n parts of PartSize bytes directly on
// MinIO and returns its id.
func (e *Env) Upload(bucket, key string, n int) string {
	e.T.Helper()
	ctx := e.T.Context()
	id, err := e.Direct.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	for p := 1; p <= n; p++ {
		data := bytes.Repeat([]byte{byte(p)}, PartSize)
		if _, err := e.Direct.PutObjectPart(ctx, bucket, key, id, p, bytes.NewReader(data), PartSize, minio.PutObjectPartOptions{}); err != nil {
			e.T.Fatal(err)
		}
	}
	return id
}

// Revision returns etcd's current revision.
func (e *Env) Revision() int64 {
	e.T.Helper()
	resp, err := e.Cli.Get(e.T.Context(), "health", clientv3.WithCountOnly())
	if err != nil {
		e.T.Fatal(err)
	}
	return resp.Header.Revision
}

// RevokeLeader revokes the lease of the election's leader key, as if the
// leader had stopped answering for longer than its TTL.
func (e *Env) RevokeLeader() {
	e.T.Helper()
	resp, err := e.Cli.Get(e.T.Context(), e.Store.Keys().Election(), clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		e.T.Fatalf("no election leader key: %v", err)
	}
	if _, err := e.Cli.Revoke(e.T.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		e.T.Fatal(err)
	}
}

// Pause reads a sweep's pause record; ok is false when it is not paused.
func (e *Env) Pause(sweep string) (etcdstore.Pause, bool) {
	e.T.Helper()
	v, err := e.Store.GetPause(e.T.Context(), sweep)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return etcdstore.Pause{}, false
	}
	if err != nil {
		e.T.Fatal(err)
	}
	return v.Value, true
}
