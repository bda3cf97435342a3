package reclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// actor is recorded on the session transitions the reclaimer makes.
const actor = "reclaimer"

// act carries out the plan's marks and deletes in plan order, from where
// the cursor points. Each action is one fenced transaction that compares
// the revisions its decision was made from and advances the cursor with it.
func (p *pass) act(ctx context.Context) error {
	for p.cur.Act.Chunk < p.cur.Chunks {
		ci := p.cur.Act.Chunk
		c, err := loadChunk(ctx, p.r.store, p.cur.Pass, ci)
		if err != nil {
			return err
		}
		for i := p.cur.Act.Index; i < len(c.Acts); i++ {
			e := c.Acts[i]
			next := p.cur
			next.Act = actPos{Chunk: ci, Index: i + 1}
			if i+1 == len(c.Acts) {
				next.Act = actPos{Chunk: ci + 1}
			}
			switch e.Verdict {
			case Mark:
				err = p.mark(ctx, e, next)
			case Delete:
				err = p.delete(ctx, e, next)
			default:
				err = fmt.Errorf("reclaim: plan entry with verdict %q", e.Verdict)
			}
			if err != nil {
				return err
			}
			p.r.progress(p)
			p.r.fault(FaultActed)
		}
		if p.cur.Act.Chunk == ci {
			// Nothing (left) to do in this chunk; the move past it is
			// recorded with the next action (or the cursor's removal).
			p.cur.Act = actPos{Chunk: ci + 1}
		}
	}
	return nil
}

// decidedFrom is what an action compares: the session and the activity key
// unchanged since the pass's revision (an activity key that did not exist
// must still not exist), no part record written since it (a part's end is
// activity), and no part of the upload in flight.
func (p *pass) decidedFrom(e planned) []clientv3.Cmp {
	keys := p.r.keys()
	act := keys.Activity(e.UploadID)
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(keys.Session(e.Bucket, e.UploadID)), "=", e.SessionRev),
		clientv3.Compare(clientv3.CreateRevision(keys.InFlight(e.UploadID)), "=", 0).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(keys.Parts(e.UploadID)), "<", p.cur.Rev+1).WithPrefix(),
	}
	if e.ActivityRev == 0 {
		return append(cmps, clientv3.Compare(clientv3.CreateRevision(act), "=", 0))
	}
	return append(cmps, clientv3.Compare(clientv3.ModRevision(act), "=", e.ActivityRev))
}

// current reads the session an action is about, as the plan saw it: ok is
// false when it changed since (or is gone), so the action is skipped.
func (p *pass) current(ctx context.Context, e planned) (sess etcdstore.Session, ok bool, err error) {
	v, err := p.r.store.GetSession(ctx, e.Bucket, e.UploadID)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return sess, false, nil
	}
	if err != nil {
		return sess, false, err
	}
	if v.ModRev != e.SessionRev {
		return sess, false, nil
	}
	sess = v.Value
	sess.History = slices.Clone(sess.History)
	return sess, true, nil
}

// transition moves sess to state to, recording the pass on the change.
func (p *pass) transition(sess *etcdstore.Session, to etcdstore.SessionState, reason string) {
	transition(sess, to, p.term, p.r.now().UTC(), fmt.Sprintf("pass %d: %s", p.cur.Pass, reason))
}

// transition moves sess to state to, recording the reclaimer's term on the
// change: every transition the reclaimer makes says which term made it.
func transition(sess *etcdstore.Session, to etcdstore.SessionState, t term, at time.Time, reason string) {
	sess.Transition(to, at, actor, reason)
	sess.History[len(sess.History)-1].Term = t.N
}

// skip records that an action's session changed since the plan, so the
// action was not done: a resumed upload wins over cleanup.
func (p *pass) skip(ctx context.Context, e planned, next cursor) error {
	next.Acted.Changed.add(e.Parts, e.Bytes)
	if _, err := fencedTxn(ctx, p.r.cli(), p.term, nil, cursorOp(p.r.keys(), &next)); err != nil {
		return err
	}
	p.r.log.Info("session changed since the plan; left alone", "pass", p.cur.Pass, "verdict", e.Verdict, "bucket", e.Bucket, "upload_id", e.UploadID)
	p.cur = next
	return nil
}

