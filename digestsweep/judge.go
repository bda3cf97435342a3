package digestsweep

import (
	"context"
	"fmt"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// outcome is how a judged blob is counted in the report.
type outcome int

const (
	outRetained  outcome = iota // retained, its tombstone (if any) already terminal
	outPending                  // pending, waiting for a later pass or its frontier
	outNew                      // made pending in this pass
	outReady                    // ready for this pass's collector
	outSkipped                  // its tombstone made skipped
	outDuplicate                // its digest's tombstone is about another copy
)

// judgement is the verdict about one stored blob: the state its tombstone
// moves to ("" writes nothing) and how it is counted once that holds.
type judgement struct {
	to etcdstore.TombstoneState
	// fresh starts a new pending round: a new required frontier, one more
	// attempt.
	fresh bool
	// frontier, when set, raises the required frontier.
	frontier int64
	out      outcome
}

// judge decides about blob b given whether it is retained and its
// tombstone (nil: none). A tombstone advances at most one step per pass:
// pending is made ready only by a later pass than the one that wrote it,
// and only once every plane applied its frontier; a ready tombstone is
// confirmed again by every pass, with that pass's reference revision,
// before the collector may act on it. noReady (the rebuild failed) holds
// every pending and ready tombstone where it is.
//
// shardRev is the reference revision of the digest's shard at the pass
// revision. Above the tombstone's frontier, it says a reference to the
// digest may have come and gone since the frontier was set (an overwrite
// drops references without a trash), and a plane holding that reference
// must not lose the blob: the frontier is raised to it.
//
// A digest stored in two places has one tombstone, about one copy; the
// other copy leaves it alone until it is settled.
func judge(retained bool, t *etcdstore.Tombstone, b Blob, pass, shardRev int64, ord rebuildOrder, applied func(int64) bool, noReady bool) judgement {
	return judgeSteps(retained, t, b, pass, shardRev, ord, applied, noReady, nil)
}

// rebuildOrder is what the rebuild rule compares: decided, the etcd
// revision of the tombstone's latest pending or ready decision (its mod
// revision), and rebuilt, the revision the last complete rebuild of every
// reference source started at. A tombstone advances to ready, or is
// confirmed ready again, only when rebuilt > decided: a rebuild that
// started after the decision has read every reference written around the
// gateway before it, so the verdict is not made on a stale picture of the
// references, whatever digests.rebuild_interval says.
type rebuildOrder struct{ decided, rebuilt int64 }

// The rules of judge as an explanation names them (docs/admin-api.md), in
// checklist order.
const (
	ruleRetainedLive       = "retained_live_tombstone"
	ruleRetained           = "retained"
	ruleTombstoneElsewhere = "tombstone_elsewhere"
	ruleNoLiveTombstone    = "no_live_tombstone"
	ruleWaitThisPass       = "waiting_this_pass"
	ruleConfirmedThisPass  = "confirmed_this_pass"
	ruleRebuildWait        = "rebuild_wait"
	ruleFrontierApplied    = "frontier_applied"
	ruleFrontierWait       = "frontier_wait"
)

// judgeSteps is judge, recording every rule it tries on cl (nil records
// nothing), so that the explanation of a digest runs the sweep's own
// judgement rather than a description of it.
func judgeSteps(retained bool, t *etcdstore.Tombstone, b Blob, pass, shardRev int64, ord rebuildOrder, applied func(int64) bool, noReady bool, cl *sweep.Checklist) judgement {
	elsewhere := t != nil && t.Bucket != "" && (t.Bucket != b.Bucket || t.Key != b.Key)
	live := t != nil && !t.State.Terminal()
	state := func() sweep.Values {
		if t == nil {
			return sweep.Values{"tombstone": nil}
		}
		return sweep.Values{"tombstone": t.State, "tombstone_pass": t.Pass, "tombstone_frontier": t.Frontier, "next_pass": pass}
	}

	match := retained && live && !elsewhere
	cl.Step(ruleRetainedLive, match, func() (string, sweep.Values) {
		switch {
		case match:
			return fmt.Sprintf("retained, with a %s tombstone: the next pass makes it skipped", t.State), state()
		case !retained:
			return "not retained", state()
		case t == nil:
			return "retained, without a tombstone to make skipped", state()
		case elsewhere:
			return fmt.Sprintf("retained; its tombstone is about another copy (%s/%s)", t.Bucket, t.Key), state()
		}
		return fmt.Sprintf("retained; its tombstone is already %s", t.State), state()
	})
	if match {
		return judgement{to: etcdstore.TombstoneSkipped, out: outSkipped}
	}
	cl.Step(ruleRetained, retained, func() (string, sweep.Values) {
		if retained {
			return "retained: the sweep leaves it alone", nil
		}
		return "nothing retains it", nil
	})
	if retained {
		// A copy retained for its own sake (young, being uploaded) says
		// nothing about the copy the tombstone is about.
		return judgement{out: outRetained}
	}
	match = elsewhere && live
	cl.Step(ruleTombstoneElsewhere, match, func() (string, sweep.Values) {
		v := state()
		if t != nil {
			v["tombstone_bucket"], v["tombstone_key"] = t.Bucket, t.Key
		}
		if match {
			return fmt.Sprintf("its %s tombstone is about another copy (%s/%s): this copy waits until that one is settled", t.State, t.Bucket, t.Key), v
		}
		return "no live tombstone about another copy", v
	})
	if match {
		return judgement{out: outDuplicate}
	}
	cl.Step(ruleNoLiveTombstone, !live, func() (string, sweep.Values) {
		if !live {
			return "no pending or ready tombstone: the next pass records a pending one, whose required frontier is the etcd revision it is written at", state()
		}
		return fmt.Sprintf("a %s tombstone exists", t.State), state()
	})
	if !live {
		return judgement{to: etcdstore.TombstonePending, fresh: true, out: outNew}
	}
	return judgeLive(t, pass, shardRev, ord, applied, noReady, cl, state)
}

// judgeLive is judgeSteps about a pending or ready tombstone t of the
// copy judged: it waits (this pass made it pending, or the rebuild
// failed, or no rebuild started after its latest decision), stays ready
// (this pass confirmed it), or goes ready once every plane applied its
// frontier (raised to shardRev when the shard moved after it was set).
// state gives the values every step shows.
func judgeLive(t *etcdstore.Tombstone, pass, shardRev int64, ord rebuildOrder, applied func(int64) bool, noReady bool, cl *sweep.Checklist, state func() sweep.Values) judgement {
	thisPass := t.State == etcdstore.TombstonePending && t.Pass >= pass
	match := noReady || thisPass
	cl.Step(ruleWaitThisPass, match, func() (string, sweep.Values) {
		v := state()
		v["rebuild_failed"] = noReady
		switch {
		case noReady:
			return "the rebuild failed in this pass: no tombstone advances", v
		case thisPass:
			return fmt.Sprintf("made pending in pass %d, which is still running: a later pass may make it ready", t.Pass), v
		}
		return "not made pending in the pass that judges it", v
	})
	if match {
		return judgement{out: outPending}
	}
	match = t.State == etcdstore.TombstoneReady && t.Pass >= pass
	cl.Step(ruleConfirmedThisPass, match, func() (string, sweep.Values) {
		if match {
			return fmt.Sprintf("confirmed ready in pass %d, which is still running: its collector deletes the blob", t.Pass), state()
		}
		return "not confirmed ready in the pass that judges it", state()
	})
	if match {
		return judgement{out: outReady} // confirmed in this pass already (resumed)
	}
	match = ord.rebuilt <= ord.decided
	cl.Step(ruleRebuildWait, match, func() (string, sweep.Values) {
		v := state()
		v["decided_revision"], v["rebuilt_revision"] = ord.decided, ord.rebuilt
		if match {
			return fmt.Sprintf("its %s decision was written at revision %d, and the last complete rebuild started at revision %d: "+
				"it waits, as it is, for a rebuild that starts after the decision", t.State, ord.decided, ord.rebuilt), v
		}
		return fmt.Sprintf("a rebuild of every reference source started after its %s decision (revision %d > %d)", t.State, ord.rebuilt, ord.decided), v
	})
	if match {
		return judgement{out: outPending}
	}
	need, raised := t.Frontier, int64(0)
	if shardRev > need {
		need, raised = shardRev, shardRev
	}
	ok := applied(need)
	frontier := func() sweep.Values {
		v := state()
		v["shard_ref_revision"], v["required_frontier"] = shardRev, need
		return v
	}
	cl.Step(ruleFrontierApplied, ok, func() (string, sweep.Values) {
		if ok {
			return fmt.Sprintf("every plane has applied revision %d: the next pass makes it ready and its collector deletes the blob", need), frontier()
		}
		return fmt.Sprintf("not every plane has applied revision %d", need), frontier()
	})
	if ok {
		return judgement{to: etcdstore.TombstoneReady, frontier: raised, out: outReady}
	}
	back := t.State == etcdstore.TombstoneReady || raised > 0
	cl.Step(ruleFrontierWait, true, func() (string, sweep.Values) {
		why := fmt.Sprintf("pending until every plane has applied revision %d", need)
		switch {
		case raised > 0:
			why += fmt.Sprintf(" (raised from %d: a reference of its shard moved at revision %d, after the frontier was set)", t.Frontier, shardRev)
		case t.State == etcdstore.TombstoneReady:
			why = "ready, but a plane has not applied its frontier (a plane was added or went back): " + why
		}
		return why, frontier()
	})
	if back {
		// Ready, but a plane was added or the frontier rose: it waits
		// again, with the frontier it needs recorded.
		return judgement{to: etcdstore.TombstonePending, frontier: raised, out: outPending}
	}
	return judgement{out: outPending}
}

// count adds a judged blob to r.
func (o outcome) count(r *Report, size int64) {
	switch o {
	case outPending:
		r.Pending++
	case outNew:
		r.Pending++
		r.NewPending++
	case outReady:
		r.Ready++
		r.ReadyBytes += size
	case outSkipped:
		r.Skipped++
	case outDuplicate:
		r.Duplicates++
	}
}

// judgePlan ends the tombstone phase, and is run again when a pass
// resumes in the collect phase: a sweep that keeps everything goes to the
// prune; otherwise a paused sweep, or a plan the breaker refuses with the
// settings of now (which pauses the sweep, see checkPlan), goes to the
// prune too, and deletes nothing.
func (s *digestSweep) judgePlan(ctx context.Context) error {
	rep := &s.cur.Report
	refused, pause, err := s.checkPlan(ctx)
	if err != nil {
		return err
	}
	if s.run.Restored != "" {
		// Checked here, so a pass resumed in the collect phase reads it
		// too: while the restore mark stands the collector never runs.
		s.keepAll(s.run.Restored)
	}
	_, kept := s.keepsAll()
	switch {
	case kept:
		s.cur.Phase = digestPhasePrune
		pause = nil
	case refused != "":
		rep.Refused = refused
		s.cur.Phase = digestPhasePrune
	case s.dry:
		// A plan deletes nothing; it says what the collector would.
		rep.Deleted, rep.Bytes = rep.Ready, rep.ReadyBytes
		s.cur.Phase = digestPhasePrune
	default:
		s.cur.Phase = digestPhaseCollect
	}
	if pause == nil {
		return s.save(ctx)
	}
	return s.save(ctx, s.keys().PauseOp(*pause))
}

// breaker checks this pass's deletions (the ready blobs) and marks (the
// blobs made pending) against their ceilings and returns why they are
// refused, or "".
func (s *digestSweep) breaker() string {
	rep := &s.cur.Report
	c := s.cfg
	b := Breaker{DeleteBlobs: rep.Ready, StoredBlobs: rep.Stored, MaxDelete: c.MaxDelete, MaxDeleteFraction: c.MaxDeleteFraction,
		MarkBlobs: rep.NewPending, MaxMark: c.MaxMark, MaxMarkFraction: c.MaxMarkFraction}
	rep.Breaker = b
	return sweep.OverAny(
		sweep.Ceiling{Verb: "deletes", Unit: "blobs", Setting: "max_delete", Count: b.DeleteBlobs, Stored: b.StoredBlobs, Max: b.MaxDelete, Fraction: b.MaxDeleteFraction},
		sweep.Ceiling{Verb: "marks (makes pending)", Unit: "blobs", Setting: "max_mark", Count: b.MarkBlobs, Stored: b.StoredBlobs, Max: b.MaxMark, Fraction: b.MaxMarkFraction},
	)
}
