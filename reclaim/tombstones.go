package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// tombstoneRead is a tombstone with the mod revision it was read at.
type tombstoneRead = etcdstore.Versioned[etcdstore.Tombstone]

// readTombstones reads the current tombstones of digests, and the etcd
// revision they were read at. A tombstone that does not decode is left
// out and logged; its digest is then judged as if it had none, and the
// write made from that fails its comparison (the key exists), so nothing
// is decided from a record that cannot be read.
func (s *digestSweep) readTombstones(ctx context.Context, digests []string) (map[string]*tombstoneRead, int64, error) {
	out := make(map[string]*tombstoneRead, len(digests))
	if len(digests) == 0 {
		return out, 0, nil
	}
	keys := s.r.keys()
	sorted := slices.Sorted(slices.Values(digests))
	want := make(map[string]bool, len(sorted))
	for _, d := range sorted {
		want[d] = true
	}
	end := keys.Tombstone(sorted[len(sorted)-1]) + "\x00"
	var rev int64
	err := scanRange(ctx, s.r.cli(), keys.Tombstone(sorted[0]), end, rangeLimit, func(kv *mvccpb.KeyValue, r int64) error {
		if rev == 0 {
			rev = r
		}
		d, ok := etcdstore.LastSegment(string(kv.Key))
		if !ok || !want[d] {
			return nil
		}
		var t etcdstore.Tombstone
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			s.r.log.Warn("tombstone does not decode; its digest is left alone", "key", string(kv.Key), "err", err)
			return nil
		}
		out[d] = &tombstoneRead{Value: t, ModRev: kv.ModRevision}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reclaim: read tombstones: %w", err)
	}
	if rev == 0 {
		// No tombstone in the range: one more read says where etcd stands.
		resp, err := s.r.cli().Get(ctx, keys.Tombstones(), clientv3.WithCountOnly(), clientv3.WithPrefix())
		if err != nil {
			return nil, 0, fmt.Errorf("reclaim: read tombstones: %w", err)
		}
		rev = resp.Header.Revision
	}
	return out, rev, nil
}

// errScanDone ends a scan early without failing it.
var errScanDone = errors.New("reclaim: scan done")

// scanRange calls fn for every key in [start, end) at the latest revision,
// read in pages of limit keys, with the revision each page was read at.
// It holds one page at a time.
func scanRange(ctx context.Context, cli *clientv3.Client, start, end string, limit int64, fn func(kv *mvccpb.KeyValue, rev int64) error) error {
	for start < end {
		resp, err := cli.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(limit))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv, resp.Header.Revision); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return nil
}

// digestWrite is one digest's part of a transaction: what it compares and
// what it writes, and what it adds to the report once it lands (recorded
// in the cursor by the same transaction, so a resumed pass counts it
// exactly once).
type digestWrite struct {
	cmps  []clientv3.Cmp
	ops   []clientv3.Op
	delta *DigestReport
}

// txnOps bounds the comparisons and the writes of one transaction, inside
// etcd's default limit of 128 with room for the fence and the cursor.
const txnOps = 120

// commit commits writes, fenced by the term, several to a transaction. A
// transaction whose comparisons fail is tried again one write at a time,
// so that one digest whose records moved does not hold back the others.
// landed[i] says whether writes[i] was committed and revs[i] at which
// revision. A dry run commits nothing and reports every write landed.
func (s *digestSweep) commit(ctx context.Context, writes []digestWrite) (landed []bool, revs []int64, err error) {
	landed, revs = make([]bool, len(writes)), make([]int64, len(writes))
	for start := 0; start < len(writes); {
		end, nc, no := start+1, len(writes[start].cmps), len(writes[start].ops)
		for end < len(writes) && nc+len(writes[end].cmps) <= txnOps && no+len(writes[end].ops) <= txnOps {
			nc, no = nc+len(writes[end].cmps), no+len(writes[end].ops)
			end++
		}
		rev, err := s.commitOne(ctx, writes[start:end])
		switch {
		case err == nil:
			for i := start; i < end; i++ {
				landed[i], revs[i] = true, rev
			}
		case errors.Is(err, errChanged) && end-start > 1:
			for i := start; i < end; i++ {
				rev, err := s.commitOne(ctx, writes[i:i+1])
				if err != nil && !errors.Is(err, errChanged) {
					return landed, revs, err
				}
				landed[i], revs[i] = err == nil, rev
			}
		case errors.Is(err, errChanged):
		default:
			return landed, revs, err
		}
		start = end
	}
	return landed, revs, nil
}

