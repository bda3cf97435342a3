package digests_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
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
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e.etcd, err = etcdstore.StartEmbedded(ctx, etcdstore.EmbeddedConfig{
		DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.etcd.Close)
	e.cli, err = etcdstore.Connect(ctx, e.etcd.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cli.Close() })
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

// sweepTestBackend makes the digest sweep's backend calls with a MinIO client
// whose requests go through rt, so that a test can watch and disturb
// them. It stands in for the reclaimer's S3 client, which these tests
// cannot reach; the rebuild makes only the listing and read calls.
type sweepTestBackend struct{ c minio.Core }

func newSweepTestBackend(t *testing.T, e *sweepEnv, rt http.RoundTripper) sweepTestBackend {
	t.Helper()
	mc, err := harness.NewMinioGo(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey, rt)
	if err != nil {
		t.Fatal(err)
	}
	return sweepTestBackend{c: minio.Core{Client: mc}}
}

// sweepBackendErr maps MinIO's answers to the ones the sweep acts on.
func sweepBackendErr(err error) error {
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchBucket":
		return digests.ErrNoSuchBucket
	case "NoSuchKey":
		return digests.ErrNoSuchKey
	}
	return err
}

func (b sweepTestBackend) ListObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (digests.ObjectPage, error) {
	res, err := b.c.ListObjectsV2(bucket, prefix, startAfter, "", "", max)
	if err != nil {
		return digests.ObjectPage{}, sweepBackendErr(err)
	}
	// ETags go without their quotes, as the gateway records them.
	page := digests.ObjectPage{Done: !res.IsTruncated}
	for _, o := range res.Contents {
		page.Objects = append(page.Objects, digests.Object{Key: o.Key, Size: o.Size, ETag: strings.Trim(o.ETag, `"`), Modified: o.LastModified})
	}
	if n := len(page.Objects); n > 0 {
		page.Next = page.Objects[n-1].Key
	}
	return page, nil
}

func (b sweepTestBackend) HeadObject(ctx context.Context, bucket, key string) (digests.ObjectInfo, error) {
	info, err := b.c.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return digests.ObjectInfo{}, sweepBackendErr(err)
	}
	return digests.ObjectInfo{Size: info.Size, ETag: strings.Trim(info.ETag, `"`)}, nil
}

func (b sweepTestBackend) GetObject(ctx context.Context, bucket, key string, limit int64) ([]byte, string, error) {
	body, info, _, err := b.c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, "", sweepBackendErr(err)
	}
	defer body.Close()
	if info.Size > limit {
		return nil, "", digests.ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s/%s: %w", bucket, key, err)
	}
	if int64(len(data)) > limit {
		return nil, "", digests.ErrTooLarge
	}
	return data, strings.Trim(info.ETag, `"`), nil
}

// errNotInRebuild says a call the rebuild never makes was made.
var errNotInRebuild = errors.New("test backend: the rebuild makes no such call")

func (sweepTestBackend) DeleteObjects(context.Context, string, []string) (map[string]string, error) {
	return nil, errNotInRebuild
}

func (sweepTestBackend) UploadInFlight(context.Context, string, string) (bool, error) {
	return false, errNotInRebuild
}
