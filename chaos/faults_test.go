//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// system is what a campaign runs: the processes and the proxies between
// them.
type system struct {
	minio    *harness.MinIO
	cluster  *harness.EtcdCluster
	gateways []*harness.Gateway
	names    []string
	// front[i] is the proxy clients reach gateway i through; back is the
	// proxy between both gateways and MinIO.
	front []*harness.FaultProxy
	back  *harness.FaultProxy
	// etcdProxies are gateway cutGateway's ways to the etcd members, one
	// per member (partition_test.go); the other gateway reaches them
	// directly.
	etcdProxies []*harness.TCPProxy
	// backArrivals records when each request reached back.
	backArrivals *arrivalLog
	// arrivals[i] records when each request reached front[i], in the
	// order the proxy logs them.
	arrivals []*arrivalLog
	status   *http.Client
	// startRev is the etcd revision before the gateways' first write.
	startRev int64
	// steer is 1 + the gateway the clients' calls start on, 0 for none
	// (workload.steer).
	steer atomic.Int32
}

// arrivalLog records the time each request reached a proxy. It is the
// first rule of the proxy and never matches, so it sees every request, in
// the order of the proxy's own request log (both are kept under the
// proxy's lock); the proxy's log adds what the gateway answered.
type arrivalLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *arrivalLog) rule() harness.Rule {
	return harness.Rule{Match: func(harness.ProxiedRequest) bool {
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		a.mu.Unlock()
		return false
	}}
}

func (a *arrivalLog) snapshot() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.times...)
}

// reclaimerStatus is what the campaign reads of a gateway's
// GET /admin/v1/reclaim/status.
type reclaimerStatus struct {
	Reclaimer struct {
		ID      string `json:"id"`
		Leading bool   `json:"leading"`
		Term    int64  `json:"term"`
	} `json:"reclaimer"`
}

