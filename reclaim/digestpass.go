package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
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
	for s.cur.Report.Kept == "" && s.cur.NS < len(nss) {
		ns := &nss[s.cur.NS]
		page, err := s.r.s3.ListObjects(ctx, ns.Bucket, ns.Prefix, s.cur.After, s.r.cfg.BatchSize)
		if errors.Is(err, s3client.ErrNoSuchBucket) {
			// A bucket that does not exist holds no blobs to judge.
			s.r.log.Warn("digest sweep: the bucket of a namespace does not exist", "namespace", ns.Name, "bucket", ns.Bucket)
			page = s3client.ObjectPage{Done: true}
		} else if err != nil {
			return fmt.Errorf("reclaim: list namespace %s: %w", ns.Name, err)
		}
		delta, err := s.page(ctx, ns, page.Objects)
		if err != nil {
			return err
		}
		s.cur.Report.plus(delta)
		s.cur.After = page.Next
		if page.Done {
			s.cur.NS, s.cur.After = s.cur.NS+1, ""
		}
		if err := s.save(ctx); err != nil {
			return err
		}
		s.r.fault(FaultDigestPage)
	}
	return s.judgePlan(ctx)
}

// startTombstones fixes the pass revision (once per pass), and reads what
// every page is judged with: the reference holds at that revision, the
// planes' frontiers and the inventories.
func (s *digestSweep) startTombstones(ctx context.Context) error {
	cli, keys := s.r.cli(), s.r.keys()
	if s.cur.Rev == 0 {
		// One read gives the pass revision and every shard's reference
		// revision at it.
		resp, err := cli.Get(ctx, keys.RefRevs(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return fmt.Errorf("reclaim: read reference revisions: %w", err)
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
		if isCompacted(err) {
			return abandon(fmt.Errorf("etcd revision %d, which the digest sweep reads references at, was compacted; the next pass starts over: %w", s.cur.Rev, err))
		}
		return fmt.Errorf("reclaim: read reference holds: %w", err)
	}
	if holds.Count > 0 {
		s.keepAll(fmt.Sprintf("%d reference hold(s) exist at revision %d: a complete into a reference source is recording its references", holds.Count, s.cur.Rev))
	}
	if s.planes, err = s.frontiers(ctx); err != nil {
		return err
	}
	s.invs = s.inventories()
	return nil
}

// inventories returns the pass's inventories, in the order they are asked:
// the cheap etcd reads first, so that the backend is asked only about the
// blobs nothing else retains.
func (s *digestSweep) inventories() []Inventory {
	cli, keys := s.r.cli(), s.r.keys()
	return []Inventory{
		refsInventory{cli: cli, keys: keys, rev: s.cur.Rev},
		trashInventory{cli: cli, keys: keys, rev: s.cur.Rev, now: s.now},
		placementsInventory{cli: cli, keys: keys, rev: s.cur.Rev, now: s.now, grace: s.cfg.PlacementGrace, stale: &s.cur.Report.StalePlacements},
		uploadsInventory{s3: s.r.s3, cli: cli, keys: keys, parallel: s.r.cfg.Parallel},
	}
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
	resp, err := s.r.cli().Get(ctx, s.r.keys().Frontiers(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reclaim: read frontiers: %w", err)
	}
	for _, kv := range resp.Kvs {
		var f etcdstore.Frontier
		if err := json.Unmarshal(kv.Value, &f); err != nil {
			// An unreadable frontier cannot prove anything: its plane
			// stays at 0 if it is one of ours.
			s.r.log.Warn("frontier does not decode", "key", string(kv.Key), "err", err)
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

// page judges one listing page of ns and writes its tombstones. It returns
// what it counted, which the caller adds to the cursor with the position.
func (s *digestSweep) page(ctx context.Context, ns *cas.Namespace, objs []s3client.Object) (DigestReport, error) {
	var t DigestReport
	blobs := make([]Blob, 0, len(objs))
	for _, o := range objs {
		d, ok := ns.Digest(o.Key)
		if !ok {
			t.Ignored++
			continue
		}
		blobs = append(blobs, Blob{Digest: d, Bucket: ns.Bucket, Key: o.Key, Size: o.Size, Modified: o.Modified})
		t.Stored++
		t.StoredBytes += o.Size
	}
	if len(blobs) == 0 {
		return t, nil
	}
	retained, err := s.retained(ctx, blobs)
	if err != nil {
		switch {
		case ctx.Err() != nil, errors.Is(err, ErrFenced):
			return t, err
		case isCompacted(err):
			return t, abandon(fmt.Errorf("etcd revision %d, which the digest sweep reads references at, was compacted; the next pass starts over: %w", s.cur.Rev, err))
		}
		s.keepAll(err.Error())
		return t, nil
	}
	s.r.fault(FaultDigestBeforeTombstone)
	tombs, rev, err := s.readTombstones(ctx, digestsOf(blobs))
	if err != nil {
		return t, err
	}
	var (
		writes []digestWrite
		outs   []outcome
		sizes  []int64
	)
	for _, b := range blobs {
		by, kept := retained[b.Digest]
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
		j := judge(kept, tomb, b, s.cur.Pass, s.cur.Shards[etcdstore.RefShard(b.Digest)], s.applied, s.cur.Report.Rebuild.Failed != "")
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

// retained asks every inventory about the blobs none before it retained,
// and returns each retained digest with the inventory that retained it.
func (s *digestSweep) retained(ctx context.Context, blobs []Blob) (map[string]string, error) {
	out := make(map[string]string, len(blobs))
	left := blobs
	for _, inv := range s.invs {
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
func (s *digestSweep) tombstoneWrite(b Blob, cur *tombstoneRead, j judgement, frontier int64, by string) digestWrite {
	keys := s.r.keys()
	key := keys.Tombstone(b.Digest)
	shard := etcdstore.RefShard(b.Digest)
	t := etcdstore.Tombstone{Digest: b.Digest}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if cur != nil {
		t = cur.Value
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRev)
	}
	cmps := []clientv3.Cmp{cmp}
	now := s.r.now().UTC()
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

// outcome is how a judged blob is counted in the report.
type outcome int

const (
	outRetained  outcome = iota // retained, its tombstone (if any) already terminal
	outPending                  // pending, waiting for a later pass or its frontier
	outNew                      // made pending in this pass
	outReady                    // ready for this pass's collector
	outSkipped                  // its tombstone made skipped
	outDuplicate                // its digest's tombstone is about another copy
)

// judgement is the verdict about one stored blob: the state its tombstone
// moves to ("" writes nothing) and how it is counted once that holds.
type judgement struct {
	to etcdstore.TombstoneState
	// fresh starts a new pending round: a new required frontier, one more
	// attempt.
	fresh bool
	// frontier, when set, raises the required frontier.
	frontier int64
	out      outcome
}

// judge decides about blob b given whether it is retained and its
// tombstone (nil: none). A tombstone advances at most one step per pass:
// pending is made ready only by a later pass than the one that wrote it,
// and only once every plane applied its frontier; a ready tombstone is
// confirmed again by every pass, with that pass's reference revision,
// before the collector may act on it. noReady (the rebuild failed) holds
// every pending and ready tombstone where it is.
//
// shardRev is the reference revision of the digest's shard at the pass
// revision. Above the tombstone's frontier, it says a reference to the
// digest may have come and gone since the frontier was set (an overwrite
// drops references without a trash), and a plane holding that reference
// must not lose the blob: the frontier is raised to it.
//
// A digest stored in two places has one tombstone, about one copy; the
// other copy leaves it alone until it is settled.
func judge(retained bool, t *etcdstore.Tombstone, b Blob, pass, shardRev int64, applied func(int64) bool, noReady bool) judgement {
	return judgeSteps(retained, t, b, pass, shardRev, applied, noReady, nil)
}

// The rules of judge as an explanation names them (docs/admin-api.md), in
// checklist order.
const (
	ruleRetainedLive       = "retained_live_tombstone"
	ruleRetained           = "retained"
	ruleTombstoneElsewhere = "tombstone_elsewhere"
	ruleNoLiveTombstone    = "no_live_tombstone"
	ruleWaitThisPass       = "waiting_this_pass"
	ruleConfirmedThisPass  = "confirmed_this_pass"
	ruleFrontierApplied    = "frontier_applied"
	ruleFrontierWait       = "frontier_wait"
)

// judgeSteps is judge, recording every rule it tries on cl (nil records
// nothing), so that the explanation of a digest runs the sweep's own
// judgement rather than a description of it.
func judgeSteps(retained bool, t *etcdstore.Tombstone, b Blob, pass, shardRev int64, applied func(int64) bool, noReady bool, cl *checklist) judgement {
	elsewhere := t != nil && t.Bucket != "" && (t.Bucket != b.Bucket || t.Key != b.Key)
	live := t != nil && !t.State.Terminal()
	state := func() Values {
		if t == nil {
			return Values{"tombstone": nil}
		}
		return Values{"tombstone": t.State, "tombstone_pass": t.Pass, "tombstone_frontier": t.Frontier, "next_pass": pass}
	}

	match := retained && live && !elsewhere
	cl.step(ruleRetainedLive, match, func() (string, Values) {
		switch {
		case match:
			return fmt.Sprintf("retained, with a %s tombstone: the next pass makes it skipped", t.State), state()
		case !retained:
			return "not retained", state()
		case t == nil:
			return "retained, without a tombstone to make skipped", state()
		case elsewhere:
			return fmt.Sprintf("retained; its tombstone is about another copy (%s/%s)", t.Bucket, t.Key), state()
		}
		return fmt.Sprintf("retained; its tombstone is already %s", t.State), state()
	})
	if match {
		return judgement{to: etcdstore.TombstoneSkipped, out: outSkipped}
	}
	cl.step(ruleRetained, retained, func() (string, Values) {
		if retained {
			return "retained: the sweep leaves it alone", nil
		}
		return "nothing retains it", nil
	})
	if retained {
		// A copy retained for its own sake (young, being uploaded) says
		// nothing about the copy the tombstone is about.
		return judgement{out: outRetained}
	}
	match = elsewhere && live
	cl.step(ruleTombstoneElsewhere, match, func() (string, Values) {
		v := state()
		if t != nil {
			v["tombstone_bucket"], v["tombstone_key"] = t.Bucket, t.Key
		}
		if match {
			return fmt.Sprintf("its %s tombstone is about another copy (%s/%s): this copy waits until that one is settled", t.State, t.Bucket, t.Key), v
		}
		return "no live tombstone about another copy", v
	})
	if match {
		return judgement{out: outDuplicate}
	}
	cl.step(ruleNoLiveTombstone, !live, func() (string, Values) {
		if !live {
			return "no pending or ready tombstone: the next pass records a pending one, whose required frontier is the etcd revision it is written at", state()
		}
		return fmt.Sprintf("a %s tombstone exists", t.State), state()
	})
	if !live {
		return judgement{to: etcdstore.TombstonePending, fresh: true, out: outNew}
	}
	thisPass := t.State == etcdstore.TombstonePending && t.Pass >= pass
	match = noReady || thisPass
	cl.step(ruleWaitThisPass, match, func() (string, Values) {
		v := state()
		v["rebuild_failed"] = noReady
		switch {
		case noReady:
			return "the rebuild failed in this pass: no tombstone advances", v
		case thisPass:
			return fmt.Sprintf("made pending in pass %d, which is still running: a later pass may make it ready", t.Pass), v
		}
		return "not made pending in the pass that judges it", v
	})
	if match {
		return judgement{out: outPending}
	}
	match = t.State == etcdstore.TombstoneReady && t.Pass >= pass
	cl.step(ruleConfirmedThisPass, match, func() (string, Values) {
		if match {
			return fmt.Sprintf("confirmed ready in pass %d, which is still running: its collector deletes the blob", t.Pass), state()
		}
		return "not confirmed ready in the pass that judges it", state()
	})
	if match {
		return judgement{out: outReady} // confirmed in this pass already (resumed)
	}
	need, raised := t.Frontier, int64(0)
	if shardRev > need {
		need, raised = shardRev, shardRev
	}
	ok := applied(need)
	frontier := func() Values {
		v := state()
		v["shard_ref_revision"], v["required_frontier"] = shardRev, need
		return v
	}
	cl.step(ruleFrontierApplied, ok, func() (string, Values) {
		if ok {
			return fmt.Sprintf("every plane has applied revision %d: the next pass makes it ready and its collector deletes the blob", need), frontier()
		}
		return fmt.Sprintf("not every plane has applied revision %d", need), frontier()
	})
	if ok {
		return judgement{to: etcdstore.TombstoneReady, frontier: raised, out: outReady}
	}
	back := t.State == etcdstore.TombstoneReady || raised > 0
	cl.step(ruleFrontierWait, true, func() (string, Values) {
		why := fmt.Sprintf("pending until every plane has applied revision %d", need)
		switch {
		case raised > 0:
			why += fmt.Sprintf(" (raised from %d: a reference of its shard moved at revision %d, after the frontier was set)", t.Frontier, shardRev)
		case t.State == etcdstore.TombstoneReady:
			why = "ready, but a plane has not applied its frontier (a plane was added or went back): " + why
		}
		return why, frontier()
	})
	if back {
		// Ready, but a plane was added or the frontier rose: it waits
		// again, with the frontier it needs recorded.
		return judgement{to: etcdstore.TombstonePending, frontier: raised, out: outPending}
	}
	return judgement{out: outPending}
}

// count adds a judged blob to r.
func (o outcome) count(r *DigestReport, size int64) {
	switch o {
	case outPending:
		r.Pending++
	case outNew:
		r.Pending++
		r.NewPending++
	case outReady:
		r.Ready++
		r.ReadyBytes += size
	case outSkipped:
		r.Skipped++
	case outDuplicate:
		r.Duplicates++
	}
}

// judgePlan ends the tombstone phase: a sweep that keeps everything goes to
// the prune; otherwise the breaker compares the deletions with its
// ceilings, and a refused plan goes to the prune too.
func (s *digestSweep) judgePlan(ctx context.Context) error {
	rep := &s.cur.Report
	refused := s.breaker()
	_, kept := s.keepsAll()
	switch {
	case kept:
		s.cur.Phase = digestPhasePrune
	case refused != "":
		rep.Refused = refused
		s.cur.Phase = digestPhasePrune
		if s.dry {
			s.r.log.Warn("the digest breaker would refuse this plan", "pass", s.cur.Pass, "refused", refused)
		} else {
			s.r.metrics.digestRefusals.Inc()
			s.r.log.Error("digest deletions refused by the breaker: nothing deleted", "pass", s.cur.Pass, "term", s.term.N, "refused", refused)
		}
	case s.dry:
		// A plan deletes nothing; it says what the collector would.
		rep.Deleted, rep.Bytes = rep.Ready, rep.ReadyBytes
		s.cur.Phase = digestPhasePrune
	default:
		s.cur.Phase = digestPhaseCollect
	}
	return s.save(ctx)
}

// breaker checks this pass's deletions (the ready blobs) against the
// ceilings and returns why they are refused, or "".
func (s *digestSweep) breaker() string {
	rep := &s.cur.Report
	del, stored := rep.Ready, rep.Stored
	rep.Breaker = DigestBreaker{DeleteBlobs: del, StoredBlobs: stored, MaxDelete: s.cfg.MaxDelete, MaxDeleteFraction: s.cfg.MaxDeleteFraction}
	return overCeiling(del, stored, s.cfg.MaxDelete, s.cfg.MaxDeleteFraction, "blobs")
}

// plus adds the counts of a page (or batch) to r.
func (r *DigestReport) plus(o DigestReport) {
	r.Pending += o.Pending
	r.Ready += o.Ready
	r.ReadyBytes += o.ReadyBytes
	r.Skipped += o.Skipped
	r.Deleted += o.Deleted
	r.Bytes += o.Bytes
	r.Stored += o.Stored
	r.StoredBytes += o.StoredBytes
	r.Retained += o.Retained
	r.NewPending += o.NewPending
	r.Changed += o.Changed
	r.Ignored += o.Ignored
	r.Duplicates += o.Duplicates
	r.Failed += o.Failed
	r.Unknown += o.Unknown
	r.Released += o.Released
	for k, v := range o.RetainedBy {
		if r.RetainedBy == nil {
			r.RetainedBy = map[string]int64{}
		}
		r.RetainedBy[k] += v
	}
}
