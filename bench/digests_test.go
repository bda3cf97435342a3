//go:build bench

package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// The digest sweep benchmark, in two parts:
//
//   - classification: a dry-run pass (Reclaimer.Plan with the digest sweep
//     on) over M small blobs on MinIO, judged against N references
//     recorded in etcd, with the peak Go heap of the pass;
//   - deletion: K unreferenced blobs taken through two real passes (the
//     first makes their tombstones pending, the second ready, and its
//     collector guards them, deletes them with batched DeleteObjects and
//     settles them), against K other blobs deleted directly on MinIO with
//     minio-go's RemoveObjects (1000 keys a request) in the same run, at K
//     and at K/10 to show that the collecting pass's memory does not grow
//     with K.
//
// As in BenchmarkReclaimPass, etcd runs in a child process so that the heap
// measured is the reclaimer's. The passes' placement grace is a
// millisecond, so that every blob is old enough to judge.
const (
	refsEnv       = "SWEEPGATE_BENCH_REFS"
	blobsEnv      = "SWEEPGATE_BENCH_BLOBS"
	deleteEnv     = "SWEEPGATE_BENCH_DELETE"
	defaultRefs   = 1_000_000
	defaultBlobs  = 100_000
	defaultDelete = 10_000
	// Each recorded reference object (a manifest) names refsPerManifest
	// blobs; one blob in unrefEvery has no reference at all.
	refsPerManifest = 10
	unrefEvery      = 10
	// blobWriters is how many blobs are written to MinIO at once.
	blobWriters = 32
	// directBatch is how many keys one DeleteObjects request of the
	// direct baseline carries (minio-go's RemoveObjects sends 1000); the
	// channel feeding it holds one batch.
	directBatch = 1000
	// The collector's deletion rate passes at 0.9 of the direct one or more;
	// its pass's memory passes when the peak at K is below twice the peak
	// at K/10, or below targetScanHeapMiB whatever the ratio.
	targetDeleteRatio = 0.9
	// Classification passes at targetClassifyPerSec digests/s, or at
	// targetListRatio of a bare listing of the same blobs, whichever is
	// lower.
	targetClassifyPerSec = 100_000
	targetListRatio      = 0.8
	targetCollectRatio   = 2.0
	// The registry-like layout the benchmark sweeps: blobs and manifests
	// in one bucket; the direct baseline's blobs lie outside the namespace.
	benchBlobs     = "blobs/sha256/"
	benchManifests = "manifests/"
	benchDirect    = "direct/sha256/"
)

// digestDelete is the deletion of K unreferenced blobs, through the
// collector and directly.
type digestDelete struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Blobs int64  `json:"blobs"`
	// Collector figures are of the collect phase of the second pass: from
	// the end of its tombstone phase (the last page judged, FaultDigestPage)
	// to the last batch settled (FaultDigestCollected): the breaker check,
	// then per page of tombstones arming the guards, and DeleteObjects of
	// up to 1000 blobs, several in flight, each recording its attempt on
	// its guards and settling its tombstones and guards. DeleteSeconds is
	// the part from the first page's guards armed to the last request
	// settled.
	CollectorSeconds float64 `json:"collector_seconds"`
	CollectorPerSec  float64 `json:"collector_per_s"`
	DeleteSeconds    float64 `json:"collector_delete_settle_seconds"`
	// PassSeconds is the whole second pass (reconcile, upload sweep,
	// rebuild, tombstone phase over the K blobs, collector, prune);
	// MarkSeconds the first pass, which makes the tombstones pending.
	PassSeconds float64 `json:"pass_seconds"`
	PassPerSec  float64 `json:"pass_per_s"`
	MarkSeconds float64 `json:"mark_pass_seconds"`
	// Direct is K other blobs deleted with minio-go RemoveObjects.
	DirectSeconds float64 `json:"direct_seconds"`
	DirectPerSec  float64 `json:"direct_per_s"`
	// Ratio is CollectorPerSec / DirectPerSec; PassRatio PassPerSec /
	// DirectPerSec.
	Ratio     float64 `json:"ratio"`
	PassRatio float64 `json:"pass_ratio"`
	// DeleteObjects requests sent by the collector and by the direct
	// delete.
	CollectorRequests int64 `json:"collector_delete_requests"`
	DirectRequests    int64 `json:"direct_delete_requests"`
	// Peak heap of the whole second pass, as in reclaimPass.
	PeakHeapBytes int64   `json:"peak_heap_bytes"`
	PeakHeapMiB   float64 `json:"peak_heap_mib"`
	PeakLiveBytes int64   `json:"peak_live_bytes"`
	PeakLiveMiB   float64 `json:"peak_live_mib"`
	HeapSamples   int     `json:"heap_samples"`
	SetupSeconds  float64 `json:"setup_seconds"`
	// Report is the second pass's digest counts.
	Report map[string]int64 `json:"report"`
}

