//go:build bench

package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The classification's memory: the same blobs are classified a second
// time against heapRefsDivisor times fewer references (in a store of their
// own, written before either pass so that both start from the same heap),
// and the peak heap of the pass at N references is compared with that at
// N/heapRefsDivisor. It passes below targetClassifyHeapRatio, or below
// targetScanHeapMiB whatever the ratio.
const (
	heapRefsDivisor         = 10
	targetClassifyHeapRatio = 1.5
)

// classifyRun is one store of references to classify the blobs against.
type classifyRun struct {
	store      *etcdstore.Store
	refs       int64
	referenced int
}

// seedSmallRefs records nRefs/heapRefsDivisor references to the blobs of
// hexes in a store of their own.
func seedSmallRefs(b *testing.B, w *reclaimWorld, bucket string, hexes []string, nRefs int) classifyRun {
	store := w.store(b, "/bench-digests-classify-small/")
	var small digestResult
	referenced := seedRefs(b, w, store.Keys(), bucket, hexes, max(1, nRefs/heapRefsDivisor), &small)
	return classifyRun{store: store, refs: small.Refs, referenced: referenced}
}

// classifyPlan plans one dry-run pass over the nBlobs blobs of bucket with
// run's references, measuring its time, peak heap and the CPU time of the
// processes involved, and checks what it judged.
func classifyPlan(ctx context.Context, b *testing.B, w *reclaimWorld, bucket string, nBlobs int, run classifyRun) (reclaimPass, map[string]float64) {
	p := reclaimPass{
		Name:  fmt.Sprintf("classify_%d_blobs_%d_refs", nBlobs, run.refs),
		Title: fmt.Sprintf("plan, %d blobs, %d refs", nBlobs, run.refs),
		Items: int64(nBlobs), Unit: "digests",
	}
	svc, err := multipart.New(multipart.Config{Store: run.store, Backend: w.backend})
	if err != nil {
		b.Fatal(err)
	}
	r, err := reclaim.New(reclaim.Config{
		Store: run.store, Sessions: svc, Backend: w.backend, ID: "bench-classify",
		Interval: 24 * time.Hour,
		// Everything else at its default: pages of 1000 blobs, 8 upload
		// listings at once, the default breaker.
		Digests: &digestsweep.SweepConfig{Layout: benchLayout(b, bucket), PlacementGrace: benchGrace},
	})
	if err != nil {
		b.Fatal(err)
	}
	cpu := readProcCPU()
	h := startHeapSampler()
	start := time.Now()
	rep, err := r.Plan(ctx)
	elapsed := time.Since(start)
	h.finish(&p)
	cpuSeconds := readProcCPU().since(cpu)
	if err != nil {
		b.Fatalf("plan: %v", err)
	}
	d := rep.Digests
	if d == nil {
		b.Fatalf("the plan has no digest report: %+v", rep)
	}
	p.Seconds = elapsed.Seconds()
	p.PerSec = float64(d.Stored) / p.Seconds
	p.Report = map[string]int64{
		"stored": d.Stored, "retained": d.Retained, "pending": d.Pending, "new_pending": d.NewPending,
		"ready": d.Ready, "skipped": d.Skipped, "ignored": d.Ignored, "changed": d.Changed,
		"rebuild_objects": 0,
	}
	for by, n := range d.RetainedBy {
		p.Report["retained_by_"+by] = n
	}
	if d.Rebuild.Result != nil {
		p.Report["rebuild_objects"] = d.Rebuild.Result.Objects
	}
	if d.Kept != "" || d.Refused != "" || d.Rebuild.Failed != "" {
		b.Fatalf("the plan kept everything (%q), was refused (%q) or its rebuild failed (%q)", d.Kept, d.Refused, d.Rebuild.Failed)
	}
	if d.Stored != int64(nBlobs) || d.Retained != int64(run.referenced) || d.Pending != int64(nBlobs-run.referenced) {
		b.Fatalf("the plan judged %d blobs, retained %d, pending %d; want %d, %d, %d (report %v)",
			d.Stored, d.Retained, d.Pending, nBlobs, run.referenced, nBlobs-run.referenced, p.Report)
	}
	return p, cpuSeconds
}

// classifyHeap sets the heap comparison of res from its two passes.
func classifyHeap(res *digestResult) {
	large, small := res.Classify, res.ClassifySmall
	if large == nil || small == nil {
		return
	}
	if small.PeakHeapBytes > 0 {
		res.ClassifyHeapRatio = float64(large.PeakHeapBytes) / float64(small.PeakHeapBytes)
	}
	res.ClassifyHeapStatus = statusBelow
	if res.ClassifyHeapRatio > 0 && res.ClassifyHeapRatio < targetClassifyHeapRatio || large.PeakHeapMiB < targetScanHeapMiB {
		res.ClassifyHeapStatus = statusPass
	}
}

// printClassifyHeap prints the heap comparison of res.
func printClassifyHeap(out io.Writer, res *digestResult) {
	large, small := res.Classify, res.ClassifySmall
	if large == nil || small == nil {
		return
	}
	fmt.Fprintf(out, "    %d refs over the same blobs: %.0f digests/s, %.1fs, peak heap +%.1f MiB (live +%.1f MiB); cpu %s\n",
		res.SmallRefs, small.PerSec, small.Seconds, small.PeakHeapMiB, small.PeakLiveMiB, cpuString(res.ClassifySmallCPU))
	fmt.Fprintf(out, "    peak heap at %d refs / at %d: x%.2f  (< x%.1f or < %d MiB)  %s\n",
		res.Refs, res.SmallRefs, res.ClassifyHeapRatio, targetClassifyHeapRatio, targetScanHeapMiB, res.ClassifyHeapStatus)
}

// procCPU is the CPU time (user and system) of the benchmark process and
// of each of its child processes, by name ("bench" for the benchmark
// process, "etcd" for its etcd child, which runs the test binary).
type procCPU map[string]time.Duration

// readProcCPU reads procCPU from /proc; a process it cannot read is left
// out.
func readProcCPU() procCPU {
	out := procCPU{}
	self, exe := os.Getpid(), filepath.Base(os.Args[0])
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 4, 14 and 15.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || end+2 > len(s) {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if pid != self && ppid != self {
			continue
		}
		name := s[open+1 : end]
		switch {
		case pid == self:
			name = "bench"
		case strings.HasPrefix(exe, name):
			name = "etcd"
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		// The kernel counts in clock ticks of 1/100 s (USER_HZ).
		out[name] += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

// since returns the CPU time each process spent since before, in seconds.
func (c procCPU) since(before procCPU) map[string]float64 {
	out := make(map[string]float64, len(c))
	for name, d := range c {
		out[name] = (d - before[name]).Seconds()
	}
	return out
}

// cpuString prints CPU seconds by process, with their sum.
func cpuString(cpu map[string]float64) string {
	if len(cpu) == 0 {
		return "n/a"
	}
	var sum float64
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(cpu)) {
		sum += cpu[name]
		parts = append(parts, fmt.Sprintf("%s %.2fs", name, cpu[name]))
	}
	return fmt.Sprintf("%.2fs (%s)", sum, strings.Join(parts, ", "))
}
