package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// tombstones runs the tombstone phase from the cursor: it reads the pass
// revision, walks every namespace's blobs page by page, judges each against
// the retained set and writes the tombstones, then checks the deletions
// against the breaker.
func (s *digestSweep) tombstones(ctx context.Context) error {
	if err := s.startTombstones(ctx); err != nil {
		return err
	}
	nss := s.cfg.Layout.Namespaces
	// The pages after this one are listed and asked of the inventories
	// while this one's tombstones are written.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ahead <-chan chan judgedPage
	for s.cur.Report.Kept == "" && !s.sliceFull() && (s.cur.NS < len(nss) || s.wrapSlice()) {
		ns := &nss[s.cur.NS]
		if ahead == nil {
			ahead = s.judgeAhead(lctx, ns, s.cur.After)
		}
		next, ok := <-ahead
		if !ok {
			return ctx.Err()
		}
		j := <-next
		page, err := j.page, j.err
		if err != nil || page.Done {
			ahead = nil
		}
		switch {
		case errors.Is(err, s3client.ErrNoSuchBucket):
			// A bucket that does not exist holds no blobs to judge.
			s.log.Warn("digest sweep: the bucket of a namespace does not exist", "namespace", ns.Name, "bucket", ns.Bucket)
			page = s3client.ObjectPage{Done: true}
		case isDenied(err):
			// Nothing in a namespace the backend denies is judged: the
			// sweep goes on with the next one (see isDenied and denied in keepall.go).
			s.denied(ns.Bucket, "namespace", ns.Name, err)
			page = s3client.ObjectPage{Done: true}
		case err != nil:
			return fmt.Errorf("digestsweep: list namespace %s: %w", ns.Name, err)
		}
		delta, err := s.page(ctx, j)
		if err != nil {
			return err
		}
		s.cur.Report.plus(delta)
		s.sliceListed(page)
		s.cur.After = page.Next
		if page.Done {
			s.cur.NS, s.cur.After = s.cur.NS+1, ""
		}
		if err := s.save(ctx); err != nil {
			return err
		}
		s.run.Fire(FaultPage)
	}
	return s.judgePlan(ctx)
}

