//go:build bench

package bench

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The load benchmark: many concurrent multipart uploads
// plus a steady small-object load, through the gateway while its reclaimer
// runs a pass every second with a grace period of seconds, then the same
// load sent direct to the same MinIO. It reports throughput and latency
// percentiles for both, and fails on any error or any byte that did not
// come back as it was sent.
const (
	loadUploadsEnv     = "SWEEPGATE_BENCH_LOAD_UPLOADS"
	loadPartEnv        = "SWEEPGATE_BENCH_LOAD_PART"
	defaultLoadUploads = 200
	defaultLoadPart    = 5 << 20 // S3's least part size (but for the last)
	minLoadPart        = 5 << 20
	maxLoadPart        = 512 << 20
	loadParts          = 8 // parts per upload, sent one after the other
	// The last part is half a part plus an odd number of bytes, so that
	// objects end off any power-of-two boundary.
	loadLastExtra = 4097
	// Part contents are windows of one random pool: window i starts at
	// i*loadGranule (an odd stride), one of loadSlots windows chosen per
	// part from the upload and part number, so that objects differ from
	// one another and a part in the wrong place does not read back right.
	loadSlots   = 32
	loadGranule = 1<<20 + 4097
	// The small-object load: loadSmallClients goroutines, each putting a
	// 4 KiB object (stamped with the client and iteration) and reading it
	// back, over loadSmallKeys keys of its own, until the uploads are done.
	loadSmallClients = 8
	loadSmallKeys    = 16
	loadSmallSize    = 4 << 10
	// The gateway's reclaimer during the load: a pass every second, uploads
	// idle for loadGrace marked expired (any activity revives them), marks
	// that stand loadDeleteAfter deleted. No live upload sits idle for a
	// minute (its longest idle time is one part's transfer), so a deletion
	// of live work would be the reclaimer's fault, not the load's.
	loadReclaimInterval = time.Second
	loadGrace           = 3 * time.Second
	loadDeleteAfter     = time.Minute
	// loadStale abandoned uploads are seeded on MinIO, with sessions marked
	// expired two hours ago, a quarter of the way into the gateway's load,
	// for the passes to delete while the load runs.
	loadStale = 16
	// loadRunPause is the pause between one `sweepgate reclaim run`
	// returning and the next, while the gateway's load runs. A run waits for
	// the pass in progress and then for its own.
	loadRunPause = time.Second
	// loadVerifyParallel GETs read objects back at once after each phase.
	loadVerifyParallel = 4
	// loadPhaseTimeout bounds one side's load and verification.
	loadPhaseTimeout = 20 * time.Minute
	// loadMaxErrors stops a phase early: past this many errors the figures
	// mean nothing and the run has failed anyway.
	loadMaxErrors = 50
	// loadErrorSamples is how many error and mismatch messages are kept.
	loadErrorSamples = 10
)

// The operations whose latency is reported.
const (
	opCreate   = "create_multipart_upload"
	opPart     = "upload_part"
	opComplete = "complete_multipart_upload"
	opSmallPut = "small_put"
	opSmallGet = "small_get"
)

var loadOps = []string{opCreate, opPart, opComplete, opSmallPut, opSmallGet}

