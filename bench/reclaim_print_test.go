//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// printReclaim prints the reclaimer benchmark's figures.
func printReclaim(out io.Writer, res *reclaimResult) {
	fmt.Fprintf(out, "\nreclaim pass (%s, %d CPUs, GOMAXPROCS %d)\n", runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "Peak heap: highest Go heap in use during the pass minus the heap after a GC before it (live: GC-marked live heap).\n")
	fmt.Fprintf(out, "%-*s %14s %14s %14s %9s\n", titleWidth, "pass", "rate", "peak heap", "peak live", "setup")
	line := func(p *reclaimPass) {
		fmt.Fprintf(out, "%-*s %14s %14s %14s %9s\n", titleWidth, p.Title,
			fmt.Sprintf("%.0f %s/s", p.PerSec, p.Unit), fmt.Sprintf("+%.1f MiB", p.PeakHeapMiB),
			fmt.Sprintf("+%.1f MiB", p.PeakLiveMiB), fmt.Sprintf("%.0fs", p.SetupSeconds))
		keys := []string{"keep", "mark", "delete", "hold", "missing", "missing_unverified"}
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, p.Report[k]))
		}
		fmt.Fprintf(out, "    %.1fs; plan: %s\n", p.Seconds, strings.Join(parts, ", "))
		if p.Ratio > 0 {
			fmt.Fprintf(out, "    bare listing on MinIO %.2fs + bare etcd range of the sessions %.2fs: plan x%.2f (<= x%.0f  %s)\n",
				p.ListSeconds, p.RangeSeconds, p.Ratio, p.TargetRatio, p.Status)
		}
		if p.ScanSeconds > 0 {
			fmt.Fprintf(out, "    session scan alone: %.2fs, %.2f us/session\n", p.ScanSeconds, p.ScanMicrosPerSession)
		}
	}
	var ratios []string
	for i := range res.Uploads {
		line(&res.Uploads[i])
		ratios = append(ratios, fmt.Sprintf("%d uploads x%.2f %s", res.Uploads[i].Items, res.Uploads[i].Ratio, res.Uploads[i].Status))
	}
	if len(ratios) > 0 {
		fmt.Fprintf(out, "%-*s %s (<= x%.0f)\n", titleWidth, "plan over bare listing + range", strings.Join(ratios, ", "), targetPlanRatio)
	}
	for i := range res.Sessions {
		line(&res.Sessions[i])
	}
	if len(res.Sessions) == 2 {
		fmt.Fprintf(out, "%-*s %14s %14s %14s %9s  %s\n", titleWidth,
			fmt.Sprintf("session scan peak heap, %d vs %d", res.Sessions[1].Items, res.Sessions[0].Items), "",
			fmt.Sprintf("x%.2f", res.ScanRatio), "", "",
			fmt.Sprintf("< x%.0f or < %d MiB  %s", targetScanRatio, targetScanHeapMiB, res.ScanStatus))
		fmt.Fprintf(out, "%-*s %14s  %s\n", titleWidth,
			fmt.Sprintf("session scan time per session, %d vs %d", res.Sessions[1].Items, res.Sessions[0].Items),
			fmt.Sprintf("x%.2f", res.ScanTimeRatio), fmt.Sprintf("<= x%.1f  %s", targetScanTimeRatio, res.ScanTimeStatus))
	}
	for _, n := range res.Notes {
		fmt.Fprintf(out, "    note: %s\n", n)
	}
}

// mergeResults adds res under name to the results file (written by
// BenchmarkGateway when it ran first), keeping what it holds.
func mergeResults(name string, res any) (string, error) {
	path := os.Getenv(resultsEnv)
	if path == "" {
		path = defaultResults
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("results path %s: %w", path, err)
	}
	all := map[string]json.RawMessage{}
	if old, err := os.ReadFile(abs); err == nil {
		if err := json.Unmarshal(old, &all); err != nil {
			return "", fmt.Errorf("results %s: %w", abs, err)
		}
	} else if !os.IsNotExist(err) {
		return "", err
	}
	body, err := json.Marshal(res)
	if err != nil {
		return "", err
	}
	all[name] = body
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", err
	}
	return abs, os.WriteFile(abs, append(b, '\n'), 0o644)
}

// envCount reads a positive count from the environment.
func envCount(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

// envCounts reads a comma-separated list of positive counts from the
// environment.
func envCounts(b *testing.B, name, def string) []int {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want positive counts separated by commas", name, v)
		}
		out = append(out, n)
	}
	return out
}

// startPlanProfile starts a CPU profile of one plan when planProfileEnv
// names a directory; the function it returns stops it. The allocation
// profiles written before and after it (.mem.base, .mem) give the plan's
// own allocations with pprof -diff_base.
func startPlanProfile(b *testing.B, p *reclaimPass) func() {
	dir := os.Getenv(planProfileEnv)
	if dir == "" {
		return func() {}
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%d", p.Name, p.Items))
	writeAllocs(b, name+".mem.base")
	cpu, err := os.Create(name + ".cpu")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			b.Fatal(err)
		}
		writeAllocs(b, name+".mem")
	}
}

func writeAllocs(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
