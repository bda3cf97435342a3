package reclaim

import (
	"fmt"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// Verdict is what a pass decides about one upload found on the backend.
type Verdict string

// The verdicts, in the order classify's checklist reaches them.
const (
	// Hold: the upload has no session, so nobody we know owns it; a person
	// decides (Adopt or DeleteOrphans).
	Hold Verdict = "hold"
	// Keep: live, completing, recently active, or someone else's to settle.
	Keep Verdict = "keep"
	// Mark: active but idle past the grace period; recorded as expired, not
	// deleted, so that a resumed upload wins on the next pass.
	Mark Verdict = "mark"
	// Delete: marked expired longer than DeleteAfter ago and unchanged since.
	Delete Verdict = "delete"
)

// Policy holds the durations the checklist compares with.
type Policy struct {
	// Grace is how long an upload may sit idle before it is marked.
	Grace time.Duration
	// DeleteAfter is how long a mark stands before the upload is deleted:
	// the second grace, during which any activity revives it.
	DeleteAfter time.Duration
	// StuckLimit flags a session completing for longer than this.
	StuckLimit time.Duration
	// ClockSkew is how far in the future a recorded time may lie before it
	// is taken as a sign of a wrong clock, which stops the pass.
	ClockSkew time.Duration
	// Elapsed is the reclaimer's elapsed clock at the decision (the
	// pass's start): a mark must have stood DeleteAfter on it too.
	Elapsed time.Duration
}

// Decision is the verdict on one upload and why.
type Decision struct {
	Verdict Verdict
	Reason  string
	// Stuck is set on a session completing past the stuck limit; Since is
	// when it began completing.
	Stuck bool
	Since time.Time
	// LastActivity is the latest activity the decision saw.
	LastActivity time.Time
	// FutureTime is set on an upload kept because a recorded time lies
	// beyond now plus the clock skew allowance.
	FutureTime bool
}

// ErrFutureTime says a recorded time lies beyond now plus the allowed clock
// skew. Some clock is or was wrong, so idleness cannot be judged from it.
var ErrFutureTime = sweep.ErrFutureTime

// FutureTimeError names the record and time that lie in the future.
type FutureTimeError struct {
	Bucket, UploadID string
	Field            string
	At, Now          time.Time
	Skew             time.Duration
}

func (e *FutureTimeError) Error() string {
	return fmt.Sprintf("reclaim: recorded time in the future: upload %s in bucket %s: %s %s is later than now (%s) plus the clock skew allowance %s",
		e.UploadID, e.Bucket, e.Field, e.At.Format(time.RFC3339Nano), e.Now.Format(time.RFC3339Nano), e.Skew)
}

// Is makes errors.Is(err, ErrFutureTime) hold.
func (e *FutureTimeError) Is(target error) bool { return target == ErrFutureTime }

// Classify decides about one backend upload from its session and activity
// records (nil when absent), stopping at the first rule that matches:
//
//  1. no session: Hold (an orphan);
//  2. completing: Keep, flagged stuck past StuckLimit;
//  3. last activity within Grace: Keep;
//  4. active and idle past Grace: Mark;
//  5. expired longer than DeleteAfter ago and unchanged since the mark: Delete;
//  6. anything else: Keep (expired but not yet due, or aborting, aborted,
//     cleanup_pending, completed: the reconciler's to settle).
//
// Before any rule, every recorded time is checked against now plus
// ClockSkew: an upload with a later one is kept (FutureTime is set), since
// an idle time computed from it would be wrong in an unknown way. The
// upload alone is kept, not the pass stopped: a clock that ran ahead for a
// while leaves such records behind, and they must not stop every pass
// until their time comes. A clock that is wrong now is found by the pass's
// own clock check (the gateways' published clocks, the backend's Date).
func Classify(p Policy, now time.Time, sess *etcdstore.Session, act *etcdstore.Activity) Decision {
	return classify(p, now, sess, act, nil)
}

// The rules of Classify as an explanation names them (docs/admin-api.md),
// in checklist order.
const (
	ruleNoSession       = "no_session"
	ruleFutureTime      = "future_time"
	ruleCompleting      = "completing"
	ruleWithinGrace     = "within_grace"
	ruleActiveIdle      = "active_idle"
	ruleExpired         = "expired"
	ruleReconcilerState = "reconciler_state"
)

// classify is Classify, recording every rule it tries on cl (nil records
// nothing). The explanation of an upload runs this same code, so that what
// an operator is told is what the sweep decides, never a copy of its rules.
func classify(p Policy, now time.Time, sess *etcdstore.Session, act *etcdstore.Activity, cl *sweep.Checklist) Decision {
	if sess == nil {
		d := Decision{Verdict: Hold, Reason: "no session: nobody known owns this upload"}
		cl.Step(ruleNoSession, true, func() (string, sweep.Values) { return d.Reason, sweep.Values{} })
		return d
	}
	cl.Step(ruleNoSession, false, func() (string, sweep.Values) {
		return fmt.Sprintf("a session records the upload, in state %s", sess.State), sweep.Values{"state": sess.State}
	})
	err := checkTimes(p, now, sess, act)
	cl.Step(ruleFutureTime, err != nil, func() (string, sweep.Values) {
		v := sweep.Values{"now": now, "clock_skew": p.ClockSkew.String(), "latest_allowed": now.Add(p.ClockSkew)}
		if err != nil {
			return err.Error() + ": kept until that time has passed", v
		}
		return "no recorded time lies beyond now plus the clock skew allowance", v
	})
	if err != nil {
		return Decision{Verdict: Keep, Reason: err.Error() + ": kept until that time has passed", FutureTime: true}
	}
	last := lastActivity(sess, act)
	d := Decision{LastActivity: last}
	idle := now.Sub(last)

	var completing bool
	if d, completing = classifyCompleting(p, now, sess, d, cl); completing {
		return d
	}

	within := idle <= p.Grace
	if within {
		d.Verdict = Keep
		d.Reason = fmt.Sprintf("active %s ago, within the grace period %s", idle.Round(time.Second), p.Grace)
	}
	cl.Step(ruleWithinGrace, within, func() (string, sweep.Values) {
		v := sweep.Values{"now": now, "last_activity": last, "idle": sweep.RoundSecond(idle), "grace": p.Grace.String(), "idle_past_grace_at": last.Add(p.Grace)}
		if within {
			return d.Reason, v
		}
		return fmt.Sprintf("idle for %s, past the grace period %s", idle.Round(time.Second), p.Grace), v
	})
	if within {
		return d
	}

	active := sess.State == etcdstore.StateActive
	if active {
		d.Verdict = Mark
		d.Reason = fmt.Sprintf("active but idle for %s, past the grace period %s", idle.Round(time.Second), p.Grace)
	}
	cl.Step(ruleActiveIdle, active, func() (string, sweep.Values) {
		if active {
			return d.Reason, sweep.Values{"state": sess.State, "idle": sweep.RoundSecond(idle), "grace": p.Grace.String()}
		}
		return fmt.Sprintf("state %s, not active", sess.State), sweep.Values{"state": sess.State}
	})
	if active {
		return d
	}

	expired := sess.State == etcdstore.StateExpired
	if expired {
		d.Verdict, d.Reason = classifyExpired(p, now, sess, last)
	}
	cl.Step(ruleExpired, expired, func() (string, sweep.Values) {
		if !expired {
			return fmt.Sprintf("state %s, not expired", sess.State), sweep.Values{"state": sess.State}
		}
		return d.Reason, expiredValues(p, now, sess, last)
	})
	if expired {
		return d
	}

	d.Verdict = Keep
	d.Reason = fmt.Sprintf("state %s: settled by the reconciler, not the sweep", sess.State)
	cl.Step(ruleReconcilerState, true, func() (string, sweep.Values) { return d.Reason, sweep.Values{"state": sess.State} })
	return d
}

// classifyCompleting applies rule 2, recording it on cl: a completing
// session is kept, and is stuck past the stuck limit. It returns d with
// the decision when the session is completing, d unchanged when not.
func classifyCompleting(p Policy, now time.Time, sess *etcdstore.Session, d Decision, cl *sweep.Checklist) (Decision, bool) {
	completing := sess.State == etcdstore.StateCompleting
	if completing {
		d.Verdict = Keep
		d.Since = sess.StateSince()
		d.Reason = "completing: never deleted by cleanup"
		if p.StuckLimit > 0 && now.Sub(d.Since) > p.StuckLimit {
			d.Stuck = true
			d.Reason = fmt.Sprintf("completing for %s, past the stuck limit %s: needs a person", now.Sub(d.Since).Round(time.Second), p.StuckLimit)
		}
	}
	cl.Step(ruleCompleting, completing, func() (string, sweep.Values) {
		if !completing {
			return fmt.Sprintf("state %s, not completing", sess.State), sweep.Values{"state": sess.State}
		}
		return d.Reason, sweep.Values{"state": sess.State, "state_since": d.Since, "completing_for": sweep.RoundSecond(now.Sub(d.Since)),
			"stuck_limit": p.StuckLimit.String(), "stuck": d.Stuck}
	})
	return d, completing
}

// expiredValues are the values an explanation shows for rule 5 on an
// expired session last active at last.
func expiredValues(p Policy, now time.Time, sess *etcdstore.Session, last time.Time) sweep.Values {
	v := sweep.Values{"state": sess.State, "expired_at": nil, "delete_after": p.DeleteAfter.String(), "last_activity": last}
	if sess.ExpiredAt != nil {
		v["expired_at"] = *sess.ExpiredAt
		v["marked_for"] = sweep.RoundSecond(now.Sub(*sess.ExpiredAt))
		v["deletable_after"] = sess.ExpiredAt.Add(p.DeleteAfter)
		v["unchanged_since_mark"] = unchangedSinceMark(sess, last)
		v["elapsed"] = sweep.RoundSecond(p.Elapsed)
		v["expired_elapsed"] = sweep.RoundSecond(markElapsed(sess))
		v["marked_for_elapsed"] = sweep.RoundSecond(p.Elapsed - markElapsed(sess))
	}
	return v
}

// markElapsed is the elapsed clock at the session's mark; a mark recorded
// without it counts from the clock's beginning (0), so the elapsed rule
// holds it until delete_after has been measured since the clock began.
func markElapsed(sess *etcdstore.Session) time.Duration {
	if sess.ExpiredElapsed == nil {
		return 0
	}
	return *sess.ExpiredElapsed
}

// classifyExpired applies rule 5 to an expired session.
func classifyExpired(p Policy, now time.Time, sess *etcdstore.Session, last time.Time) (Verdict, string) {
	if sess.ExpiredAt == nil {
		return Keep, "expired without a recorded mark time: cannot tell how long the mark stood"
	}
	if !unchangedSinceMark(sess, last) {
		return Keep, "expired, but the session changed after its mark"
	}
	marked := now.Sub(*sess.ExpiredAt)
	if marked <= p.DeleteAfter {
		return Keep, fmt.Sprintf("marked expired %s ago; deletable after %s", marked.Round(time.Second), p.DeleteAfter)
	}
	// The wall clock alone could have jumped: the mark must have stood as
	// long on the elapsed clock, which only measured time advances.
	measured := p.Elapsed - markElapsed(sess)
	if measured <= p.DeleteAfter {
		return Keep, fmt.Sprintf("marked expired %s ago by the wall clock but only %s ago by the reclaimer's elapsed clock; deletable after %s on both",
			marked.Round(time.Second), max(measured, 0).Round(time.Second), p.DeleteAfter)
	}
	return Delete, fmt.Sprintf("marked expired %s ago (%s by the elapsed clock), longer than %s, and unchanged since",
		marked.Round(time.Second), measured.Round(time.Second), p.DeleteAfter)
}

// unchangedSinceMark reports whether nothing happened to the session after
// it was marked: no activity later than the mark, and the mark is its last
// transition. (Activity on an expired session moves it back to active, so
// this guards against a record written some other way.)
func unchangedSinceMark(sess *etcdstore.Session, last time.Time) bool {
	if last.After(*sess.ExpiredAt) {
		return false
	}
	if n := len(sess.History); n > 0 && sess.History[n-1].To != etcdstore.StateExpired {
		return false
	}
	return true
}

// lastActivity is the latest of the session's own activity, the activity
// key's, and its creation (a session that never saw a part is as old as its
// creation).
func lastActivity(sess *etcdstore.Session, act *etcdstore.Activity) time.Time {
	last := sess.LastActivity
	if sess.Created.After(last) {
		last = sess.Created
	}
	if act != nil && act.At.After(last) {
		last = act.At
	}
	return last
}

// checkTimes finds a recorded time later than now plus the skew allowance.
func checkTimes(p Policy, now time.Time, sess *etcdstore.Session, act *etcdstore.Activity) error {
	limit := now.Add(p.ClockSkew)
	check := func(field string, at time.Time) error {
		if at.After(limit) {
			return &FutureTimeError{Bucket: sess.Bucket, UploadID: sess.UploadID, Field: field, At: at, Now: now, Skew: p.ClockSkew}
		}
		return nil
	}
	if err := check("created", sess.Created); err != nil {
		return err
	}
	if err := check("last activity", sess.LastActivity); err != nil {
		return err
	}
	if sess.ExpiredAt != nil {
		if err := check("expired-at", *sess.ExpiredAt); err != nil {
			return err
		}
	}
	for _, t := range sess.History {
		if err := check("transition to "+string(t.To), t.At); err != nil {
			return err
		}
	}
	if act != nil {
		if err := check("activity ("+act.What+")", act.At); err != nil {
			return err
		}
	}
	return nil
}
