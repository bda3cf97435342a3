//go:build integration

package reclaim_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// partitionedBackend is a reclaimer's backend connection, alive throughout,
// that counts the aborts sent through it once its process lost etcd.
type partitionedBackend struct {
	multipart.Backend
	lost           atomic.Bool
	abortsAfterCut atomic.Int64
}

func (b *partitionedBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete && req.URL.Query().Has("uploadId") && b.lost.Load() {
		b.abortsAfterCut.Add(1)
	}
	return b.Backend.RoundTrip(req)
}

// TestPassStopsWhenEtcdIsLost cuts the leader's path to etcd in the middle
// of a pass's deletes, as a network partition would (its connections stay
// open and carry nothing), while its process and its backend connection
// live on. The pass stops within the election's TTL and a few seconds,
// with an error, sending no delete after the cut; the other reclaimer,
// which still reaches etcd, leads under a higher term and its pass resumes
// the stopped one, deleting each remaining abandoned upload once; when the
// partition heals the former leader follows and deletes nothing.
func TestPassStopsWhenEtcdIsLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	idle, busy := e.idleAndBusy("lost-a", "lost-b", "lost-c")
	// A reaches etcd only through a proxy the test cuts.
	proxy := harness.StartTCPProxy(t, e.Etcd.Endpoints()[0])
	storeA, cliA := e.storeThrough(proxy)
	beA := &partitionedBackend{Backend: e.Backend}
	svcA, err := multipart.New(multipart.Config{Store: storeA, Backend: beA, Now: e.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var acted atomic.Int32
	var armed atomic.Bool
	cfgA := e.Config()
	cfgA.ID, cfgA.Store, cfgA.Sessions, cfgA.Backend, cfgA.ElectionTTL = "a", storeA, svcA, beA, 2*time.Second
	cfgA.Fault = func(point string) {
		if point == reclaim.FaultActed && armed.Load() && acted.Add(1) == 1 {
			proxy.Cut()
			beA.lost.Store(true)
		}
	}
	a := e.Start(cfgA)
	termA, _ := a.Leader()
	if one := e.MustPass(a); one.Acted.Marked != count(3, 6) {
		t.Fatalf("A's first pass marked %+v, want the three idle uploads", one.Acted.Marked)
	}
	e.Clock.Advance(13 * time.Hour) // past DeleteAfter
	cfgB := e.Config()
	cfgB.ID, cfgB.ElectionTTL = "b", 2*time.Second
	b := e.Run(cfgB)

	armed.Store(true)
	start := time.Now()
	if _, err := e.Trigger(a); err == nil {
		t.Fatal("the pass of the reclaimer that lost etcd succeeded")
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the pass that lost etcd stopped after %v, want within the TTL and a few seconds", took)
	}
	if n := beA.abortsAfterCut.Load(); n != 0 {
		t.Errorf("the reclaimer that lost etcd sent %d aborts after the cut", n)
	}
	if got := e.Backend.Aborts.Load(); got != 1 {
		t.Fatalf("%d aborts reached MinIO before the new leader, want the one done before the cut", got)
	}

	actx, acancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer acancel()
	termB, err := b.Elector().AwaitLeader(actx)
	if err != nil {
		t.Fatal(err)
	}
	if termB <= termA {
		t.Errorf("B's term %d is not above A's %d", termB, termA)
	}
	rep := e.MustPass(b)
	// The resumed pass's tally is the whole pass's: A's delete and B's two.
	if rep.Resumed != 1 || rep.Acted.Deleted != count(3, 6) {
		t.Errorf("B's pass %d resumed %d times and deleted %+v; want A's pass resumed once, its tally the three idle uploads",
			rep.Pass, rep.Resumed, rep.Acted.Deleted)
	}

	proxy.Restore()
	reclaimtest.WaitFor(t, "A to reach etcd again", func() bool {
		hctx, hcancel := context.WithTimeout(t.Context(), time.Second)
		defer hcancel()
		return etcdstore.Health(hctx, cliA) == nil
	})
	if _, err := e.Trigger(b); err != nil {
		t.Errorf("B's pass after the partition healed: %v", err)
	}
	if _, leading := a.Leader(); leading {
		t.Error("A leads again after the partition healed, while B's term lasts")
	}
	if n := beA.abortsAfterCut.Load(); n != 0 {
		t.Errorf("the former leader sent %d aborts after the cut", n)
	}
	e.requireIdleGoneBusyKept(idle, busy)
}

// idleAndBusy makes, in each bucket, an upload idle for 30 hours (2 parts)
// and one active a minute ago (3 parts), with their sessions; it returns
// them as bucket, key, upload id.
func (e *env) idleAndBusy(buckets ...string) (idle, busy [][3]string) {
	e.T.Helper()
	now := e.Clock.Now()
	for _, b := range buckets {
		e.Bucket(b)
		id := e.Upload(b, "idle", 2)
		e.session(b, "idle", id, etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-30*time.Hour))
		idle = append(idle, [3]string{b, "idle", id})
		id = e.Upload(b, "busy", 3)
		e.session(b, "busy", id, etcdstore.StateActive, now.Add(-time.Hour), now.Add(-time.Minute))
		busy = append(busy, [3]string{b, "busy", id})
	}
	return idle, busy
}

// storeThrough returns a store over a new etcd client that reaches etcd
// through proxy, and the client.
func (e *env) storeThrough(proxy *harness.TCPProxy) (*etcdstore.Store, *clientv3.Client) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.T.Context(), 10*time.Second)
	defer cancel()
	cli, err := etcdstore.Connect(ctx, []string{proxy.URL}, 5*time.Second)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { cli.Close() })
	return etcdstore.NewStore(cli, e.Store.Keys()), cli
}

// requireIdleGoneBusyKept checks that each idle upload was aborted once
// and is gone from MinIO, and each busy one is active with its parts.
func (e *env) requireIdleGoneBusyKept(idle, busy [][3]string) {
	t := e.T
	t.Helper()
	if got := e.Backend.Aborts.Load(); got != int64(len(idle)) {
		t.Errorf("%d aborts reached MinIO, want one per idle upload (%d)", got, len(idle))
	}
	for _, u := range idle {
		if st := e.getSession(u[0], u[2]).State; st != etcdstore.StateAborted {
			t.Errorf("%s/%s = %s, want aborted", u[0], u[1], st)
		}
		if n := e.partsOnMinIO(u[0], u[1], u[2]); n != -1 {
			t.Errorf("%s/%s has %d parts on MinIO, want the upload gone", u[0], u[1], n)
		}
	}
	for _, u := range busy {
		if st := e.getSession(u[0], u[2]).State; st != etcdstore.StateActive {
			t.Errorf("%s/%s = %s, want active", u[0], u[1], st)
		}
		if n := e.partsOnMinIO(u[0], u[1], u[2]); n != 3 {
			t.Errorf("%s/%s has %d parts on MinIO, want its 3", u[0], u[1], n)
		}
	}
}