// commitOne commits writes in one fenced transaction, with the cursor when
// they carry counts, and returns its revision.
func (s *digestSweep) commitOne(ctx context.Context, writes []digestWrite) (int64, error) {
	var (
		cmps  []clientv3.Cmp
		ops   []clientv3.Op
		sum   DigestReport
		count bool
	)
	for _, w := range writes {
		cmps = append(cmps, w.cmps...)
		ops = append(ops, w.ops...)
		if w.delta != nil {
			sum.plus(*w.delta)
			count = true
		}
	}
	if s.dry {
		s.cur.Report.plus(sum)
		return 0, nil
	}
	if count {
		next := s.cur
		next.Report.plus(sum)
		ops = append(ops, cursorOpOf(s.r.keys(), &next))
	}
	resp, err := fencedTxn(ctx, s.r.cli(), s.term, cmps, ops...)
	if err != nil {
		return 0, err
	}
	s.cur.Report.plus(sum)
	return resp.Header.Revision, nil
}

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
	for _, st := range etcdstore.AllTombstoneStates {
		s.r.metrics.tombstones.WithLabelValues(string(st)).Set(float64(counts[st]))
	}
	return s.save(ctx)
}

// pruneTombstones counts every tombstone by state and removes terminal
// ones older than the retention, up to pruneLimit. A tombstone that does
// not decode is counted under "undecodable" and kept for a person.
func (s *digestSweep) pruneTombstones(ctx context.Context, pruned *Pruned) (map[etcdstore.TombstoneState]int64, error) {
	keys := s.r.keys()
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
	err := scanRange(ctx, s.r.cli(), keys.Tombstones(), clientv3.GetPrefixRangeEnd(keys.Tombstones()), rangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		var t etcdstore.Tombstone
		if err := json.Unmarshal(kv.Value, &t); err != nil {
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
		if len(writes) == txnOps {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("reclaim: prune tombstones: %w", err)
	}
	return counts, nil
}

// pruneTrash removes trash records whose window has passed, with their
// trash references, each in one transaction that compares the record as
// read (so that a restore racing with it wins or fails cleanly).
func (s *digestSweep) pruneTrash(ctx context.Context, pruned *Pruned) error {
	keys := s.r.keys()
	var writes []digestWrite
	err := scanRange(ctx, s.r.cli(), keys.AllTrash(), clientv3.GetPrefixRangeEnd(keys.AllTrash()), rangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		if int64(len(writes)) >= pruneLimit {
			return errScanDone
		}
		var tr etcdstore.TrashRecord
		if err := json.Unmarshal(kv.Value, &tr); err != nil || tr.Expires.After(s.now) {
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
	if err != nil && !errors.Is(err, errScanDone) {
		return fmt.Errorf("reclaim: read trash: %w", err)
	}
	landed, _, err := s.commit(ctx, writes)
	for _, ok := range landed {
		if ok {
			pruned.Trash++
		}
	}
	if err != nil {
		return fmt.Errorf("reclaim: prune trash: %w", err)
	}
	return nil
}

// prunePlacements removes placements older than the placement grace: a
// gateway writes a blob in far less, so these are left by one that died,
// and they would keep their digests from ever being guarded.
func (s *digestSweep) prunePlacements(ctx context.Context, pruned *Pruned) error {
	keys := s.r.keys()
	var writes []digestWrite
	err := scanRange(ctx, s.r.cli(), keys.AllPlacements(), clientv3.GetPrefixRangeEnd(keys.AllPlacements()), rangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		if int64(len(writes)) >= pruneLimit {
			return errScanDone
		}
		var p etcdstore.Placement
		if err := json.Unmarshal(kv.Value, &p); err != nil || p.At.IsZero() || s.now.Sub(p.At) < s.cfg.PlacementGrace {
			return nil
		}
		writes = append(writes, digestWrite{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
			ops:  []clientv3.Op{clientv3.OpDelete(string(kv.Key))},
		})
		return nil
	})
	if err != nil && !errors.Is(err, errScanDone) {
		return fmt.Errorf("reclaim: read placements: %w", err)
	}
	landed, _, err := s.commit(ctx, writes)
	for _, ok := range landed {
		if ok {
			pruned.Placements++
		}
	}
	if err != nil {
		return fmt.Errorf("reclaim: prune placements: %w", err)
	}
	return nil
}
