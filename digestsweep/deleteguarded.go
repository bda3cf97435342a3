package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// blobFate is what became of a guarded blob's delete.
type blobFate int

const (
	// blobGone: the backend said the key is deleted, or a HEAD after a
	// complete answer found it gone. The guard is released.
	blobGone blobFate = iota
	// blobGoneSettling: the answer was not clear and a HEAD found the blob
	// gone. The bytes are gone, so the tombstone is recorded deleted; the
	// request may still be on its way, and would delete a blob uploaded
	// again, so the guard stays armed until the attempt is settled.
	blobGoneSettling
	// blobPresent: a complete answer named the key failed (the request has
	// finished) and a HEAD found the blob. The guard is released.
	blobPresent
	// blobSettling: the answer was not clear and a HEAD found the blob: the
	// request may still be executed, so the guard stays armed.
	blobSettling
	// blobUnknown: nothing could tell; the guard stays armed.
	blobUnknown
	// blobNotSent: the recorded deadline had passed before the request
	// could be sent, so nothing was sent (a successor may already have
	// taken the guard over). Settled like blobPresent: the guard is
	// released, comparing it as this pass recorded the attempt.
	blobNotSent
)

// deleteGuarded deletes the guarded blobs of one bucket, at most
// maxDeleteKeys of them, in one request. Before the request the attempt is
// recorded on the guards of the batch (fenced: a term known to be over
// sends nothing), only the blobs whose record landed are sent, and the
// request is sent only before the deadline recorded, read on the elapsed
// clock right before sending, and gives up at that deadline. Each blob is then settled from
// the backend's answer to this request: a key whose delete failed, or
// every key of a request with no clear answer, is looked at with a HEAD;
// nothing is deleted twice blindly. Several batches may be deleted at
// once, each from its own goroutine.
func (s *digestSweep) deleteGuarded(ctx context.Context, guarded []armed) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	batch, sendBy, err := s.recordAttempt(ctx, guarded)
	if err != nil || len(batch) == 0 {
		return err
	}
	s.run.Fire(FaultAttempted)
	fates := make([]blobFate, len(batch))
	why := make([]string, len(batch))
	s.deleteBatch(ctx, batch, sendBy, fates, why)
	return s.settle(context.WithoutCancel(ctx), batch, fates, why)
}

// deleteBatch deletes the blobs of one bucket in one request and decides
// each one's fate. The request is sent only if sendBy, the deadline
// recorded on the guards, is still ahead on the elapsed clock, and it gives
// up at sendBy: a successor settles the guard only after that deadline
// (and the settle margin), so no request of this pass can reach the
// backend once a successor may have released the guard.
func (s *digestSweep) deleteBatch(ctx context.Context, batch []armed, sendBy time.Time, fates []blobFate, why []string) {
	bucket := batch[0].tomb.Bucket
	keys := make([]string, len(batch))
	for i, a := range batch {
		keys[i] = a.tomb.Key
	}
	left := sendBy.Sub(s.clock())
	if left <= 0 {
		for i := range batch {
			fates[i], why[i] = blobNotSent, fmt.Sprintf("delete not sent: its recorded deadline had passed %s before it could be sent", -left)
		}
		s.log.Warn("blob delete not sent: the recorded deadline had passed", "pass", s.cur.Pass, "bucket", bucket, "blobs", len(batch), "late", -left)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, left)
	failed, err := s.s3.DeleteObjects(dctx, bucket, keys)
	cancel()
	// Looking again is finished even when the pass is cancelled, so that
	// the guards are settled with what the backend holds.
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
		case errors.Is(herr, s3client.ErrNoSuchKey) && err == nil:
			fates[i], why[i] = blobGone, cause+"; looking again found the blob gone"
		case errors.Is(herr, s3client.ErrNoSuchKey):
			fates[i], why[i] = blobGoneSettling, cause+"; looking again found the blob gone; its guard stays armed until the delete is settled"
		case herr == nil && err == nil:
			fates[i], why[i] = blobPresent, cause+"; looking again found the blob still there"
		case herr == nil:
			fates[i], why[i] = blobSettling, cause+"; looking again found the blob still there, but the delete may still be executed: its guard stays armed until it is settled"
		default:
			fates[i], why[i] = blobUnknown, fmt.Sprintf("%s; looking again failed too (%v)", cause, herr)
		}
		s.log.Warn("blob delete not clear; looked again", "pass", s.cur.Pass, "bucket", bucket, "key", a.tomb.Key, "outcome", why[i])
	}
}

