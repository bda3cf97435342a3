//go:build e2e

package e2e

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// shSplitLeaders makes the shards' passes run on different gateways at
// once: the gateway leading shard logs loses its link to logs' etcd alone
// (its proxy is cut), so the other gateway wins logs' election in a newer
// term while the first keeps the default shard; with the link back, an
// upload abandoned on each of the two shards at the same time is aborted
// by that shard's own leader, in that shard's own term. It returns the
// terms and leaders as they are then.
func shSplitLeaders(t *testing.T, gateways []*harness.Gateway, clients []*s3.Client, shards []*shard,
	terms map[string]int64, leaders map[string]int) (map[string]int64, map[string]int) {
	t.Helper()
	main, logs := shards[0], shards[1]
	if leaders["main"] != leaders["logs"] {
		t.Fatalf("the shards' leaders are already apart (%v); the test cannot tell what the cut did", leaders)
	}
	from := leaders["logs"]
	to := 1 - from
	logs.proxies[from].Cut()
	eventually(t, shPhase, func() (bool, string) {
		for i, g := range gateways {
			s, _ := readMetrics(t, g)
			v, _ := s.series("sweepgate_reclaim_leading", "shard", "logs")
			if want := i == to; (v == 1) != want {
				return false, fmt.Sprintf("gateway %d leads shard logs: %v", i, v)
			}
		}
		return true, ""
	})
	logs.proxies[from].Restore()
	newTerms, newLeaders := shLeaders(t, gateways, shards)
	if newLeaders["logs"] != to || newLeaders["main"] != from || newTerms["logs"] <= terms["logs"] || newTerms["main"] != terms["main"] {
		t.Fatalf("after the cut: leaders %v in terms %v; want logs led by gateway %d in a term after %d, main still by gateway %d in term %d",
			newLeaders, newTerms, to, terms["logs"], from, terms["main"])
	}
	ids := map[*shard]string{
		main: shAbandon(t, clients[from], main.bucket, "abandoned-split.bin"),
		logs: shAbandon(t, clients[to], logs.bucket, "abandoned-split.bin"),
	}
	for sh, id := range ids {
		if term := shAwaitAborted(t, sh, id); term != newTerms[sh.name] {
			t.Errorf("shard %s's upload abandoned with the leaders apart was aborted in term %d; its leader's term is %d", sh.name, term, newTerms[sh.name])
		}
	}
	return newTerms, newLeaders
}
