//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Targets, as docs/benchmarks.md gives them. They are reported against, never
// enforced: a figure below its target prints BELOW and the run goes on.
const (
	targetLargeRatio  = 0.90    // throughput, gateway/direct, large objects
	targetSmallRatio  = 0.85    // operations per second, gateway/direct, 4 KiB objects
	targetRSSGrowthMB = 64      // MiB of gateway RSS growth while 1 GiB streams through
	targetEtcdCommits = 1.1     // etcd commits per UploadPart in a burst of one upload's parts, keyspace schema 2
	mib               = 1 << 20 // bytes
	gib               = 1 << 30 // bytes
	resultsEnv        = "SWEEPGATE_BENCH_RESULTS"
	defaultResults    = "results.json" // relative to the package directory: bench/results.json
	statusPass        = "PASS"
	statusBelow       = "BELOW"
	statusUnavailable = "UNAVAILABLE"
)

// comparison is one workload measured direct to MinIO and through the
// gateway.
type comparison struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Unit of Direct and Gateway: "MB/s" (10^6 bytes per second) or "ops/s".
	Unit string `json:"unit"`
	// Direct and Gateway are the medians of the samples. Ratio is the
	// median of the rounds' ratios, each round's gateway sample over its
	// direct one (the samples taken side by side), or the ratio of the
	// medians when the sides have different numbers of samples.
	Direct         float64   `json:"direct"`
	Gateway        float64   `json:"gateway"`
	Ratio          float64   `json:"ratio"`
	TargetRatio    float64   `json:"target_ratio"`
	Status         string    `json:"status"`
	DirectSamples  []float64 `json:"direct_samples"`
	GatewaySamples []float64 `json:"gateway_samples"`
	// Detail says what one sample is.
	Detail string `json:"detail"`
	// BareProxy is the median of the samples through a bare
	// httputil.ReverseProxy in the same rounds, for the workloads that run
	// through one too; BareProxyRatio the median of its rounds' ratios to
	// direct; OverBare is Ratio / BareProxyRatio, PASS (BareStatus) when
	// the gateway is at least as fast as the bare proxy relative to MinIO.
	BareProxy        float64   `json:"bare_proxy,omitempty"`
	BareProxyRatio   float64   `json:"bare_proxy_ratio,omitempty"`
	BareProxySamples []float64 `json:"bare_proxy_samples,omitempty"`
	OverBare         float64   `json:"gateway_over_bare_proxy,omitempty"`
	BareStatus       string    `json:"bare_status,omitempty"`
	// CPU is the small workloads' CPU time per 1,000 requests, the
	// gateway's next to MinIO's.
	CPU *cpuPerRequest `json:"cpu_per_1000_requests,omitempty"`
}

// rssPhase is the gateway's memory during one way of streaming 1 GiB.
type rssPhase struct {
	Name string `json:"name"`
	// PeakGrowthBytes is the highest VmRSS seen during the phase minus the
	// baseline taken before the first phase.
	PeakGrowthBytes int64   `json:"peak_growth_bytes"`
	PeakGrowthMiB   float64 `json:"peak_growth_mib"`
	// Throughput of the phase through the gateway, MB/s.
	MBPerSec float64 `json:"mb_per_s"`
	Samples  int     `json:"samples"`
}

// rssResult is the gateway's resident memory growth while a 1 GiB object
// streams through it.
type rssResult struct {
	PID             int        `json:"pid"`
	BaselineBytes   int64      `json:"baseline_bytes"`
	PeakBytes       int64      `json:"peak_bytes"`
	GrowthBytes     int64      `json:"growth_bytes"`
	GrowthMiB       float64    `json:"growth_mib"`
	TargetGrowthMiB float64    `json:"target_growth_mib"`
	Status          string     `json:"status"`
	Phases          []rssPhase `json:"phases"`
	Note            string     `json:"note,omitempty"`
}

// report collects every figure of a run.
type report struct {
	mu          sync.Mutex
	GeneratedAt time.Time             `json:"generated_at"`
	GoVersion   string                `json:"go_version"`
	GOOS        string                `json:"goos"`
	GOARCH      string                `json:"goarch"`
	NumCPU      int                   `json:"num_cpu"`
	GOMAXPROCS  int                   `json:"gomaxprocs"`
	Race        bool                  `json:"gateway_race_detector"`
	Workloads   map[string]comparison `json:"workloads"`
	// Order is the order in which workloads ran, for printing.
	Order []string   `json:"order"`
	RSS   *rssResult `json:"rss_1gib_stream,omitempty"`
	// EtcdWrites is the gateway's etcd commits and requests per UploadPart.
	EtcdWrites *etcdWritesResult `json:"etcd_commits_per_part,omitempty"`
}

