package digestsweep

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// The breaker stays tripped: a plan it refuses pauses the digest sweep in
// etcd (etcdstore.Keys.Pause(CursorName)), and while the pause exists every
// pass still judges the blobs and writes their tombstones (pending, ready,
// skipped: records that delete nothing by themselves), reports what the
// collector would do, and deletes nothing: the collector does not run, and
// the guards the pass took over are released by the prune's rules. Only a
// person removes the pause (reclaim.Reclaimer.Resume).

// checkPlan runs the breaker on the plan as counted and reads the pause. It
// returns why the collector must not run ("" when it may) and, when the
// breaker refused a plan of a sweep not yet paused and this is not a dry
// run, the pause to record with the cursor.
func (s *digestSweep) checkPlan(ctx context.Context) (string, *etcdstore.Pause, error) {
	refused := s.breaker()
	cur, err := s.store.GetPause(ctx, CursorName)
	switch {
	case err == nil:
		p := cur.Value
		why := sweep.Paused(CursorName, p.Pass, p.Term, p.At, p.Reason)
		if refused != "" {
			why += "; this plan is refused too: " + refused
		}
		s.cur.Report.Paused = true
		return why, nil, nil
	case !errors.Is(err, etcdstore.ErrNotFound):
		return "", nil, err
	case refused == "":
		return "", nil, nil
	case s.dry:
		s.log.Warn("the digest breaker would refuse this plan", "pass", s.cur.Pass, "refused", refused)
		return refused, nil, nil
	}
	s.metrics.BreakerRefused()
	s.log.Error("digest deletions refused by the breaker: nothing deleted, and the digest sweep is paused until a person resumes it",
		"pass", s.cur.Pass, "term", s.term.N, "refused", refused)
	compared, _ := json.Marshal(s.cur.Report.Breaker) // plain data always marshals
	return refused, &etcdstore.Pause{Sweep: CursorName, Reason: refused, Compared: compared,
		Pass: s.cur.Pass, Term: s.term.N, At: s.clock().UTC()}, nil
}
