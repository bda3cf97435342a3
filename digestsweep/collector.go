package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
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
		return nil, fmt.Errorf("digestsweep: read tombstone: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var t etcdstore.Tombstone
	if err := etcdstore.DecodeKV(etcdstore.TombstoneRecord, resp.Kvs[0], &t); err != nil {
		if errors.Is(err, etcdstore.ErrNewerRecord) {
			return nil, err
		}
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

// collect runs the collector from the cursor: the tombstones are read in
// pages of the batch size, and the ready ones this pass confirmed are
// guarded page by page in the pass's goroutine, then deleted and settled
// in requests of up to 1000 blobs of one bucket, digests.delete_parallel
// of them in flight (see deletes). The cursor moves past a page only once
// every blob it guarded is settled, so memory is bounded by the batch
// times the requests in flight.
func (s *digestSweep) collect(ctx context.Context) error {
	keys := s.keys()
	start, end := keys.Tombstones(), clientv3.GetPrefixRangeEnd(keys.Tombstones())
	if s.cur.Collect != "" {
		start = s.cur.Collect + "\x00"
	}
	d := s.newDeletes()
	err := s.collectPages(ctx, d, start, end)
	if err == nil {
		d.flushAll(ctx)
	}
	if werr := d.wait(ctx); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	s.cur.Phase = digestPhasePrune
	return s.save(ctx)
}

// collectPages reads the tombstones in [start, end) page by page, at most
// a batch each, a bounded stretch at the latest revision a request (see
// sweepScan), guards each page's ready ones and hands them to d. Before
// each page it compares the gateways' layouts again, and stops (keeping
// the rest) when one differs.
func (s *digestSweep) collectPages(ctx context.Context, d *deletes, start, end string) error {
	p := etcdstore.NewRangePager(s.cli().KV, start, end, etcdstore.LatestRev, int64(s.batch))
	for {
		kvs, _, err := p.Next(ctx)
		if err != nil {
			return fmt.Errorf("digestsweep: read tombstones: %w", err)
		}
		if len(kvs) == 0 {
			return nil
		}
		// A gateway of another layout that came after the plan was
		// judged may have stored, as plain objects, references to blobs
		// the plan holds ready: no further guard is armed.
		if why, err := s.layoutsDiffer(ctx); err != nil {
			return err
		} else if why != "" {
			s.keepAll(why)
			return nil
		}
		guarded, err := s.collectPage(ctx, kvs)
		if err != nil {
			return err
		}
		if err := d.add(ctx, string(kvs[len(kvs)-1].Key), guarded); err != nil {
			return err
		}
	}
}

// armed is a blob whose guard is armed by this pass, since at, guarded
// while the collector read page (a sequence number of the pass's
// collector).
type armed struct {
	tomb     etcdstore.Tombstone
	guardRev int64
	at       time.Time
	page     int
}

// collectPage guards the page's ready tombstones and returns them, to be
// deleted and settled. A guard on a tombstone that is no longer ready for this
// pass (one taken over that the tombstone phase then found retained) is
// released: it records no attempt, so no delete of its blob can be in
// flight. A guard that records an attempt is left alone.
func (s *digestSweep) collectPage(ctx context.Context, kvs []*mvccpb.KeyValue) ([]armed, error) {
	first, _ := etcdstore.LastSegment(string(kvs[0].Key))
	last, _ := etcdstore.LastSegment(string(kvs[len(kvs)-1].Key))
	guards, err := s.readGuards(ctx, first, last)
	if err != nil {
		return nil, err
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
		if err := etcdstore.DecodeKV(etcdstore.TombstoneRecord, kv, &t); err != nil {
			if errors.Is(err, etcdstore.ErrNewerRecord) {
				return nil, err
			}
			continue
		}
		t.Digest, _ = etcdstore.LastSegment(string(kv.Key))
		g := guards[t.Digest]
		switch kind := guardAction(t, g, s.cur.Pass); kind {
		case guardRelease:
			writes, intents = append(writes, s.releaseWrite(t.Digest, g.ModRev)), append(intents, intent{t, kind})
		case guardConfirm:
			writes, intents = append(writes, s.armWrite(t, kv.ModRevision, g)), append(intents, intent{t, kind})
		case guardArm:
			writes, intents = append(writes, s.armWrite(t, kv.ModRevision, nil)), append(intents, intent{t, kind})
		}
	}
	now := s.clock().UTC()
	// Each write is to one digest's guard (a page holds a digest's
	// tombstone once), so they go in several transactions at once.
	landed, revs, err := s.commitParallel(ctx, writes)
	if err != nil {
		return nil, err
	}
	var (
		guarded []armed
		undo    []digestWrite
	)
	for i, in := range intents {
		switch {
		case in.kind == guardRelease:
		case landed[i]:
			guarded = append(guarded, armed{tomb: in.tomb, guardRev: revs[i], at: now})
		default:
			if in.kind == guardConfirm {
				// A reference was recorded while the guard was armed (the
				// rebuild may record one): the guard goes, the blob stays.
				undo = append(undo, s.releaseWrite(in.tomb.Digest, guards[in.tomb.Digest].ModRev))
			}
			s.countChanged()
			s.log.Info("blob not guarded: its references or placements moved since the verdict", "pass", s.cur.Pass, "digest", in.tomb.Digest)
		}
	}
	if _, _, err := s.commit(ctx, undo); err != nil {
		return nil, err
	}
	if len(guarded) > 0 {
		s.run.Fire(FaultGuarded)
	}
	return guarded, nil
}

// What the collector does with a tombstone's guard (guardAction).
const (
	guardLeave   = ""        // nothing: no guard to touch, or one with an attempt
	guardRelease = "release" // release a guard whose tombstone is not ready for this pass
	guardConfirm = "confirm" // confirm a guard this pass took over
	guardArm     = "arm"     // arm a new guard
)

// guardAction decides what the collector does with tombstone t and its
// guard g (nil: none) in pass: only a tombstone made or confirmed ready by
// this very pass is guarded (armed, or a guard taken over confirmed), so
// only its blob can be deleted; a guard whose tombstone is not ready for
// this pass is released; a guard recording a delete attempt is left
// alone, since that delete may still be executed (settleGuards settles
// it).
func guardAction(t etcdstore.Tombstone, g *sweepGuard, pass int64) string {
	ready := t.State == etcdstore.TombstoneReady && t.Pass == pass
	switch {
	case g != nil && g.Value.Attempt != nil:
		return guardLeave
	case g != nil && !ready:
		return guardRelease
	case ready && g != nil:
		return guardConfirm
	case ready:
		return guardArm
	}
	return guardLeave
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
		// A guard that does not decode is left out: no write is made from
		// it, and an arm fails its comparison (the key exists).
		if g, ok := decodeGuard(kv); ok {
			out[d] = &sweepGuard{Value: g, ModRev: kv.ModRevision}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("digestsweep: read guards: %w", err)
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
		absent(keys.Unrecorded()),
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