// loadLatency is one operation's latency over a side's load.
type loadLatency struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// loadVerify is the read-back after a side's load.
type loadVerify struct {
	// Objects were read back in full and compared byte for byte with what
	// was sent (their ETag and length too).
	Objects   int     `json:"objects"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	MiBPerSec float64 `json:"mib_per_s"`
	// LeftoverUploads counts multipart uploads still on MinIO under the
	// load's prefix after the phase: every upload completed, so 0.
	LeftoverUploads int `json:"leftover_uploads"`
}

// loadSide is one side's figures.
type loadSide struct {
	Side string `json:"side"`
	// MultipartSeconds runs from the first CreateMultipartUpload to the
	// last CompleteMultipartUpload; MultipartMiBPerSec is every part's bytes
	// over it.
	MultipartSeconds   float64 `json:"multipart_seconds"`
	MultipartMiBPerSec float64 `json:"multipart_mib_per_s"`
	Completed          int     `json:"completed_uploads"`
	// SmallOps counts small PUTs and GETs (each verified) over SmallSeconds.
	SmallOps       int64                  `json:"small_ops"`
	SmallSeconds   float64                `json:"small_seconds"`
	SmallOpsPerSec float64                `json:"small_ops_per_s"`
	Latency        map[string]loadLatency `json:"latency"`
	// Errors are failed requests (of the load, of the read-back, of
	// `reclaim run`); Mismatches are answers or bytes that differ from what
	// was sent. Both must be 0.
	Errors          int64      `json:"errors"`
	ErrorSamples    []string   `json:"error_samples,omitempty"`
	Mismatches      int64      `json:"mismatches"`
	MismatchSamples []string   `json:"mismatch_samples,omitempty"`
	Verify          loadVerify `json:"verify"`
	// OtherCPU is the share of the machine's CPU time during the load that
	// went to processes other than the benchmark's own (this client, MinIO,
	// the gateway), from /proc (Linux; -1 elsewhere). The sides run one
	// after the other, so other work on the machine skews one of them.
	OtherCPU float64 `json:"other_cpu_share"`
}

// loadRun is one `sweepgate reclaim run` during the gateway's load.
type loadRun struct {
	Pass int64 `json:"pass"`
	// Seconds is how long the command took: the pass in progress, then its
	// own.
	Seconds float64 `json:"seconds"`
}

// loadPass is one pass that ran during the gateway's load, from its stored
// report; the counts are sessions.
type loadPass struct {
	Pass int64 `json:"pass"`
	// Run says `sweepgate reclaim run` asked for it; else the interval did.
	Run bool `json:"reclaim_run"`
	// AfterLoad says it started after the last upload completed.
	AfterLoad bool `json:"after_load"`
	// StartedS is when it started, in seconds since the gateway's phase
	// began; Seconds how long it took.
	StartedS float64 `json:"started_s"`
	Seconds  float64 `json:"seconds"`
	// Judged counts the uploads the pass judged; Keep, Mark and Delete its
	// plan; Marked, Deleted and Changed what it did (Changed: planned, but
	// the session had changed, so left alone).
	Judged  int64  `json:"judged"`
	Keep    int64  `json:"keep"`
	Mark    int64  `json:"mark"`
	Delete  int64  `json:"delete"`
	Marked  int64  `json:"marked"`
	Deleted int64  `json:"deleted"`
	Changed int64  `json:"changed"`
	Refused string `json:"refused,omitempty"`
	Stopped string `json:"stopped,omitempty"`
}

// loadReclaim is what the gateway's reclaimer did during its load, from its
// /metrics before and after, the `reclaim run` calls and the pass reports.
type loadReclaim struct {
	Interval          string  `json:"interval"`
	Grace             string  `json:"grace"`
	DeleteAfter       string  `json:"delete_after"`
	MaxDeleteFraction float64 `json:"max_delete_fraction"`
	// PassResults counts passes by result (sweepgate_reclaim_passes_total).
	PassResults map[string]float64 `json:"pass_results"`
	// MarkedParts and DeletedParts are sweepgate_reclaim_acted_parts_total
	// for mark and aborted; Revived counts sessions moved from expired back
	// to active by activity; Conflicts the session transactions that lost
	// a race and were decided again.
	MarkedParts  float64    `json:"marked_parts"`
	DeletedParts float64    `json:"deleted_parts"`
	Revived      float64    `json:"revived"`
	Conflicts    float64    `json:"txn_conflicts"`
	Runs         []loadRun  `json:"runs"`
	Passes       []loadPass `json:"passes"`
	// Stale abandoned uploads were seeded (StaleSeededS seconds into the
	// phase); StaleGone of them were gone from MinIO after it.
	Stale        int     `json:"stale"`
	StaleSeededS float64 `json:"stale_seeded_s"`
	StaleGone    int     `json:"stale_gone"`
	// LoadEndS is when the last upload completed, in seconds since the
	// gateway's phase began.
	LoadEndS float64 `json:"load_end_s"`
}

// loadResult is the benchmark's entry in results.json.
type loadResult struct {
	Uploads        int       `json:"uploads"`
	PartsPerUpload int       `json:"parts_per_upload"`
	PartSize       int64     `json:"part_size"`
	LastPartSize   int64     `json:"last_part_size"`
	BytesPerSide   int64     `json:"bytes_per_side"`
	SmallClients   int       `json:"small_clients"`
	SmallSize      int       `json:"small_size"`
	Gateway        *loadSide `json:"gateway,omitempty"`
	Direct         *loadSide `json:"direct,omitempty"`
	// Ratios are gateway/direct: throughput (higher is better, against the
	// foundation targets) and p99 latency (lower is better, reported only).
	MultipartRatio  float64            `json:"multipart_ratio"`
	MultipartTarget float64            `json:"multipart_target_ratio"`
	MultipartStatus string             `json:"multipart_status"`
	SmallOpsRatio   float64            `json:"small_ops_ratio"`
	SmallOpsTarget  float64            `json:"small_ops_target_ratio"`
	SmallOpsStatus  string             `json:"small_ops_status"`
	P99Ratio        map[string]float64 `json:"p99_ratio"`
	Reclaim         *loadReclaim       `json:"reclaim,omitempty"`
	// Integrity is PASS when neither side had an error or a mismatch and
	// every stale upload was reclaimed, else FAIL (and the benchmark fails).
	Integrity string   `json:"integrity"`
	Problems  []string `json:"problems,omitempty"`
	Seconds   float64  `json:"seconds"`
	Notes     []string `json:"notes,omitempty"`
}

// BenchmarkLoad runs the load through the gateway, then direct to MinIO.
func BenchmarkLoad(b *testing.B) {
	uploads := envCount(b, loadUploadsEnv, defaultLoadUploads)
	partSize := envSize(b, loadPartEnv, defaultLoadPart)
	if partSize < minLoadPart || partSize > maxLoadPart {
		b.Fatalf("%s=%d: a part must be at least 5 MiB (S3's least part size) and at most %d MiB", loadPartEnv, partSize, maxLoadPart>>20)
	}
	var res *loadResult
	b.Run("Multipart_and_small_under_reclaim", func(b *testing.B) {
		// The framework may run a sub-benchmark again with a larger b.N;
		// the load is measured once.
		if res == nil {
			res = benchLoad(b, uploads, partSize)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(res.Gateway.MultipartMiBPerSec, "gateway_MiB/s")
		b.ReportMetric(res.Direct.MultipartMiBPerSec, "direct_MiB/s")
		b.ReportMetric(res.MultipartRatio, "mp_ratio")
		b.ReportMetric(res.SmallOpsRatio, "small_ratio")
	})
	if res == nil {
		return
	}
	printLoad(os.Stdout, res)
	path, err := mergeResults("load", res)
	if err != nil {
		b.Fatalf("%v", err)
	}
	fmt.Fprintf(os.Stdout, "results: %s\n\n", path)
	if res.Integrity != statusPass {
		b.Fatalf("load: %s (see above and %s)", strings.Join(res.Problems, "; "), path)
	}
}

// envSize reads a size in bytes from the environment: a number, optionally
// followed by KiB, MiB or GiB (or K, M, G, the same binary units).
func envSize(b *testing.B, name string, def int64) int64 {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	num, mult := v, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = strings.TrimSpace(s), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a size such as 5242880 or 5MiB", name, v)
	}
	return n * mult
}

// loadLayout says what every part of every upload holds.
type loadLayout struct {
	pool               []byte
	partSize, lastSize int64
	// md5s of the window at each slot, as a full part and as a last part.
	fullMD5, lastMD5 [loadSlots][md5.Size]byte
}

func newLoadLayout(partSize int64) *loadLayout {
	l := &loadLayout{partSize: partSize, lastSize: partSize/2 + loadLastExtra}
	l.pool = harness.NewData(7, partSize+(loadSlots-1)*loadGranule).Bytes()
	var wg sync.WaitGroup
	for s := range loadSlots {
		wg.Go(func() {
			off := int64(s) * loadGranule
			l.fullMD5[s] = md5.Sum(l.pool[off : off+l.partSize])
			l.lastMD5[s] = md5.Sum(l.pool[off : off+l.lastSize])
		})
	}
	wg.Wait()
	return l
}

// slot picks the window of part p (0-based) of upload u (splitmix64).
func (l *loadLayout) slot(u, p int) int {
	z := uint64(u)*loadParts + uint64(p) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int((z ^ (z >> 31)) % loadSlots)
}

// part returns the bytes of part p of upload u and their MD5.
func (l *loadLayout) part(u, p int) ([]byte, [md5.Size]byte) {
	s := l.slot(u, p)
	off := int64(s) * loadGranule
	if p == loadParts-1 {
		return l.pool[off : off+l.lastSize], l.lastMD5[s]
	}
	return l.pool[off : off+l.partSize], l.fullMD5[s]
}

func (l *loadLayout) objectSize() int64 { return (loadParts-1)*l.partSize + l.lastSize }

// etag is the multipart ETag of upload u's object: the MD5 of the parts'
// MD5s, a dash and the part count.
func (l *loadLayout) etag(u int) string {
	h := md5.New()
	for p := range loadParts {
		_, sum := l.part(u, p)
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(loadParts)
}

// latencies collects durations by operation.
type latencies struct {
	mu sync.Mutex
	d  map[string][]time.Duration
}

func (l *latencies) add(op string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.d == nil {
		l.d = map[string][]time.Duration{}
	}
	l.d[op] = append(l.d[op], d)
}

// stats returns the nearest-rank percentiles of each operation.
func (l *latencies) stats() map[string]loadLatency {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]loadLatency{}
	for op, ds := range l.d {
		s := slices.Clone(ds)
		slices.Sort(s)
		rank := func(p float64) float64 {
			i := max(0, int(math.Ceil(p*float64(len(s))))-1)
			return ms(s[i])
		}
		out[op] = loadLatency{Count: len(s), P50Ms: rank(0.50), P99Ms: rank(0.99), MaxMs: ms(s[len(s)-1])}
	}
	return out
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// faults counts errors and mismatches and keeps the first few of each.
type faults struct {
	mu                  sync.Mutex
	errors, mismatches  int64
	errSample, misMatch []string
	// tooMany is closed when the errors pass loadMaxErrors.
	tooMany chan struct{}
}

func newFaults() *faults { return &faults{tooMany: make(chan struct{})} }

func (f *faults) err(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors++
	if len(f.errSample) < loadErrorSamples {
		f.errSample = append(f.errSample, fmt.Sprintf(format, args...))
	}
	if f.errors == loadMaxErrors {
		close(f.tooMany)
	}
}

func (f *faults) mismatch(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mismatches++
	if len(f.misMatch) < loadErrorSamples {
		f.misMatch = append(f.misMatch, fmt.Sprintf(format, args...))
	}
}

func (f *faults) fill(s *loadSide) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Errors, s.ErrorSamples = f.errors, slices.Clone(f.errSample)
	s.Mismatches, s.MismatchSamples = f.mismatches, slices.Clone(f.misMatch)
}

// loadTarget is one side under load.
type loadTarget struct {
	name   string
	s3     *s3.Client
	bucket string
	lay    *loadLayout
	// uploads is the number of concurrent uploads.
	uploads int
	lat     latencies
	faults  *faults
	// partsDone counts parts uploaded; mpDone is closed when every upload
	// has ended.
	partsDone atomic.Int64
	mpDone    chan struct{}
	mpEnd     time.Time // set before mpDone is closed
	// pids are the processes that serve this side, with this one.
	pids []int
	// etags[u] is the ETag upload u's complete returned ("" if it failed).
	etags []string
}

func newLoadTarget(name, bucket string, lay *loadLayout, uploads int, c *s3.Client) *loadTarget {
	return &loadTarget{name: name, bucket: bucket, lay: lay, uploads: uploads, s3: c,
		faults: newFaults(), mpDone: make(chan struct{}), etags: make([]string, uploads)}
}

func (t *loadTarget) key(u int) string { return fmt.Sprintf("load/%s/%03d", t.name, u) }

// loadClient is an aws-sdk-go-v2 client like the harness's, with room in
// its connection pool for every upload and small-object client at once.
func loadClient(tb testing.TB, endpoint, region, accessKey, secretKey string, conns int) *s3.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tb.Cleanup(tr.CloseIdleConnections)
	return harness.NewS3Client(endpoint, region, accessKey, secretKey, tr, true)
}

// benchLoad starts MinIO and a gateway with a busy reclaimer, runs the load
// through the gateway, stops the gateway, and runs the load direct.
func benchLoad(b *testing.B, uploads int, partSize int64) *loadResult {
	start := time.Now()
	lay := newLoadLayout(partSize)
	res := &loadResult{
		Uploads: uploads, PartsPerUpload: loadParts, PartSize: partSize, LastPartSize: lay.lastSize,
		BytesPerSide: int64(uploads) * lay.objectSize(), SmallClients: loadSmallClients, SmallSize: loadSmallSize,
		MultipartTarget: targetLargeRatio, SmallOpsTarget: targetSmallRatio, P99Ratio: map[string]float64{},
		Reclaim: &loadReclaim{
			Interval: loadReclaimInterval.String(), Grace: loadGrace.String(), DeleteAfter: loadDeleteAfter.String(),
			MaxDeleteFraction: 1, Stale: loadStale,
		},
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("%d uploads run at once, each sending its %d parts one after the other, aws-sdk-go-v2 over plain HTTP (payload SHA-256 and CRC32 computed by the client, counted in UploadPart's latency)", uploads, loadParts),
		fmt.Sprintf("%d small-object clients PUT a 4 KiB object and GET it back in a loop until the uploads are done", loadSmallClients),
		"gateway first, with its reclaimer passing every second; then the gateway is stopped and the same load goes direct to the same MinIO (its objects deleted in between)",
		"reclaim.max_delete_fraction is 1 so that deleting the stale uploads does not depend on how many parts the load has stored when a pass runs",
		"every completed object is read back in full and compared byte for byte after its phase (untimed)")

	env := harness.Start(b, harness.Options{LogLevel: "info", Config: map[string]any{
		"reclaim": map[string]any{
			"interval":            loadReclaimInterval.String(),
			"grace":               loadGrace.String(),
			"delete_after":        loadDeleteAfter.String(),
			"max_delete_fraction": 1,
		},
	}})
	env.RequireGateway(b)
	bucket := env.Bucket(b)
	conns := uploads + loadSmallClients + 8
	gw := newLoadTarget("gateway", bucket, lay, uploads, loadClient(b, env.Endpoint, env.Region, env.AccessKey, env.SecretKey, conns))
	direct := newLoadTarget("direct", bucket, lay, uploads, loadClient(b, env.MinIO.Endpoint, env.MinIO.Region, env.MinIO.AccessKey, env.MinIO.SecretKey, conns))
	admin := env.DirectSDK(b)
	bin := harness.BuildSweepgate(b)
	if minioPID := pidOf(env.MinIO.DataDir); minioPID != 0 {
		direct.pids = []int{os.Getpid(), minioPID}
		gw.pids = []int{os.Getpid(), minioPID, env.Gateway.PID()}
	}

	// Gateway: the load, the reclaimer driver beside it, then the checks
	// while the gateway still runs.
	before, err := env.Gateway.Metrics()
	if err != nil {
		b.Fatalf("metrics: %v", err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), loadPhaseTimeout)
	phaseStart := time.Now()
	driver := make(chan struct{})
	stale := &staleUploads{}
	go func() {
		defer close(driver)
		driveReclaim(ctx, env, bin, admin, gw, stale, res.Reclaim, phaseStart)
	}()
	res.Gateway = runLoad(ctx, b, gw)
	<-driver
	// Settle: the stale uploads the passes during the load did not reach
	// go in the next ones; a last run then waits for the pass in progress,
	// so that the figures below cover whole passes.
	res.Reclaim.StaleGone = stale.awaitGone(ctx, admin, bucket, gw.faults)
	if run, err := reclaimRunCLI(ctx, bin, env.Gateway.AdminEndpoint); err != nil {
		gw.faults.err("sweepgate reclaim run after the load: %v", err)
	} else {
		res.Reclaim.Runs = append(res.Reclaim.Runs, run)
	}
	after, err := env.Gateway.Metrics()
	if err != nil {
		b.Fatalf("metrics: %v", err)
	}
	fillReclaimMetrics(res.Reclaim, before, after)
	res.Reclaim.LoadEndS = math.Round(gw.mpEnd.Sub(phaseStart).Seconds()*10) / 10
	if res.Reclaim.Passes, err = passReports(ctx, env.Gateway.AdminEndpoint, phaseStart, gw.mpEnd, res.Reclaim.Runs); err != nil {
		gw.faults.err("pass reports: %v", err)
	}
	verifyLoad(ctx, gw, admin, res.Gateway)
	cancel()
	env.Gateway.Stop()
	deleteLoadObjects(b, admin, gw)
	syncDisks()

	ctx, cancel = context.WithTimeout(b.Context(), loadPhaseTimeout)
	defer cancel()
	res.Direct = runLoad(ctx, b, direct)
	verifyLoad(ctx, direct, admin, res.Direct)
	gw.faults.fill(res.Gateway)
	direct.faults.fill(res.Direct)

	g, d := res.Gateway, res.Direct
	res.MultipartRatio = ratio(g.MultipartMiBPerSec, d.MultipartMiBPerSec)
	res.MultipartStatus = passBelow(res.MultipartRatio, targetLargeRatio)
	res.SmallOpsRatio = ratio(g.SmallOpsPerSec, d.SmallOpsPerSec)
	res.SmallOpsStatus = passBelow(res.SmallOpsRatio, targetSmallRatio)
	for _, op := range loadOps {
		res.P99Ratio[op] = ratio(g.Latency[op].P99Ms, d.Latency[op].P99Ms)
	}
	for _, s := range []*loadSide{g, d} {
		if s.Errors > 0 || s.Mismatches > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: %d errors, %d mismatches", s.Side, s.Errors, s.Mismatches))
		}
		if s.Completed != uploads || s.Verify.Objects != uploads {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: %d of %d uploads completed, %d read back intact", s.Side, s.Completed, uploads, s.Verify.Objects))
		}
		if s.Verify.LeftoverUploads > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: %d uploads left on MinIO", s.Side, s.Verify.LeftoverUploads))
		}
	}
	if rc := res.Reclaim; rc.StaleGone != rc.Stale {
		res.Problems = append(res.Problems, fmt.Sprintf("gateway: the passes reclaimed %d of the %d stale uploads", rc.StaleGone, rc.Stale))
	}
	res.Integrity = statusPass
	if len(res.Problems) > 0 {
		res.Integrity = "FAIL"
	}
	res.Seconds = time.Since(start).Seconds()
	return res
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func passBelow(r, target float64) string {
	if r >= target {
		return statusPass
	}
	return statusBelow
}

// runLoad runs the uploads and the small-object clients against t until
// every upload has ended.
func runLoad(ctx context.Context, b *testing.B, t *loadTarget) *loadSide {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.faults.tooMany:
			cancel()
		case <-ctx.Done():
		}
	}()
	// One request each way first, so that a side that does not answer
	// fails here rather than as thousands of errors.
	if _, err := t.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(t.bucket), Key: aws.String("load-warmup/" + t.name), Body: bytes.NewReader(t.lay.pool[:loadSmallSize]),
	}); err != nil {
		b.Fatalf("%s: warm-up PUT: %v", t.name, err)
	}
	if _, err := getDiscard(ctx, t.s3, t.bucket, "load-warmup/"+t.name); err != nil {
		b.Fatalf("%s: warm-up GET: %v", t.name, err)
	}

	meter := startCPUMeter(t.pids)
	var stopSmall atomic.Bool
	var smallOps atomic.Int64
	var small sync.WaitGroup
	start := time.Now()
	for w := range loadSmallClients {
		small.Go(func() { smallClient(ctx, t, w, &stopSmall, &smallOps) })
	}
	var mp sync.WaitGroup
	for u := range t.uploads {
		mp.Go(func() { loadUpload(ctx, t, u) })
	}
	mp.Wait()
	mpElapsed := time.Since(start)
	t.mpEnd = time.Now()
	close(t.mpDone)
	stopSmall.Store(true)
	small.Wait()
	smallElapsed := time.Since(start)

	s := &loadSide{Side: t.name, MultipartSeconds: mpElapsed.Seconds(), SmallOps: smallOps.Load(), SmallSeconds: smallElapsed.Seconds(), OtherCPU: meter.otherShare()}
	for _, e := range t.etags {
		if e != "" {
			s.Completed++
		}
	}
	s.MultipartMiBPerSec = float64(int64(s.Completed)*t.lay.objectSize()) / mib / mpElapsed.Seconds()
	s.SmallOpsPerSec = float64(s.SmallOps) / smallElapsed.Seconds()
	s.Latency = t.lat.stats()
	b.Logf("%s: %d/%d uploads in %.1fs (%.1f MiB/s), %d small ops (%.0f/s)",
		t.name, s.Completed, t.uploads, s.MultipartSeconds, s.MultipartMiBPerSec, s.SmallOps, s.SmallOpsPerSec)
	return s
}

// loadUpload runs upload u: create, its parts one after the other, complete.
// A failure is counted and the upload aborted.
func loadUpload(ctx context.Context, t *loadTarget, u int) {
	key := t.key(u)
	begin := time.Now()
	created, err := t.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(t.bucket), Key: aws.String(key)})
	if err != nil {
		t.faults.err("%s: CreateMultipartUpload %s: %v", t.name, key, err)
		return
	}
	t.lat.add(opCreate, time.Since(begin))
	id := aws.ToString(created.UploadId)
	parts := make([]types.CompletedPart, loadParts)
	for p := range loadParts {
		body, sum := t.lay.part(u, p)
		begin := time.Now()
		out, err := t.s3.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(t.bucket), Key: aws.String(key), UploadId: aws.String(id),
			PartNumber: aws.Int32(int32(p + 1)), Body: bytes.NewReader(body),
		})
		if err != nil {
			t.faults.err("%s: UploadPart %s part %d: %v", t.name, key, p+1, err)
			abortUpload(ctx, t.s3, t.bucket, key, id)
			return
		}
		t.lat.add(opPart, time.Since(begin))
		t.partsDone.Add(1)
		if got, want := unquoteETag(out.ETag), hex.EncodeToString(sum[:]); got != want {
			t.faults.mismatch("%s: UploadPart %s part %d: ETag %s, want %s", t.name, key, p+1, got, want)
		}
		parts[p] = types.CompletedPart{
			PartNumber: aws.Int32(int32(p + 1)), ETag: out.ETag,
			ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C,
			ChecksumCRC64NVME: out.ChecksumCRC64NVME, ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256,
		}
	}
	begin = time.Now()
	out, err := t.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(t.bucket), Key: aws.String(key), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		t.faults.err("%s: CompleteMultipartUpload %s: %v", t.name, key, err)
		abortUpload(ctx, t.s3, t.bucket, key, id)
		return
	}
	t.lat.add(opComplete, time.Since(begin))
	got := unquoteETag(out.ETag)
	if want := t.lay.etag(u); got != want {
		t.faults.mismatch("%s: CompleteMultipartUpload %s: ETag %s, want %s", t.name, key, got, want)
	}
	t.etags[u] = got
}

func unquoteETag(e *string) string { return strings.Trim(aws.ToString(e), `"`) }

// smallClient PUTs a 4 KiB object stamped with its client and iteration and
// GETs it back, checking the PUT's ETag and the bytes, until stop is set.
func smallClient(ctx context.Context, t *loadTarget, w int, stop *atomic.Bool, ops *atomic.Int64) {
	body := make([]byte, loadSmallSize)
	got := make([]byte, loadSmallSize+1)
	for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
		copy(body, t.lay.pool[(w*loadSmallKeys+i%loadSmallKeys)*loadSmallSize:])
		copy(body, fmt.Sprintf("%s client %d iteration %d\n", t.name, w, i))
		key := fmt.Sprintf("load-small/%s/%d/%02d", t.name, w, i%loadSmallKeys)
		begin := time.Now()
		out, err := t.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(t.bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
		if err != nil {
			t.faults.err("%s: small PUT %s: %v", t.name, key, err)
			continue
		}
		t.lat.add(opSmallPut, time.Since(begin))
		ops.Add(1)
		sum := md5.Sum(body)
		if e := unquoteETag(out.ETag); e != hex.EncodeToString(sum[:]) {
			t.faults.mismatch("%s: small PUT %s: ETag %s, want %x", t.name, key, e, sum)
		}
		begin = time.Now()
		n, err := getInto(ctx, t.s3, t.bucket, key, got)
		if err != nil {
			t.faults.err("%s: small GET %s: %v", t.name, key, err)
			continue
		}
		t.lat.add(opSmallGet, time.Since(begin))
		ops.Add(1)
		if !bytes.Equal(got[:n], body) {
			t.faults.mismatch("%s: small GET %s: %d bytes that differ from the %d just PUT", t.name, key, n, len(body))
		}
	}
}

// getInto GETs an object into buf (which should be one byte longer than the
// object, to see a longer one) and returns how much it read.
func getInto(ctx context.Context, c *s3.Client, bucket, key string, buf []byte) (int, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// verifyLoad reads every completed object back through t's client and
// compares it with what was sent, then checks that no upload was left on
// MinIO under the side's prefix.
func verifyLoad(ctx context.Context, t *loadTarget, admin *s3.Client, s *loadSide) {
	start := time.Now()
	next := atomic.Int64{}
	var read atomic.Int64
	var objects atomic.Int64
	var wg sync.WaitGroup
	for range loadVerifyParallel {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for {
				u := int(next.Add(1) - 1)
				if u >= t.uploads {
					return
				}
				if t.etags[u] == "" {
					continue // its failure is counted already
				}
				n, ok := verifyObject(ctx, t, u, buf)
				read.Add(n)
				if ok {
					objects.Add(1)
				}
			}
		})
	}
	wg.Wait()
	s.Verify.Seconds = time.Since(start).Seconds()
	s.Verify.Objects = int(objects.Load())
	s.Verify.Bytes = read.Load()
	s.Verify.MiBPerSec = float64(s.Verify.Bytes) / mib / s.Verify.Seconds

	prefix := "load/" + t.name + "/"
	out, err := admin.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(t.bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.faults.err("%s: ListMultipartUploads %s: %v", t.name, prefix, err)
		return
	}
	s.Verify.LeftoverUploads = len(out.Uploads)
	for _, up := range out.Uploads {
		t.faults.mismatch("%s: upload %s of %s is still on MinIO after the load", t.name, aws.ToString(up.UploadId), aws.ToString(up.Key))
	}
}