// mark records an idle active session as expired: a mark, not a deletion.
func (p *pass) mark(ctx context.Context, e planned, next cursor) error {
	sess, ok, err := p.current(ctx, e)
	if err != nil {
		return err
	}
	if !ok {
		return p.skip(ctx, e, next)
	}
	if ok, err := p.checkBackend(ctx, e, sess, next); err != nil || !ok {
		return err
	}
	now := p.r.now().UTC()
	elapsed := p.r.elapsedNow(p.cur.Elapsed)
	sess.ExpiredAt, sess.ExpiredElapsed = &now, &elapsed
	p.transition(&sess, etcdstore.StateExpired, e.Reason)
	val, err := etcdstore.MarshalSession(&sess)
	if err != nil {
		return err
	}
	done := next
	done.Acted.Marked.add(e.Parts, e.Bytes)
	keys := p.r.keys()
	_, err = fencedTxn(ctx, p.r.cli(), p.term, p.decidedFrom(e),
		clientv3.OpPut(keys.Session(e.Bucket, e.UploadID), val), cursorOp(keys, &done))
	if errors.Is(err, errChanged) {
		return p.skip(ctx, e, next)
	}
	if err != nil {
		return err
	}
	p.cur = done
	p.r.metrics.marked(e.Parts, e.Bytes)
	audit.Record(p.r.log, audit.MarkExpired, audit.Upload(e.Bucket, e.Key, e.UploadID), e.Reason,
		"pass", p.cur.Pass, "term", p.term.N, "parts", e.Parts, "bytes", e.Bytes)
	return nil
}

// delete records the abort intent (expired -> aborting, fenced, compared
// with what the plan saw), then aborts on the backend and records what came
// of it. An unclear answer is never retried blindly: the upload is listed
// again and the session records what was found, with the doubt.
func (p *pass) delete(ctx context.Context, e planned, next cursor) error {
	sess, ok, err := p.current(ctx, e)
	if err != nil {
		return err
	}
	if !ok {
		return p.skip(ctx, e, next)
	}
	if ok, err := p.checkBackend(ctx, e, sess, next); err != nil || !ok {
		return err
	}
	p.transition(&sess, etcdstore.StateAborting, e.Reason)
	val, err := etcdstore.MarshalSession(&sess)
	if err != nil {
		return err
	}
	intent := next
	intent.Acted.Intents.add(e.Parts, e.Bytes)
	keys := p.r.keys()
	skey := keys.Session(e.Bucket, e.UploadID)
	resp, err := fencedTxn(ctx, p.r.cli(), p.term, p.decidedFrom(e), clientv3.OpPut(skey, val), cursorOp(keys, &intent))
	if errors.Is(err, errChanged) {
		return p.skip(ctx, e, next)
	}
	if err != nil {
		return err
	}
	p.cur = intent
	p.r.fault(FaultDeleteAfterIntent)

	var done cursor
	to, doubt, err := p.r.abortAndSettle(ctx, p.term, sess, resp.Header.Revision, func(to etcdstore.SessionState) []clientv3.Op {
		done = p.cur
		if to == etcdstore.StateAborted {
			done.Acted.Deleted.add(e.Parts, e.Bytes)
		} else {
			done.Acted.CleanupPending.add(e.Parts, e.Bytes)
		}
		return []clientv3.Op{cursorOp(keys, &done)}
	})
	// The abort went to the backend whatever became of its record.
	audit.Record(p.r.log, audit.AbortUpload, audit.Upload(e.Bucket, e.Key, e.UploadID), e.Reason,
		"pass", p.cur.Pass, "term", p.term.N, "parts", e.Parts, "bytes", e.Bytes, "outcome", to, "uncertain", doubt, "recorded", err == nil)
	switch {
	case errors.Is(err, errChanged):
		// Someone settled it first (the reconciler); theirs stands.
		p.r.log.Info("aborted upload settled by someone else first", "bucket", e.Bucket, "upload_id", e.UploadID)
		return nil
	case err != nil:
		// The session stays aborting; the reconciler finishes it.
		return fmt.Errorf("record abort outcome of %s/%s: %w", e.Bucket, e.UploadID, err)
	}
	p.cur = done
	p.r.metrics.deleted(string(to), e.Parts, e.Bytes)
	return nil
}

