//go:build bench

package bench

// BenchmarkDigestSweep's deletion half: the collector's passes against
// direct RemoveObjects calls, timed and counted.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// deleteCounter counts the DeleteObjects requests the reclaimer sends.
type deleteCounter struct {
	multipart.Backend
	n atomic.Int64
}

func (c *deleteCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if isDeleteObjects(req) {
		c.n.Add(1)
	}
	return c.Backend.RoundTrip(req)
}

// deleteCounting counts the DeleteObjects requests of a minio-go client.
type deleteCounting struct {
	http.RoundTripper
	n atomic.Int64
}

func (c *deleteCounting) RoundTrip(req *http.Request) (*http.Response, error) {
	if isDeleteObjects(req) {
		c.n.Add(1)
	}
	return c.RoundTripper.RoundTrip(req)
}

func isDeleteObjects(req *http.Request) bool {
	return req.Method == http.MethodPost && req.URL.Query().Has("delete")
}

// collectClock times the collect phase of a pass from the sweep's fault
// points, which it calls from the pass's goroutine and from the
// collector's requests in flight.
type collectClock struct {
	mu            sync.Mutex
	lastPage      time.Time // the tombstone phase's last page
	guarded       time.Time // the first page had its guards armed
	lastCollected time.Time
}

func (c *collectClock) fault(point string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch point {
	case digestsweep.FaultPage:
		c.lastPage = now
	case digestsweep.FaultGuarded:
		if c.guarded.IsZero() {
			c.guarded = now
		}
	case digestsweep.FaultCollected:
		c.lastCollected = now
	}
}

func (c *collectClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastPage, c.guarded, c.lastCollected = time.Time{}, time.Time{}, time.Time{}
}

func (c *collectClock) read() (collect, deleting time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastPage.IsZero() || c.lastCollected.Before(c.lastPage) || c.guarded.IsZero() {
		return 0, 0
	}
	return c.lastCollected.Sub(c.lastPage), c.lastCollected.Sub(c.guarded)
}