// verifyObject GETs upload u's object and compares its length, ETag and
// every byte; it returns the bytes read and whether all matched.
func verifyObject(ctx context.Context, t *loadTarget, u int, buf []byte) (int64, bool) {
	key := t.key(u)
	out, err := t.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(t.bucket), Key: aws.String(key)})
	if err != nil {
		t.faults.err("%s: read-back GET %s: %v", t.name, key, err)
		return 0, false
	}
	defer out.Body.Close()
	size := t.lay.objectSize()
	if n := aws.ToInt64(out.ContentLength); n != size {
		t.faults.mismatch("%s: read-back %s: Content-Length %d, want %d", t.name, key, n, size)
		return 0, false
	}
	if got, want := unquoteETag(out.ETag), t.lay.etag(u); got != want {
		t.faults.mismatch("%s: read-back %s: ETag %s, want %s", t.name, key, got, want)
		return 0, false
	}
	var pos int64
	for p := range loadParts {
		want, _ := t.lay.part(u, p)
		for len(want) > 0 {
			n := min(len(buf), len(want))
			if _, err := io.ReadFull(out.Body, buf[:n]); err != nil {
				t.faults.err("%s: read-back %s at byte %d: %v", t.name, key, pos, err)
				return pos, false
			}
			if !bytes.Equal(buf[:n], want[:n]) {
				t.faults.mismatch("%s: read-back %s: bytes %d..%d (part %d) differ from what was sent", t.name, key, pos, pos+int64(n), p+1)
				return pos + int64(n), false
			}
			pos += int64(n)
			want = want[n:]
		}
	}
	if n, _ := out.Body.Read(buf[:1]); n != 0 {
		t.faults.mismatch("%s: read-back %s: longer than the %d bytes sent", t.name, key, size)
		return pos, false
	}
	return pos, true
}

