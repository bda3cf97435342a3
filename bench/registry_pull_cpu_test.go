//go:build bench

package bench

// The registry pull benchmark's CPU budget: the CPU each process spends
// per pull, one path at a time.

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// pullCPUPulls pulls measure each path's CPU: the clock tick of
// /proc/PID/stat (10 ms) is then 0.25 ms per pull.
const pullCPUPulls = 40

// pullPath is one way a registry reaches MinIO: its registry's URL and
// configuration file, and the process in between (0 for none).
type pullPath struct {
	name     string
	registry string
	config   string
	hopPID   int
}

// pullCPU is one path's CPU per pull, in milliseconds, by process.
type pullCPU struct {
	Path string `json:"path"`
	// Client is this benchmark's process (the pulling client); Registry
	// the path's registry; MinIO MinIO; Hop the process between the
	// registry and MinIO (sweepgate, the bare reverse proxy or the TCP
	// relay), 0 on the direct path.
	Client   float64 `json:"client_ms"`
	Registry float64 `json:"registry_ms"`
	MinIO    float64 `json:"minio_ms"`
	Hop      float64 `json:"hop_ms"`
	Total    float64 `json:"total_ms"`
	// Wall is the pull time over the block, and Busy the share of the
	// machine's CPUs the processes kept busy over it (Total over
	// Wall times the CPUs).
	Wall float64 `json:"wall_ms"`
	Busy float64 `json:"busy"`
}

// measurePullCPU pulls pullCPUPulls times from each path in turn, each
// path's pulls in one block, and returns each path's CPU per pull.
func measurePullCPU(ctx context.Context, minioPID int, paths []pullPath) ([]pullCPU, error) {
	out := make([]pullCPU, 0, len(paths))
	for _, p := range paths {
		regPID := pidOf(p.config)
		if regPID == 0 || minioPID == 0 {
			return nil, fmt.Errorf("cpu per pull: no process for the registry of %s or MinIO", p.name)
		}
		procs := [][]int{{os.Getpid()}, {regPID}, {minioPID}, nil}
		if p.hopPID != 0 {
			procs[3] = []int{p.hopPID}
		}
		before := make([]float64, len(procs))
		for i, pids := range procs {
			v, err := processCPU(pids)
			if err != nil {
				return nil, err
			}
			before[i] = v
		}
		start := time.Now()
		for range pullCPUPulls {
			if _, _, err := pullImage(ctx, p.registry); err != nil {
				return nil, err
			}
		}
		wall := time.Since(start).Seconds()
		ms := make([]float64, len(procs))
		for i, pids := range procs {
			v, err := processCPU(pids)
			if err != nil {
				return nil, err
			}
			ms[i] = (v - before[i]) * 1e3 / pullCPUPulls
		}
		c := pullCPU{Path: p.name, Client: ms[0], Registry: ms[1], MinIO: ms[2], Hop: ms[3],
			Wall: wall * 1e3 / pullCPUPulls}
		c.Total = c.Client + c.Registry + c.MinIO + c.Hop
		c.Busy = c.Total / (c.Wall * float64(runtime.NumCPU()))
		out = append(out, c)
	}
	return out, nil
}

// printPullCPU prints the CPU per pull of each path.
func printPullCPU(w io.Writer, cs []pullCPU) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "CPU per pull, ms (%d pulls from each path in turn)   client  registry  MinIO    hop   total   wall   CPUs busy\n", pullCPUPulls)
	for _, c := range cs {
		fmt.Fprintf(w, "  %-50s %6.2f %8.2f %6.2f %6.2f %7.2f %6.1f %6.0f%%\n",
			c.Path, c.Client, c.Registry, c.MinIO, c.Hop, c.Total, c.Wall, c.Busy*100)
	}
}