// startTombstones fixes the pass revision (once per pass), and reads what
// every page is judged with: the reference holds at that revision, the
// planes' frontiers and the inventories.
func (s *digestSweep) startTombstones(ctx context.Context) error {
	cli, keys := s.cli(), s.keys()
	if s.cur.Rev == 0 {
		// One read gives the pass revision and every shard's reference
		// revision at it.
		resp, err := cli.Get(ctx, keys.RefRevs(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return fmt.Errorf("digestsweep: read reference revisions: %w", err)
		}
		s.cur.Rev = resp.Header.Revision
		s.cur.Shards = make(map[string]int64, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			if sh, ok := etcdstore.LastSegment(string(kv.Key)); ok {
				s.cur.Shards[sh] = kv.ModRevision
			}
		}
		s.cur.Report.Revision = s.cur.Rev
		if err := s.save(ctx); err != nil {
			return err
		}
	}
	holds, err := cli.Get(ctx, keys.RefHolds(), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(s.cur.Rev))
	if err != nil {
		if sweep.IsCompacted(err) {
			return sweep.Abandon(fmt.Errorf("etcd revision %d, which the digest sweep reads references at, was compacted; the next pass starts over: %w", s.cur.Rev, err))
		}
		return fmt.Errorf("digestsweep: read reference holds: %w", err)
	}
	if holds.Count > 0 {
		s.keepAll(fmt.Sprintf("%d reference hold(s) exist at revision %d: a complete into a reference source is recording its references", holds.Count, s.cur.Rev))
	}
	if why, err := s.layoutsDiffer(ctx); err != nil {
		return err
	} else if why != "" {
		s.keepAll(why)
	}
	why, err := s.unrecorded(ctx)
	if err != nil {
		return err
	}
	if why != "" {
		s.keepAll(why)
	}
	if s.planes, err = s.frontiers(ctx); err != nil {
		return err
	}
	return nil
}

// inventories returns the pass's inventories of etcd, in the order they
// are asked: the references first, as they retain most blobs. The uploads
// inventory (uploadsInventory) is asked after them, about fewer blobs (see
// uploadsAhead).
func (s *digestSweep) inventories() []Inventory {
	return s.inventoriesCounting(&s.cur.Report.StalePlacements)
}

// inventoriesCounting is inventories, counting stale placements in stale.
func (s *digestSweep) inventoriesCounting(stale *int64) []Inventory {
	cli, keys := s.cli(), s.keys()
	return []Inventory{
		refsInventory{cli: cli, keys: keys, rev: s.cur.Rev},
		trashInventory{cli: cli, keys: keys, rev: s.cur.Rev, now: s.now, elapsed: s.run.Elapsed},
		placementsInventory{cli: cli, keys: keys, rev: s.cur.Rev, now: s.now, grace: s.cfg.PlacementGrace, stale: stale},
	}
}

// uploadsInventory returns the pass's inventory of multipart uploads on
// the backend.
func (s *digestSweep) uploadsInventory() uploadsInventory {
	return uploadsInventory{s3: s.s3, cli: s.cli(), keys: s.keys(), parallel: s.parallel}
}

// frontiers reads the configured planes' frontiers; a plane that has not
// reported stands at 0.
func (s *digestSweep) frontiers(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(s.cfg.Planes))
	for _, pl := range s.cfg.Planes {
		out[pl] = 0
	}
	if len(out) == 0 {
		return out, nil
	}
	resp, err := s.cli().Get(ctx, s.keys().Frontiers(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("digestsweep: read frontiers: %w", err)
	}
	for _, kv := range resp.Kvs {
		var f etcdstore.Frontier
		if err := etcdstore.DecodeKV(etcdstore.FrontierRecord, kv, &f); err != nil {
			if errors.Is(err, etcdstore.ErrNewerRecord) {
				return nil, err
			}
			// An unreadable frontier cannot prove anything: its plane
			// stays at 0 if it is one of ours.
			s.log.Warn("frontier does not decode", "key", string(kv.Key), "err", err)
			continue
		}
		if _, ok := out[f.Plane]; ok {
			out[f.Plane] = f.Revision
		}
	}
	return out, nil
}

// applied reports whether every configured plane has applied revision rev.
func (s *digestSweep) applied(rev int64) bool {
	for _, at := range s.planes {
		if at < rev {
			return false
		}
	}
	return true
}

// page judges one listing page, which the inventories have read, and
// writes its tombstones. It returns
// what it counted, which the caller adds to the cursor with the position.
func (s *digestSweep) page(ctx context.Context, j judgedPage) (Report, error) {
	t, blobs, retained := j.t, j.blobs, j.retained
	if len(blobs) == 0 {
		return t, nil
	}
	if j.rerr != nil {
		return t, s.inventoryFailed(ctx, j.rerr)
	}
	s.run.Fire(FaultBeforeTombstone)
	tombs, rev, err := s.readTombstones(ctx, digestsOf(blobs))
	if err != nil {
		return t, err
	}
	uploading, err := s.uploadsJudged(ctx, j, tombs)
	if err != nil {
		return t, s.inventoryFailed(ctx, err)
	}
	var (
		writes []digestWrite
		outs   []outcome
		sizes  []int64
	)
	for _, b := range blobs {
		by, kept := retained[b.Digest]
		if !kept && uploading[b.Digest] {
			by, kept = "uploads", true
		}
		if kept {
			t.Retained++
			if t.RetainedBy == nil {
				t.RetainedBy = map[string]int64{}
			}
			t.RetainedBy[by]++
		}
		cur := tombs[b.Digest]
		var tomb *etcdstore.Tombstone
		if cur != nil {
			tomb = &cur.Value
		}
		var ord rebuildOrder
		if cur != nil {
			ord = rebuildOrder{decided: cur.ModRev, rebuilt: s.cur.Rebuild.Proof}
		}
		j := judge(kept, tomb, b, s.cur.Pass, s.cur.Shards[etcdstore.RefShard(b.Digest)], ord, s.applied, s.cur.Report.Rebuild.Failed != "")
		if j.to == "" {
			j.out.count(&t, b.Size)
			continue
		}
		writes = append(writes, s.tombstoneWrite(b, cur, j, rev, by))
		outs, sizes = append(outs, j.out), append(sizes, b.Size)
	}
	landed, _, err := s.commit(ctx, writes)
	if err != nil {
		return t, err
	}
	for i, ok := range landed {
		if ok {
			outs[i].count(&t, sizes[i])
		} else {
			t.Changed++
		}
	}
	return t, nil
}

// inventoryFailed settles an inventory's failure to answer about a page:
// an ended context, a lost term or a compacted pass revision stop the
// pass; anything else keeps everything for the rest of it.
func (s *digestSweep) inventoryFailed(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil, errors.Is(err, sweep.ErrFenced):
		return err
	case sweep.IsCompacted(err):
		return sweep.Abandon(fmt.Errorf("etcd revision %d, which the digest sweep reads references at, was compacted; the next pass starts over: %w", s.cur.Rev, err))
	}
	s.keepAll(err.Error())
	return nil
}

