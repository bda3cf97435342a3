//go:build bench

package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
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
	// MarkedParts and DeletedParts are sweepgate_reclaim_marked_parts_total
	// and sweepgate_reclaim_deleted_parts_total{outcome="aborted"}; Revived counts sessions moved from expired back
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
			"interval":                    loadReclaimInterval.String(),
			"grace":                       loadGrace.String(),
			"delete_after":                loadDeleteAfter.String(),
			"max_delete_fraction":         1,
			"max_delete_uploads_fraction": 1,
			"max_mark_fraction":           1,
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

	res.compare(uploads)
	res.Seconds = time.Since(start).Seconds()
	return res
}

// compare sets r's ratios of gateway to direct, and lists as problems any
// error, mismatch, missing object, leftover upload or stale upload the
// passes did not reclaim.
func (r *loadResult) compare(uploads int) {
	g, d := r.Gateway, r.Direct
	r.MultipartRatio = ratio(g.MultipartMiBPerSec, d.MultipartMiBPerSec)
	r.MultipartStatus = passBelow(r.MultipartRatio, targetLargeRatio)
	r.SmallOpsRatio = ratio(g.SmallOpsPerSec, d.SmallOpsPerSec)
	r.SmallOpsStatus = passBelow(r.SmallOpsRatio, targetSmallRatio)
	for _, op := range loadOps {
		r.P99Ratio[op] = ratio(g.Latency[op].P99Ms, d.Latency[op].P99Ms)
	}
	for _, s := range []*loadSide{g, d} {
		if s.Errors > 0 || s.Mismatches > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %d errors, %d mismatches", s.Side, s.Errors, s.Mismatches))
		}
		if s.Completed != uploads || s.Verify.Objects != uploads {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %d of %d uploads completed, %d read back intact", s.Side, s.Completed, uploads, s.Verify.Objects))
		}
		if s.Verify.LeftoverUploads > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %d uploads left on MinIO", s.Side, s.Verify.LeftoverUploads))
		}
	}
	if rc := r.Reclaim; rc.StaleGone != rc.Stale {
		r.Problems = append(r.Problems, fmt.Sprintf("gateway: the passes reclaimed %d of the %d stale uploads", rc.StaleGone, rc.Stale))
	}
	r.Integrity = statusPass
	if len(r.Problems) > 0 {
		r.Integrity = "FAIL"
	}
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