// statusOf asks gateway i whether it leads; an error when it does not
// answer (dead, paused).
func (s *system) statusOf(ctx context.Context, i int) (reclaimerStatus, error) {
	var st reclaimerStatus
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.gateways[i].AdminEndpoint+"/admin/v1/reclaim/status", nil)
	if err != nil {
		return st, err
	}
	req.Header.Set("Authorization", "Bearer "+s.gateways[i].AdminToken())
	resp, err := s.status.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, errors.New(resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader returns the gateway that says it leads the reclaimer, or -1.
func (s *system) leader(ctx context.Context) (int, int64) {
	for i := range s.gateways {
		if st, err := s.statusOf(ctx, i); err == nil && st.Reclaimer.Leading {
			return i, st.Reclaimer.Term
		}
	}
	return -1, 0
}

// pause is a SIGSTOP of a gateway, until its SIGCONT.
type pause struct {
	gw       int
	from, to time.Time
}

// faults injects the campaign's faults from their own random streams and
// records them.
type faults struct {
	sys *system
	log *campaignLog
	cfg campaignConfig

	mu         sync.Mutex
	injections []*harness.Injection
	pauses     []pause
	stopped    map[int]bool // gateways under SIGSTOP now
	offsets    []offsetWindow
	layouts    []layoutWindow
	// etcdFaults are the times etcd was killed, frozen or cut off;
	// restarts the times a gateway was down or restarting.
	etcdFaults []etcdWindow
	restarts   []gwWindow
	counts     map[string]int
}

func newFaults(sys *system, log *campaignLog, cfg campaignConfig) *faults {
	return &faults{sys: sys, log: log, cfg: cfg, stopped: map[int]bool{}, counts: map[string]int{}}
}

func (f *faults) count(what string) {
	f.mu.Lock()
	f.counts[what]++
	f.mu.Unlock()
}

// The process faults (and faultClockOffset, faultLayout,
// faultPartitionEtcd), taken in turns in an order drawn from the seed, so
// that even a short campaign has each of them.
const (
	faultKillGateway = "kill-gateway"
	faultKillEtcd    = "kill-etcd"
	faultFreezeEtcd  = "freeze-etcd"
	faultStopLeader  = "stop-leader"
)

// runProcesses injects process faults until end: it runs in the test's
// goroutine, since restarting a process may fail the test.
func (f *faults) runProcesses(t *testing.T, ctx context.Context, end time.Time) {
	rng := f.cfg.rng(1)
	kinds := []string{faultKillGateway, faultKillEtcd, faultFreezeEtcd, faultPartitionEtcd, faultStopLeader, faultClockOffset, faultLayout}
	next := time.Now().Add(time.Duration(4000+rng.IntN(4000)) * time.Millisecond)
	for turn := 0; ; turn++ {
		if turn%len(kinds) == 0 {
			rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		}
		kind := kinds[turn%len(kinds)]
		// Each fault's own numbers are drawn now, whatever happens, so
		// the schedule does not depend on the system's answers.
		down := time.Duration(1000+rng.IntN(3000)) * time.Millisecond
		pick := rng.IntN(100)
		offset := drawOffset(rng)
		lead := rng.IntN(3) == 0
		variant := []string{layoutWithoutSource, layoutWithoutSource, layoutExtraNamespace}[rng.IntN(3)]
		length := down
		switch kind {
		case faultLayout:
			// Long enough for a few passes while the layouts differ.
			length = down + 5*time.Second
		case faultPartitionEtcd:
			// Long enough for the cut gateway's probe of etcd to time out
			// and its refusals to be served for a while.
			length = down + partitionSeen
		case faultClockOffset:
			// Long enough for passes to start while it lives.
			length = down + 3*time.Second
			if o := (offsetWindow{offset: offset}); o.large() {
				length += 3 * time.Second
			}
		}
		// Leave the last seconds of the workload without a new fault.
		if next.Add(length).After(end.Add(-3 * time.Second)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		switch kind {
		case faultKillGateway:
			f.killGateway(t, ctx, pick, down)
		case faultKillEtcd:
			f.killEtcd(t, pick, down+time.Second)
		case faultFreezeEtcd:
			f.freezeEtcd(down + time.Second)
		case faultPartitionEtcd:
			f.partitionEtcd(ctx, length, lead)
		case faultStopLeader:
			f.stopLeader(ctx, down+electionTTL+time.Second)
		case faultClockOffset:
			f.clockOffset(t, ctx, pick, offset, length, lead)
		case faultLayout:
			f.layoutMismatch(t, ctx, pick, variant, length)
		}
		next = time.Now().Add(time.Duration(4000+rng.IntN(6000)) * time.Millisecond)
	}
}

// killGateway kills the reclaimer leader (mostly) or a gateway at random
// with SIGKILL, and restarts it after down.
func (f *faults) killGateway(t *testing.T, ctx context.Context, pick int, down time.Duration) {
	victim := pick % len(f.sys.gateways)
	why := "at random"
	if pick < 60 {
		if i, term := f.sys.leader(ctx); i >= 0 {
			victim, why = i, fmt.Sprintf("the reclaimer leader, term %d", term)
		}
	}
	g := f.sys.gateways[victim]
	f.log.printf("FAULT", "SIGKILL %s (pid %d, %s); restart in %s", f.sys.names[victim], g.PID(), why, down)
	from := time.Now()
	g.Kill()
	f.count(faultKillGateway)
	time.Sleep(down)
	start := time.Now()
	g.Restart()
	f.restarted(victim, from, faultKillGateway)
	f.log.printf("FAULT", "%s restarted (pid %d) in %s", f.sys.names[victim], g.PID(), time.Since(start).Round(time.Millisecond))
}

// killEtcd kills the raft leader (mostly) or a member at random, and
// restarts it after down.
func (f *faults) killEtcd(t *testing.T, pick int, down time.Duration) {
	victim := pick % f.sys.cluster.Len()
	why := "at random"
	if pick < 60 {
		victim, why = f.sys.cluster.Leader(t), "the raft leader"
	}
	f.log.printf("FAULT", "SIGKILL etcd member %s (%s); restart in %s", f.sys.cluster.Name(victim), why, down)
	from := time.Now()
	f.sys.cluster.Kill(victim)
	f.count(faultKillEtcd)
	time.Sleep(down)
	start := time.Now()
	f.sys.cluster.Restart(victim)
	f.etcdFault(faultKillEtcd, -1, from)
	f.log.printf("FAULT", "etcd member %s restarted in %s", f.sys.cluster.Name(victim), time.Since(start).Round(time.Millisecond))
}

// freezeEtcd stops every etcd member with SIGSTOP for d, as a hung
// cluster or a partition from all gateways looks (connections stay open,
// nothing answers), and resumes them.
func (f *faults) freezeEtcd(d time.Duration) {
	n := f.sys.cluster.Len()
	f.log.printf("FAULT", "SIGSTOP every etcd member for %s", d)
	from := time.Now()
	for i := range n {
		f.sys.cluster.Freeze(i)
	}
	f.count(faultFreezeEtcd)
	time.Sleep(d)
	for i := range n {
		f.sys.cluster.Thaw(i)
	}
	f.etcdFault(faultFreezeEtcd, -1, from)
	f.log.printf("FAULT", "SIGCONT every etcd member")
}

// stopLeader pauses the reclaimer leader with SIGSTOP for d, past its
// election TTL, and resumes it with SIGCONT.
func (f *faults) stopLeader(ctx context.Context, d time.Duration) {
	i, term := f.sys.leader(ctx)
	if i < 0 {
		f.log.printf("FAULT", "stop-leader skipped: no gateway says it leads")
		return
	}
	pid := f.sys.gateways[i].PID()
	f.mu.Lock()
	f.stopped[i] = true
	f.mu.Unlock()
	from := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		f.log.printf("FAULT", "SIGSTOP %s (pid %d): %v", f.sys.names[i], pid, err)
		return
	}
	f.log.printf("FAULT", "SIGSTOP %s (pid %d, reclaimer leader in term %d) for %s (election TTL %s)", f.sys.names[i], pid, term, d, electionTTL)
	f.count(faultStopLeader)
	time.Sleep(d)
	f.cont(i)
	f.mu.Lock()
	f.pauses = append(f.pauses, pause{gw: i, from: from, to: time.Now()})
	f.mu.Unlock()
}

// cont resumes gateway i if it is stopped.
func (f *faults) cont(i int) {
	f.mu.Lock()
	stopped := f.stopped[i]
	delete(f.stopped, i)
	f.mu.Unlock()
	if !stopped {
		return
	}
	pid := f.sys.gateways[i].PID()
	err := syscall.Kill(pid, syscall.SIGCONT)
	f.log.printf("FAULT", "SIGCONT %s (pid %d): %v", f.sys.names[i], pid, err)
}

// runProxies injects faults into the proxies until ctx ends: lost
// responses, requests never forwarded, requests and responses held back,
// and short outages of one gateway's proxy. A fault not used up within a
// few seconds is removed.
func (f *faults) runProxies(ctx context.Context, end time.Time) {
	rng := f.cfg.rng(2)
	for {
		wait := time.Duration(300+rng.IntN(2200)) * time.Millisecond
		target := rng.IntN(5) // 0, 1: a gateway's front proxy; 2-4: the backend proxy
		kind := rng.IntN(5)
		method := []string{"", http.MethodPut, http.MethodPost, http.MethodGet, http.MethodDelete}[rng.IntN(5)]
		times := 1 + rng.IntN(3)
		hold := time.Duration(200+rng.IntN(2300)) * time.Millisecond
		if target >= 2 {
			// Below the trash window, so that a manifest's delete held
			// at the backend does not outlast the trash that keeps its
			// blobs.
			hold = time.Duration(200+rng.IntN(1300)) * time.Millisecond
		}
		outage := time.Duration(500+rng.IntN(1500)) * time.Millisecond
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if time.Now().After(end) {
			return
		}
		p, name := f.sys.back, "backend"
		if target < 2 {
			p, name = f.sys.front[target], "front-"+f.sys.names[target]
		}
		rule := harness.Rule{Times: times}
		if method != "" {
			rule.Match = func(r harness.ProxiedRequest) bool { return r.Method == method }
		}
		what := ""
		switch kind {
		case 0:
			rule.Fault, what = harness.DropResponse, "drop the response"
		case 1:
			rule.Fault, what = harness.CloseBeforeForward, "close before forwarding"
		case 2, 3:
			until := make(chan struct{})
			time.AfterFunc(hold, func() { close(until) })
			rule.Until = until
			if kind == 2 {
				rule.Fault, what = harness.HoldRequest, fmt.Sprintf("hold the request %s", hold)
			} else {
				rule.Fault, what = harness.HoldResponse, fmt.Sprintf("hold the response %s", hold)
			}
		case 4:
			if target >= 2 {
				rule.Fault, what = harness.DropResponse, "drop the response"
				break
			}
			// An outage of one gateway's front: every request is closed
			// unanswered for a moment.
			rule.Fault, rule.Times, rule.Match, what = harness.CloseBeforeForward, 0, nil, fmt.Sprintf("outage %s", outage)
		}
		m := method
		if m == "" || rule.Match == nil {
			m = "any"
		}
		in := p.Inject(rule)
		f.mu.Lock()
		f.injections = append(f.injections, in)
		f.mu.Unlock()
		f.count("proxy " + name + " " + rule.Fault.String())
		f.log.printf("FAULT", "%s: %s for %s requests (%d times)", name, what, m, rule.Times)
		life := 5 * time.Second
		if kind == 4 && target < 2 {
			life = outage
		}
		time.AfterFunc(life, in.Remove)
	}
}

// heal ends every fault: injections removed, paused gateways resumed,
// killed processes started again.
func (f *faults) heal(t *testing.T) {
	f.mu.Lock()
	ins := f.injections
	f.injections = nil
	f.mu.Unlock()
	for _, in := range ins {
		in.Remove()
	}
	for _, p := range f.sys.etcdProxies {
		p.Restore()
	}
	for i := range f.sys.gateways {
		f.cont(i)
	}
	for i := range f.sys.cluster.Len() {
		if !f.sys.cluster.Running(i) {
			f.log.printf("heal", "restarting etcd member %s", f.sys.cluster.Name(i))
			f.sys.cluster.Restart(i)
		}
	}
	for i, g := range f.sys.gateways {
		if !g.Running() {
			f.log.printf("heal", "restarting %s", f.sys.names[i])
			g.Restart()
		}
	}
}

// pausesOf returns the pauses so far.
func (f *faults) pausesOf() []pause {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]pause(nil), f.pauses...)
}
