//go:build bench

package bench

// The registry pull benchmark's etcd read counters and its printed table.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// scrapeEtcdReads reads the embedded etcd's read counters from its client
// URL's /metrics and the gateway's count of its etcd gets.
func scrapeEtcdReads(g *harness.Gateway) (etcdReads, error) {
	var r etcdReads
	resp, err := http.Get(g.EtcdClientURL + "/metrics")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("etcd metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	seenRange, seenMVCC := false, false
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, " ")
		labels := ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			// Label values may hold spaces: cut at the closing brace.
			j := strings.Index(line, "} ")
			if j < 0 {
				continue
			}
			name, labels, rest = line[:i], line[i+1:j], line[j+2:]
		}
		value, _, _ := strings.Cut(rest, " ")
		switch {
		case name == etcdMVCCRange:
			seenMVCC = true
		case name == etcdGRPCHandled && strings.Contains(labels, `grpc_method="Range"`):
			seenRange = true
		default:
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return r, fmt.Errorf("etcd metrics: malformed line %q", line)
		}
		if name == etcdMVCCRange {
			r.MVCCRange += n
		} else {
			r.Range += n
		}
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	if !seenMVCC {
		return r, fmt.Errorf("etcd metrics: no %s", etcdMVCCRange)
	}
	_ = seenRange // absent until etcd handled a first Range
	text, err := g.Metrics()
	if err != nil {
		return r, err
	}
	cs, err := parseEtcdCounts(text)
	if err != nil {
		return r, err
	}
	r.GatewayGets = cs[opGet]
	sumLine := strings.TrimSuffix(etcdMetric, "_count") + `_sum{op="get"} `
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(line, sumLine); ok {
			v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
			if r.GatewayGetSeconds, err = strconv.ParseFloat(v, 64); err != nil {
				return r, fmt.Errorf("metrics: malformed line %q", line)
			}
		}
	}
	return r, nil
}

// printRegistryPull prints the pull times, the throughput ratio in the
// style of the summary table, and the etcd reads per blob GET.
func printRegistryPull(w io.Writer, r *registryPull) {
	c := r.Throughput
	fmt.Fprintf(w, "\nregistry pull (%s, %d CPUs): %d layers, %d blobs, %.2f MB per pull, %d at a time; %d rounds, the registries interleaved\n",
		runtime.Version(), runtime.NumCPU(), r.Layers, r.Blobs, float64(r.Bytes)/1e6, r.Parallel, r.Rounds)
	fmt.Fprintf(w, "%-*s %14s %14s %7s %8s  %s\n", titleWidth, "", "direct", "gateway", "ratio", "target", "")
	secs := func(x float64) string { return fmt.Sprintf("%.1f ms", x*1e3) }
	for _, row := range []struct {
		title      string
		direct, gw float64
	}{
		{"pull time, median", r.Direct.MedianSeconds, r.Gateway.MedianSeconds},
		{"pull time, p90", r.Direct.P90Seconds, r.Gateway.P90Seconds},
		{"  median, bucket outside the digest layout", r.Direct.MedianSeconds, r.Plain.MedianSeconds},
		{"  p90, bucket outside the digest layout", r.Direct.P90Seconds, r.Plain.P90Seconds},
		{"  median, bare reverse proxy", r.Direct.MedianSeconds, r.Bare.MedianSeconds},
		{"  p90, bare reverse proxy", r.Direct.P90Seconds, r.Bare.P90Seconds},
		{"  median, TCP relay", r.Direct.MedianSeconds, r.Relay.MedianSeconds},
		{"  p90, TCP relay", r.Direct.P90Seconds, r.Relay.P90Seconds},
	} {
		fmt.Fprintf(w, "%-*s %14s %14s %7.3f\n", titleWidth, row.title, secs(row.direct), secs(row.gw), row.gw/row.direct)
	}
	for _, c := range []comparison{c, r.PlainThroughput, r.BareThroughput, r.RelayThroughput} {
		status, target := c.Status, fmt.Sprintf(">= %.2f", c.TargetRatio)
		if c.Name != r.Throughput.Name {
			status, target = "(reference)", ""
		}
		fmt.Fprintf(w, "%-*s %14s %14s %7.3f %8s  %s\n", titleWidth, c.Title,
			fmt.Sprintf("%.1f %s", c.Direct, c.Unit), fmt.Sprintf("%.1f %s", c.Gateway, c.Unit),
			c.Ratio, target, status)
	}
	fmt.Fprintf(w, "%-*s %14s %14s\n", titleWidth, "etcd reads per blob GET (mvcc ranges)", "", fmt.Sprintf("%.2f /GET", r.ReadsPerBlobGet.MVCCRange))
	fmt.Fprintf(w, "    %-*s %14s %14s\n", titleWidth-4, "Range RPCs over gRPC per blob GET", "", fmt.Sprintf("%.2f /GET", r.ReadsPerBlobGet.Range))
	fmt.Fprintf(w, "    %-*s %14s %14s\n", titleWidth-4, "gateway etcd gets per blob GET", "", fmt.Sprintf("%.2f /GET", r.ReadsPerBlobGet.GatewayGets))
	fmt.Fprintf(w, "    %-*s %14s %14s\n", titleWidth-4, "mvcc ranges per blob GET, traced pulls", "", fmt.Sprintf("%.2f /GET", r.TracedReadsPerBlobGet.MVCCRange))
	fmt.Fprintf(w, "    pull phase %.1fs: %.0f Range RPCs, %.0f mvcc ranges, %.0f gateway gets; idle window %.1fs: %.0f, %.0f, %.0f\n",
		r.PullSeconds, r.PullReads.Range, r.PullReads.MVCCRange, r.PullReads.GatewayGets,
		r.IdleSeconds, r.IdleReads.Range, r.IdleReads.MVCCRange, r.IdleReads.GatewayGets)
	fmt.Fprintf(w, "    blob GETs through sweepgate: %.1f per pull (%.1f of them HEAD) of %.1f S3 calls, %.0f over the rounds\n",
		r.BlobGetsPerPull, r.BlobHeadsPerPull, r.S3CallsPerPull, r.BlobGets)
	if r.Rounds > 0 {
		fmt.Fprintf(w, "    gateway's wait for etcd gets: %.1f ms per pull (summed over blobs in flight), %.2f ms per get\n",
			r.PullReads.GatewayGetSeconds/float64(r.Rounds)*1e3, r.PullReads.GatewayGetSeconds/max(1, r.PullReads.GatewayGets)*1e3)
	}
	printPullCPU(w, r.CPU)
}
