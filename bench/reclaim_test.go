//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// The reclaimer benchmark: one dry-run pass (Reclaimer.Plan, the
// same inventory and classification a real pass makes, writing nothing)
// over N real multipart uploads on MinIO, and over M session records in
// etcd whose uploads the backend does not have, with the peak Go heap of
// the pass. The pass runs in this process; etcd runs embedded in a child
// process (this test binary again, see init below), so that the heap
// measured is the reclaimer's and its client's, not etcd's index of a
// million keys.
const (
	uploadsEnv  = "SWEEPGATE_BENCH_UPLOADS"
	sessionsEnv = "SWEEPGATE_BENCH_SESSIONS"
	// defaultUploads is the counts of uploads planned over, each on a
	// MinIO of its own (MinIO answers a listing of 100,000 uploads in one
	// page of about 40 MB, which the plan decodes as it streams in).
	defaultUploads  = "10000,100000"
	defaultSessions = 1_000_000
	// sessionTxn is how many session puts go in one etcd transaction, and
	// sessionWriters how many transactions are in flight.
	sessionTxn     = 128
	sessionWriters = 8
	// uploadWriters is how many uploads are created on MinIO at once.
	uploadWriters = 32
	// uploadPartSize is the one part each benchmark upload has.
	uploadPartSize = 1024
	// The session scan's memory passes when the peak at M is below twice
	// the peak at M/10, or below targetScanHeapMiB whatever the ratio.
	targetScanRatio = 2.0
	// A plan costs at most targetPlanRatio times a bare listing of its
	// uploads plus a bare range read of their sessions; the session scan's
	// time per session at M is within targetScanTimeRatio of that at M/10.
	targetPlanRatio     = 2.0
	targetScanTimeRatio = 1.5
	targetScanHeapMiB   = 64
	heapSampleEvery     = 10 * time.Millisecond
	// etcdChildEnv makes this test binary an etcd server (see init).
	etcdChildEnv = "SWEEPGATE_BENCH_ETCD_CHILD"
	// planProfileEnv, when set, names a directory where each plan writes
	// a CPU profile of itself alone (plan-<items>.cpu, without the
	// fixture's setup) and a heap profile taken at its end.
	planProfileEnv = "SWEEPGATE_BENCH_PLAN_PROFILE"
)

// passResult is one measured pass.
type reclaimPass struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Items is what the pass went through (uploads or session records).
	Items   int64   `json:"items"`
	Unit    string  `json:"unit"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_s"`
	// PeakHeapBytes is the highest heap in use (runtime/metrics heap
	// objects + unused heap spans) seen during the pass minus the heap in
	// use after a GC just before it; PeakLiveBytes the same for the heap
	// marked live by the GC cycles that ran during the pass.
	PeakHeapBytes int64   `json:"peak_heap_bytes"`
	PeakHeapMiB   float64 `json:"peak_heap_mib"`
	PeakLiveBytes int64   `json:"peak_live_bytes"`
	PeakLiveMiB   float64 `json:"peak_live_mib"`
	HeapSamples   int     `json:"heap_samples"`
	// Setup is how long writing the fixture took.
	SetupSeconds float64 `json:"setup_seconds"`
	// Plan figures, as the pass reported them.
	Report map[string]int64 `json:"report"`
	// Uploads: a bare listing of the uploads on MinIO and a bare range read
	// of their sessions in etcd, measured after the plan in the same run,
	// and the plan's time over their sum.
	ListSeconds  float64 `json:"list_seconds,omitempty"`
	RangeSeconds float64 `json:"range_seconds,omitempty"`
	Ratio        float64 `json:"ratio,omitempty"`
	TargetRatio  float64 `json:"target_ratio,omitempty"`
	Status       string  `json:"status,omitempty"`
	// Sessions: one scan of every session (etcdstore.ScanSessions) after
	// the plan, and its time per session.
	ScanSeconds          float64 `json:"scan_seconds,omitempty"`
	ScanMicrosPerSession float64 `json:"scan_us_per_session,omitempty"`
}

