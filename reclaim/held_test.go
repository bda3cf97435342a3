//go:build integration

package reclaim_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// hold is a Config.Fault hook that holds a pass the first time it reaches
// point, until the test releases it (or ends).
type hold struct {
	t       *testing.T
	point   string
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHold(t *testing.T, point string) *hold {
	return &hold{t: t, point: point, reached: make(chan struct{}), release: make(chan struct{})}
}

func (h *hold) fault(point string) {
	if point != h.point || !h.armed.CompareAndSwap(true, false) {
		return
	}
	close(h.reached)
	select {
	case <-h.release:
	case <-h.t.Context().Done():
	}
}

// wait returns once the pass is held.
func (h *hold) wait() {
	h.t.Helper()
	select {
	case <-h.reached:
	case <-time.After(60 * time.Second):
		h.t.Fatalf("the pass never reached %s", h.point)
	}
}

func (h *hold) free() { h.once.Do(func() { close(h.release) }) }

// passResult is the outcome of a pass run in the background.
type passResult struct {
	rep reclaim.Report
	err error
}

// background triggers a pass of r and returns where its outcome arrives.
func (e *env) background(r *reclaim.Reclaimer) <-chan passResult {
	out := make(chan passResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(e.T.Context(), 120*time.Second)
		defer cancel()
		rep, err := r.Trigger(ctx)
		out <- passResult{rep, err}
	}()
	return out
}

// handOver ends the leader's term as an expired lease would (unless it
// already ended) and waits until next leads with a higher term.
func (e *env) handOver(next *reclaim.Reclaimer, old int64) int64 {
	e.T.Helper()
	resp, err := e.Cli.Get(e.T.Context(), e.Store.Keys().Election(), clientv3.WithFirstCreate()...)
	if err != nil {
		e.T.Fatal(err)
	}
	if len(resp.Kvs) > 0 && resp.Kvs[0].CreateRevision == old {
		if _, err := e.Cli.Revoke(e.T.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
			e.T.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(e.T.Context(), 30*time.Second)
	defer cancel()
	term, err := next.Elector().AwaitLeader(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	if term <= old {
		e.T.Fatalf("new term %d is not above the old %d", term, old)
	}
	return term
}

// lastTerm is the term recorded on a session's last transition.
func lastTerm(s etcdstore.Session) int64 { return s.History[len(s.History)-1].Term }

// TestFormerLeaderHeldAfterIntent holds leader A after it recorded S3's
// "aborting" and before its backend abort, hands the election to B, and
// lets B run its pass (which resumes A's: S5, which got a part meanwhile,
// is kept) before A goes on. A's abort of S3 is sent late: it is harmless
// (S3 was to go, and an abort of a gone upload is idempotent), but every
// write A makes after its term ended is refused, and A touches nothing
// else. B either settles S3 before A's late abort (its reconciler finds it
// aborting for longer than ReconcileAfter) or leaves it for a later pass.
func TestFormerLeaderHeldAfterIntent(t *testing.T) {
	t.Parallel()
	for _, settledFirst := range []bool{true, false} {
		name := "left aborting by the next leader"
		if settledFirst {
			name = "settled by the next leader first"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			inv := e.scenarioInventory()
			now := e.Clock.Now()
			const k5 = "s5/object"
			s5 := e.Upload(inv.bucket, k5, 4)
			e.session(inv.bucket, k5, s5, etcdstore.StateActive, now.Add(-31*time.Hour), now.Add(-30*time.Hour))

			h := newHold(t, reclaim.FaultDeleteAfterIntent)
			cfgA := e.Config()
			cfgA.ID, cfgA.Fault = "a", h.fault
			a := e.Start(cfgA)
			termA, _ := a.Leader()
			cfgB := e.Config()
			cfgB.ID = "b"
			b := e.Run(cfgB)
			if one := e.MustPass(a); one.Acted.Marked != count(2, 9) {
				t.Fatalf("pass one marked %+v, want S3 and S5", one.Acted.Marked)
			}
			e.Clock.Advance(13 * time.Hour)

			h.armed.Store(true)
			resA := e.background(a)
			h.wait()
			if s := e.getSession(inv.bucket, inv.s3); s.State != etcdstore.StateAborting || lastTerm(s) != termA {
				t.Fatalf("S3 while A is held = %s under term %d, want aborting under %d", s.State, lastTerm(s), termA)
			}
			if n := e.Backend.Aborts.Load(); n != 0 {
				t.Fatalf("%d aborts sent before the hold", n)
			}
			e.uploadPart(inv.bucket, k5, s5, 5)

			termB := e.handOver(b, termA)
			if settledFirst {
				e.Clock.Advance(2 * time.Minute) // past ReconcileAfter
			}
			two := e.MustPass(b)
			if two.Pass != 2 || two.Resumed != 1 || two.Acted.Changed != count(1, 4) || two.Acted.Deleted != (reclaim.Count{}) {
				t.Errorf("B's pass = %d resumed %d acted %+v; want pass 2 resumed, S5 left alone as changed", two.Pass, two.Resumed, two.Acted)
			}
			wantS3 := etcdstore.StateAborting
			if settledFirst {
				wantS3 = etcdstore.StateAborted
			}
			if s := e.getSession(inv.bucket, inv.s3); s.State != wantS3 {
				t.Errorf("S3 after B's pass = %s, want %s", s.State, wantS3)
			}

			h.free()
			res := <-resA
			if !errors.Is(res.err, reclaim.ErrFenced) {
				t.Errorf("A's pass after its release: %v, want ErrFenced", res.err)
			}
			wantHeldLeaderEnd(t, e, b, inv, s5, settledFirst, termA, termB)
		})
	}
}

// wantHeldLeaderEnd checks the world after the held leader A went on: S3
// gone, recorded only under a term that held; S5 (revived) and the rest
// untouched; a second abort only when B had aborted first.
func wantHeldLeaderEnd(t *testing.T, e *env, b *reclaim.Reclaimer, inv inventory, s5 string, settledFirst bool, termA, termB int64) {
	t.Helper()
	if got := e.parts(inv); got != [4]int{12, 7, -1, 3} {
		t.Errorf("parts on MinIO = %v, want S3 gone and S1, S2, S4 intact", got)
	}
	if n := e.partsOnMinIO(inv.bucket, "s5/object", s5); n != 5 {
		t.Errorf("S5 has %d parts on MinIO, want 5 (it got a part while A was held)", n)
	}
	if st := e.getSession(inv.bucket, s5).State; st != etcdstore.StateActive {
		t.Errorf("S5 = %s, want active", st)
	}
	s3 := e.getSession(inv.bucket, inv.s3)
	if settledFirst {
		// B aborted it; A's late abort found it gone (idempotent) and its
		// record of that was refused.
		if s3.State != etcdstore.StateAborted || lastTerm(s3) != termB || e.Backend.Aborts.Load() != 2 {
			t.Errorf("S3 = %s under term %d, %d aborts; want aborted under B's term %d, and A's late abort sent",
				s3.State, lastTerm(s3), e.Backend.Aborts.Load(), termB)
		}
		return
	}
	// A's abort was the one that removed S3, but its record was refused:
	// S3 stays as A's last valid write left it, for a pass of B to settle.
	if s3.State != etcdstore.StateAborting || lastTerm(s3) != termA || e.Backend.Aborts.Load() != 1 {
		t.Fatalf("S3 after A's release = %s under term %d, %d aborts; want still aborting under A's term %d, one abort",
			s3.State, lastTerm(s3), e.Backend.Aborts.Load(), termA)
	}
	e.Clock.Advance(2 * time.Minute) // past ReconcileAfter
	if rep := e.MustPass(b); rep.Reconcile == nil || rep.Reconcile.Aborted != 1 {
		t.Errorf("B's next pass reconciled %+v, want S3 settled as aborted", rep.Reconcile)
	}
	s3 = e.getSession(inv.bucket, inv.s3)
	if s3.State != etcdstore.StateAborted || lastTerm(s3) != termB || e.Backend.Aborts.Load() != 1 {
		t.Errorf("S3 = %s under term %d, %d aborts; want aborted under B's term %d without another abort",
			s3.State, lastTerm(s3), e.Backend.Aborts.Load(), termB)
	}
}

// TestHeldLeaderKeepsRevivedUpload holds the leader after it planned to
// delete S3 and before it acts; meanwhile S3 gets a part through the
// session service. When the leader goes on, in the same term or after the
// election moved on (and the next leader ran the pass), S3 is kept: the
// delete's intent compares the session as the plan saw it.
func TestHeldLeaderKeepsRevivedUpload(t *testing.T) {
	t.Parallel()
	for _, handOver := range []bool{false, true} {
		name := "same term"
		if handOver {
			name = "after a hand-over"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			inv := e.scenarioInventory()
			h := newHold(t, reclaim.FaultPlanned)
			cfgA := e.Config()
			cfgA.ID, cfgA.Fault = "a", h.fault
			a := e.Start(cfgA)
			termA, _ := a.Leader()
			cfgB := e.Config()
			cfgB.ID = "b"
			b := e.Run(cfgB)
			e.marked(a)

			h.armed.Store(true)
			resA := e.background(a)
			h.wait()
			e.uploadPart(inv.bucket, inv.k3, inv.s3, 6)
			if handOver {
				e.handOver(b, termA)
				two := e.MustPass(b)
				if two.Pass != 2 || two.Resumed != 1 || two.Acted.Changed != count(1, 5) || two.Acted.Intents != (reclaim.Count{}) {
					t.Errorf("B's pass = %d resumed %d acted %+v; want pass 2 resumed, S3 left alone as changed", two.Pass, two.Resumed, two.Acted)
				}
			}
			h.free()
			res := <-resA
			switch {
			case handOver && res.err == nil:
				t.Errorf("A's pass after its term ended succeeded: %+v", res.rep.Acted)
			case !handOver && res.err != nil:
				t.Errorf("A's pass: %v", res.err)
			case !handOver && (res.rep.Acted.Changed != count(1, 5) || res.rep.Acted.Intents != (reclaim.Count{})):
				t.Errorf("A's pass acted %+v, want S3 left alone as changed", res.rep.Acted)
			}
			if got := e.parts(inv); got != [4]int{12, 7, 6, 3} || e.Backend.Aborts.Load() != 0 {
				t.Errorf("parts on MinIO = %v, %d aborts; want S3 kept with its new part", got, e.Backend.Aborts.Load())
			}
			if st := e.getSession(inv.bucket, inv.s3).State; st != etcdstore.StateActive {
				t.Errorf("S3 = %s, want active", st)
			}
		})
	}
}

// TestActivityBetweenPlanAndMark holds the pass after it planned to mark
// S3 and before it acts; meanwhile a part of S3 goes through the session
// service, which records activity apart from the session. The mark's
// transaction compares the activity key as the plan saw it, so S3 stays
// active and its parts stay on MinIO.
func TestActivityBetweenPlanAndMark(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	h := newHold(t, reclaim.FaultPlanned)
	cfg := e.Config()
	cfg.Fault = h.fault
	r := e.Start(cfg)

	h.armed.Store(true)
	res := e.background(r)
	h.wait()
	before := e.getSession(inv.bucket, inv.s3)
	e.uploadPart(inv.bucket, inv.k3, inv.s3, 6)
	h.free()
	one := <-res
	if one.err != nil {
		t.Fatalf("pass: %v", one.err)
	}
	if one.rep.Uploads.Mark != count(1, 5) || one.rep.Acted.Marked != (reclaim.Count{}) || one.rep.Acted.Changed != count(1, 5) {
		t.Errorf("pass planned %+v, acted %+v; want S3's mark planned, then left alone as changed", one.rep.Uploads.Mark, one.rep.Acted)
	}
	s3 := e.getSession(inv.bucket, inv.s3)
	if s3.State != etcdstore.StateActive || s3.ExpiredAt != nil || len(s3.History) != len(before.History) {
		t.Errorf("S3 = %s (expired at %v, %d transitions, %d before the part); want active, unmarked", s3.State, s3.ExpiredAt, len(s3.History), len(before.History))
	}
	if got := e.parts(inv); got != [4]int{12, 7, 6, 3} {
		t.Errorf("parts on MinIO = %v, want S3 with its new part", got)
	}
}
