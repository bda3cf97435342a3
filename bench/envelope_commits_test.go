//go:build bench

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// The commit rate one etcd cluster sustains, measured with no gateway in
// the way: clients that each put a value the size of a part record, one
// after another, straight into every shard at once for envelopeCommitTime,
// one client a shard (each put waits for its own commit: the rate a lone
// writer gets) and then envelopeCommitClients a shard (etcd batches the
// puts in flight into one raft entry and one fsync). Beside it, the WAL
// fsyncs each member made over the parallel load, from its own
// etcd_disk_wal_fsync_duration_seconds histogram on the client URL's
// /metrics: their mean duration and the commits per fsync, whose quotient
// is the commit rate the leader's fsync allows at that batching.
const (
	envelopeCommitTime    = 3 * time.Second
	envelopeCommitClients = 16
	envelopeCommitValue   = 400 // bytes, about a part record's key and value
	walFsyncMetric        = "etcd_disk_wal_fsync_duration_seconds"
)

// envelopeCommits is a topology's commit rates.
type envelopeCommits struct {
	// SerialPerSec is the puts a second of one client a shard, over all
	// shards; ParallelPerSec the same with envelopeCommitClients a shard.
	SerialPerSec   float64 `json:"serial_commits_per_s"`
	ParallelPerSec float64 `json:"parallel_commits_per_s"`
	// FsyncMeanSeconds and CommitsPerFsync are over the parallel load,
	// when the members' /metrics answer (0 otherwise).
	FsyncMeanSeconds float64 `json:"wal_fsync_mean_s,omitempty"`
	CommitsPerFsync  float64 `json:"commits_per_fsync,omitempty"`
	// TimedOut counts the puts etcd itself gave up on (its request timeout
	// or a leader change, as a saturated cluster of members sharing two
	// cores does): counted, not retried, and not in the rates.
	TimedOut int64 `json:"puts_timed_out"`
}

// benchCommits measures the topology's commit rates.
func benchCommits(b *testing.B, shards []envShard, members int) envelopeCommits {
	var res envelopeCommits
	var puts, serialTimedOut, parallelTimedOut int64
	res.SerialPerSec, _, serialTimedOut = putRate(b, shards, 1, "serial")
	f0 := walFsyncs(shards)
	res.ParallelPerSec, puts, parallelTimedOut = putRate(b, shards, envelopeCommitClients, "parallel")
	res.TimedOut = serialTimedOut + parallelTimedOut
	f1 := walFsyncs(shards)
	if f0.ok && f1.ok && f1.count > f0.count {
		res.FsyncMeanSeconds = (f1.sum - f0.sum) / (f1.count - f0.count)
		// Every member of a shard fsyncs every entry: the fsyncs of one
		// member are the total over the members of one shard.
		res.CommitsPerFsync = float64(puts) * float64(max(1, members)) / (f1.count - f0.count)
	}
	return res
}

// putRate puts envelopeCommitValue bytes under keys outside the gateway's
// prefix from clients goroutines a shard for envelopeCommitTime and
// returns the puts a second over all shards, their number, and the puts
// etcd timed out (etcdGaveUp), after which a writer goes on; any other
// error fails the benchmark.
func putRate(b *testing.B, shards []envShard, clients int, name string) (float64, int64, int64) {
	ctx, cancel := context.WithTimeout(b.Context(), envelopeCommitTime)
	defer cancel()
	value := strings.Repeat("v", envelopeCommitValue)
	var (
		n, timedOut atomic.Int64
		wg          sync.WaitGroup
		first       atomic.Value
	)
	start := time.Now()
	for _, s := range shards {
		for w := range clients {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					_, err := s.cli.Put(ctx, fmt.Sprintf("/envelope-bench/%s/%02d/%08d", name, w, i), value)
					if etcdGaveUp(err) && ctx.Err() == nil {
						timedOut.Add(1)
						continue
					}
					if err != nil {
						if ctx.Err() == nil {
							first.CompareAndSwap(nil, err)
						}
						return
					}
					n.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		b.Fatalf("etcd put: %v", err)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), n.Load(), timedOut.Load()
}

// etcdGaveUp reports whether err is etcd's own refusal to wait longer for
// a commit.
func etcdGaveUp(err error) bool {
	return errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost) || errors.Is(err, rpctypes.ErrLeaderChanged)
}

// fsyncs is the sum of the members' WAL fsync histograms.
type fsyncs struct {
	sum, count float64
	ok         bool
}

// walFsyncs reads every member's WAL fsync histogram; ok is false when a
// member's /metrics does not give it.
func walFsyncs(shards []envShard) fsyncs {
	f := fsyncs{ok: true}
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, s := range shards {
		for _, ep := range s.endpoints {
			sum, count, ok := memberFsyncs(hc, ep)
			f.sum, f.count, f.ok = f.sum+sum, f.count+count, f.ok && ok
		}
	}
	return f
}

func memberFsyncs(hc *http.Client, endpoint string) (sum, count float64, ok bool) {
	resp, err := hc.Get(strings.TrimSuffix(endpoint, "/") + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, false
	}
	var seen int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, found := strings.Cut(sc.Text(), " ")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		switch {
		case err != nil:
		case name == walFsyncMetric+"_sum":
			sum, seen = v, seen+1
		case name == walFsyncMetric+"_count":
			count, seen = v, seen+1
		}
	}
	return sum, count, seen == 2 && sc.Err() == nil
}