// abortAndSettle aborts on the backend an upload whose "aborting" was
// recorded at revision rev, then records the outcome on the session
// (fenced, compared with rev) together with extra(outcome)'s writes. An
// unclear answer is never retried blindly: the upload is listed again and
// the session records what was found, with the doubt.
//
// From the recorded intent on, the abort is finished even if ctx is
// cancelled: an aborting session takes no more parts, and the abort is what
// any successor or the reconciler would do.
func (r *Reclaimer) abortAndSettle(ctx context.Context, t term, sess etcdstore.Session, rev int64, extra func(etcdstore.SessionState) []clientv3.Op) (etcdstore.SessionState, string, error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*r.cfg.BackendTimeout+r.cfg.BackendTimeout/2)
	defer cancel()
	to, doubt := etcdstore.StateAborted, ""
	reason := "backend confirmed the abort"
	if aerr := r.s3.Abort(actx, sess.Bucket, sess.Key, sess.UploadID); aerr != nil {
		to, doubt, reason = r.relist(actx, sess, aerr)
		r.log.Warn("abort outcome unclear; listed again", "bucket", sess.Bucket, "upload_id", sess.UploadID, "err", aerr, "now", to)
	}
	sess.History = slices.Clone(sess.History)
	transition(&sess, to, t, r.now().UTC(), reason)
	if doubt != "" {
		sess.Uncertain = doubt
		sess.AbortAttempts++
	}
	val, err := etcdstore.MarshalSession(&sess)
	if err != nil {
		return to, doubt, err
	}
	skey := r.keys().Session(sess.Bucket, sess.UploadID)
	ops := append([]clientv3.Op{clientv3.OpPut(skey, val)}, extra(to)...)
	_, err = fencedTxn(actx, r.cli(), t, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(skey), "=", rev)}, ops...)
	return to, doubt, err
}

// relist decides an unclear abort from a fresh look at the backend.
func (r *Reclaimer) relist(ctx context.Context, sess etcdstore.Session, aerr error) (etcdstore.SessionState, string, string) {
	present, lerr := r.s3.UploadExists(ctx, sess.Bucket, sess.Key, sess.UploadID)
	return unclearAbort(aerr, present, lerr)
}

// unclearAbort decides an abort whose answer (aerr) was not clear from
// listing the upload again (present, or lerr when that failed too): it is
// recorded aborted only when the listing shows the upload gone; otherwise
// it is cleanup_pending, for the reconciler. It returns the state, the
// doubt (recorded either way, so an unclear abort is never recorded as a
// plain success) and the transition's reason.
func unclearAbort(aerr error, present bool, lerr error) (etcdstore.SessionState, string, string) {
	switch {
	case lerr != nil:
		doubt := fmt.Sprintf("abort outcome unclear (%v); listing again failed too (%v)", aerr, lerr)
		return etcdstore.StateCleanupPending, doubt, "abort outcome unknown"
	case present:
		doubt := fmt.Sprintf("abort outcome unclear (%v); listing again found the upload still there", aerr)
		return etcdstore.StateCleanupPending, doubt, "abort not done; left for the reconciler"
	default:
		doubt := fmt.Sprintf("abort outcome unclear (%v); listing again found the upload gone", aerr)
		return etcdstore.StateAborted, doubt, "upload gone on listing again"
	}
}