// deleteLoadObjects deletes the side's multipart objects directly on MinIO,
// so that the next side starts with the same disk.
func deleteLoadObjects(b *testing.B, admin *s3.Client, t *loadTarget) {
	const batch = 500
	var ids []types.ObjectIdentifier
	for u := range t.uploads {
		if t.etags[u] != "" {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(t.key(u))})
		}
	}
	for len(ids) > 0 {
		n := min(batch, len(ids))
		out, err := admin.DeleteObjects(b.Context(), &s3.DeleteObjectsInput{
			Bucket: aws.String(t.bucket), Delete: &types.Delete{Objects: ids[:n], Quiet: aws.Bool(true)},
		})
		if err != nil {
			b.Fatalf("delete the %s side's objects: %v", t.name, err)
		}
		if len(out.Errors) > 0 {
			b.Fatalf("delete the %s side's objects: %s: %s", t.name, aws.ToString(out.Errors[0].Key), aws.ToString(out.Errors[0].Message))
		}
		ids = ids[n:]
	}
}

// cpuMeter measures the CPU time the machine spends outside a set of
// processes (and their waited-for children).
type cpuMeter struct {
	pids         []int
	start        time.Time
	busy0, ours0 float64
	unknown      bool
}

// clockTick is USER_HZ, the unit of /proc/stat and /proc/PID/stat: 100 on
// every Linux this runs on.
const clockTick = 100