// settle records each guarded blob's fate: gone, its tombstone is deleted
// (with its bytes counted) and, once the request has finished, the guard
// released; present after a finished request, the guard is released and
// the tombstone stays ready with one more attempt; otherwise the guard
// stays armed, with its attempt, for a later pass to settle once no delete
// can still land.
//
// A gone blob's guard is released in a transaction after the one that
// records its tombstone deleted (releaseGone): the transactions that
// record counts go one at a time (commitOne), and those releases, which
// record none, go several at once. Until its release lands the guard is
// left as for an unclear answer whose blob a HEAD found gone (a deleted
// tombstone under a guard with an attempt), which a later pass settles
// (settleGone) if this one stops in between.
func (s *digestSweep) settle(ctx context.Context, guarded []armed, fates []blobFate, why []string) error {
	writes := make([]digestWrite, 0, len(guarded))
	for i, a := range guarded {
		var releaseCmps []clientv3.Cmp
		var release []clientv3.Op
		if fates[i] == blobGone || fates[i] == blobGoneSettling {
			var err error
			if releaseCmps, release, err = s.contentRelease(ctx, a.tomb); err != nil {
				return err
			}
		}
		writes = append(writes, s.settleWrite(a, fates[i], why[i], releaseCmps, release))
	}
	landed, _, err := s.commit(ctx, writes)
	if err == nil {
		s.run.Fire(FaultGoneRecorded)
		err = s.releaseGone(ctx, guarded, fates, landed)
	}
	for i, ok := range landed {
		if fates[i] != blobGone && fates[i] != blobGoneSettling {
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

// settleWrite is the write that records guarded blob a's fate (see
// settle): only a blob found gone is recorded deleted and counted as
// deleted (with releaseCmps and release, what it named, removed with it);
// a blob present after a finished request keeps its tombstone, with one
// more attempt, and its guard is released; a delete still unclear writes
// nothing and leaves the guard armed, counted as settling.
func (s *digestSweep) settleWrite(a armed, fate blobFate, why string, releaseCmps []clientv3.Cmp, release []clientv3.Op) digestWrite {
	keys := s.keys()
	d := a.tomb.Digest
	guardCmp := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(keys.Guard(d)), "=", a.guardRev)}
	switch fate {
	case blobGone:
		return digestWrite{cmps: append(guardCmp, releaseCmps...), delta: &Report{Deleted: 1, Bytes: a.tomb.Size}, ops: append([]clientv3.Op{
			clientv3.OpPut(keys.Tombstone(d), etcdstore.MarshalRecord(s.deleted(a.tomb, why))),
		}, release...)}
	case blobGoneSettling:
		return digestWrite{cmps: append(guardCmp, releaseCmps...), delta: &Report{Deleted: 1, Bytes: a.tomb.Size, Settling: 1}, ops: append([]clientv3.Op{
			clientv3.OpPut(keys.Tombstone(d), etcdstore.MarshalRecord(s.deleted(a.tomb, why))),
		}, release...)}
	case blobPresent, blobNotSent:
		t := a.tomb
		t.Attempts++
		t.Term, t.Reason = s.term.N, why
		return digestWrite{cmps: guardCmp, delta: &Report{Failed: 1}, ops: []clientv3.Op{
			clientv3.OpPut(keys.Tombstone(d), etcdstore.MarshalRecord(t)),
			clientv3.OpDelete(keys.Guard(d)),
		}}
	case blobSettling:
		return digestWrite{delta: &Report{Settling: 1}}
	}
	return digestWrite{delta: &Report{Unknown: 1, Settling: 1}}
}

// releaseGone releases the guards of the blobs whose request answered them
// deleted (blobGone) once their tombstones are recorded deleted (landed),
// each comparing its guard as this pass recorded the attempt, several
// transactions at once: one guard each, no counts.
func (s *digestSweep) releaseGone(ctx context.Context, guarded []armed, fates []blobFate, landed []bool) error {
	keys := s.keys()
	var writes []digestWrite
	for i, a := range guarded {
		if fates[i] != blobGone || !landed[i] {
			continue
		}
		key := keys.Guard(a.tomb.Digest)
		writes = append(writes, digestWrite{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", a.guardRev)},
			ops:  []clientv3.Op{clientv3.OpDelete(key)},
		})
	}
	_, _, err := s.commitParallel(ctx, writes)
	return err
}

// contentRelease returns the comparisons and writes that remove what a
// deleted blob named (its key's references, recorded when the blob is
// content, cas.Namespace.Content), to commit with the record of its
// deletion. What it named stays retained until then, and then only by
// other references.
//
// Only a record with no write in flight is removed, compared at the
// revision read: the blob's guard is armed, so no write of its key can
// begin (a write places the blob first, which a guard refuses), and the
// record read is the one the deleted bytes made.
func (s *digestSweep) contentRelease(ctx context.Context, t etcdstore.Tombstone) ([]clientv3.Cmp, []clientv3.Op, error) {
	if ns, _, _ := s.cfg.Layout.Namespace(t.Bucket, t.Key); ns == nil || ns.Content == "" {
		return nil, nil, nil
	}
	rec, err := s.store.GetRefSource(ctx, t.Bucket, t.Key)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("digestsweep: read what blob %s named: %w", t.Digest, err)
	}
	if rec.Value.Pending != nil {
		// Cannot happen under the guard; keeping the record only retains
		// more.
		s.log.Warn("a deleted blob's key has a write in flight; what the blob named stays retained", "digest", t.Digest, "key", t.Key)
		return nil, nil, nil
	}
	keys := s.keys()
	source := keys.RefSource(t.Bucket, t.Key)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(source), "=", rec.ModRev)}
	ops := []clientv3.Op{clientv3.OpDelete(source)}
	for _, d := range rec.Value.All() {
		ops = append(ops, clientv3.OpDelete(keys.Ref(d, t.Bucket, t.Key)))
	}
	return cmps, ops, nil
}
