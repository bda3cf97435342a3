package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// FutureTimeError names a digest record whose time lies beyond now plus
// the clock skew allowance: some clock is wrong, so the sweep stops.
type FutureTimeError struct {
	Record string
	Field  string
	At     time.Time
	Now    time.Time
	Skew   time.Duration
}

func (e *FutureTimeError) Error() string {
	return fmt.Sprintf("digestsweep: recorded time in the future: %s: %s %s is later than now (%s) plus the clock skew allowance %s",
		e.Record, e.Field, e.At.Format(time.RFC3339Nano), e.Now.Format(time.RFC3339Nano), e.Skew)
}

// Is makes errors.Is(err, sweep.ErrFutureTime) hold.
func (e *FutureTimeError) Is(target error) bool { return target == sweep.ErrFutureTime }

// trashExpired reports whether a trash entry's window has passed on both
// clocks: the wall clock (expires, stamped by the gateway that trashed it)
// and the elapsed clock (expiresElapsed, stamped by the first pass that saw
// it). An entry no pass has stamped yet has not expired.
func trashExpired(expires time.Time, expiresElapsed *time.Duration, now time.Time, elapsed time.Duration) bool {
	return !expires.After(now) && expiresElapsed != nil && elapsed >= *expiresElapsed
}

// checkTimes finds the trash entries and tombstones that record a time
// beyond now plus the clock skew allowance, and stamps every trash entry no
// pass has seen yet with the elapsed clock its window ends at. A dry run
// only checks. A future time only makes its record last longer (trash
// expires later, a tombstone is pruned later), so such records are counted
// and logged, not a reason to stop: a clock that ran ahead for a while
// must not stop every pass until its times come. A clock that is wrong now
// is found by the pass's own clock check.
func (s *digestSweep) checkTimes(ctx context.Context) error {
	keys := s.keys()
	limit := s.now.Add(s.run.ClockSkew)
	var (
		futures int64
		first   *FutureTimeError
	)
	future := func(record, field string, at time.Time) error {
		if s.run.ClockSkew > 0 && at.After(limit) {
			futures++
			if first == nil {
				first = &FutureTimeError{Record: record, Field: field, At: at, Now: s.now, Skew: s.run.ClockSkew}
			}
		}
		return nil
	}
	defer func() {
		if first != nil {
			s.cur.Report.FutureTimes = futures
			s.log.Warn("digest records with a time in the future: a clock ran ahead when they were written; they are kept longer, never shorter",
				"pass", s.cur.Pass, "records", futures, "first", first.Error())
		}
	}()
	// The stamps are committed as they gather, sweepTxnOps at a time, so
	// that memory holds a page of records however many are unstamped.
	var writes []digestWrite
	stamp := func() error {
		_, _, err := s.commit(ctx, writes)
		writes = writes[:0]
		if err != nil && !errors.Is(err, sweep.ErrChanged) {
			return fmt.Errorf("digestsweep: stamp trash with the elapsed clock: %w", err)
		}
		return nil
	}
	err := sweepScan(ctx, s.cli(), keys.AllTrash(), clientv3.GetPrefixRangeEnd(keys.AllTrash()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		var tr etcdstore.TrashRecord
		if err := etcdstore.DecodeKV(etcdstore.TrashRecordKind, kv, &tr); errors.Is(err, etcdstore.ErrNewerRecord) {
			return err
		} else if err != nil {
			return nil // an unreadable record is kept: it never expires
		}
		if err := future("trash of "+tr.Bucket+"/"+tr.Key, "deleted_at", tr.DeletedAt); err != nil {
			return err
		}
		if tr.ExpiresElapsed == nil && !s.dry {
			writes = append(writes, s.stampTrash(kv, tr))
			if len(writes) == sweepTxnOps {
				return stamp()
			}
		}
		return nil
	})
	if err == nil {
		err = stamp()
	}
	if err != nil {
		return err
	}
	return sweepScan(ctx, s.cli(), keys.Tombstones(), clientv3.GetPrefixRangeEnd(keys.Tombstones()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		var ts etcdstore.Tombstone
		if err := etcdstore.DecodeKV(etcdstore.TombstoneRecord, kv, &ts); errors.Is(err, etcdstore.ErrNewerRecord) {
			return err
		} else if err != nil {
			return nil
		}
		return future("tombstone of "+ts.Digest, "since", ts.Since)
	})
}

// stampTrash is the write that records on a trash entry, and on its trash
// references, when its window ends on the elapsed clock: the window (its
// wall clock expiry less its deletion) from the elapsed clock now. It
// compares the record as read, so a restore racing with it wins.
func (s *digestSweep) stampTrash(kv *mvccpb.KeyValue, tr etcdstore.TrashRecord) digestWrite {
	now := s.run.Elapsed
	if s.run.ElapsedNow != nil {
		now = max(now, s.run.ElapsedNow())
	}
	at := now + max(tr.Expires.Sub(tr.DeletedAt), 0)
	tr.ExpiresElapsed = &at
	keys := s.keys()
	w := digestWrite{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
		ops:  []clientv3.Op{clientv3.OpPut(string(kv.Key), etcdstore.MarshalRecord(tr))},
	}
	for _, d := range tr.Digests {
		ref := etcdstore.TrashRef{Expires: tr.Expires, ExpiresElapsed: &at}
		w.ops = append(w.ops, clientv3.OpPut(keys.TrashRef(d, tr.Bucket, tr.Key, tr.DeletedAt), etcdstore.MarshalRecord(ref)))
	}
	return w
}