func startCPUMeter(pids []int) *cpuMeter {
	m := &cpuMeter{pids: pids, start: time.Now()}
	var err error
	if m.busy0, err = machineBusy(); err == nil {
		m.ours0, err = processCPU(pids)
	}
	m.unknown = err != nil || len(pids) == 0
	return m
}

// otherShare returns the share of the machine's CPU time since the start
// that went to other processes, or -1 when /proc could not say.
func (m *cpuMeter) otherShare() float64 {
	busy, err := machineBusy()
	if err != nil || m.unknown {
		return -1
	}
	ours, err := processCPU(m.pids)
	if err != nil {
		return -1
	}
	total := time.Since(m.start).Seconds() * float64(runtime.NumCPU())
	return math.Round(max(0, (busy-m.busy0)-(ours-m.ours0))/total*1000) / 1000
}

// machineBusy returns the CPU seconds all CPUs spent in user and system
// mode (/proc/stat; interrupts and steal left out).
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var sum float64
	for _, v := range f[1:4] { // user, nice, system
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum / clockTick, nil
}

// processCPU returns the CPU seconds of the processes, their own and their
// waited-for children's (/proc/PID/stat utime, stime, cutime, cstime).
func processCPU(pids []int) (float64, error) {
	var sum float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 15 {
			return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
		}
		for _, v := range f[11:15] { // fields 14 to 17 of the whole line
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			sum += n
		}
	}
	return sum / clockTick, nil
}

