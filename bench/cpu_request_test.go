//go:build bench

package bench

// The small-object workloads' CPU figures: the gateway's CPU seconds per
// 1,000 requests next to MinIO's own for the same requests sent direct, and
// next to a bare reverse proxy's for the same requests sent through it.

import (
	"fmt"
	"math"
)

// targetCPUShare is the most CPU the gateway may spend on a small request,
// as a share of what MinIO spends on it (docs/benchmarks.md).
const targetCPUShare = 0.30

// targetCPUOverBare is the most CPU the gateway may spend on a small
// request as a multiple of what a bare httputil.ReverseProxy spends on the
// same request in the same run (docs/benchmarks.md).
const targetCPUOverBare = 1.2

// cpuProcs names the process whose CPU time every side of a workload is
// measured against; each side names its own proxy process (side.pid).
type cpuProcs struct {
	minio int
}

// cpuTally accumulates CPU seconds and requests over a workload's rounds,
// by side: the side's own proxy process's (none direct) and MinIO's.
type cpuTally struct {
	minio               int
	proc, minioCPU, ops map[string]float64
	unknown             bool
	// perSample counts each sample as one request, whatever its amount.
	perSample bool
}

func newCPUTally(minio int) *cpuTally {
	return &cpuTally{minio: minio, proc: map[string]float64{}, minioCPU: map[string]float64{}, ops: map[string]float64{}}
}

// cpuPerRequest is the CPU time per 1,000 requests of a small workload,
// from /proc (utime+stime, 10 ms ticks, summed over every round).
type cpuPerRequest struct {
	// Gateway is the gateway process's CPU seconds per 1,000 requests
	// through it; MinIO is MinIO's per 1,000 requests sent direct;
	// MinIOViaGateway is MinIO's per 1,000 requests through the gateway.
	Gateway         float64 `json:"gateway_cpu_s"`
	MinIO           float64 `json:"minio_cpu_s"`
	MinIOViaGateway float64 `json:"minio_via_gateway_cpu_s"`
	// Ratio is Gateway / MinIO, against TargetRatio (at most).
	Ratio       float64 `json:"ratio"`
	TargetRatio float64 `json:"target_ratio"`
	Status      string  `json:"status"`
	GatewayOps  float64 `json:"gateway_requests"`
	DirectOps   float64 `json:"direct_requests"`
	// BareProxy is the bare reverse proxy's CPU seconds per 1,000
	// requests through it, in the same rounds, when the workload ran
	// through it; BareRatio is Gateway / BareProxy, against
	// TargetBareRatio (at most).
	BareProxy       float64 `json:"bare_proxy_cpu_s,omitempty"`
	MinIOViaBare    float64 `json:"minio_via_bare_proxy_cpu_s,omitempty"`
	BareRatio       float64 `json:"bare_ratio,omitempty"`
	TargetBareRatio float64 `json:"target_bare_ratio,omitempty"`
	BareStatus      string  `json:"bare_status,omitempty"`
	BareOps         float64 `json:"bare_proxy_requests,omitempty"`
}

// sample runs one round against s and adds its CPU time.
func (c *cpuTally) sample(s side, run func() (float64, error)) (float64, error) {
	if c == nil || c.unknown {
		return run()
	}
	pids := []int{c.minio}
	if s.pid != nil {
		pids = append(pids, s.pid())
	}
	before := make([]float64, len(pids))
	for i, pid := range pids {
		var err error
		if before[i], err = processCPU([]int{pid}); err != nil || pid == 0 {
			c.unknown = true
			return run()
		}
	}
	amount, err := run()
	if err != nil {
		return amount, err
	}
	after := make([]float64, len(pids))
	for i, pid := range pids {
		var perr error
		if after[i], perr = processCPU([]int{pid}); perr != nil {
			c.unknown = true
			return amount, nil
		}
	}
	c.minioCPU[s.name] += after[0] - before[0]
	if len(pids) > 1 {
		c.proc[s.name] += after[1] - before[1]
	}
	if c.perSample {
		c.ops[s.name]++
	} else {
		c.ops[s.name] += amount
	}
	return amount, nil
}

// result returns the figures, or nil when /proc could not say.
func (c *cpuTally) result() *cpuPerRequest {
	if c == nil || c.unknown || c.ops[sideDirect] == 0 || c.ops[sideGateway] == 0 {
		return nil
	}
	per := func(s, ops float64) float64 { return math.Round(s/ops*1000*1e4) / 1e4 }
	r := &cpuPerRequest{
		Gateway: per(c.proc[sideGateway], c.ops[sideGateway]), MinIO: per(c.minioCPU[sideDirect], c.ops[sideDirect]),
		MinIOViaGateway: per(c.minioCPU[sideGateway], c.ops[sideGateway]),
		TargetRatio:     targetCPUShare, GatewayOps: c.ops[sideGateway], DirectOps: c.ops[sideDirect],
	}
	r.Ratio = ratio(r.Gateway, r.MinIO)
	r.Status = statusBelow
	if r.MinIO > 0 && r.Ratio <= targetCPUShare {
		r.Status = statusPass
	}
	if ops := c.ops[sideBare]; ops > 0 {
		r.BareProxy, r.BareOps, r.MinIOViaBare = per(c.proc[sideBare], ops), ops, per(c.minioCPU[sideBare], ops)
		r.BareRatio, r.TargetBareRatio = ratio(r.Gateway, r.BareProxy), targetCPUOverBare
		r.BareStatus = statusBelow
		if r.BareProxy > 0 && r.BareRatio <= targetCPUOverBare {
			r.BareStatus = statusPass
		}
	}
	return r
}

func (r *cpuPerRequest) String() string {
	s := fmt.Sprintf("gateway %.3f s, MinIO %.3f s (%.3f s behind the gateway) per 1,000 requests, ratio %.3f (target <= %.2f) %s",
		r.Gateway, r.MinIO, r.MinIOViaGateway, r.Ratio, r.TargetRatio, r.Status)
	if r.BareProxy > 0 {
		s += fmt.Sprintf("; bare proxy %.3f s (MinIO %.3f s behind it), gateway/bare %.3f (target <= %.2f) %s",
			r.BareProxy, r.MinIOViaBare, r.BareRatio, r.TargetBareRatio, r.BareStatus)
	}
	return s
}