func newReport() *report {
	return &report{
		GeneratedAt: time.Now().UTC(),
		GoVersion:   runtime.Version(),
		GOOS:        runtime.GOOS,
		GOARCH:      runtime.GOARCH,
		NumCPU:      runtime.NumCPU(),
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		Race:        os.Getenv("SWEEPGATE_E2E_RACE") == "1",
		Workloads:   map[string]comparison{},
	}
}

// addComparison records (or, when the benchmark framework runs a workload
// again with a larger N, replaces) a workload's figures.
func (r *report) addComparison(c comparison) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.Workloads[c.Name]; !ok {
		r.Order = append(r.Order, c.Name)
	}
	r.Workloads[c.Name] = c
}

func (r *report) setRSS(res rssResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.RSS = &res
}

func (r *report) setEtcdWrites(res etcdWritesResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.EtcdWrites = &res
}

// newComparison computes medians, ratio and status from the samples.
func newComparison(name, title, unit, detail string, target float64, direct, gateway []float64) comparison {
	c := comparison{
		Name: name, Title: title, Unit: unit, Detail: detail, TargetRatio: target,
		Direct: median(direct), Gateway: median(gateway),
		DirectSamples: round2(direct), GatewaySamples: round2(gateway),
	}
	c.Ratio = roundRatio(gateway, direct)
	c.Status = statusBelow
	if c.Ratio >= target {
		c.Status = statusPass
	}
	return c
}

// addBare adds the samples of the bare reverse proxy, taken in the same
// rounds as c's.
func (c *comparison) addBare(bare []float64) {
	c.BareProxy, c.BareProxySamples = median(bare), round2(bare)
	c.BareProxyRatio = roundRatio(bare, c.DirectSamples)
	c.OverBare = ratio(c.Ratio, c.BareProxyRatio)
	c.BareStatus = statusBelow
	if c.BareProxyRatio > 0 && c.Ratio >= c.BareProxyRatio {
		c.BareStatus = statusPass
	}
}

// roundRatio is the median of xs[i]/ys[i], the ratio of samples taken in
// the same round; the ratio of the medians when the two differ in length.
func roundRatio(xs, ys []float64) float64 {
	if len(xs) != len(ys) || len(xs) == 0 {
		if m := median(ys); m > 0 {
			return median(xs) / m
		}
		return 0
	}
	rs := make([]float64, 0, len(xs))
	for i := range xs {
		if ys[i] > 0 {
			rs = append(rs, xs[i]/ys[i])
		}
	}
	return median(rs)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round2(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int64(x*100+0.5)) / 100
	}
	return out
}

// titleWidth is the width of the table's first column.
const titleWidth = 42