// pidOf returns the pid of the process whose command line contains s, or 0.
func pidOf(s string) int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(b, []byte(s)) {
			return pid
		}
	}
	return 0
}

// syncDisks flushes written-back data, so that the first side's writes do
// not slow the second (best effort: sync(1) may be missing).
func syncDisks() {
	if path, err := exec.LookPath("sync"); err == nil {
		_ = exec.Command(path).Run()
	}
}

// staleUploads are the abandoned uploads seeded for the passes to delete.
type staleUploads struct {
	mu   sync.Mutex
	keys []string
	ids  []string
}

// seed creates n uploads with one small part each directly on MinIO and a
// session for each that was marked expired two hours ago and has not
// changed since, as a pass would leave an abandoned upload: the next pass
// deletes them.
func (st *staleUploads) seed(ctx context.Context, env *harness.Env, admin *s3.Client, bucket string, n int) error {
	cli, err := etcdstore.Connect(ctx, []string{env.Gateway.EtcdClientURL}, 5*time.Second)
	if err != nil {
		return err
	}
	defer cli.Close()
	keys, err := etcdstore.NewKeys(etcdstore.DefaultPrefix)
	if err != nil {
		return err
	}
	store := etcdstore.NewStore(cli, keys)
	now := time.Now().UTC()
	created, marked := now.Add(-3*time.Hour), now.Add(-2*time.Hour)
	// All at once: under the load each request takes a while.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("load/stale/%02d", i)
			id, err := createUpload(ctx, admin, bucket, key)
			if err != nil {
				errs[i] = err
				return
			}
			st.mu.Lock()
			st.keys, st.ids = append(st.keys, key), append(st.ids, id)
			st.mu.Unlock()
			if _, err := admin.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
				PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 1024)),
			}); err != nil {
				errs[i] = fmt.Errorf("UploadPart %s: %w", key, err)
				return
			}
			sess := &etcdstore.Session{Bucket: bucket, Key: key, UploadID: id, Owner: "bench", Created: created, LastActivity: created}
			sess.Transition(etcdstore.StateActive, created, "gateway", "created")
			sess.Transition(etcdstore.StateExpired, marked, "reclaimer", "bench: abandoned")
			sess.ExpiredAt = &marked
			if _, err := store.CreateSession(ctx, sess); err != nil {
				errs[i] = fmt.Errorf("session of %s: %w", key, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// awaitGone waits (up to 30s: passes run every second) until every stale
// upload is gone from MinIO and returns how many are.
func (st *staleUploads) awaitGone(ctx context.Context, admin *s3.Client, bucket string, f *faults) int {
	st.mu.Lock()
	keys, ids := slices.Clone(st.keys), slices.Clone(st.ids)
	st.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		gone := 0
		for i, key := range keys {
			_, err := admin.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(ids[i])})
			var api smithy.APIError
			switch {
			case errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload":
				gone++
			case err != nil:
				f.err("ListParts of stale upload %s: %v", key, err)
				return gone
			}
		}
		if gone == len(keys) || time.Now().After(deadline) {
			return gone
		}
		select {
		case <-ctx.Done():
			return gone
		case <-time.After(time.Second):
		}
	}
}

