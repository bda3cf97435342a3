package digests

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// The collector deletes the bytes of ready tombstones. For each it arms
// guards/<digest> in a transaction that also compares that the tombstone is
// as the tombstone phase left it, that the digest's shard has had no
// reference write since the verdict, and that no reference, placement or
// reference hold exists. While the guard is armed the gateway refuses any
// write that would reference or place the digest, so the delete that
// follows cannot race with one. The guard is released once the backend
// says (or a HEAD shows) what became of the bytes; when nobody can tell,
// it stays armed for a later pass to settle.

// sweepGuard is an armed guard with its mod revision.
type sweepGuard = etcdstore.Versioned[etcdstore.Guard]

// settleGuards settles the guards found armed when the sweep starts: they
// were left by a collector that was cut short (a crash, a lost term, a
// delete whose outcome nobody learnt). Each blob is looked at: gone, its
// tombstone is recorded deleted and the guard released; present, the
// guard is taken over by this pass, whose collector deletes the blob (safe:
// while the guard was armed nothing could reference or place the digest;
// the collector still checks that no reference was recorded since, as the
// rebuild may have). A dry run only counts them.
func (s *digestSweep) settleGuards(ctx context.Context) error {
	keys := s.keys()
	err := sweepScan(ctx, s.cli(), keys.Guards(), clientv3.GetPrefixRangeEnd(keys.Guards()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		s.cur.Report.Guards++
		if s.dry {
			return nil
		}
		return s.settleGuard(ctx, kv)
	})
	if err != nil {
		return fmt.Errorf("reclaim: settle guards: %w", err)
	}
	return nil
}

// settleGuard settles one guard found armed.
func (s *digestSweep) settleGuard(ctx context.Context, kv *mvccpb.KeyValue) error {
	keys := s.keys()
	d, _ := etcdstore.LastSegment(string(kv.Key))
	var g etcdstore.Guard
	if err := json.Unmarshal(kv.Value, &g); err != nil || g.Digest == "" {
		g = etcdstore.Guard{Digest: d}
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
		// Nothing says where the blob is, so there is nothing to delete.
		return s.commitLogged(ctx, "guard without a blob released", d, release)
	}
	_, herr := s.s3.Head(ctx, g.Bucket, g.Key)
	switch {
	case errors.Is(herr, s3client.ErrNoSuchKey):
		w := digestWrite{cmps: []clientv3.Cmp{guardCmp}, ops: []clientv3.Op{clientv3.OpDelete(string(kv.Key))}, delta: &Report{}}
		if tomb != nil && !tomb.Value.State.Terminal() {
			w.ops = append(w.ops, clientv3.OpPut(keys.Tombstone(d), etcdstore.MarshalRecord(s.deleted(tomb.Value, "deleted; settled after the collector was cut short"))))
			w.delta = &Report{Deleted: 1, Bytes: tomb.Value.Size}
		}
		landed, _, err := s.commit(ctx, []digestWrite{w})
		if err == nil && landed[0] {
			s.metrics.Deleted(w.delta.Deleted, w.delta.Bytes)
			// The pass that deleted the bytes was cut short, most likely
			// before its audit line: this line records the delete.
			audit.Record(s.log, audit.DeleteBlob, d, "guarded delete of an earlier pass found done: the blob is gone",
				"pass", s.cur.Pass, "term", s.term.N, "bucket", g.Bucket, "key", g.Key, "guard_term", g.Term, "guard_pass", g.Pass)
		}
		return err
	case herr != nil:
		return fmt.Errorf("reclaim: look at guarded blob %s/%s: %w", g.Bucket, g.Key, herr)
	case tomb == nil || tomb.Value.State != etcdstore.TombstoneReady:
		return s.commitLogged(ctx, "guard of a blob that is no longer ready released", d, release)
	}
	g.Term, g.Pass, g.At = s.term.N, s.cur.Pass, s.clock().UTC()
	t := tomb.Value
	t.Term, t.Pass = s.term.N, s.cur.Pass
	return s.commitLogged(ctx, "guard taken over for this pass's collector", d, digestWrite{
		cmps: []clientv3.Cmp{guardCmp, clientv3.Compare(clientv3.ModRevision(keys.Tombstone(d)), "=", tomb.ModRev)},
		ops: []clientv3.Op{
			clientv3.OpPut(string(kv.Key), etcdstore.MarshalRecord(g)),
			clientv3.OpPut(keys.Tombstone(d), etcdstore.MarshalRecord(t)),
		},
	})
}