type digestResult struct {
	// Classify is the dry-run pass; Items are the blobs judged.
	Classify *reclaimPass `json:"classify,omitempty"`
	// Refs is how many references were recorded in etcd (in RefObjects
	// reference objects), over Referenced of the blobs; RefsSeconds how
	// long writing them took, BlobsSeconds writing the blobs.
	Refs         int64   `json:"refs,omitempty"`
	RefObjects   int64   `json:"ref_objects,omitempty"`
	Referenced   int64   `json:"referenced_blobs,omitempty"`
	RefsSeconds  float64 `json:"refs_setup_seconds,omitempty"`
	RefsPerSec   float64 `json:"refs_setup_per_s,omitempty"`
	BlobsSeconds float64 `json:"blobs_setup_seconds,omitempty"`
	BlobsPerSec  float64 `json:"blobs_setup_per_s,omitempty"`
	// ListSeconds is a bare listing (minio-go ListObjects, ListObjectsV2
	// of 1000 keys a page) of the classified blobs, in the same run;
	// ListRatio the classification rate over its rate; ClassifyTarget
	// the lower of targetClassifyPerSec and targetListRatio of it.
	ListSeconds    float64 `json:"list_seconds,omitempty"`
	ListPerSec     float64 `json:"list_per_s,omitempty"`
	ListRatio      float64 `json:"classify_list_ratio,omitempty"`
	ClassifyTarget float64 `json:"target_classify_per_s,omitempty"`
	ClassifyStatus string  `json:"classify_status,omitempty"`
	// ListCPU and ClassifyCPU are the CPU seconds the benchmark process
	// (the reclaimer), etcd and MinIO spent during the bare listing and
	// during the pass: on a loaded machine they say what the pass costs
	// when its time does not.
	ListCPU     map[string]float64 `json:"list_cpu_seconds,omitempty"`
	ClassifyCPU map[string]float64 `json:"classify_cpu_seconds,omitempty"`
	// ClassifySmall is the same classification against SmallRefs, a
	// tenth of the references (see heapRefsDivisor), and
	// ClassifyHeapRatio the peak heap of Classify over its.
	ClassifySmall      *reclaimPass       `json:"classify_small,omitempty"`
	ClassifySmallCPU   map[string]float64 `json:"classify_small_cpu_seconds,omitempty"`
	SmallRefs          int64              `json:"small_refs,omitempty"`
	ClassifyHeapRatio  float64            `json:"classify_heap_ratio,omitempty"`
	TargetClassifyHeap float64            `json:"target_classify_heap_ratio"`
	ClassifyHeapStatus string             `json:"classify_heap_status,omitempty"`
	// Deletes are the deletion runs at K/10 and K (only K when K < 10);
	// the ratio and its status are those at K.
	Deletes           []digestDelete `json:"deletes,omitempty"`
	DeleteRatio       float64        `json:"delete_ratio,omitempty"`
	TargetDeleteRatio float64        `json:"target_delete_ratio"`
	DeleteStatus      string         `json:"delete_status,omitempty"`
	// CollectHeapRatio is the collecting pass's peak heap at K over that
	// at K/10.
	CollectHeapRatio  float64  `json:"collect_heap_ratio,omitempty"`
	TargetCollectHeap float64  `json:"target_collect_heap_ratio"`
	TargetCollectMiB  float64  `json:"target_collect_heap_mib"`
	CollectHeapStatus string   `json:"collect_heap_status,omitempty"`
	Notes             []string `json:"notes,omitempty"`
}