// driveReclaim runs beside the gateway's load: it runs `sweepgate reclaim
// run` again and again until the uploads are done, and once a quarter of
// the parts are in, it seeds the stale uploads.
func driveReclaim(ctx context.Context, env *harness.Env, bin string, admin *s3.Client, t *loadTarget, st *staleUploads, rec *loadReclaim, phaseStart time.Time) {
	var wg sync.WaitGroup
	wg.Go(func() {
		quarter := max(int64(t.uploads*loadParts)/4, 1)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for wait := true; wait && t.partsDone.Load() < quarter; {
			select {
			case <-ctx.Done():
				return
			case <-t.mpDone:
				wait = false
			case <-tick.C:
			}
		}
		rec.StaleSeededS = math.Round(time.Since(phaseStart).Seconds()*10) / 10
		if err := st.seed(ctx, env, admin, t.bucket, loadStale); err != nil {
			t.faults.err("seed the stale uploads: %v", err)
		}
	})
	for {
		run, err := reclaimRunCLI(ctx, bin, env.Gateway.AdminEndpoint)
		if err != nil {
			t.faults.err("sweepgate reclaim run: %v", err)
		} else {
			rec.Runs = append(rec.Runs, run)
		}
		select {
		case <-ctx.Done():
		case <-t.mpDone:
		case <-time.After(loadRunPause):
			continue
		}
		break
	}
	wg.Wait()
}

// reclaimRunCLI runs `sweepgate reclaim run --json` against the admin API,
// as an operator would. A refused or stopped pass (exit 4) is an error.
func reclaimRunCLI(ctx context.Context, bin, admin string) (loadRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "reclaim", "run", "--json", "--admin", admin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWEEPGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SWEEPGATE_ADMIN_TOKEN="+harness.AdminTokenOf(admin))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	begin := time.Now()
	err := cmd.Run()
	run := loadRun{Seconds: math.Round(time.Since(begin).Seconds()*100) / 100}
	var rep reclaim.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		return run, fmt.Errorf("%v: %s%s", errors.Join(err, jerr), out.Bytes(), errOut.Bytes())
	}
	run.Pass = rep.Pass
	if err != nil {
		return run, fmt.Errorf("pass %d: %v (refused %q, stopped %q) %s", rep.Pass, err, rep.Refused, rep.Stopped, errOut.Bytes())
	}
	return run, nil
}

// passReports reads the stored pass reports (GET /admin/v1/reclaim/reports)
// of the passes that finished after since, oldest first, noting those that
// started after loadEnd.
func passReports(ctx context.Context, admin string, since, loadEnd time.Time, runs []loadRun) ([]loadPass, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/admin/v1/reclaim/reports?limit=100", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+harness.AdminTokenOf(admin))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var reps struct {
		Reports []reclaim.Report `json:"reports"`
	}
	if err := json.Unmarshal(body, &reps); err != nil {
		return nil, err
	}
	var out []loadPass
	for _, r := range reps.Reports {
		if r.Finished.Before(since) || r.DryRun {
			continue
		}
		u, a := r.Uploads, r.Acted
		out = append(out, loadPass{
			Pass: r.Pass, Run: slices.ContainsFunc(runs, func(x loadRun) bool { return x.Pass == r.Pass }), AfterLoad: r.Started.After(loadEnd),
			StartedS: math.Round(r.Started.Sub(since).Seconds()*10) / 10, Seconds: math.Round(r.Finished.Sub(r.Started).Seconds()*100) / 100,
			Judged: u.Keep.Sessions + u.Mark.Sessions + u.Delete.Sessions + u.Hold.Sessions,
			Keep:   u.Keep.Sessions, Mark: u.Mark.Sessions, Delete: u.Delete.Sessions,
			Marked: a.Marked.Sessions, Deleted: a.Deleted.Sessions, Changed: a.Changed.Sessions,
			Refused: r.Refused, Stopped: r.Stopped,
		})
	}
	slices.SortFunc(out, func(a, b loadPass) int { return int(a.Pass - b.Pass) })
	return out, nil
}

// fillReclaimMetrics takes what the reclaimer and the sessions did from the
// difference of two /metrics scrapes.
func fillReclaimMetrics(rec *loadReclaim, before, after string) {
	b, a := metricSeries(before), metricSeries(after)
	diff := func(name, labels string) float64 { return a[name+labels] - b[name+labels] }
	rec.PassResults = map[string]float64{}
	const passes = "sweepgate_reclaim_passes_total"
	for series, v := range a {
		if labels, ok := strings.CutPrefix(series, passes+"{"); ok {
			result := strings.TrimSuffix(strings.TrimPrefix(labels, `result="`), `"}`)
			if d := v - b[series]; d > 0 {
				rec.PassResults[result] = d
			}
		}
	}
	rec.MarkedParts = diff("sweepgate_reclaim_acted_parts_total", `{outcome="mark"}`)
	rec.DeletedParts = diff("sweepgate_reclaim_acted_parts_total", `{outcome="aborted"}`)
	rec.Revived = diff("sweepgate_sessions_transitions_total", `{from="expired",to="active"}`)
	rec.Conflicts = diff("sweepgate_etcd_txn_conflicts_total", "")
}

