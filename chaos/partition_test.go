//go:build chaos

package chaos

// The partition of one gateway from etcd: gateway cutGateway reaches each
// etcd member through a harness.TCPProxy of its own, and the fault cuts
// all of them for a few seconds while the other gateway and the members
// keep talking to each other. Also the records of the times etcd or a
// gateway was away, which the checker's rules read.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// faultPartitionEtcd cuts gateway cutGateway off from every etcd member.
const faultPartitionEtcd = "partition-etcd"

// partitionSeen is how much longer than a process fault's down time a
// partition lasts: the gateway probes etcd every second with a probe
// bounded by etcd.request_timeout (the default in the campaign), so by
// then its probe has failed and it has refused what needs etcd for a
// while, the degraded mode the fault is there to exercise.
const partitionSeen = etcdstore.DefaultRequestTimeout + 3*time.Second

// cutGateway is the gateway that reaches etcd through TCP proxies, and
// that faultPartitionEtcd cuts off.
const cutGateway = 1

// etcdWindow is a time etcd was killed, frozen or cut off: kind is the
// fault, gw the gateway cut off from it (-1: the fault reached both).
type etcdWindow struct {
	kind     string
	gw       int
	from, to time.Time
}

// reaches reports whether the fault reached gateway gw.
func (w etcdWindow) reaches(gw int) bool { return w.gw < 0 || w.gw == gw }

// gwWindow is a time a gateway was down or restarting: from just before
// it was stopped or killed until its next process was ready.
type gwWindow struct {
	gw       int
	from, to time.Time
	why      string
}

// etcdFault records an etcd fault of kind that reached gateway gw (-1:
// both) from from until now.
func (f *faults) etcdFault(kind string, gw int, from time.Time) {
	f.mu.Lock()
	f.etcdFaults = append(f.etcdFaults, etcdWindow{kind: kind, gw: gw, from: from, to: time.Now()})
	f.mu.Unlock()
}

// restarted records that gateway gw was down or restarting from from
// until now, for the fault why.
func (f *faults) restarted(gw int, from time.Time, why string) {
	f.mu.Lock()
	f.restarts = append(f.restarts, gwWindow{gw: gw, from: from, to: time.Now(), why: why})
	f.mu.Unlock()
}

func (f *faults) etcdFaultsOf() []etcdWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]etcdWindow(nil), f.etcdFaults...)
}

func (f *faults) restartsOf() []gwWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]gwWindow(nil), f.restarts...)
}

// startEtcdProxies starts one TCP proxy per etcd member for gateway
// cutGateway and returns the endpoints that gateway is given instead of
// the members' own.
//
// The partition holds because the gateway's etcd client only ever dials
// the endpoints it is configured with: etcdstore.Dial leaves
// clientv3.Config.AutoSyncInterval at zero, so the client never replaces
// its endpoints with the member list's advertised client URLs (which
// would route around the proxies), and nothing in the gateway calls Sync
// or SetEndpoints. The fault logs the outcome too: what both gateways'
// /etcdz said during the cut (the cut one goes unavailable once a probe
// times out, the other does not).
func startEtcdProxies(t *testing.T, sys *system) []string {
	var eps []string
	for i := range sys.cluster.Len() {
		p := harness.StartTCPProxy(t, sys.cluster.Endpoint(i))
		sys.etcdProxies = append(sys.etcdProxies, p)
		eps = append(eps, p.URL)
	}
	return eps
}

// partitionEtcd cuts gateway cutGateway off from every etcd member for d
// (its TCP proxies hold its connections: nothing passes, nothing is
// reset), then restores the path; the proxies close the held connections
// so that its etcd client reconnects. The reclaimer leader may be the cut
// gateway: its lease lapses and the other gateway must take over in a
// higher term, while fencing keeps the cut one from acting. With lead,
// the cut gateway is made the leader first (the other one restarted,
// as clockOffset does), so that the cut meets a leader.
func (f *faults) partitionEtcd(ctx context.Context, d time.Duration, lead bool) {
	if lead {
		f.leadOn(ctx, cutGateway)
	}
	i, term := f.sys.leader(ctx)
	leads := "no gateway says it leads the reclaimer"
	if i >= 0 {
		leads = fmt.Sprintf("%s leads the reclaimer in term %d", f.sys.names[i], term)
	}
	other := f.sys.names[(cutGateway+1)%len(f.sys.gateways)]
	from := time.Now()
	for _, p := range f.sys.etcdProxies {
		p.Cut()
	}
	f.log.printf("FAULT", "partition %s from every etcd member for %s: its %d etcd proxies cut, connections held; %s and the members still talk (%s)",
		f.sys.names[cutGateway], d, len(f.sys.etcdProxies), other, leads)
	f.count(faultPartitionEtcd)
	seen := f.watchEtcdz(ctx, from.Add(d))
	for _, p := range f.sys.etcdProxies {
		p.Restore()
	}
	f.etcdFault(faultPartitionEtcd, cutGateway, from)
	f.log.printf("FAULT", "partition of %s ends after %s: its etcd proxies forward again, held connections closed; /etcdz during the cut: %s",
		f.sys.names[cutGateway], time.Since(from).Round(time.Millisecond), seen)
}

// leadOn restarts the gateways other than gw that lead the reclaimer, and
// waits a few seconds for gw to take the lead.
func (f *faults) leadOn(ctx context.Context, gw int) {
	i, term := f.sys.leader(ctx)
	if i < 0 || i == gw {
		return
	}
	f.log.printf("FAULT", "restart %s (reclaimer leader in term %d) so that %s takes the lead before its partition", f.sys.names[i], term, f.sys.names[gw])
	from := time.Now()
	f.sys.gateways[i].Restart()
	f.restarted(i, from, faultPartitionEtcd)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		if l, _ := f.sys.leader(ctx); l == gw {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watchEtcdz asks both gateways' /etcdz every 250ms until until, and says
// what each answered and when that changed.
func (f *faults) watchEtcdz(ctx context.Context, until time.Time) string {
	last := make([]string, len(f.sys.gateways))
	var seen []string
	for {
		for i, g := range f.sys.gateways {
			st := "no answer"
			rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			req, err := http.NewRequestWithContext(rctx, http.MethodGet, g.AdminEndpoint+"/etcdz", nil)
			if err == nil {
				if resp, err := f.sys.status.Do(req); err == nil {
					st = fmt.Sprint(resp.StatusCode)
					resp.Body.Close()
				}
			}
			cancel()
			if st != last[i] {
				last[i] = st
				seen = append(seen, fmt.Sprintf("%s %s at %s", f.sys.names[i], st, f.log.since(time.Now())))
			}
		}
		left := time.Until(until)
		if left <= 0 || ctx.Err() != nil {
			return strings.Join(seen, ", ")
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(left, 250*time.Millisecond)):
		}
	}
}
