package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// The one rule of guards: a guard is released only when its blob's bytes
// are proven gone, or when it is proven that no delete of the blob can
// still be executed by the backend. The collector records every delete
// attempt on the guards of its batch (fenced by its term) before it sends
// the request, so a guard without an attempt proves that none was sent
// and none ever will be under an older term: that term's attempt record
// would fail its fence or the guard's mod revision. A guard with an
// attempt is proven settled only once the attempt's deadline plus
// digests.guard_settle plus reclaim.clock_skew (the reader's clock may
// differ from the sender's) has passed; until then it stays armed whatever
// a HEAD shows, since the request may still be on its way to the backend.
// A complete answer to the attempt settles it too: the request has
// finished and this client never sends one twice.

// settleUntil returns when guard attempt a can no longer be executed by
// the backend, and whether that time is still ahead on this clock.
func (s *digestSweep) settleUntil(a *etcdstore.DeleteAttempt) (time.Time, bool) {
	until := a.Deadline.Add(s.cfg.GuardSettle + s.cfg.ClockSkew)
	return until, s.clock().Before(until)
}

// settleGuards settles the guards found armed when the sweep starts: they
// were left by a collector that was cut short (a crash, a lost term, a
// delete whose outcome nobody learnt). A guard whose last delete attempt
// may still be executed stays armed and is counted as settling. Any other
// blob is looked at: gone, its tombstone is recorded deleted and the guard
// released; present, the guard is taken over by this pass, whose collector
// deletes the blob (safe: while the guard was armed nothing could
// reference or place the digest; the collector still checks that no
// reference was recorded since, as the rebuild may have). A dry run only
// counts them.
func (s *digestSweep) settleGuards(ctx context.Context) error {
	keys := s.keys()
	err := sweepScan(ctx, s.cli(), keys.Guards(), clientv3.GetPrefixRangeEnd(keys.Guards()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		s.cur.Report.Guards++
		if s.dry {
			if _, wait := s.guardWait(decodeGuard(kv)); wait {
				s.cur.Report.Settling++
			}
			return nil
		}
		return s.settleGuard(ctx, kv)
	})
	if err != nil {
		return fmt.Errorf("digestsweep: settle guards: %w", err)
	}
	return nil
}

// decodeGuard decodes a guard; ok is false when its value does not decode
// or is of a newer release's layout: either may hide an attempt, so such a
// guard stays armed.
func decodeGuard(kv *mvccpb.KeyValue) (etcdstore.Guard, bool) {
	d, _ := etcdstore.LastSegment(string(kv.Key))
	var g etcdstore.Guard
	if err := etcdstore.DecodeKV(etcdstore.GuardRecord, kv, &g); err != nil {
		return etcdstore.Guard{Digest: d}, false
	}
	if g.Digest == "" {
		g.Digest = d
	}
	return g, true
}

// guardWait says until when guard g must stay armed, and whether that is
// still ahead. A guard that does not decode (ok false) may hide an attempt:
// it stays armed for a person to look at.
func (s *digestSweep) guardWait(g etcdstore.Guard, ok bool) (time.Time, bool) {
	switch {
	case !ok:
		return time.Time{}, true
	case g.Attempt == nil:
		return time.Time{}, false
	}
	return s.settleUntil(g.Attempt)
}

// settleGuard settles one guard found armed.
func (s *digestSweep) settleGuard(ctx context.Context, kv *mvccpb.KeyValue) error {
	keys := s.keys()
	g, ok := decodeGuard(kv)
	d := g.Digest
	if until, wait := s.guardWait(g, ok); wait {
		s.cur.Report.Settling++
		if !ok {
			s.log.Error("guard does not decode: it stays armed, since it may record a delete still in flight; a person must look at it", "digest", d, "key", string(kv.Key))
			return nil
		}
		s.log.Info("guard stays armed: a delete of its blob may still be executed", "pass", s.cur.Pass, "digest", d,
			"attempt_term", g.Attempt.Term, "attempt_pass", g.Attempt.Pass, "deadline", g.Attempt.Deadline, "settled_after", until)
		return nil
	}
	tomb, err := s.readTombstone(ctx, d)
	if err != nil {
		return err
	}
	if g.Bucket == "" && tomb != nil {
		g.Bucket, g.Key = tomb.Value.Bucket, tomb.Value.Key
	}
	guardCmp := clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)
	release := digestWrite{cmps: []clientv3.Cmp{guardCmp}, ops: []clientv3.Op{clientv3.OpDelete(string(kv.Key))}, delta: &Report{Released: 1}}
	if g.Bucket == "" {
		// Nothing says where the blob is, so no delete of it was ever sent
		// (an attempt is recorded with the blob's place).
		return s.commitLogged(ctx, "guard without a blob released", d, release)
	}
	_, herr := s.s3.Head(ctx, g.Bucket, g.Key)
	switch {
	case errors.Is(herr, s3client.ErrNoSuchKey):
		return s.settleGone(ctx, kv, g, tomb)
	case herr != nil:
		return fmt.Errorf("digestsweep: look at guarded blob %s/%s: %w", g.Bucket, g.Key, herr)
	case tomb == nil || tomb.Value.State != etcdstore.TombstoneReady:
		return s.commitLogged(ctx, "guard of a blob that is no longer ready released: no delete of it can still be executed", d, release)
	}
	// Any attempt the guard records is settled: this pass's collector may
	// send its own. The tombstone is left as it is: the tombstone phase
	// judges it again (a rebuild must have started after its last
	// decision), and a guard whose tombstone this pass does not confirm
	// ready is released by the collector.
	g.Term, g.Pass, g.At, g.Attempt = s.term.N, s.cur.Pass, s.clock().UTC(), nil
	return s.commitLogged(ctx, "guard taken over for this pass's collector", d, digestWrite{
		cmps: []clientv3.Cmp{guardCmp, clientv3.Compare(clientv3.ModRevision(keys.Tombstone(d)), "=", tomb.ModRev)},
		ops:  []clientv3.Op{clientv3.OpPut(string(kv.Key), etcdstore.MarshalRecord(g))},
	})
}

