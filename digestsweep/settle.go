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
	"github.com/sweepgate/sweepgate/sweep"
)

// SettleDue settles, outside any pass, every guard whose last delete
// attempt can no longer be executed (its deadline plus
// digests.guard_settle plus reclaim.clock_skew has passed): the leader
// calls it on a timer between passes, so that a guard left by an unclear
// delete stops blocking the producer's writes within seconds of its settle
// time instead of at the next pass. Each guard is looked at with a HEAD:
// the blob gone, its tombstone is recorded deleted and the guard released;
// present, the guard is released and the tombstone left for the next pass
// to judge again (unlike settleGuards it takes nothing over: no collector
// follows). Every write is fenced by run.Term and compares the guard as
// read. Guards without an attempt belong to a pass and are left to it.
//
// It returns how many guards it released and the earliest settle time of
// those still waiting (zero when none waits).
func (sw *Sweep) SettleDue(ctx context.Context, run *sweep.Run) (released int, next time.Time, err error) {
	s := &digestSweep{Sweep: sw, run: run, term: run.Term, now: run.Now}
	keys := s.keys()
	err = sweepScan(ctx, s.cli(), keys.Guards(), clientv3.GetPrefixRangeEnd(keys.Guards()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		g, ok := decodeGuard(kv)
		if !ok || g.Attempt == nil || g.Bucket == "" {
			return nil
		}
		if until, wait := s.settleUntil(g.Attempt); wait {
			if next.IsZero() || until.Before(next) {
				next = until
			}
			return nil
		}
		done, err := s.settleDueGuard(ctx, kv, g)
		if done {
			released++
		}
		return err
	})
	if err != nil {
		return released, next, fmt.Errorf("digestsweep: settle due guards: %w", err)
	}
	return released, next, nil
}

// settleDueGuard settles one guard whose attempt can no longer be
// executed, and reports whether its release landed.
func (s *digestSweep) settleDueGuard(ctx context.Context, kv *mvccpb.KeyValue, g etcdstore.Guard) (bool, error) {
	d := g.Digest
	_, herr := s.s3.Head(ctx, g.Bucket, g.Key)
	if herr != nil && !errors.Is(herr, s3client.ErrNoSuchKey) {
		s.log.Warn("guard not settled: looking at its blob failed; trying again later", "digest", d, "bucket", g.Bucket, "key", g.Key, "err", herr)
		return false, nil
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)}
	ops := []clientv3.Op{clientv3.OpDelete(string(kv.Key))}
	gone := errors.Is(herr, s3client.ErrNoSuchKey)
	var tomb *sweepTombstone
	if gone {
		var err error
		if tomb, err = s.readTombstone(ctx, d); err != nil {
			return false, err
		}
		if tomb != nil && !tomb.Value.State.Terminal() {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys().Tombstone(d)), "=", tomb.ModRev))
			ops = append(ops, clientv3.OpPut(s.keys().Tombstone(d), etcdstore.MarshalRecord(s.deleted(tomb.Value, "deleted; settled after its delete's outcome was unclear"))))
		} else {
			tomb = nil
		}
	}
	_, err := sweep.FencedTxn(ctx, s.cli(), s.term, cmps, ops...)
	if errors.Is(err, sweep.ErrChanged) {
		return false, nil // the guard or tombstone moved: whoever moved it settles it
	}
	if err != nil {
		return false, err
	}
	switch {
	case tomb != nil:
		s.metrics.Deleted(1, tomb.Value.Size)
		audit.Record(s.log, audit.DeleteBlob, d, "delete whose outcome was unclear found done once it could no longer be executed: the blob is gone",
			"term", s.term.N, "bucket", g.Bucket, "key", g.Key, "attempt_term", g.Attempt.Term, "attempt_pass", g.Attempt.Pass)
	case gone:
		s.log.Info("guard of a deleted blob released between passes: no delete of it can still be executed", "term", s.term.N, "digest", d)
	default:
		s.log.Info("guard released between passes: its delete can no longer be executed and the blob is still there", "term", s.term.N, "digest", d)
	}
	return true, nil
}