// print writes the summary table.
func (r *report) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "\nsweepgate vs direct MinIO (%s, %d CPUs, GOMAXPROCS %d)\n", r.GoVersion, r.NumCPU, r.GOMAXPROCS)
	if r.Race {
		fmt.Fprintf(w, "warning: the gateway was built with the race detector (SWEEPGATE_E2E_RACE=1); figures are not representative\n")
	}
	fmt.Fprintf(w, "PASS: meets its target; BELOW: misses it (reported, not enforced). Figures are medians of the samples.\n")
	fmt.Fprintf(w, "%-*s %14s %14s %7s %8s  %s\n", titleWidth, "workload", "direct", "gateway", "ratio", "target", "")
	for _, name := range r.Order {
		c := r.Workloads[name]
		fmt.Fprintf(w, "%-*s %14s %14s %7.3f %8s  %s\n", titleWidth, c.Title,
			fmt.Sprintf("%.1f %s", c.Direct, c.Unit), fmt.Sprintf("%.1f %s", c.Gateway, c.Unit),
			c.Ratio, fmt.Sprintf(">= %.2f", c.TargetRatio), c.Status)
		if c.BareProxySamples != nil {
			fmt.Fprintf(w, "    %-*s %14s %14s %7.3f\n", titleWidth-4, "bare httputil.ReverseProxy (direct, bare)",
				"", fmt.Sprintf("%.1f %s", c.BareProxy, c.Unit), c.BareProxyRatio)
			fmt.Fprintf(w, "    %-*s %14s %14s %7.3f %8s  %s\n", titleWidth-4, "gateway's ratio over the bare proxy's",
				"", "", c.OverBare, ">= 1.00", c.BareStatus)
		}
		if p := c.CPU; p != nil {
			fmt.Fprintf(w, "    %-*s %14s %14s %7.3f %8s  %s\n", titleWidth-4, "CPU s per 1,000 requests (MinIO, gateway)",
				fmt.Sprintf("%.3f s", p.MinIO), fmt.Sprintf("%.3f s", p.Gateway), p.Ratio, fmt.Sprintf("<= %.2f", p.TargetRatio), p.Status)
			fmt.Fprintf(w, "    %-*s %14s %14s\n", titleWidth-4, "MinIO CPU s per 1,000, behind the gateway", "", fmt.Sprintf("%.3f s", p.MinIOViaGateway))
			if p.BareProxy > 0 {
				fmt.Fprintf(w, "    %-*s %14s %14s %7.3f %8s  %s\n", titleWidth-4, "CPU s per 1,000 requests (bare, gateway)",
					fmt.Sprintf("%.3f s", p.BareProxy), fmt.Sprintf("%.3f s", p.Gateway), p.BareRatio, fmt.Sprintf("<= %.2f", p.TargetBareRatio), p.BareStatus)
				fmt.Fprintf(w, "    %-*s %14s %14s\n", titleWidth-4, "MinIO CPU s per 1,000, behind the bare proxy", "", fmt.Sprintf("%.3f s", p.MinIOViaBare))
			}
		}
	}
	if r.RSS != nil {
		fig := "n/a"
		if r.RSS.Status != statusUnavailable {
			fig = fmt.Sprintf("+%.1f MiB", r.RSS.GrowthMiB)
		}
		fmt.Fprintf(w, "%-*s %14s %14s %7s %8s  %s\n", titleWidth, "gateway RSS growth, 1 GiB stream", "", fig, "",
			fmt.Sprintf("< %d MiB", targetRSSGrowthMB), r.RSS.Status)
		for _, p := range r.RSS.Phases {
			fmt.Fprintf(w, "    %-*s %14s %14s\n", titleWidth-4, p.Name, fmt.Sprintf("%.1f MB/s", p.MBPerSec), fmt.Sprintf("+%.1f MiB", p.PeakGrowthMiB))
		}
		if r.RSS.Note != "" {
			fmt.Fprintf(w, "    note: %s\n", r.RSS.Note)
		}
	}
	if e := r.EtcdWrites; e != nil {
		printEtcdWrites(w, e)
	}
}

// printEtcdWrites prints the etcd commits per part and their detail.
func printEtcdWrites(w io.Writer, e *etcdWritesResult) {
	perPart := func(x float64) string { return fmt.Sprintf("%.2f /part", x) }
	line := func(title string, x float64) {
		fmt.Fprintf(w, "    %-*s %14s %14s\n", titleWidth-4, title, "", perPart(x))
	}
	fmt.Fprintf(w, "%-*s %14s %14s %7s %8s  %s\n", titleWidth,
		fmt.Sprintf("etcd commits per part (%d x %d MiB, %d par)", e.Parts, e.PartSize>>20, e.Parallel), "",
		fmt.Sprintf("%.3f /part", e.CommitsPerPart), "", fmt.Sprintf("<= %.1f", e.TargetCommits), e.Status)
	fmt.Fprintf(w, "    keyspace schema %d; one burst: %d commits: %d part records, %d in-flight record writes, %d in-flight record removals, %d other keys\n",
		e.Schema, e.Burst.Commits, e.Burst.PartRecords, e.Burst.RecordWrites, e.Burst.RecordRemovals, e.Burst.Other)
	fmt.Fprintf(w, "    requests by kind, commits or not: a txn is a part's start (a read-only check but for the burst's first)\n")
	fmt.Fprintf(w, "    or its end (its part record); the lingering record's removal is a plain client delete outside the histogram\n")
	line("txn requests", e.PerPart.Txn)
	line("put requests", e.PerPart.Put)
	line("delete requests", e.PerPart.Delete)
	line("get requests (reads)", e.PerPart.Get)
	order := "NOT CONFIRMED"
	if e.Order.Confirmed {
		order = "confirmed"
	}
	fmt.Fprintf(w, "    order, the first part held mid-body: %s (%s)\n", order, e.Order.Note)
	fmt.Fprintf(w, "    not counted above: CreateMultipartUpload %v; CompleteMultipartUpload %v\n", e.Create, e.Complete)
}

// write stores the report as JSON and returns the absolute path.
func (r *report) write() (string, error) {
	path := os.Getenv(resultsEnv)
	if path == "" {
		path = defaultResults
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("results path %s: %w", path, err)
	}
	r.mu.Lock()
	b, err := json.MarshalIndent(r, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", fmt.Errorf("results directory: %w", err)
	}
	if err := os.WriteFile(abs, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return abs, nil
}
