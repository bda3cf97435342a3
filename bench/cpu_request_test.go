//go:build bench

package bench

// The small-object workloads' CPU figure: the gateway's CPU seconds per
// 1,000 requests next to MinIO's own for the same requests sent direct.

import (
	"fmt"
	"math"
)

// targetCPUShare is the most CPU the gateway may spend on a small request,
// as a share of what MinIO spends on it (docs/benchmarks.md).
const targetCPUShare = 0.30

// cpuProcs names the processes whose CPU time a workload measures.
type cpuProcs struct {
	gateway func() int // the gateway's (or the proxy's) pid now (0 when unknown)
	minio   int
}

// cpuTally accumulates CPU seconds and requests over a workload's rounds.
type cpuTally struct {
	procs *cpuProcs
	// direct: MinIO's CPU over the direct rounds; gateway and minioVia: the
	// gateway's and MinIO's over the gateway rounds.
	direct, gateway, minioVia float64
	directOps, gatewayOps     float64
	unknown                   bool
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
}

// sample runs one round against the named side and adds its CPU time.
func (c *cpuTally) sample(side string, run func() (float64, error)) (float64, error) {
	if c == nil || c.unknown {
		return run()
	}
	pids := []int{c.procs.minio}
	gw := c.procs.gateway()
	if side != "direct" {
		pids = append(pids, gw)
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
	if side != "direct" {
		c.minioVia += after[0] - before[0]
		c.gateway += after[1] - before[1]
		c.gatewayOps += amount
	} else {
		c.direct += after[0] - before[0]
		c.directOps += amount
	}
	return amount, nil
}

// result returns the figures, or nil when /proc could not say.
func (c *cpuTally) result() *cpuPerRequest {
	if c == nil || c.unknown || c.directOps == 0 || c.gatewayOps == 0 {
		return nil
	}
	per := func(s, ops float64) float64 { return math.Round(s/ops*1000*1e4) / 1e4 }
	r := &cpuPerRequest{
		Gateway: per(c.gateway, c.gatewayOps), MinIO: per(c.direct, c.directOps),
		MinIOViaGateway: per(c.minioVia, c.gatewayOps),
		TargetRatio:     targetCPUShare, GatewayOps: c.gatewayOps, DirectOps: c.directOps,
	}
	r.Ratio = ratio(r.Gateway, r.MinIO)
	r.Status = statusBelow
	if r.MinIO > 0 && r.Ratio <= targetCPUShare {
		r.Status = statusPass
	}
	return r
}

func (r *cpuPerRequest) String() string {
	return fmt.Sprintf("gateway %.3f s, MinIO %.3f s (%.3f s behind the gateway) per 1,000 requests, ratio %.3f (target <= %.2f) %s",
		r.Gateway, r.MinIO, r.MinIOViaGateway, r.Ratio, r.TargetRatio, r.Status)
}