// commitLogged commits one write and logs what it did. A write whose
// records changed meanwhile is someone else's to settle.
func (s *digestSweep) commitLogged(ctx context.Context, what, digest string, w digestWrite) error {
	landed, _, err := s.commit(ctx, []digestWrite{w})
	if err != nil {
		return err
	}
	if landed[0] {
		s.log.Info(what, "pass", s.cur.Pass, "term", s.term.N, "digest", digest)
	}
	return nil
}

// readTombstone reads digest's tombstone; nil when there is none or it
// does not decode.
func (s *digestSweep) readTombstone(ctx context.Context, digest string) (*sweepTombstone, error) {
	resp, err := s.cli().Get(ctx, s.keys().Tombstone(digest))
	if err != nil {
		return nil, fmt.Errorf("reclaim: read tombstone: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var t etcdstore.Tombstone
	if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		s.log.Warn("tombstone does not decode", "digest", digest, "err", err)
		return nil, nil
	}
	return &sweepTombstone{Value: t, ModRev: resp.Kvs[0].ModRevision}, nil
}

// deleted returns t recorded as deleted by this pass.
func (s *digestSweep) deleted(t etcdstore.Tombstone, reason string) etcdstore.Tombstone {
	t.State, t.Since, t.Term, t.Pass, t.Reason = etcdstore.TombstoneDeleted, s.clock().UTC(), s.term.N, s.cur.Pass, reason
	return t
}

// releaseGuards releases the guards this pass took over, when it deletes
// nothing: their tombstones stay ready for a later pass.
func (s *digestSweep) releaseGuards(ctx context.Context) error {
	if s.dry {
		return nil
	}
	keys := s.keys()
	var writes []digestWrite
	err := sweepScan(ctx, s.cli(), keys.Guards(), clientv3.GetPrefixRangeEnd(keys.Guards()), sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		var g etcdstore.Guard
		if json.Unmarshal(kv.Value, &g) == nil && g.Pass == s.cur.Pass {
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
		return fmt.Errorf("reclaim: release guards: %w", err)
	}
	return nil
}

// collect runs the collector from the cursor: the tombstones are read in
// pages of the batch size, and the ready ones this pass confirmed are
// guarded, deleted and settled page by page, so memory is bounded by the
// batch.
func (s *digestSweep) collect(ctx context.Context) error {
	keys := s.keys()
	start, end := keys.Tombstones(), clientv3.GetPrefixRangeEnd(keys.Tombstones())
	if s.cur.Collect != "" {
		start = s.cur.Collect + "\x00"
	}
	for start < end {
		resp, err := s.cli().Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(int64(s.batch)))
		if err != nil {
			return fmt.Errorf("reclaim: read tombstones: %w", err)
		}
		if len(resp.Kvs) == 0 {
			break
		}
		if err := s.collectPage(ctx, resp.Kvs); err != nil {
			return err
		}
		s.cur.Collect = string(resp.Kvs[len(resp.Kvs)-1].Key)
		if err := s.save(ctx); err != nil {
			return err
		}
		s.run.Fire(FaultCollected)
		if !resp.More {
			break
		}
		start = s.cur.Collect + "\x00"
	}
	s.cur.Phase = digestPhasePrune
	return s.save(ctx)
}

// armed is a blob whose guard is armed by this pass.
type armed struct {
	tomb     etcdstore.Tombstone
	guardRev int64
}

// collectPage guards the page's ready tombstones, deletes their blobs and
// settles them. A guard on a tombstone that is no longer ready for this
// pass (one taken over that the tombstone phase then found retained) is
// released.
func (s *digestSweep) collectPage(ctx context.Context, kvs []*mvccpb.KeyValue) error {
	first, _ := etcdstore.LastSegment(string(kvs[0].Key))
	last, _ := etcdstore.LastSegment(string(kvs[len(kvs)-1].Key))
	guards, err := s.readGuards(ctx, first, last)
	if err != nil {
		return err
	}
	// Each write is a release, an arm or a confirm of a guard.
	type intent struct {
		tomb etcdstore.Tombstone
		kind string
	}
	var (
		writes  []digestWrite
		intents []intent
	)
	for _, kv := range kvs {
		var t etcdstore.Tombstone
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			continue
		}
		t.Digest, _ = etcdstore.LastSegment(string(kv.Key))
		g := guards[t.Digest]
		ready := t.State == etcdstore.TombstoneReady && t.Pass == s.cur.Pass
		switch {
		case g != nil && !ready:
			writes, intents = append(writes, s.releaseWrite(t.Digest, g.ModRev)), append(intents, intent{t, "release"})
		case ready && g != nil:
			writes, intents = append(writes, s.armWrite(t, kv.ModRevision, g)), append(intents, intent{t, "confirm"})
		case ready:
			writes, intents = append(writes, s.armWrite(t, kv.ModRevision, nil)), append(intents, intent{t, "arm"})
		}
	}
	landed, revs, err := s.commit(ctx, writes)
	if err != nil {
		return err
	}
	var (
		guarded []armed
		undo    []digestWrite
	)
	for i, in := range intents {
		switch {
		case in.kind == "release":
		case landed[i]:
			guarded = append(guarded, armed{tomb: in.tomb, guardRev: revs[i]})
		default:
			if in.kind == "confirm" {
				// A reference was recorded while the guard was armed (the
				// rebuild may record one): the guard goes, the blob stays.
				undo = append(undo, s.releaseWrite(in.tomb.Digest, guards[in.tomb.Digest].ModRev))
			}
			s.cur.Report.Changed++
			s.log.Info("blob not guarded: its references or placements moved since the verdict", "pass", s.cur.Pass, "digest", in.tomb.Digest)
		}
	}
	if _, _, err := s.commit(ctx, undo); err != nil {
		return err
	}
	if len(guarded) == 0 {
		return nil
	}
	s.run.Fire(FaultGuarded)
	return s.deleteGuarded(ctx, guarded)
}