// BenchmarkDigestSweep measures the digest sweep's classification (a dry
// run over M blobs and N references) and its deletion throughput through
// the collector against a direct batched delete.
func BenchmarkDigestSweep(b *testing.B) {
	nRefs := envCount(b, refsEnv, defaultRefs)
	nBlobs := envCount(b, blobsEnv, defaultBlobs)
	nDelete := envCount(b, deleteEnv, defaultDelete)
	cli := startEtcdChild(b)
	res := digestResult{TargetDeleteRatio: targetDeleteRatio, TargetCollectHeap: targetCollectRatio, TargetCollectMiB: targetScanHeapMiB,
		TargetClassifyHeap: targetClassifyHeapRatio}
	res.Notes = append(res.Notes,
		"etcd runs embedded in a child process; the heap figures are the benchmark process's: the reclaimer and its etcd and S3 clients",
		"the passes' placement grace is 1ms, so every blob is old enough to judge",
		"classification is a dry run (Reclaimer.Plan): rebuild (an empty reference source), then every blob listed and asked of the inventories (references, trash, placements; the unreferenced ones also of the multipart uploads on MinIO, one request each), no writes",
		"deletion: a first pass makes the K tombstones pending, a second makes them ready and collects them; the collector rate is its collect phase, the pass rate the whole second pass")

	b.Run("Classify", func(b *testing.B) {
		if res.Classify == nil {
			benchClassify(b, newReclaimWorld(b, cli), nRefs, nBlobs, &res)
		}
		reportPass(b, res.Classify)
	})
	b.Run("Delete", func(b *testing.B) {
		if res.Deletes == nil {
			w := newReclaimWorld(b, cli)
			sizes := []int{nDelete}
			if nDelete >= 10 {
				sizes = []int{nDelete / 10, nDelete}
			}
			for _, k := range sizes {
				res.Deletes = append(res.Deletes, benchDelete(b, w, k))
			}
		}
		d := res.Deletes[len(res.Deletes)-1]
		b.ReportMetric(d.CollectorPerSec, "collector-blobs/s")
		b.ReportMetric(d.DirectPerSec, "direct-blobs/s")
		b.ReportMetric(d.PeakHeapMiB, "peak-heap-MiB")
	})
	if n := len(res.Deletes); n > 0 {
		res.DeleteRatio = res.Deletes[n-1].Ratio
		res.DeleteStatus = statusBelow
		if res.DeleteRatio >= targetDeleteRatio {
			res.DeleteStatus = statusPass
		}
	}
	if len(res.Deletes) == 2 {
		small, large := res.Deletes[0], res.Deletes[1]
		if small.PeakHeapBytes > 0 {
			res.CollectHeapRatio = float64(large.PeakHeapBytes) / float64(small.PeakHeapBytes)
		}
		res.CollectHeapStatus = statusBelow
		if large.PeakHeapBytes < int64(targetCollectRatio*float64(small.PeakHeapBytes)) || large.PeakHeapMiB < targetScanHeapMiB {
			res.CollectHeapStatus = statusPass
		}
	}
	printDigests(os.Stdout, &res)
	path, err := mergeResults("digest_sweep", &res)
	if err != nil {
		b.Fatalf("%v", err)
	}
	fmt.Fprintf(os.Stdout, "results: %s\n\n", path)
}

// benchGrace is the passes' placement grace: blobs written a moment ago
// are old. (The passes run on the real clock: a pass stops when the
// backend's clock differs from its own by more than the clock skew.)
const benchGrace = time.Millisecond

// benchLayout is the registry-like layout in bucket: blobs under
// benchBlobs, manifests (none on the backend, so the rebuild lists one
// empty prefix) under benchManifests.
func benchLayout(b *testing.B, bucket string) *cas.Layout {
	ns, err := cas.NewNamespace("blobs", bucket, benchBlobs, "", false)
	if err != nil {
		b.Fatal(err)
	}
	src, err := cas.NewSource("manifests", bucket, benchManifests, "", 0)
	if err != nil {
		b.Fatal(err)
	}
	return &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}}
}

// benchBlob is the body of a benchmark blob and its digest's hex.
func benchBlob(format string, args ...any) (body []byte, hexDigest string) {
	body = fmt.Appendf(nil, format, args...)
	sum := sha256.Sum256(body)
	return body, hex.EncodeToString(sum[:])
}

// putBlobs writes n tiny objects to bucket, blobWriters at a time; blob
// returns the i-th one's key and body.
func putBlobs(ctx context.Context, mc *minio.Client, bucket string, n int, blob func(i int) (key string, body []byte)) error {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range blobWriters {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() != nil {
					return
				}
				key, body := blob(i)
				if _, err := mc.PutObject(ctx, bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("put %s: %w", key, err))
					return
				}
			}
		})
	}
	wg.Wait()
	err, _ := failed.Load().(error)
	return err
}