// metricSeries maps each sample line of a Prometheus text exposition
// ("name{labels}" or "name") to its value.
func metricSeries(text string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if i := strings.LastIndex(line, "} "); i >= 0 {
			series, value, ok = line[:i+1], line[i+2:], true
		}
		if !ok {
			continue
		}
		value, _, _ = strings.Cut(value, " ") // a timestamp may follow
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[series] = v
		}
	}
	return out
}

func printLoad(w io.Writer, r *loadResult) {
	g, d := r.Gateway, r.Direct
	fmt.Fprintf(w, "\nload: %d concurrent multipart uploads x %d parts (%.2f MiB, the last %.2f MiB) + %d small-object clients (%s, %d CPUs)\n",
		r.Uploads, r.PartsPerUpload, float64(r.PartSize)/mib, float64(r.LastPartSize)/mib, r.SmallClients, runtime.Version(), runtime.NumCPU())
	fmt.Fprintf(w, "%.2f GiB a side; gateway with a reclaimer pass every %s (grace %s, delete after %s), then direct to MinIO. Latencies: p50 / p99.\n",
		float64(r.BytesPerSide)/gib, r.Reclaim.Interval, r.Reclaim.Grace, r.Reclaim.DeleteAfter)
	fmt.Fprintf(w, "%-*s %18s %18s %7s %8s  %s\n", titleWidth, "workload", "direct", "gateway", "ratio", "target", "")
	fmt.Fprintf(w, "%-*s %18s %18s %7.3f %8s  %s\n", titleWidth, "multipart throughput (MiB/s)",
		fmt.Sprintf("%.1f MiB/s", d.MultipartMiBPerSec), fmt.Sprintf("%.1f MiB/s", g.MultipartMiBPerSec),
		r.MultipartRatio, fmt.Sprintf(">= %.2f", r.MultipartTarget), r.MultipartStatus)
	fmt.Fprintf(w, "%-*s %18s %18s %7.3f %8s  %s\n", titleWidth, "small PUT+GET 4 KiB (ops/s)",
		fmt.Sprintf("%.1f ops/s", d.SmallOpsPerSec), fmt.Sprintf("%.1f ops/s", g.SmallOpsPerSec),
		r.SmallOpsRatio, fmt.Sprintf(">= %.2f", r.SmallOpsTarget), r.SmallOpsStatus)
	titles := map[string]string{
		opCreate: "CreateMultipartUpload p50/p99 (ms)", opPart: "UploadPart p50/p99 (ms)",
		opComplete: "CompleteMultipartUpload p50/p99 (ms)", opSmallPut: "small PUT p50/p99 (ms)", opSmallGet: "small GET p50/p99 (ms)",
	}
	for _, op := range loadOps {
		fmt.Fprintf(w, "%-*s %18s %18s %7.3f %8s  %s\n", titleWidth, titles[op],
			fmt.Sprintf("%.1f / %.1f", d.Latency[op].P50Ms, d.Latency[op].P99Ms),
			fmt.Sprintf("%.1f / %.1f", g.Latency[op].P50Ms, g.Latency[op].P99Ms),
			r.P99Ratio[op], "p99", "")
	}
	fmt.Fprintf(w, "%-*s %18s %18s %7s %8s  %s\n", titleWidth, "errors / mismatches",
		fmt.Sprintf("%d / %d", d.Errors, d.Mismatches), fmt.Sprintf("%d / %d", g.Errors, g.Mismatches), "", "= 0", r.Integrity)
	fmt.Fprintf(w, "%-*s %18s %18s\n", titleWidth, "objects read back byte for byte",
		fmt.Sprintf("%d / %d", d.Verify.Objects, r.Uploads), fmt.Sprintf("%d / %d", g.Verify.Objects, r.Uploads))
	fmt.Fprintf(w, "    %-*s %18s %18s\n", titleWidth-4, "read-back", fmt.Sprintf("%.0fs, %.0f MiB/s", d.Verify.Seconds, d.Verify.MiBPerSec),
		fmt.Sprintf("%.0fs, %.0f MiB/s", g.Verify.Seconds, g.Verify.MiBPerSec))
	fmt.Fprintf(w, "    %-*s %18s %18s\n", titleWidth-4, "multipart phase", fmt.Sprintf("%.1fs", d.MultipartSeconds), fmt.Sprintf("%.1fs", g.MultipartSeconds))
	fmt.Fprintf(w, "    %-*s %18s %18s\n", titleWidth-4, "CPU share of other processes", cpuShare(d.OtherCPU), cpuShare(g.OtherCPU))
	rc := r.Reclaim
	var results []string
	for _, k := range slices.Sorted(maps.Keys(rc.PassResults)) {
		results = append(results, fmt.Sprintf("%s %.0f", k, rc.PassResults[k]))
	}
	fmt.Fprintf(w, "reclaimer in the gateway's phase (the load ended at %.1fs): passes %s (%d reclaim run); marked %.0f parts, %.0f sessions revived by activity, %.0f txn conflicts; stale uploads seeded at %.1fs, reclaimed %d / %d (%.0f parts deleted)\n",
		rc.LoadEndS, strings.Join(results, ", "), len(rc.Runs), rc.MarkedParts, rc.Revived, rc.Conflicts, rc.StaleSeededS, rc.StaleGone, rc.Stale, rc.DeletedParts)
	for _, p := range rc.Passes {
		by := "interval"
		if p.Run {
			by = "reclaim run"
		}
		if p.AfterLoad {
			by += ", after the load"
		}
		fmt.Fprintf(w, "    pass %d (%s) at %.1fs took %.1fs: %d uploads judged; plan keep %d, mark %d, delete %d; marked %d, deleted %d, changed since the plan %d%s%s\n",
			p.Pass, by, p.StartedS, p.Seconds, p.Judged, p.Keep, p.Mark, p.Delete, p.Marked, p.Deleted, p.Changed,
			optional("; refused: ", p.Refused), optional("; stopped: ", p.Stopped))
	}
	for _, s := range []*loadSide{g, d} {
		for _, e := range s.ErrorSamples {
			fmt.Fprintf(w, "    error: %s\n", e)
		}
		for _, e := range s.MismatchSamples {
			fmt.Fprintf(w, "    mismatch: %s\n", e)
		}
	}
	fmt.Fprintf(w, "    whole benchmark: %.0fs\n", r.Seconds)
}

func cpuShare(x float64) string {
	if x < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.0f%%", x*100)
}

func optional(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