// readGuards reads the guards of the digests from first to last.
func (s *digestSweep) readGuards(ctx context.Context, first, last string) (map[string]*sweepGuard, error) {
	keys := s.keys()
	out := map[string]*sweepGuard{}
	err := sweepScan(ctx, s.cli(), keys.Guard(first), keys.Guard(last)+"\x00", sweepRangeLimit, func(kv *mvccpb.KeyValue, _ int64) error {
		d, ok := etcdstore.LastSegment(string(kv.Key))
		if !ok {
			return nil
		}
		var g etcdstore.Guard
		_ = json.Unmarshal(kv.Value, &g) // the key is what guards
		out[d] = &sweepGuard{Value: g, ModRev: kv.ModRevision}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reclaim: read guards: %w", err)
	}
	return out, nil
}

// releaseWrite removes digest's guard as read.
func (s *digestSweep) releaseWrite(digest string, modRev int64) digestWrite {
	key := s.keys().Guard(digest)
	return digestWrite{
		cmps:  []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)},
		ops:   []clientv3.Op{clientv3.OpDelete(key)},
		delta: &Report{Released: 1},
	}
}

// armWrite arms digest t.Digest's guard, or confirms one this pass took
// over (g), comparing everything the delete is decided from: the tombstone
// as read (ready in this pass), no reference, placement or reference hold,
// and, for a new guard, no reference write in the digest's shard since the
// verdict (a guard taken over already kept every write of the digest out).
func (s *digestSweep) armWrite(t etcdstore.Tombstone, tombRev int64, g *sweepGuard) digestWrite {
	keys := s.keys()
	d := t.Digest
	absent := func(prefix string) clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix()
	}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(keys.Tombstone(d)), "=", tombRev),
		absent(keys.Refs(d)),
		absent(keys.Placements(d)),
		absent(keys.RefHolds()),
	}
	if g != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(keys.Guard(d)), "=", g.ModRev))
	} else {
		cmps = append(cmps,
			clientv3.Compare(clientv3.CreateRevision(keys.Guard(d)), "=", 0),
			clientv3.Compare(clientv3.ModRevision(keys.RefRev(etcdstore.RefShard(d))), "=", t.RefRev))
	}
	guard := etcdstore.Guard{Digest: d, Bucket: t.Bucket, Key: t.Key, Term: s.term.N, Pass: s.cur.Pass, At: s.clock().UTC()}
	return digestWrite{cmps: cmps, ops: []clientv3.Op{clientv3.OpPut(keys.Guard(d), etcdstore.MarshalRecord(guard))}}
}

// blobFate is what became of a guarded blob's delete.
type blobFate int

const (
	blobGone blobFate = iota
	blobPresent
	blobUnknown
)

