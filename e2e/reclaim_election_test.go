//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// electionTTL is the reclaimer election's lease in the election test: how
// long a killed leader keeps the lead.
const electionTTL = 2 * time.Second

// TestReclaimElection runs two sweepgate processes that share one etcd
// (run by the test, so that killing either gateway leaves it up): exactly
// one leads the reclaimer, the other refuses to act and names it, and
// killing the leader (SIGKILL: no chance to resign) hands the lead to the
// other with a higher term once the lease expires. The killed gateway
// comes back as a follower.
func TestReclaimElection(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	etcd, _ := etcdtest.Start(t)

	m := harness.StartMinIO(t)
	opts := harness.Options{
		EtcdEndpoints: etcd.Endpoints(),
		Config:        map[string]any{"reclaim": map[string]any{"election_ttl": electionTTL.String(), "interval": "1h"}},
	}
	gateways := []*harness.Gateway{harness.StartGateway(t, m, opts), harness.StartGateway(t, m, opts)}
	shard, flags, adminStatus := electionShard(t, gateways[0])

	// Exactly one leads, and both say which.
	var leader, follower *harness.Gateway
	var term int64
	eventually(t, 30*time.Second, func() (bool, string) {
		leader, follower, term = nil, nil, 0
		var states []string
		leaders := 0
		for _, g := range gateways {
			st, _ := adminStatus(t, g)
			states = append(states, fmt.Sprintf("%s leading=%v leader=%+v", st.Reclaimer.ID, st.Reclaimer.Leading, st.Reclaimer.Leader))
			if st.Reclaimer.Leading {
				leaders++
				leader, term = g, st.Reclaimer.Term
			} else {
				follower = g
			}
		}
		return leaders == 1, fmt.Sprintf("want exactly one leader: %s", strings.Join(states, "; "))
	})
	leaderStatus, _ := adminStatus(t, leader)
	followerStatus, _ := adminStatus(t, follower)
	if l := followerStatus.Reclaimer.Leader; l == nil || l.ID != leaderStatus.Reclaimer.ID || l.Term != term {
		t.Fatalf("the follower sees leader %+v, want %s in term %d", l, leaderStatus.Reclaimer.ID, term)
	}
	if !strings.HasSuffix(leaderStatus.Reclaimer.ID, "@"+strings.TrimPrefix(leader.AdminEndpoint, "http://")) {
		t.Errorf("leader id %q does not name its admin address %s", leaderStatus.Reclaimer.ID, leader.AdminEndpoint)
	}

	// Only the leader acts; the follower names it.
	if rep := runPass(t, leader.AdminEndpoint, flags...); rep.Term != term {
		t.Errorf("the leader's pass ran in term %d, want %d", rep.Term, term)
	}
	code, _, errOut := sweepgateCmd(t, follower.AdminEndpoint, append([]string{"reclaim", "run"}, flags...)...)
	if code != 1 || !strings.Contains(errOut, "the leader is "+leaderStatus.Reclaimer.ID) {
		t.Errorf("reclaim run on the follower: exit %d, stderr %q", code, errOut)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, follower.AdminEndpoint+"/admin/v1/reclaim/run"+shard, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	authorizeAdmin(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("POST run on the follower = %s, want 409", resp.Status)
	}

	// Kill the leader: the follower takes over, in a higher term, within
	// about the lease's TTL.
	killed := time.Now()
	leader.Kill()
	var after reclaimStatus
	eventually(t, 10*electionTTL+10*time.Second, func() (bool, string) {
		after, _ = adminStatus(t, follower)
		return after.Reclaimer.Leading, fmt.Sprintf("the survivor does not lead: %+v", after.Reclaimer)
	})
	t.Logf("handover %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if after.Reclaimer.Term <= term {
		t.Fatalf("new term %d is not above the killed leader's %d", after.Reclaimer.Term, term)
	}
	if l := after.Reclaimer.Leader; l == nil || l.ID != followerStatus.Reclaimer.ID || l.Term != after.Reclaimer.Term {
		t.Errorf("after the handover etcd names %+v as leader", l)
	}
	if rep := runPass(t, follower.AdminEndpoint, flags...); rep.Term != after.Reclaimer.Term {
		t.Errorf("the new leader's pass ran in term %d, want %d", rep.Term, after.Reclaimer.Term)
	}

	// The killed gateway comes back as a follower: still exactly one leads.
	leader.Restart()
	back, _ := adminStatus(t, leader)
	if back.Reclaimer.Leading || back.Reclaimer.Leader == nil || back.Reclaimer.Leader.Term != after.Reclaimer.Term {
		t.Errorf("the restarted gateway: %+v", back.Reclaimer)
	}
	if st, _ := adminStatus(t, follower); !st.Reclaimer.Leading || st.Reclaimer.Term != after.Reclaimer.Term {
		t.Errorf("the new leader after the restart: %+v", st.Reclaimer)
	}
}

// electionShard picks the election TestReclaimElection watches: in shard
// mode that of the shard the test's bucket would be on (each shard has its
// own), else the one election. It returns the query and the flags that
// address it, and adminStatus reading it.
func electionShard(t *testing.T, g *harness.Gateway) (query string, flags []string, status func(*testing.T, *harness.Gateway) (reclaimStatus, bool)) {
	t.Helper()
	bucket := harness.BucketName(t)
	shard := g.ShardOf(bucket)
	if shard != "" {
		t.Logf("the election of shard %s", shard)
		query = "?shard=" + shard
	}
	return query, shardFlags(g, bucket), func(t *testing.T, g *harness.Gateway) (reclaimStatus, bool) { return adminShardStatus(t, g, shard) }
}
