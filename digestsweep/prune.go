package digestsweep

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// pruneLimit bounds what one pass prunes of each kind, so that a backlog
// is worked off over passes in transactions of bounded size.
const pruneLimit = 1000

// prune removes, in bounded batches, terminal tombstones past their
// retention, expired trash with its trash references, and placements
// older than the placement grace, and counts the tombstones by state. It
// first releases the guards of a pass that deletes nothing. A dry run
// counts what it would remove.
func (s *digestSweep) prune(ctx context.Context) error {
	if s.cur.Phase != digestPhasePrune {
		s.cur.Phase = digestPhasePrune
		if err := s.save(ctx); err != nil {
			return err
		}
	}
	if _, kept := s.keepsAll(); kept {
		if err := s.releaseGuards(ctx); err != nil {
			return err
		}
	}
	var pruned Pruned
	counts, err := s.pruneTombstones(ctx, &pruned)
	if err != nil {
		return err
	}
	if err := s.pruneTrash(ctx, &pruned); err != nil {
		return err
	}
	if err := s.prunePlacements(ctx, &pruned); err != nil {
		return err
	}
	s.cur.Report.Pruned = pruned
	s.cur.Report.Tombstones = counts
	s.metrics.Tombstones(counts)
	return s.save(ctx)
}

// pruneTombstones counts every tombstone by state and removes terminal
// ones older than the retention, up to pruneLimit. A tombstone that does
// not decode is counted under "undecodable" and kept for a person.
func (s *digestSweep) pruneTombstones(ctx context.Context, pruned *Pruned) (map[etcdstore.TombstoneState]int64, error) {
	keys := s.keys()
	counts := map[etcdstore.TombstoneState]int64{}
	var writes []digestWrite
	var states []etcdstore.TombstoneState
	flush := func() error {
		landed, _, err := s.commit(ctx, writes)
		for i, ok := range landed {
			if ok {
				pruned.Tombstones++
			} else {
				counts[states[i]]++
			}
		}
		writes, states = writes[:0], states[:0]
		return err
	}
	err := sweepScan(ctx, s.cli(), keys.Tombstones(), clientv3.GetPrefixRangeEnd(keys.Tombstones()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		var t etcdstore.Tombstone
		if err := etcdstore.DecodeKV(etcdstore.TombstoneRecord, kv, &t); err != nil {
			if errors.Is(err, etcdstore.ErrNewerRecord) {
				return err
			}
			counts["undecodable"]++
			return nil
		}
		if !t.State.Terminal() || s.now.Sub(t.Since) <= s.cfg.TombstoneRetention || pruned.Tombstones+int64(len(writes)) >= pruneLimit {
			counts[t.State]++
			return nil
		}
		writes = append(writes, digestWrite{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
			ops:  []clientv3.Op{clientv3.OpDelete(string(kv.Key))},
		})
		states = append(states, t.State)
		if len(writes) == sweepTxnOps {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("digestsweep: prune tombstones: %w", err)
	}
	return counts, nil
}

// pruneTrash removes trash records whose window has passed, with their
// trash references, each in one transaction that compares the record as
// read (so that a restore racing with it wins or fails cleanly).
func (s *digestSweep) pruneTrash(ctx context.Context, pruned *Pruned) error {
	keys := s.keys()
	var writes []digestWrite
	err := sweepScan(ctx, s.cli(), keys.AllTrash(), clientv3.GetPrefixRangeEnd(keys.AllTrash()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		if int64(len(writes)) >= pruneLimit {
			return errSweepScanDone
		}
		var tr etcdstore.TrashRecord
		if err := etcdstore.DecodeKV(etcdstore.TrashRecordKind, kv, &tr); errors.Is(err, etcdstore.ErrNewerRecord) {
			return err
		} else if err != nil || !trashExpired(tr.Expires, tr.ExpiresElapsed, s.now, s.run.Elapsed) {
			return nil // an unreadable record is kept: it may retain
		}
		w := digestWrite{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
			ops:  []clientv3.Op{clientv3.OpDelete(string(kv.Key))},
		}
		for _, d := range tr.Digests {
			w.ops = append(w.ops, clientv3.OpDelete(keys.TrashRef(d, tr.Bucket, tr.Key, tr.DeletedAt)))
		}
		writes = append(writes, w)
		return nil
	})
	if err != nil && !errors.Is(err, errSweepScanDone) {
		return fmt.Errorf("digestsweep: read trash: %w", err)
	}
	landed, _, err := s.commit(ctx, writes)
	for _, ok := range landed {
		if ok {
			pruned.Trash++
		}
	}
	if err != nil {
		return fmt.Errorf("digestsweep: prune trash: %w", err)
	}
	return nil
}

// prunePlacements removes placements older than the placement grace: a
// gateway writes a blob in far less, so these are left by one that died,
// and they would keep their digests from ever being guarded.
func (s *digestSweep) prunePlacements(ctx context.Context, pruned *Pruned) error {
	keys := s.keys()
	var writes []digestWrite
	err := sweepScan(ctx, s.cli(), keys.AllPlacements(), clientv3.GetPrefixRangeEnd(keys.AllPlacements()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		if int64(len(writes)) >= pruneLimit {
			return errSweepScanDone
		}
		var p etcdstore.Placement
		if err := etcdstore.DecodeKV(etcdstore.PlacementRecord, kv, &p); errors.Is(err, etcdstore.ErrNewerRecord) {
			return err
		} else if err != nil || p.At.IsZero() || s.now.Sub(p.At) < s.cfg.PlacementGrace {
			return nil
		}
		writes = append(writes, digestWrite{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
			ops:  []clientv3.Op{clientv3.OpDelete(string(kv.Key))},
		})
		return nil
	})
	if err != nil && !errors.Is(err, errSweepScanDone) {
		return fmt.Errorf("digestsweep: read placements: %w", err)
	}
	landed, _, err := s.commit(ctx, writes)
	for _, ok := range landed {
		if ok {
			pruned.Placements++
		}
	}
	if err != nil {
		return fmt.Errorf("digestsweep: prune placements: %w", err)
	}
	return nil
}