// deleteGuarded deletes the guarded blobs, at most 1000 to a request, and
// settles each from the backend's answer. A key whose delete failed, or
// every key of a request with no clear answer, is looked at with a HEAD
// and settled from what it shows; nothing is deleted twice blindly.
func (s *digestSweep) deleteGuarded(ctx context.Context, guarded []armed) error {
	// A term known to be over sends no delete; the fence is asked right
	// before (the guards keep it safe if the term ends in between).
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := sweep.FencedTxn(ctx, s.cli(), s.term, nil); err != nil {
		return err
	}
	slices.SortFunc(guarded, func(a, b armed) int {
		return cmp.Or(cmp.Compare(a.tomb.Bucket, b.tomb.Bucket), cmp.Compare(a.tomb.Key, b.tomb.Key))
	})
	fates := make([]blobFate, len(guarded))
	why := make([]string, len(guarded))
	for start := 0; start < len(guarded); {
		end := start + 1
		for end < len(guarded) && end-start < 1000 && guarded[end].tomb.Bucket == guarded[start].tomb.Bucket {
			end++
		}
		s.deleteBatch(ctx, guarded[start:end], fates[start:end], why[start:end])
		start = end
	}
	return s.settle(context.WithoutCancel(ctx), guarded, fates, why)
}

// deleteBatch deletes the blobs of one bucket in one request and decides
// each one's fate.
func (s *digestSweep) deleteBatch(ctx context.Context, batch []armed, fates []blobFate, why []string) {
	bucket := batch[0].tomb.Bucket
	keys := make([]string, len(batch))
	for i, a := range batch {
		keys[i] = a.tomb.Key
	}
	failed, err := s.s3.DeleteObjects(ctx, bucket, keys)
	// Looking again is finished even when the pass is cancelled, so that
	// the guards are released with what the backend holds.
	hctx := context.WithoutCancel(ctx)
	for i, a := range batch {
		code, bad := failed[a.tomb.Key]
		if err == nil && !bad {
			fates[i] = blobGone
			continue
		}
		cause := fmt.Sprintf("delete failed with %s", code)
		if err != nil {
			cause = fmt.Sprintf("delete outcome unclear (%v)", err)
		}
		_, herr := s.s3.Head(hctx, bucket, a.tomb.Key)
		switch {
		case errors.Is(herr, s3client.ErrNoSuchKey):
			fates[i], why[i] = blobGone, cause+"; looking again found the blob gone"
		case herr == nil:
			fates[i], why[i] = blobPresent, cause+"; looking again found the blob still there"
		default:
			fates[i], why[i] = blobUnknown, fmt.Sprintf("%s; looking again failed too (%v)", cause, herr)
		}
		s.log.Warn("blob delete not clear; looked again", "pass", s.cur.Pass, "bucket", bucket, "key", a.tomb.Key, "outcome", why[i])
	}
}

// settle records each guarded blob's fate: gone, its tombstone is deleted
// (with its bytes counted) and the guard released; still present, the
// guard is released and the tombstone stays ready with one more attempt;
// unknown, the guard stays armed for a later pass to look again.
func (s *digestSweep) settle(ctx context.Context, guarded []armed, fates []blobFate, why []string) error {
	keys := s.keys()
	writes := make([]digestWrite, 0, len(guarded))
	for i, a := range guarded {
		d := a.tomb.Digest
		guardCmp := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(keys.Guard(d)), "=", a.guardRev)}
		switch fates[i] {
		case blobGone:
			writes = append(writes, digestWrite{cmps: guardCmp, delta: &Report{Deleted: 1, Bytes: a.tomb.Size}, ops: []clientv3.Op{
				clientv3.OpPut(keys.Tombstone(d), etcdstore.MarshalRecord(s.deleted(a.tomb, why[i]))),
				clientv3.OpDelete(keys.Guard(d)),
			}})
		case blobPresent:
			t := a.tomb
			t.Attempts++
			t.Term, t.Reason = s.term.N, why[i]
			writes = append(writes, digestWrite{cmps: guardCmp, delta: &Report{Failed: 1}, ops: []clientv3.Op{
				clientv3.OpPut(keys.Tombstone(d), etcdstore.MarshalRecord(t)),
				clientv3.OpDelete(keys.Guard(d)),
			}})
		default:
			writes = append(writes, digestWrite{delta: &Report{Unknown: 1}})
		}
	}
	landed, _, err := s.commit(ctx, writes)
	for i, ok := range landed {
		if fates[i] != blobGone {
			continue
		}
		if ok {
			s.metrics.Deleted(1, guarded[i].tomb.Size)
		}
		// The bytes are gone whatever became of the tombstone's record.
		t := guarded[i].tomb
		reason := fmt.Sprintf("unreferenced at reference revision %d, and every plane has applied revision %d", t.RefRev, t.Frontier)
		if why[i] != "" {
			reason += "; " + why[i]
		}
		audit.Record(s.log, audit.DeleteBlob, t.Digest, reason,
			"pass", s.cur.Pass, "term", s.term.N, "bucket", t.Bucket, "key", t.Key, "bytes", t.Size, "recorded", ok)
	}
	return err
}
