package reclaim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	ptr := func(t time.Time) *time.Time { return &t }
	policy := reclaim.Policy{Grace: 24 * time.Hour, DeleteAfter: 12 * time.Hour, StuckLimit: time.Hour, ClockSkew: 5 * time.Minute, Elapsed: 100 * time.Hour}
	elapsedAgo := func(d time.Duration) *time.Duration { e := policy.Elapsed - d; return &e }

	// session builds a session whose history ends in state st at time at.
	session := func(st etcdstore.SessionState, created, last time.Time, at time.Time) *etcdstore.Session {
		s := &etcdstore.Session{Bucket: "b", Key: "k", UploadID: "u", Created: created, LastActivity: last}
		s.Transition(etcdstore.StateActive, created, "gateway", "created")
		if st != etcdstore.StateActive {
			s.Transition(st, at, "test", "")
		}
		return s
	}
	expired := func(markedAgo, lastAgo time.Duration) *etcdstore.Session {
		s := session(etcdstore.StateExpired, ago(40*time.Hour), ago(lastAgo), ago(markedAgo))
		s.ExpiredAt = ptr(ago(markedAgo))
		s.ExpiredElapsed = elapsedAgo(markedAgo)
		return s
	}

	tests := []struct {
		name  string
		sess  *etcdstore.Session
		act   *etcdstore.Activity
		want  reclaim.Verdict
		stuck bool
		// future: kept because a recorded time lies in the future.
		future bool
	}{
		{name: "no session is held", want: reclaim.Hold},
		{name: "active, recent activity on the session", sess: session(etcdstore.StateActive, ago(2*time.Hour), ago(10*time.Minute), time.Time{}), want: reclaim.Keep},
		{name: "active, recent activity only on the activity key",
			sess: session(etcdstore.StateActive, ago(40*time.Hour), ago(30*time.Hour), time.Time{}),
			act:  &etcdstore.Activity{At: ago(time.Hour), What: "UploadPart"}, want: reclaim.Keep},
		{name: "active, exactly at the grace period", sess: session(etcdstore.StateActive, ago(30*time.Hour), ago(24*time.Hour), time.Time{}), want: reclaim.Keep},
		{name: "active, idle past grace is marked", sess: session(etcdstore.StateActive, ago(31*time.Hour), ago(30*time.Hour), time.Time{}), want: reclaim.Mark},
		{name: "active, never any activity, created long ago", sess: session(etcdstore.StateActive, ago(30*time.Hour), time.Time{}, time.Time{}), want: reclaim.Mark},
		{name: "active, old activity key does not revive",
			sess: session(etcdstore.StateActive, ago(40*time.Hour), ago(30*time.Hour), time.Time{}),
			act:  &etcdstore.Activity{At: ago(25 * time.Hour)}, want: reclaim.Mark},
		{name: "completing, idle, not stuck yet", sess: session(etcdstore.StateCompleting, ago(40*time.Hour), ago(30*time.Hour), ago(30*time.Minute)), want: reclaim.Keep},
		{name: "completing past the stuck limit is kept and flagged", sess: session(etcdstore.StateCompleting, ago(40*time.Hour), ago(30*time.Hour), ago(30*time.Hour)), want: reclaim.Keep, stuck: true},
		{name: "completing, flagged again later, keeps its original since", sess: func() *etcdstore.Session {
			s := session(etcdstore.StateCompleting, ago(40*time.Hour), ago(30*time.Hour), ago(30*time.Hour))
			s.Transition(etcdstore.StateCompleting, ago(time.Minute), "reconciler", "flagged stuck")
			return s
		}(), want: reclaim.Keep, stuck: true},
		{name: "expired, mark older than delete-after, unchanged", sess: expired(13*time.Hour, 37*time.Hour), want: reclaim.Delete},
		{name: "expired, mark too recent", sess: expired(11*time.Hour, 37*time.Hour), want: reclaim.Keep},
		{name: "expired, mark old on the wall clock but recent on the elapsed clock (a clock jump)", sess: func() *etcdstore.Session {
			s := expired(39*time.Hour, 39*time.Hour+30*time.Minute)
			s.ExpiredElapsed = elapsedAgo(time.Hour)
			return s
		}(), want: reclaim.Keep},
		{name: "expired, mark exactly delete-after ago on the elapsed clock", sess: func() *etcdstore.Session {
			s := expired(13*time.Hour, 37*time.Hour)
			s.ExpiredElapsed = elapsedAgo(12 * time.Hour)
			return s
		}(), want: reclaim.Keep},
		{name: "expired, mark without an elapsed value counts from the clock's beginning", sess: func() *etcdstore.Session {
			s := expired(13*time.Hour, 37*time.Hour)
			s.ExpiredElapsed = nil
			return s
		}(), want: reclaim.Delete},
		{name: "expired, mark elapsed later than the clock (a restored etcd)", sess: func() *etcdstore.Session {
			s := expired(13*time.Hour, 37*time.Hour)
			s.ExpiredElapsed = elapsedAgo(-time.Hour)
			return s
		}(), want: reclaim.Keep},
		{name: "expired, activity key after the mark",
			sess: expired(13*time.Hour, 37*time.Hour),
			act:  &etcdstore.Activity{At: ago(12*time.Hour + 30*time.Minute)}, want: reclaim.Keep},
		{name: "expired, recent activity within grace", sess: expired(13*time.Hour, 37*time.Hour),
			act: &etcdstore.Activity{At: ago(time.Hour)}, want: reclaim.Keep},
		{name: "expired without a mark time", sess: func() *etcdstore.Session {
			s := expired(13*time.Hour, 37*time.Hour)
			s.ExpiredAt = nil
			return s
		}(), want: reclaim.Keep},
		{name: "expired, but a later transition", sess: func() *etcdstore.Session {
			s := expired(13*time.Hour, 37*time.Hour)
			s.History = append(s.History, etcdstore.Transition{At: ago(12 * time.Hour), From: etcdstore.StateExpired, To: etcdstore.StateExpired})
			s.History[len(s.History)-1].To = etcdstore.StateActive
			return s
		}(), want: reclaim.Keep},
		{name: "aborting is the reconciler's", sess: session(etcdstore.StateAborting, ago(40*time.Hour), ago(30*time.Hour), ago(30*time.Hour)), want: reclaim.Keep},
		{name: "aborted is the reconciler's", sess: session(etcdstore.StateAborted, ago(40*time.Hour), ago(30*time.Hour), ago(30*time.Hour)), want: reclaim.Keep},
		{name: "cleanup_pending is the reconciler's", sess: session(etcdstore.StateCleanupPending, ago(40*time.Hour), ago(30*time.Hour), ago(30*time.Hour)), want: reclaim.Keep},
		{name: "completed with an upload left is kept", sess: session(etcdstore.StateCompleted, ago(40*time.Hour), ago(30*time.Hour), ago(30*time.Hour)), want: reclaim.Keep},
		{name: "activity within the skew allowance", sess: session(etcdstore.StateActive, ago(40*time.Hour), now.Add(4*time.Minute), time.Time{}), want: reclaim.Keep},
		{name: "future activity key",
			sess: session(etcdstore.StateActive, ago(40*time.Hour), ago(30*time.Hour), time.Time{}),
			act:  &etcdstore.Activity{At: now.Add(time.Hour), What: "UploadPart"}, want: reclaim.Keep, future: true},
		{name: "future last activity", sess: session(etcdstore.StateActive, ago(40*time.Hour), now.Add(6*time.Minute), time.Time{}), want: reclaim.Keep, future: true},
		{name: "future creation", sess: session(etcdstore.StateActive, now.Add(time.Hour), time.Time{}, time.Time{}), want: reclaim.Keep, future: true},
		{name: "future mark", sess: func() *etcdstore.Session {
			s := expired(13*time.Hour, 37*time.Hour)
			s.ExpiredAt = ptr(now.Add(time.Hour))
			return s
		}(), want: reclaim.Keep, future: true},
		{name: "future transition of a completing session", sess: session(etcdstore.StateCompleting, ago(40*time.Hour), ago(30*time.Hour), now.Add(time.Hour)), want: reclaim.Keep, future: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := reclaim.Classify(policy, now, tt.sess, tt.act)
			if d.FutureTime != tt.future || (tt.future && !strings.Contains(d.Reason, "in the future: upload u in bucket b")) {
				t.Errorf("Classify = future %v (%q), want future %v naming the record", d.FutureTime, d.Reason, tt.future)
			}
			if d.Verdict != tt.want || d.Stuck != tt.stuck {
				t.Errorf("Classify = %s (stuck %v, %q), want %s (stuck %v)", d.Verdict, d.Stuck, d.Reason, tt.want, tt.stuck)
			}
			if d.Reason == "" {
				t.Error("decision without a reason")
			}
		})
	}
}

// TestClassifyAgeAloneNeverDeletes walks an active session through ever
// longer idle times: without a recorded mark no age gives Delete.
func TestClassifyAgeAloneNeverDeletes(t *testing.T) {
	t.Parallel()
	policy := reclaim.Policy{Grace: time.Hour, DeleteAfter: time.Hour, ClockSkew: time.Minute}
	created := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &etcdstore.Session{Bucket: "b", UploadID: "u", Created: created, LastActivity: created}
	s.Transition(etcdstore.StateActive, created, "gateway", "created")
	for _, idle := range []time.Duration{0, time.Hour, 48 * time.Hour, 5 * 365 * 24 * time.Hour} {
		d := reclaim.Classify(policy, created.Add(idle), s, nil)
		if d.Verdict == reclaim.Delete {
			t.Fatalf("idle %s: an active session was classified Delete", idle)
		}
	}
}