type reclaimResult struct {
	// Uploads: one plan per count of uploads, smallest first.
	Uploads  []reclaimPass `json:"uploads,omitempty"`
	Sessions []reclaimPass `json:"sessions,omitempty"`
	// ScanRatio is peak heap at M over peak heap at M/10.
	ScanRatio float64 `json:"scan_ratio,omitempty"`
	// ScanTimeRatio is the session scan's time per session at M over that
	// at M/10.
	ScanTimeRatio       float64  `json:"scan_time_ratio,omitempty"`
	TargetScanTimeRatio float64  `json:"target_scan_time_ratio"`
	ScanTimeStatus      string   `json:"scan_time_status,omitempty"`
	TargetScanRatio     float64  `json:"target_scan_ratio"`
	TargetScanMiB       float64  `json:"target_scan_mib"`
	ScanStatus          string   `json:"scan_status,omitempty"`
	Notes               []string `json:"notes,omitempty"`
}

// runEtcdChild turns this test binary into an embedded etcd server when the
// benchmark started it as a child (so etcd's memory is not counted in the
// benchmark's heap): it prints the client endpoint and serves until its stdin
// closes, then exits. TestMain calls it first.
func runEtcdChild() {
	dir := os.Getenv(etcdChildEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e, err := etcdtest.Serve(ctx, etcdtest.Config{DataDir: dir, QuotaBackendBytes: 8 << 30})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd child: %v\n", err)
		os.Exit(2)
	}
	fmt.Printf("endpoint %s\n", strings.Join(e.Endpoints(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	e.Close()
	os.Exit(0)
}

// startChild runs this test binary again as a server of its own, with
// env set to value, stopped (stdin closed, then killed after stopWait) when
// b ends. The child's first line on stdout starts with prefix; startChild
// returns the rest and the child's pid.
func startChild(b *testing.B, env, value, prefix string, stopWait time.Duration) (string, int) {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start the %s child: %v", env, err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(stopWait):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the %s child did not start: %v", env, err)
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if !ok {
		b.Fatalf("the %s child said %q", env, line)
	}
	return rest, cmd.Process.Pid
}

// startEtcdChild runs etcd in a child process and connects to it.
func startEtcdChild(b *testing.B) *clientv3.Client {
	b.Helper()
	eps, _ := startChild(b, etcdChildEnv, filepath.Join(b.TempDir(), "etcd"), "endpoint ", 30*time.Second)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	cli, err := etcdstore.Connect(ctx, strings.Split(eps, ","), 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return cli
}

// heapSampler records the peak Go heap every heapSampleEvery.
type heapSampler struct {
	baseHeap, baseLive int64
	peakHeap, peakLive atomic.Int64
	samples            atomic.Int64
	stop               chan struct{}
	done               chan struct{}
}

var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/gc/heap/live:bytes"}

func readHeap(s []metrics.Sample) (inuse, live int64) {
	metrics.Read(s)
	return int64(s[0].Value.Uint64() + s[1].Value.Uint64()), int64(s[2].Value.Uint64())
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	runtime.GC()
	s := make([]metrics.Sample, len(heapMetrics))
	for i, n := range heapMetrics {
		s[i].Name = n
	}
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	h.baseHeap, h.baseLive = readHeap(s)
	h.peakHeap.Store(h.baseHeap)
	h.peakLive.Store(h.baseLive)
	go func() {
		defer close(h.done)
		t := time.NewTicker(heapSampleEvery)
		defer t.Stop()
		for {
			inuse, live := readHeap(s)
			h.samples.Add(1)
			if inuse > h.peakHeap.Load() {
				h.peakHeap.Store(inuse)
			}
			if live > h.peakLive.Load() {
				h.peakLive.Store(live)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) finish(p *reclaimPass) {
	close(h.stop)
	<-h.done
	p.PeakHeapBytes = h.peakHeap.Load() - h.baseHeap
	p.PeakLiveBytes = h.peakLive.Load() - h.baseLive
	p.PeakHeapMiB = float64(p.PeakHeapBytes) / mib
	p.PeakLiveMiB = float64(p.PeakLiveBytes) / mib
	p.HeapSamples = int(h.samples.Load())
}

// reclaimWorld is MinIO and etcd (in a child) with a backend client.
type reclaimWorld struct {
	minio   *harness.MinIO
	direct  minio.Core
	backend multipart.Backend
	cli     *clientv3.Client
}

// newReclaimWorld starts a MinIO for the rest of b and uses etcd cli.
func newReclaimWorld(b *testing.B, cli *clientv3.Client) *reclaimWorld {
	b.Helper()
	w := &reclaimWorld{minio: harness.StartMinIO(b), cli: cli}
	mc, err := harness.NewMinioGo(w.minio.Endpoint, w.minio.Region, w.minio.AccessKey, w.minio.SecretKey, nil)
	if err != nil {
		b.Fatal(err)
	}
	w.direct = minio.Core{Client: mc}
	if w.backend, err = backend.NewStatic(w.minio.Endpoint, w.minio.Region, w.minio.AccessKey, w.minio.SecretKey); err != nil {
		b.Fatal(err)
	}
	return w
}

func (w *reclaimWorld) store(b *testing.B, prefix string) *etcdstore.Store {
	keys, err := etcdstore.NewKeys(prefix)
	if err != nil {
		b.Fatal(err)
	}
	return etcdstore.NewStore(w.cli, keys)
}

// plan runs one measured dry-run pass with store's sessions.
func (w *reclaimWorld) plan(b *testing.B, store *etcdstore.Store, p *reclaimPass) reclaim.Report {
	b.Helper()
	svc, err := multipart.New(multipart.Config{Store: store, Backend: w.backend})
	if err != nil {
		b.Fatal(err)
	}
	r, err := reclaim.New(reclaim.Config{
		Store: store, Sessions: svc, Backend: w.backend, ID: "bench",
		// Everything else at its default: batches of 1000, 8 uploads
		// examined at once, 1000 missing-session checks, 24h grace.
		Interval: 24 * time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	stopProfile := startPlanProfile(b, p)
	h := startHeapSampler()
	start := time.Now()
	rep, err := r.Plan(ctx)
	elapsed := time.Since(start)
	h.finish(p)
	stopProfile()
	if err != nil {
		b.Fatalf("%s: plan: %v", p.Name, err)
	}
	p.Seconds = elapsed.Seconds()
	p.PerSec = float64(p.Items) / elapsed.Seconds()
	p.Report = map[string]int64{
		"keep": rep.Uploads.Keep.Sessions, "mark": rep.Uploads.Mark.Sessions, "delete": rep.Uploads.Delete.Sessions,
		"hold": rep.Uploads.Hold.Sessions, "missing": rep.Totals.Missing, "missing_unverified": rep.Totals.MissingUnverified,
		"orphans": rep.Totals.Orphans, "stuck": rep.Totals.Stuck, "vanished": rep.Vanished,
	}
	return rep
}

func reportPass(b *testing.B, p *reclaimPass) {
	b.ReportMetric(p.PerSec, p.Unit+"/s")
	b.ReportMetric(p.PeakHeapMiB, "peak-heap-MiB")
}

// benchSession is the record of one benchmark session.
func benchSession(bucket, key, id string, created, last time.Time) (string, error) {
	s := &etcdstore.Session{Bucket: bucket, Key: key, UploadID: id, Owner: "bench", Created: created, LastActivity: last}
	s.Transition(etcdstore.StateActive, created, "gateway", "created")
	return etcdstore.MarshalSession(s)
}

// putSessions writes n records (sessions, or part records) through store,
// sessionTxn puts per transaction, sessionWriters transactions at once. rec
// returns the i-th record's key and value.
func putSessions(ctx context.Context, store *etcdstore.Store, n int, rec func(i int) (key, val string, err error)) error {
	batches := make(chan int)
	errs := make(chan error, sessionWriters)
	var wg sync.WaitGroup
	for range sessionWriters {
		wg.Go(func() {
			for first := range batches {
				ops := make([]clientv3.Op, 0, sessionTxn)
				for i := first; i < min(first+sessionTxn, n); i++ {
					key, val, err := rec(i)
					if err != nil {
						errs <- err
						return
					}
					ops = append(ops, clientv3.OpPut(key, val))
				}
				if _, err := store.Client().Txn(ctx).Then(ops...).Commit(); err != nil {
					errs <- fmt.Errorf("write sessions %d..%d: %w", first, first+len(ops)-1, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for first := 0; first < n; first += sessionTxn {
		select {
		case batches <- first:
		case err = <-errs:
			break feed
		}
	}
	close(batches)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// BenchmarkReclaimPass measures one reclaim pass (a dry run: Plan) over
// real uploads on MinIO and over session records in etcd.
func BenchmarkReclaimPass(b *testing.B) {
	nUploads := envCounts(b, uploadsEnv, defaultUploads)
	nSessions := envCount(b, sessionsEnv, defaultSessions)
	cli := startEtcdChild(b)
	res := reclaimResult{TargetScanRatio: targetScanRatio, TargetScanMiB: targetScanHeapMiB, TargetScanTimeRatio: targetScanTimeRatio}
	res.Notes = append(res.Notes,
		"passes are dry runs (Reclaimer.Plan): the inventory and classification of a real pass, no writes",
		"etcd runs embedded in a child process; the heap figures are the benchmark process's: the reclaimer and its etcd and S3 clients")

	b.Run("Uploads_MinIO", func(b *testing.B) {
		// The framework runs a sub-benchmark again with a larger b.N when
		// it took under -benchtime; the pass is measured once.
		if res.Uploads == nil {
			// A MinIO for each count: a pass inventories every bucket.
			for _, n := range nUploads {
				res.Uploads = append(res.Uploads, benchUploads(b, newReclaimWorld(b, cli), n))
			}
		}
		reportPass(b, &res.Uploads[len(res.Uploads)-1])
	})
	b.Run("Sessions_etcd", func(b *testing.B) {
		// A MinIO of its own: a pass inventories every bucket, and the
		// uploads above would be counted as orphans here.
		if res.Sessions == nil {
			w := newReclaimWorld(b, cli)
			small := max(nSessions/10, 1)
			for i, n := range []int{small, nSessions} {
				p := benchSessions(b, w, fmt.Sprintf("/bench-sessions-%d/", i), n)
				res.Sessions = append(res.Sessions, p)
			}
		}
		reportPass(b, &res.Sessions[len(res.Sessions)-1])
	})
	if len(res.Sessions) == 2 {
		small, large := res.Sessions[0], res.Sessions[1]
		if small.PeakHeapBytes > 0 {
			res.ScanRatio = float64(large.PeakHeapBytes) / float64(small.PeakHeapBytes)
		}
		res.ScanTimeRatio = large.ScanMicrosPerSession / small.ScanMicrosPerSession
		res.ScanTimeStatus = statusBelow
		if res.ScanTimeRatio <= targetScanTimeRatio {
			res.ScanTimeStatus = statusPass
		}
		res.ScanStatus = statusBelow
		if large.PeakHeapBytes < int64(targetScanRatio*float64(small.PeakHeapBytes)) || large.PeakHeapMiB < targetScanHeapMiB {
			res.ScanStatus = statusPass
		}
	}
	printReclaim(os.Stdout, &res)
	path, err := mergeResults("reclaim_pass", &res)
	if err != nil {
		b.Fatalf("%v", err)
	}
	fmt.Fprintf(os.Stdout, "results: %s\n\n", path)
}

// benchUploads creates n uploads with one tiny part each directly on MinIO,
// a session for each (half idle for 30h, half active a minute ago), and
// plans a pass over them.
func benchUploads(b *testing.B, w *reclaimWorld, n int) reclaimPass {
	ctx := b.Context()
	p := reclaimPass{Name: "uploads_minio", Title: fmt.Sprintf("plan pass, %d uploads on MinIO", n), Items: int64(n), Unit: "uploads"}
	const bucket = "reclaim-bench"
	if err := w.direct.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		b.Fatal(err)
	}
	store := w.store(b, fmt.Sprintf("/bench-uploads-%d/", n))
	setup := time.Now()
	ids, etags := make([]string, n), make([]string, n)
	part := bytes.Repeat([]byte{0xab}, uploadPartSize)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range uploadWriters {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() != nil {
					return
				}
				key := fmt.Sprintf("obj/%06d", i)
				id, err := w.direct.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
				if err == nil {
					var op minio.ObjectPart
					op, err = w.direct.PutObjectPart(ctx, bucket, key, id, 1, bytes.NewReader(part), uploadPartSize, minio.PutObjectPartOptions{})
					etags[i] = op.ETag
				}
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("upload %s: %w", key, err))
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	if err := putSessions(ctx, store, n, func(i int) (string, string, error) {
		last := now.Add(-time.Minute)
		if i%2 == 0 {
			last = now.Add(-30 * time.Hour)
		}
		val, err := benchSession(bucket, fmt.Sprintf("obj/%06d", i), ids[i], now.Add(-31*time.Hour), last)
		return store.Keys().Session(bucket, ids[i]), val, err
	}); err != nil {
		b.Fatal(err)
	}
	// The part record the gateway writes for each part it passes on.
	if err := putSessions(ctx, store, n, func(i int) (string, string, error) {
		val, err := json.Marshal(etcdstore.Part{Number: 1, ETag: etags[i], Size: uploadPartSize, At: now.Add(-31 * time.Hour)})
		return store.Keys().Part(ids[i], 1), string(val), err
	}); err != nil {
		b.Fatal(err)
	}
	p.SetupSeconds = time.Since(setup).Seconds()
	rep := w.plan(b, store, &p)
	if got := rep.Uploads.Keep.Sessions + rep.Uploads.Mark.Sessions + rep.Uploads.Delete.Sessions + rep.Uploads.Hold.Sessions; got != int64(n) {
		b.Fatalf("the pass counted %d uploads, want %d (report %+v)", got, n, p.Report)
	}
	w.bareUploads(b, store, bucket, n, &p)
	return p
}

// bareUploads measures, after the plan, what the plan cannot do with less:
// one listing of bucket's uploads on MinIO, page by page, and one range
// read of their sessions in etcd; p.Ratio is the plan's time over theirs.
func (w *reclaimWorld) bareUploads(b *testing.B, store *etcdstore.Store, bucket string, n int, p *reclaimPass) {
	ctx := b.Context()
	start := time.Now()
	listed := 0
	var km, um string
	for {
		res, err := w.direct.ListMultipartUploads(ctx, bucket, "", km, um, "", 1000)
		if err != nil {
			b.Fatal(err)
		}
		listed += len(res.Uploads)
		if !res.IsTruncated {
			break
		}
		km, um = res.NextKeyMarker, res.NextUploadIDMarker
	}
	p.ListSeconds = time.Since(start).Seconds()
	start = time.Now()
	resp, err := store.Client().Get(ctx, store.Keys().Sessions(bucket), clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	p.RangeSeconds = time.Since(start).Seconds()
	if listed != n || len(resp.Kvs) != n {
		b.Fatalf("bare reads: %d uploads listed, %d sessions read; want %d", listed, len(resp.Kvs), n)
	}
	p.Ratio = p.Seconds / (p.ListSeconds + p.RangeSeconds)
	p.TargetRatio = targetPlanRatio
	p.Status = statusBelow
	if p.Ratio <= targetPlanRatio {
		p.Status = statusPass
	}
}

// benchSessions writes n active sessions in an (empty) bucket on MinIO that
// has no uploads and plans a pass: the pass scans every session of the
// bucket at its revision, checks the first MissingCheckBudget of them on
// the backend and counts the rest as unverified.
func benchSessions(b *testing.B, w *reclaimWorld, prefix string, n int) reclaimPass {
	ctx := b.Context()
	bucket := "sessions-" + strconv.Itoa(n)
	p := reclaimPass{Name: fmt.Sprintf("sessions_etcd_%d", n), Title: fmt.Sprintf("plan pass, %d sessions, no uploads", n), Items: int64(n), Unit: "records"}
	if err := w.direct.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		b.Fatal(err)
	}
	store := w.store(b, prefix)
	setup := time.Now()
	now := time.Now().UTC()
	if err := putSessions(ctx, store, n, func(i int) (string, string, error) {
		id := fmt.Sprintf("upload-%08d", i)
		val, err := benchSession(bucket, fmt.Sprintf("obj/%08d", i), id, now.Add(-2*time.Hour), now.Add(-time.Hour))
		return store.Keys().Session(bucket, id), val, err
	}); err != nil {
		b.Fatal(err)
	}
	p.SetupSeconds = time.Since(setup).Seconds()
	rep := w.plan(b, store, &p)
	if got := rep.Totals.Missing + rep.Totals.MissingUnverified; got != int64(n) {
		b.Fatalf("the pass went through %d sessions, want %d (report %+v)", got, n, p.Report)
	}
	// The session scan alone, as the pass and the reconciler make it.
	start := time.Now()
	var scanned int
	if _, err := store.ScanSessions(ctx, bucket, 0, func(etcdstore.Versioned[etcdstore.Session]) error { scanned++; return nil }); err != nil || scanned != n {
		b.Fatalf("scan: %d sessions, %v; want %d", scanned, err, n)
	}
	p.ScanSeconds = time.Since(start).Seconds()
	p.ScanMicrosPerSession = 1e6 * p.ScanSeconds / float64(n)
	return p
}