// retained asks every inventory about the blobs none before it retained,
// and returns each retained digest with the inventory that retained it.
func (s *digestSweep) retained(ctx context.Context, blobs []Blob, invs []Inventory) (map[string]string, error) {
	out := make(map[string]string, len(blobs))
	left := blobs
	for _, inv := range invs {
		if len(left) == 0 {
			break
		}
		got, err := inv.Retained(ctx, left)
		if err != nil {
			return nil, fmt.Errorf("inventory %s: %w", inv.Name(), err)
		}
		rest := left[:0:0]
		for _, b := range left {
			if got[b.Digest] {
				out[b.Digest] = inv.Name()
			} else {
				rest = append(rest, b)
			}
		}
		left = rest
	}
	return out, nil
}

// tombstoneWrite is the transaction that records judgement j about blob
// b: it compares the tombstone as read (absent when there was none) and,
// for a verdict that advances reclamation, the reference revision of the
// digest's shard at the pass revision, so that a reference committed after
// the proof makes it fail. frontier is the etcd revision when the
// tombstones were read: the required frontier of a new pending round.
func (s *digestSweep) tombstoneWrite(b Blob, cur *sweepTombstone, j judgement, frontier int64, by string) digestWrite {
	keys := s.keys()
	key := keys.Tombstone(b.Digest)
	shard := etcdstore.RefShard(b.Digest)
	t := etcdstore.Tombstone{Digest: b.Digest}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if cur != nil {
		t = cur.Value
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRev)
	}
	cmps := []clientv3.Cmp{cmp}
	now := s.clock().UTC()
	if t.State != j.to {
		t.Since = now
	}
	t.State, t.Term, t.Pass = j.to, s.term.N, s.cur.Pass
	if j.to == etcdstore.TombstoneSkipped {
		t.Reason = "retained by " + by
		return digestWrite{cmps: cmps, ops: []clientv3.Op{clientv3.OpPut(key, etcdstore.MarshalRecord(t))}}
	}
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(keys.RefRev(shard)), "=", s.cur.Shards[shard]))
	t.Bucket, t.Key, t.Size = b.Bucket, b.Key, b.Size
	t.RefRev, t.Reason = s.cur.Shards[shard], ""
	if j.fresh {
		t.Frontier, t.Since = frontier, now
		t.Attempts++
	}
	if j.frontier > 0 {
		t.Frontier = j.frontier
	}
	return digestWrite{cmps: cmps, ops: []clientv3.Op{clientv3.OpPut(key, etcdstore.MarshalRecord(t))}}
}

// sweepTombstone is a tombstone with the mod revision it was read at.
type sweepTombstone = etcdstore.Versioned[etcdstore.Tombstone]

// readTombstones reads the current tombstones of digests, and the etcd
// revision they were read at. A tombstone that does not decode is left
// out and logged; its digest is then judged as if it had none, and the
// write made from that fails its comparison (the key exists), so nothing
// is decided from a record that cannot be read.
func (s *digestSweep) readTombstones(ctx context.Context, digests []string) (map[string]*sweepTombstone, int64, error) {
	out := make(map[string]*sweepTombstone, len(digests))
	if len(digests) == 0 {
		return out, 0, nil
	}
	keys := s.keys()
	sorted := slices.Sorted(slices.Values(digests))
	want := make(map[string]bool, len(sorted))
	for _, d := range sorted {
		want[d] = true
	}
	end := keys.Tombstone(sorted[len(sorted)-1]) + "\x00"
	var rev int64
	err := sweepScan(ctx, s.cli(), keys.Tombstone(sorted[0]), end, sweepRangeLimit, func(kv *mvccpb.KeyValue, r int64) error {
		if rev == 0 {
			rev = r
		}
		d, ok := etcdstore.LastSegment(string(kv.Key))
		if !ok || !want[d] {
			return nil
		}
		var t etcdstore.Tombstone
		if err := etcdstore.DecodeKV(etcdstore.TombstoneRecord, kv, &t); err != nil {
			if errors.Is(err, etcdstore.ErrNewerRecord) {
				return err
			}
			s.log.Warn("tombstone does not decode; its digest is left alone", "key", string(kv.Key), "err", err)
			return nil
		}
		out[d] = &sweepTombstone{Value: t, ModRev: kv.ModRevision}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("digestsweep: read tombstones: %w", err)
	}
	if rev == 0 {
		// No tombstone in the range: one more read says where etcd stands.
		resp, err := s.cli().Get(ctx, keys.Tombstones(), clientv3.WithCountOnly(), clientv3.WithPrefix())
		if err != nil {
			return nil, 0, fmt.Errorf("digestsweep: read tombstones: %w", err)
		}
		rev = resp.Header.Revision
	}
	return out, rev, nil
}