// settleGone releases guard g, whose blob a HEAD found gone, and records
// its tombstone deleted.
func (s *digestSweep) settleGone(ctx context.Context, kv *mvccpb.KeyValue, g etcdstore.Guard, tomb *sweepTombstone) error {
	d := g.Digest
	guardCmp := clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)
	w := digestWrite{cmps: []clientv3.Cmp{guardCmp}, ops: []clientv3.Op{clientv3.OpDelete(string(kv.Key))}, delta: &Report{}}
	if tomb != nil && !tomb.Value.State.Terminal() {
		w.ops = append(w.ops, clientv3.OpPut(s.keys().Tombstone(d), etcdstore.MarshalRecord(s.deleted(tomb.Value, "deleted; settled after the collector was cut short"))))
		w.delta = &Report{Deleted: 1, Bytes: tomb.Value.Size}
	}
	landed, _, err := s.commit(ctx, []digestWrite{w})
	if err == nil && landed[0] && w.delta.Deleted == 0 {
		s.log.Info("guard of a deleted blob released: no delete of it can still be executed", "pass", s.cur.Pass, "term", s.term.N, "digest", d)
	}
	if err == nil && landed[0] && w.delta.Deleted > 0 {
		s.metrics.Deleted(w.delta.Deleted, w.delta.Bytes)
		// The pass that deleted the bytes was cut short, most likely
		// before its audit line: this line records the delete.
		audit.Record(s.log, audit.DeleteBlob, d, "guarded delete of an earlier pass found done: the blob is gone",
			"pass", s.cur.Pass, "term", s.term.N, "bucket", g.Bucket, "key", g.Key, "guard_term", g.Term, "guard_pass", g.Pass)
	}
	return err
}

// releaseGuards releases the guards this pass took over, when it deletes
// nothing: their tombstones stay ready for a later pass. A guard taken
// over records no attempt (any earlier one was settled when it was taken
// over); one that records an attempt is left for settleGuards.
func (s *digestSweep) releaseGuards(ctx context.Context) error {
	if s.dry {
		return nil
	}
	keys := s.keys()
	var writes []digestWrite
	err := sweepScan(ctx, s.cli(), keys.Guards(), clientv3.GetPrefixRangeEnd(keys.Guards()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		if g, ok := decodeGuard(kv); ok && g.Pass == s.cur.Pass && g.Attempt == nil {
			writes = append(writes, digestWrite{
				cmps:  []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
				ops:   []clientv3.Op{clientv3.OpDelete(string(kv.Key))},
				delta: &Report{Released: 1},
			})
		}
		if len(writes) == sweepTxnOps {
			_, _, err := s.commit(ctx, writes)
			writes = writes[:0]
			return err
		}
		return nil
	})
	if err == nil {
		_, _, err = s.commit(ctx, writes)
	}
	if err != nil {
		return fmt.Errorf("digestsweep: release guards: %w", err)
	}
	return nil
}

// recordAttempt records a delete attempt, with its deadline, on the guards
// of batch, each in a write that compares the guard as this pass armed it
// (and the term, as every write does), several to a transaction. It
// returns the blobs whose attempt landed, with their guards' new mod
// revisions: only they may be sent, and only before sendBy, the recorded
// deadline as read on the elapsed clock (the production clock carries
// time.Now's monotonic reading, so a wall-clock step does not move it). A
// guard that changed meanwhile is left as it is, for a later pass to
// settle.
func (s *digestSweep) recordAttempt(ctx context.Context, batch []armed) (sent []armed, sendBy time.Time, err error) {
	keys := s.keys()
	now := s.clock()
	sendBy = now.Add(s.cfg.BackendTimeout)
	att := &etcdstore.DeleteAttempt{Sent: now.UTC(), Deadline: sendBy.UTC(), Term: s.term.N, Pass: s.cur.Pass}
	writes := make([]digestWrite, len(batch))
	for i, a := range batch {
		t := a.tomb
		g := etcdstore.Guard{Digest: t.Digest, Bucket: t.Bucket, Key: t.Key, Term: s.term.N, Pass: s.cur.Pass, At: a.at, Attempt: att}
		writes[i] = digestWrite{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(keys.Guard(t.Digest)), "=", a.guardRev)},
			ops:  []clientv3.Op{clientv3.OpPut(keys.Guard(t.Digest), etcdstore.MarshalRecord(g))},
		}
	}
	// A batch holds a digest once: each write is to a guard of its own.
	landed, revs, err := s.commitParallel(ctx, writes)
	if err != nil {
		return nil, sendBy, err
	}
	sent = make([]armed, 0, len(batch))
	for i, a := range batch {
		if !landed[i] {
			s.countChanged()
			s.log.Warn("blob not deleted: its guard changed before the delete was sent", "pass", s.cur.Pass, "digest", a.tomb.Digest)
			continue
		}
		a.guardRev = revs[i]
		sent = append(sent, a)
	}
	return sent, sendBy, nil
}
