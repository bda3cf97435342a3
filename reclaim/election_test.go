//go:build integration

package reclaim_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// startEtcd starts an embedded etcd for a test and returns a client.
func startEtcd(t *testing.T) (*etcdstore.Embedded, *clientv3.Client) {
	t.Helper()
	return etcdtest.Start(t)
}

const electionPrefix = "/sweepgate-test/reclaim/election/"

func newElector(t *testing.T, cli *clientv3.Client, id string, ttl time.Duration) *reclaim.Elector {
	t.Helper()
	el, err := reclaim.NewElector(reclaim.ElectorConfig{Client: cli, Prefix: electionPrefix, ID: id, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return el
}

// campaign runs Campaign in the background and returns its result channel.
func campaign(ctx context.Context, el *reclaim.Elector) <-chan *reclaim.Leadership {
	ch := make(chan *reclaim.Leadership, 1)
	go func() {
		l, err := el.Campaign(ctx)
		if err != nil {
			l = nil
		}
		ch <- l
	}()
	return ch
}

func fenced(t *testing.T, cli *clientv3.Client, fence clientv3.Cmp) bool {
	t.Helper()
	resp, err := cli.Txn(t.Context()).If(fence).Then(clientv3.OpPut("/sweepgate-test/fenced", "x")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	return resp.Succeeded
}

func TestExactlyOneLeaderAndHandOver(t *testing.T) {
	t.Parallel()
	_, cli := startEtcd(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, b := newElector(t, cli, "a", 10*time.Second), newElector(t, cli, "b", 10*time.Second)
	ca, cb := campaign(ctx, a), campaign(ctx, b)

	var first *reclaim.Leadership
	var firstEl, second *reclaim.Elector
	var secondCh <-chan *reclaim.Leadership
	select {
	case first = <-ca:
		firstEl, second, secondCh = a, b, cb
	case first = <-cb:
		firstEl, second, secondCh = b, a, ca
	case <-time.After(30 * time.Second):
		t.Fatal("nobody won the election")
	}
	if first == nil {
		t.Fatal("campaign failed")
	}
	select {
	case <-secondCh:
		t.Fatal("two candidates lead at once")
	case <-time.After(200 * time.Millisecond):
	}
	if term, ok := firstEl.Leader(); !ok || term != first.Term {
		t.Errorf("leader's Leader() = %d, %v; want %d, true", term, ok, first.Term)
	}
	if _, ok := second.Leader(); ok {
		t.Error("the waiting candidate says it leads")
	}
	info, ok, err := reclaim.CurrentLeader(t.Context(), cli, electionPrefix)
	if err != nil || !ok || info.Term != first.Term {
		t.Errorf("CurrentLeader = %+v, %v, %v", info, ok, err)
	}
	if !fenced(t, cli, first.Fence()) || !fenced(t, cli, firstEl.Fence()) {
		t.Fatal("the leader's fence does not hold")
	}

	firstEl.Resign(first)
	var next *reclaim.Leadership
	select {
	case next = <-secondCh:
	case <-time.After(30 * time.Second):
		t.Fatal("no hand-over after the leader resigned")
	}
	if next == nil || next.Term <= first.Term {
		t.Fatalf("new term %v is not above %d", next, first.Term)
	}
	if _, ok := firstEl.Leader(); ok {
		t.Error("the resigned candidate still says it leads")
	}
	if fenced(t, cli, first.Fence()) || fenced(t, cli, firstEl.Fence()) {
		t.Error("the former leader's fence still holds")
	}
	if !fenced(t, cli, next.Fence()) {
		t.Error("the new leader's fence does not hold")
	}
	select {
	case <-first.Done():
	default:
		t.Error("the resigned term's context is not done")
	}
}

// TestLostSessionEndsTheTerm revokes the leader's lease: its context ends
// (the running pass would be cancelled), its fence fails at once, and it
// can campaign again with a new session and a higher term.
func TestLostSessionEndsTheTerm(t *testing.T) {
	t.Parallel()
	_, cli := startEtcd(t)
	el := newElector(t, cli, "a", 2*time.Second)
	l, err := el.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(t.Context(), l.Lease()); err != nil {
		t.Fatal(err)
	}
	// The fence fails before the process has even noticed.
	if fenced(t, cli, l.Fence()) {
		t.Error("fence held after the lease was revoked")
	}
	select {
	case <-l.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("term did not end after its session's lease was revoked")
	}
	reclaimtest.WaitFor(t, "the elector to notice", func() bool { _, ok := el.Leader(); return !ok })
	l2, err := el.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer el.Resign(l2)
	if l2.Lease() == l.Lease() || l2.Term <= l.Term {
		t.Errorf("re-campaign reused the session or term: lease %x term %d after %x %d", l2.Lease(), l2.Term, l.Lease(), l.Term)
	}
}

func TestFenceWithoutATermNeverHolds(t *testing.T) {
	t.Parallel()
	_, cli := startEtcd(t)
	el := newElector(t, cli, "a", 0)
	if fenced(t, cli, el.Fence()) {
		t.Error("a candidate that never led passed its fence")
	}
	if _, ok, err := reclaim.CurrentLeader(t.Context(), cli, electionPrefix); ok || err != nil {
		t.Errorf("CurrentLeader with no candidate = %v, %v", ok, err)
	}
}
