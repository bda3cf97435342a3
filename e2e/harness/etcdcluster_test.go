//go:build integration

package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdClusterSurvivesAKilledMember checks what the multi-node tests
// rely on: a three-member cluster keeps accepting writes after its raft
// leader is killed with SIGKILL (the hardest member to lose: the others
// must elect a new one), and the member, restarted from its data
// directory, catches up on every write it missed.
func TestEtcdClusterSurvivesAKilledMember(t *testing.T) {
	t.Parallel()
	c := StartEtcdCluster(t, 3)
	cli := c.Client(t)
	put := func(key string) int64 {
		t.Helper()
		// A follower forwards a write to the leader it knows until it
		// notices the leader is gone, and a write lost that way only
		// ends with its deadline: a client retries it, and so does
		// this test.
		var err error
		for try := 0; try < 20; try++ {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			var resp *clientv3.PutResponse
			resp, err = cli.Put(ctx, key, "v-"+key)
			cancel()
			if err == nil {
				return resp.Header.Revision
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("put %s: %v", key, err)
		return 0
	}
	for i := range 10 {
		put(fmt.Sprintf("/test/before/%02d", i))
	}

	victim := c.Leader(t)
	c.Kill(victim)
	if c.Running(victim) {
		t.Fatalf("member %d still runs after Kill", victim)
	}
	killed := time.Now()
	var last int64
	for i := range 20 {
		last = put(fmt.Sprintf("/test/after/%02d", i))
	}
	t.Logf("20 writes with member %s (the leader) killed took %s", c.Name(victim), time.Since(killed).Round(time.Millisecond))
	if now := c.Leader(t); now == victim {
		t.Fatalf("member %d leads although it was killed", victim)
	}

	c.Restart(victim)
	if !c.Running(victim) {
		t.Fatalf("member %d does not run after Restart", victim)
	}
	// A serializable read answers from the member's own copy: once it
	// shows the last write, the member has caught up.
	mine := c.MemberClient(t, victim)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		resp, err := mine.Get(ctx, "/test/", clientv3.WithPrefix(), clientv3.WithSerializable())
		cancel()
		if err == nil && resp.Header.Revision >= last && len(resp.Kvs) == 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted member %s has not caught up to revision %d: %v", c.Name(victim), last, describe(resp, err))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And it takes part again: a write and a linearizable read through it.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := mine.Put(ctx, "/test/through-restarted", "x"); err != nil {
		t.Fatalf("write through the restarted member: %v", err)
	}
	if resp, err := mine.Get(ctx, "/test/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 31 {
		t.Fatalf("linearizable read through the restarted member: %v", describe(resp, err))
	}
}

func describe(resp *clientv3.GetResponse, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d keys (count %d) at revision %d", len(resp.Kvs), resp.Count, resp.Header.Revision)
}
