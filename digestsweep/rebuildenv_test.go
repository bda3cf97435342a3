//go:build integration

package digestsweep_test

import (
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// sweepClock is the injected clock: time moves only when a test says so.
type sweepClock struct {
	mu  sync.Mutex
	now time.Time
}

func newSweepClock() *sweepClock {
	return &sweepClock{now: time.Now().UTC().Truncate(time.Second)}
}

func (c *sweepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *sweepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// sweepEnv is one test's world: a real MinIO, a real etcd and the clock.
type sweepEnv struct {
	t      *testing.T
	minio  *harness.MinIO
	direct minio.Core
	etcd   *etcdstore.Embedded
	cli    *clientv3.Client
	store  *etcdstore.Store
	clock  *sweepClock
}

func newSweepEnv(t *testing.T) *sweepEnv {
	t.Helper()
	e := &sweepEnv{t: t, clock: newSweepClock()}
	e.minio = harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.direct = minio.Core{Client: mc}
	e.etcd, e.cli = etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/sweepgate-test/")
	if err != nil {
		t.Fatal(err)
	}
	e.store = etcdstore.NewStore(e.cli, keys)
	return e
}

func (e *sweepEnv) bucket(name string) {
	e.t.Helper()
	if err := e.direct.MakeBucket(e.t.Context(), name, minio.MakeBucketOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