// putKeys writes n keys to etcd, sessionTxn puts per transaction,
// sessionWriters transactions at once; kv returns the i-th key and value.
func putKeys(ctx context.Context, cli *clientv3.Client, n int, kv func(i int) (key, val string)) error {
	batches := make(chan int)
	errs := make(chan error, sessionWriters)
	var wg sync.WaitGroup
	for range sessionWriters {
		wg.Go(func() {
			for first := range batches {
				ops := make([]clientv3.Op, 0, sessionTxn)
				for i := first; i < min(first+sessionTxn, n); i++ {
					ops = append(ops, clientv3.OpPut(kv(i)))
				}
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					errs <- fmt.Errorf("write keys %d..%d: %w", first, first+len(ops)-1, err)
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

// countPrefix counts the objects under prefix of bucket.
func countPrefix(ctx context.Context, mc *minio.Client, bucket, prefix string) (int, error) {
	n := 0
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return n, o.Err
		}
		n++
	}
	return n, nil
}

// benchClassify writes nBlobs blobs to MinIO and nRefs references to etcd
// naming all but one blob in unrefEvery, and plans a pass over them.
func benchClassify(b *testing.B, w *reclaimWorld, nRefs, nBlobs int, res *digestResult) {
	ctx := b.Context()
	const bucket = "cas-classify"
	if err := w.direct.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		b.Fatal(err)
	}
	store := w.store(b, "/bench-digests-classify/")
	keys := store.Keys()

	start := time.Now()
	hexes := make([]string, nBlobs)
	if err := putBlobs(ctx, w.direct.Client, bucket, nBlobs, func(i int) (string, []byte) {
		body, h := benchBlob("sweepgate bench blob %d", i)
		hexes[i] = h
		return benchBlobs + h, body
	}); err != nil {
		b.Fatal(err)
	}
	res.BlobsSeconds = time.Since(start).Seconds()
	res.BlobsPerSec = float64(nBlobs) / res.BlobsSeconds

	big := classifyRun{store: store, referenced: seedRefs(b, w, keys, bucket, hexes, nRefs, res)}
	big.refs = res.Refs
	small := seedSmallRefs(b, w, bucket, hexes, nRefs)
	res.SmallRefs = small.refs
	hexes = nil

	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	cpu := readProcCPU()
	start = time.Now()
	if n, err := countPrefix(ctx, w.direct.Client, bucket, benchBlobs); err != nil || n != nBlobs {
		b.Fatalf("bare listing: %d blobs, want %d (%v)", n, nBlobs, err)
	}
	res.ListSeconds = time.Since(start).Seconds()
	res.ListCPU = readProcCPU().since(cpu)
	res.ListPerSec = float64(nBlobs) / res.ListSeconds
	p, cpuSeconds := classifyPlan(ctx, b, w, bucket, nBlobs, big)
	p.SetupSeconds = res.BlobsSeconds + res.RefsSeconds
	res.Classify, res.ClassifyCPU = &p, cpuSeconds
	res.ListRatio = p.PerSec / res.ListPerSec
	res.ClassifyTarget = min(targetClassifyPerSec, targetListRatio*res.ListPerSec)
	res.ClassifyStatus = statusBelow
	if p.PerSec >= res.ClassifyTarget {
		res.ClassifyStatus = statusPass
	}
	q, cpuSeconds := classifyPlan(ctx, b, w, bucket, nBlobs, small)
	res.ClassifySmall, res.ClassifySmallCPU = &q, cpuSeconds
	classifyHeap(res)
}

// seedRefs records nRefs references in etcd, from manifests of
// refsPerManifest references each, to the blobs of hexes (all but one in
// unrefEvery of them, at most nRefs), and returns how many blobs they
// reference. It adds how long that took, and the counts, to res.
func seedRefs(b *testing.B, w *reclaimWorld, keys etcdstore.Keys, bucket string, hexes []string, nRefs int, res *digestResult) int {
	ctx := b.Context()
	nBlobs := len(hexes)
	// Reference i is manifest i/refsPerManifest naming blob i mod
	// referenced: every referenced blob gets nRefs/referenced references
	// or one more, from distinct manifests.
	referenced := min(nBlobs-nBlobs/unrefEvery, nRefs)
	val := etcdstore.MarshalRecord(etcdstore.Ref{At: time.Now().UTC().Add(-time.Hour)})
	start := time.Now()
	if err := putKeys(ctx, w.cli, nRefs, func(i int) (string, string) {
		return keys.Ref("sha256:"+hexes[i%referenced], bucket, benchManifests+fmt.Sprintf("%08d", i/refsPerManifest)), val
	}); err != nil {
		b.Fatal(err)
	}
	// The gateway moves a shard's reference revision with every write to
	// it; the last writes touched every shard.
	var ops []clientv3.Op
	for _, sh := range etcdstore.AllRefShards() {
		ops = append(ops, clientv3.OpPut(keys.RefRev(sh), ""))
	}
	if _, err := w.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		b.Fatal(err)
	}
	res.RefsSeconds = time.Since(start).Seconds()
	count, err := w.cli.Get(ctx, keys.AllRefs(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	res.Refs, res.RefObjects, res.Referenced = count.Count, int64((nRefs+refsPerManifest-1)/refsPerManifest), int64(referenced)
	res.RefsPerSec = float64(res.Refs) / res.RefsSeconds
	return referenced
}

func printDigests(out io.Writer, res *digestResult) {
	fmt.Fprintf(out, "\ndigest sweep (%s, %d CPUs, GOMAXPROCS %d)\n", runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "Peak heap: highest Go heap in use during the pass minus the heap after a GC before it (live: GC-marked live heap).\n")
	if p := res.Classify; p != nil {
		fmt.Fprintf(out, "%-*s %14s %14s %14s %9s\n", titleWidth, "pass", "rate", "peak heap", "peak live", "setup")
		fmt.Fprintf(out, "%-*s %14s %14s %14s %9s\n", titleWidth, p.Title,
			fmt.Sprintf("%.0f %s/s", p.PerSec, p.Unit), fmt.Sprintf("+%.1f MiB", p.PeakHeapMiB),
			fmt.Sprintf("+%.1f MiB", p.PeakLiveMiB), fmt.Sprintf("%.0fs", p.SetupSeconds))
		fmt.Fprintf(out, "    bare listing %.2fs, %.0f blobs/s; classification/listing %.3f; target >= %.0f digests/s (the lower of %d/s and %.1f of the listing)  %s\n",
			res.ListSeconds, res.ListPerSec, res.ListRatio, res.ClassifyTarget, targetClassifyPerSec, targetListRatio, res.ClassifyStatus)
		fmt.Fprintf(out, "    %.1fs; stored %d, retained %d (references %d), pending %d\n",
			p.Seconds, p.Report["stored"], p.Report["retained"], p.Report["retained_by_references"], p.Report["pending"])
		fmt.Fprintf(out, "    cpu: pass %s; bare listing %s\n", cpuString(res.ClassifyCPU), cpuString(res.ListCPU))
		printClassifyHeap(out, res)
		fmt.Fprintf(out, "    setup: %d refs (%d manifests over %d blobs) in %.1fs (%.0f/s); %d blobs in %.1fs (%.0f/s)\n",
			res.Refs, res.RefObjects, res.Referenced, res.RefsSeconds, res.RefsPerSec, p.Items, res.BlobsSeconds, res.BlobsPerSec)
	}
	if len(res.Deletes) > 0 {
		fmt.Fprintf(out, "%-*s %14s %14s %7s %8s  %s\n", titleWidth, "deletion", "direct", "collector", "ratio", "target", "")
	}
	for i, d := range res.Deletes {
		status := ""
		if i == len(res.Deletes)-1 {
			status = res.DeleteStatus
		}
		fmt.Fprintf(out, "%-*s %14s %14s %7.3f %8s  %s\n", titleWidth, d.Title,
			fmt.Sprintf("%.0f blobs/s", d.DirectPerSec), fmt.Sprintf("%.0f blobs/s", d.CollectorPerSec),
			d.Ratio, fmt.Sprintf(">= %.2f", targetDeleteRatio), status)
		fmt.Fprintf(out, "    direct %.2fs (%d DeleteObjects); collect phase %.2fs (%d DeleteObjects; %.2fs of it from the first guards armed)\n",
			d.DirectSeconds, d.DirectRequests, d.CollectorSeconds, d.CollectorRequests, d.DeleteSeconds)
		fmt.Fprintf(out, "    whole collecting pass %.2fs, %.0f blobs/s (ratio %.3f); marking pass %.2fs; peak heap +%.1f MiB (live +%.1f MiB)\n",
			d.PassSeconds, d.PassPerSec, d.PassRatio, d.MarkSeconds, d.PeakHeapMiB, d.PeakLiveMiB)
	}
	if len(res.Deletes) == 2 {
		fmt.Fprintf(out, "%-*s %14s %14s %7s %8s  %s\n", titleWidth,
			fmt.Sprintf("collecting pass peak heap, %d vs %d", res.Deletes[1].Blobs, res.Deletes[0].Blobs), "",
			fmt.Sprintf("x%.2f", res.CollectHeapRatio), "", "",
			fmt.Sprintf("< x%.0f or < %d MiB  %s", targetCollectRatio, targetScanHeapMiB, res.CollectHeapStatus))
	}
	for _, n := range res.Notes {
		fmt.Fprintf(out, "    note: %s\n", n)
	}
}