// benchDelete writes k unreferenced blobs into a namespace and k more
// outside it, runs a pass that makes the first k pending, deletes the
// other k directly with RemoveObjects, then runs the pass whose collector
// deletes the first k, measuring both deletions.
func benchDelete(b *testing.B, w *reclaimWorld, k int) digestDelete {
	ctx := b.Context()
	bucket := "cas-delete-" + strconv.Itoa(k)
	res := digestDelete{Name: fmt.Sprintf("delete_%d", k), Title: fmt.Sprintf("deletion, %d unreferenced blobs", k), Blobs: int64(k)}
	if err := w.direct.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	directKeys := make([]string, k)
	if err := putBlobs(ctx, w.direct.Client, bucket, 2*k, func(i int) (string, []byte) {
		if i < k {
			body, h := benchBlob("sweepgate bench collected blob %d of %d", i, k)
			return benchBlobs + h, body
		}
		body, h := benchBlob("sweepgate bench direct blob %d of %d", i-k, k)
		directKeys[i-k] = benchDirect + h
		return directKeys[i-k], body
	}); err != nil {
		b.Fatal(err)
	}
	res.SetupSeconds = time.Since(start).Seconds()

	store := w.store(b, fmt.Sprintf("/bench-digests-delete-%d/", k))
	svc, err := multipart.New(multipart.Config{Store: store, Backend: w.backend})
	if err != nil {
		b.Fatal(err)
	}
	be := &deleteCounter{Backend: w.backend}
	clock := &collectClock{}
	r, err := reclaim.New(reclaim.Config{
		Store: store, Sessions: svc, Backend: be, ID: "bench-delete",
		Interval: 24 * time.Hour, Fault: clock.fault,
		Digests: &digestsweep.SweepConfig{
			Layout: benchLayout(b, bucket), PlacementGrace: benchGrace,
			// The breaker lets the whole namespace go: every blob in it
			// is unreferenced.
			MaxDelete: -1, MaxDeleteFraction: 1, MaxMark: -1, MaxMarkFraction: 1,
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(runCtx)
	}()
	defer func() {
		stop()
		<-done
	}()
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = r.Elector().AwaitLeader(lctx)
	lcancel()
	if err != nil {
		b.Fatalf("the reclaimer did not win the election: %v", err)
	}
	// The first pass makes every tombstone pending.
	one, elapsed := digestPass(b, r, res.Name)
	res.MarkSeconds = elapsed.Seconds()
	if one.NewPending != int64(k) || one.Stored != int64(k) {
		b.Fatalf("%s: the first pass made %d of %d stored blobs pending, want %d (report %+v)", res.Name, one.NewPending, one.Stored, k, one)
	}

	// The direct baseline, between the two passes.
	deleteDirect(b, w, bucket, directKeys, &res)

	// The second pass makes them ready and collects them.
	clock.reset()
	be.n.Store(0)
	h := startHeapSampler()
	two, elapsed := digestPass(b, r, res.Name)
	var hp reclaimPass
	h.finish(&hp)
	res.PeakHeapBytes, res.PeakHeapMiB, res.PeakLiveBytes, res.PeakLiveMiB, res.HeapSamples = hp.PeakHeapBytes, hp.PeakHeapMiB, hp.PeakLiveBytes, hp.PeakLiveMiB, hp.HeapSamples
	res.PassSeconds = elapsed.Seconds()
	res.PassPerSec = float64(two.Deleted) / res.PassSeconds
	collect, deleting := clock.read()
	if collect <= 0 {
		b.Fatalf("%s: the collect phase was not timed (fault points not seen)", res.Name)
	}
	res.CollectorSeconds, res.DeleteSeconds = collect.Seconds(), deleting.Seconds()
	res.CollectorPerSec = float64(two.Deleted) / res.CollectorSeconds
	res.CollectorRequests = be.n.Load()
	res.Ratio = res.CollectorPerSec / res.DirectPerSec
	res.PassRatio = res.PassPerSec / res.DirectPerSec
	res.Report = map[string]int64{
		"stored": two.Stored, "pending": two.Pending, "ready": two.Ready, "deleted": two.Deleted, "bytes": two.Bytes,
		"failed": two.Failed, "unknown": two.Unknown, "changed": two.Changed,
	}
	if two.Deleted != int64(k) || two.Failed != 0 || two.Unknown != 0 {
		b.Fatalf("%s: the second pass deleted %d blobs, want %d (report %v)", res.Name, two.Deleted, k, res.Report)
	}
	if n, err := countPrefix(ctx, w.direct.Client, bucket, benchBlobs); err != nil || n != 0 {
		b.Fatalf("%s: %d blobs left in the namespace after the collector (%v)", res.Name, n, err)
	}
	return res
}

// digestPass triggers one pass of r, which must run the digest sweep in
// full, and returns its digest report and how long it took.
func digestPass(b *testing.B, r *reclaim.Reclaimer, name string) (digestsweep.Report, time.Duration) {
	b.Helper()
	pctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
	defer cancel()
	t0 := time.Now()
	rep, err := r.Trigger(pctx)
	elapsed := time.Since(t0)
	if err != nil {
		b.Fatalf("%s: pass %d: %v (stopped: %s)", name, rep.Pass, err, rep.Stopped)
	}
	if rep.Digests == nil {
		b.Fatalf("%s: pass %d has no digest report", name, rep.Pass)
	}
	if d := rep.Digests; d.Kept != "" || d.Refused != "" || d.Rebuild.Failed != "" {
		b.Fatalf("%s: pass %d kept everything (%q), was refused (%q) or its rebuild failed (%q)", name, rep.Pass, d.Kept, d.Refused, d.Rebuild.Failed)
	}
	return *rep.Digests, elapsed
}

// deleteDirect deletes keys from bucket with minio-go's RemoveObjects, the
// baseline of the collector, and records its rate and requests in res.
func deleteDirect(b *testing.B, w *reclaimWorld, bucket string, keys []string, res *digestDelete) {
	ctx := b.Context()
	k := len(keys)
	rt := &deleteCounting{RoundTripper: http.DefaultTransport}
	mc, err := harness.NewMinioGo(w.minio.Endpoint, w.minio.Region, w.minio.AccessKey, w.minio.SecretKey, rt)
	if err != nil {
		b.Fatal(err)
	}
	objs := make(chan minio.ObjectInfo, directBatch)
	go func() {
		defer close(objs)
		for _, key := range keys {
			objs <- minio.ObjectInfo{Key: key}
		}
	}()
	start := time.Now()
	var derr error
	for e := range mc.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		if derr == nil {
			derr = fmt.Errorf("direct delete of %s: %w", e.ObjectName, e.Err)
		}
	}
	res.DirectSeconds = time.Since(start).Seconds()
	if derr != nil {
		b.Fatal(derr)
	}
	res.DirectPerSec = float64(k) / res.DirectSeconds
	res.DirectRequests = rt.n.Load()
	if n, err := countPrefix(ctx, w.direct.Client, bucket, benchDirect); err != nil || n != 0 {
		b.Fatalf("%s: %d blobs left after the direct delete (%v)", res.Name, n, err)
	}
}
