package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrGuarded says a digest the write names has an armed guard: its bytes
// are being deleted. The write records nothing; the client retries after
// the collector is done (and re-uploads the blob first).
var ErrGuarded = errors.New("etcdstore: a digest the write names is being reclaimed")

// ErrWriteInFlight says another write or delete of the same reference
// object is in flight through a gateway. Only one at a time is recorded, so
// that the record always knows which body the backend holds.
var ErrWriteInFlight = errors.New("etcdstore: another write of this reference object is in flight")

// MaxRecordedDigests bounds the digests one reference object's record may
// retain: its own (at most cas.MaxDigestsPerObject) plus those of a write
// whose outcome was unknown, until the rebuild settles them.
const MaxRecordedDigests = 100

// refRetries bounds the compare-and-put retries of one reference write.
const refRetries = 8

// StalePendingAfter is how old a pending write must be before a later
// write or delete of the same object takes it over. A gateway bounds its
// own reference writes far below this; an older one is from a gateway that
// died between recording the write and recording its end.
const StalePendingAfter = 15 * time.Minute

// takeOverStale ends a pending write older than StalePendingAfter as of
// unknown outcome: its digests join the recorded ones and the record is
// dirty until the rebuild reads the body (or the next write replaces it).
// Nothing is dropped, so taking over is always safe.
func takeOverStale(rec *RefSource, now time.Time) {
	if rec.Pending != nil && now.Sub(rec.Pending.At) > StalePendingAfter {
		rec.Digests = union(rec.Digests, rec.Pending.Digests)
		rec.Pending, rec.Dirty = nil, true
	}
}

// GetRefSource reads the record of the reference object bucket/key, and
// ErrNotFound when there is none.
func (s *Store) GetRefSource(ctx context.Context, bucket, key string) (Versioned[RefSource], error) {
	resp, err := s.cli.Get(ctx, s.keys.RefSource(bucket, key))
	if err != nil {
		return Versioned[RefSource]{}, fmt.Errorf("read reference record: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Versioned[RefSource]{}, ErrNotFound
	}
	var r RefSource
	if err := DecodeKV(RefSourceRecord, resp.Kvs[0], &r); err != nil {
		return Versioned[RefSource]{}, err
	}
	return Versioned[RefSource]{Value: r, ModRev: resp.Kvs[0].ModRevision}, nil
}

// refRevOps advances the reference revision of every shard the digests
// fall in.
func (s *Store) refRevOps(digests ...[]string) []clientv3.Op {
	shards := map[string]bool{}
	for _, ds := range digests {
		for _, d := range ds {
			shards[RefShard(d)] = true
		}
	}
	ops := make([]clientv3.Op, 0, len(shards))
	for _, sh := range AllRefShards() {
		if shards[sh] {
			ops = append(ops, clientv3.OpPut(s.keys.RefRev(sh), ""))
		}
	}
	return ops
}

// notGuarded compares that no guard is armed for any of digests.
func (s *Store) notGuarded(digests []string) []clientv3.Cmp {
	cmps := make([]clientv3.Cmp, 0, len(digests))
	for _, d := range digests {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.Guard(d)), "=", 0))
	}
	return cmps
}

// sourceCmp compares that the reference record is as it was read (absent
// when modRev is 0).
func (s *Store) sourceCmp(bucket, key string, modRev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(s.keys.RefSource(bucket, key)), "=", modRev)
}

// readSource reads a reference record, returning an empty one (ModRev 0)
// when there is none.
func (s *Store) readSource(ctx context.Context, bucket, key string, now time.Time) (Versioned[RefSource], error) {
	v, err := s.GetRefSource(ctx, bucket, key)
	if errors.Is(err, ErrNotFound) {
		return Versioned[RefSource]{Value: RefSource{Bucket: bucket, Key: key, Updated: now}}, nil
	}
	return v, err
}

// commitRefTxn runs one reference transaction and reports whether it held.
// When it did not, it tells a guarded digest (ErrGuarded) from a changed
// record (nil, false: read again).
func (s *Store) commitRefTxn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op, guarded []string) (bool, error) {
	if len(cmps) > maxTxnOps || len(ops) > maxTxnOps {
		return false, fmt.Errorf("etcdstore: reference transaction of %d comparisons and %d writes is over etcd's limit", len(cmps), len(ops))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("record references: %w", err)
	}
	if resp.Succeeded {
		return true, nil
	}
	for _, d := range guarded {
		armed, err := s.Guarded(ctx, d)
		if err != nil {
			return false, err
		}
		if armed {
			return false, ErrGuarded
		}
	}
	return false, nil
}

// BeginRefWrite records the references of a write of the reference object
// bucket/key before its body goes to the backend: the digests of w are
// recorded as references (retained) together with the ones already
// recorded, and the record remembers w as pending. It fails with
// ErrGuarded, recording nothing, if any digest of w has an armed guard, and
// with ErrWriteInFlight if another write of the object is pending.
func (s *Store) BeginRefWrite(ctx context.Context, bucket, key string, w RefWrite) error {
	w.Digests = slices.Compact(slices.Sorted(slices.Values(w.Digests)))
	for range refRetries {
		cur, err := s.readSource(ctx, bucket, key, w.At)
		if err != nil {
			return err
		}
		rec := cur.Value
		takeOverStale(&rec, w.At)
		if rec.Pending != nil {
			return ErrWriteInFlight
		}
		if len(union(rec.Digests, w.Digests)) > MaxRecordedDigests {
			// A write of unknown outcome left both bodies' digests; until the
			// rebuild settles them there is no room for a third.
			return ErrWriteInFlight
		}
		rec.Pending = &w
		rec.Updated = w.At
		cmps := append([]clientv3.Cmp{s.sourceCmp(bucket, key, cur.ModRev)}, s.notGuarded(w.Digests)...)
		ops := []clientv3.Op{clientv3.OpPut(s.keys.RefSource(bucket, key), MarshalRecord(rec))}
		for _, d := range w.Digests {
			ops = append(ops, clientv3.OpPut(s.keys.Ref(d, bucket, key), MarshalRecord(Ref{At: w.At})))
		}
		ops = append(ops, s.refRevOps(w.Digests)...)
		ok, err := s.commitRefTxn(ctx, cmps, ops, w.Digests)
		if err != nil || ok {
			return err
		}
	}
	return ErrConflict
}

// WriteOutcome is what became of a reference object's write on the backend.
type WriteOutcome int

// The outcomes of a write.
const (
	// WriteCommitted: the backend stored the new body.
	WriteCommitted WriteOutcome = iota
	// WriteFailed: the backend definitely did not store it.
	WriteFailed
	// WriteUnknown: no clear answer. Both bodies' digests stay recorded and
	// the record is marked dirty for the rebuild to settle.
	WriteUnknown
	// WriteCommittedVersion: the backend stored the new body as a new
	// version and keeps the older ones (a versioned bucket). The record
	// keeps the digests of every stored version: the new body's are added,
	// none is removed.
	WriteCommittedVersion
)

// EndRefWrite records the outcome of the pending write id of bucket/key:
// committed, its digests replace the old ones; committed as a version, its
// digests join the old ones; failed, its digests are removed again;
// unknown, both stay. etag is the backend's ETag of a
// committed body. References are removed only after the record says they
// are no longer needed, so every moment retains at least what the backend
// may hold.
func (s *Store) EndRefWrite(ctx context.Context, bucket, key, id string, outcome WriteOutcome, etag string, now time.Time) error {
	for range refRetries {
		cur, err := s.GetRefSource(ctx, bucket, key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rec := cur.Value
		if rec.Pending == nil || rec.Pending.ID != id {
			return nil // already ended
		}
		w := *rec.Pending
		before := rec.All()
		rec.Pending = nil
		rec.Updated = now
		switch outcome {
		case WriteCommitted:
			rec.Digests, rec.ETag, rec.Dirty, rec.Restored, rec.Unknown = w.Digests, etag, false, false, false
		case WriteCommittedVersion:
			rec.Digests, rec.ETag, rec.Restored, rec.Unknown = union(rec.Digests, w.Digests), etag, false, false
		case WriteUnknown:
			rec.Digests, rec.Dirty = union(rec.Digests, w.Digests), true
		}
		drop := minus(before, rec.Digests)
		cmps := []clientv3.Cmp{s.sourceCmp(bucket, key, cur.ModRev)}
		ops := make([]clientv3.Op, 0, len(drop)+2)
		if len(rec.Digests) == 0 && !rec.Dirty {
			ops = append(ops, clientv3.OpDelete(s.keys.RefSource(bucket, key)))
		} else {
			ops = append(ops, clientv3.OpPut(s.keys.RefSource(bucket, key), MarshalRecord(rec)))
		}
		for _, d := range drop {
			ops = append(ops, clientv3.OpDelete(s.keys.Ref(d, bucket, key)))
		}
		ops = append(ops, s.refRevOps(drop)...)
		ok, err := s.commitRefTxn(ctx, cmps, ops, nil)
		if err != nil || ok {
			return err
		}
	}
	return ErrConflict
}

// TrashRefSource moves the references of the object bucket/key to the
// trash before the object is deleted: a trash record (listable, restorable)
// and one trash reference per digest, retained until expires. It returns
// the record, and ok false when the object had no recorded references. A
// pending write of the object makes it fail with ErrWriteInFlight.
//
// The move takes two transactions when the digests do not fit in one: the
// trash first, then the removal of the references, so that every moment
// retains the digests.
func (s *Store) TrashRefSource(ctx context.Context, bucket, key, principal string, now, expires time.Time) (TrashRecord, bool, error) {
	for range refRetries {
		cur, err := s.GetRefSource(ctx, bucket, key)
		if errors.Is(err, ErrNotFound) {
			return TrashRecord{}, false, nil
		}
		if err != nil {
			return TrashRecord{}, false, err
		}
		rec := cur.Value
		takeOverStale(&rec, now)
		if rec.Pending != nil {
			return TrashRecord{}, false, ErrWriteInFlight
		}
		tr := TrashRecord{Bucket: bucket, Key: key, Digests: rec.Digests, DeletedAt: now, Expires: expires, Principal: principal, ETag: rec.ETag}
		trash := []clientv3.Op{clientv3.OpPut(s.keys.Trash(bucket, key, now), MarshalRecord(tr))}
		for _, d := range rec.Digests {
			trash = append(trash, clientv3.OpPut(s.keys.TrashRef(d, bucket, key, now), MarshalRecord(TrashRef{Expires: expires})))
		}
		remove := []clientv3.Op{clientv3.OpDelete(s.keys.RefSource(bucket, key))}
		for _, d := range rec.Digests {
			remove = append(remove, clientv3.OpDelete(s.keys.Ref(d, bucket, key)))
		}
		revs := s.refRevOps(rec.Digests)
		cmps := []clientv3.Cmp{s.sourceCmp(bucket, key, cur.ModRev)}
		if len(trash)+len(remove)+len(revs) <= maxTxnOps {
			ok, err := s.commitRefTxn(ctx, cmps, slices.Concat(trash, remove, revs), nil)
			if err != nil {
				return TrashRecord{}, false, err
			}
			if ok {
				return tr, true, nil
			}
			continue
		}
		ok, err := s.commitRefTxn(ctx, cmps, slices.Concat(trash, revs), nil)
		if err != nil {
			return TrashRecord{}, false, err
		}
		if !ok {
			continue
		}
		// The record is unchanged by the first step, so the second compares
		// the same revision; if a write came between, the trash stays as
		// well as the references (more retained, never less) and the
		// caller retries.
		ok, err = s.commitRefTxn(ctx, cmps, slices.Concat(remove, revs), nil)
		if err != nil {
			return TrashRecord{}, false, err
		}
		if ok {
			return tr, true, nil
		}
	}
	return TrashRecord{}, false, ErrConflict
}

// GetTrash reads one trash record, and ErrNotFound when there is none.
func (s *Store) GetTrash(ctx context.Context, bucket, key string, deletedAt time.Time) (Versioned[TrashRecord], error) {
	resp, err := s.cli.Get(ctx, s.keys.Trash(bucket, key, deletedAt))
	if err != nil {
		return Versioned[TrashRecord]{}, fmt.Errorf("read trash: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Versioned[TrashRecord]{}, ErrNotFound
	}
	var tr TrashRecord
	if err := DecodeKV(TrashRecordKind, resp.Kvs[0], &tr); err != nil {
		return Versioned[TrashRecord]{}, err
	}
	return Versioned[TrashRecord]{Value: tr, ModRev: resp.Kvs[0].ModRevision}, nil
}

// ListTrash returns the trash records of bucket ("" for all) and, when key
// is not empty, of that object only, oldest first within an object, at
// most limit of them (0: no limit).
func (s *Store) ListTrash(ctx context.Context, bucket, key string, limit int64) ([]TrashRecord, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(limit))
	}
	resp, err := s.cli.Get(ctx, s.keys.TrashOf(bucket, key), opts...)
	if err != nil {
		return nil, fmt.Errorf("list trash: %w", err)
	}
	out := make([]TrashRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var tr TrashRecord
		if err := DecodeKV(TrashRecordKind, kv, &tr); err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	return out, nil
}

// RestoreTrash brings the references of a trash record back: they are
// recorded again for bucket/key (marked restored, merged with any
// references a newer write of the object recorded), and the trash record
// and its trash references are removed. It fails with ErrNotFound when the
// record is gone, and with ErrGuarded when a digest's bytes are being
// deleted (its trash had expired).
func (s *Store) RestoreTrash(ctx context.Context, bucket, key string, deletedAt, now time.Time) (TrashRecord, error) {
	for range refRetries {
		tv, err := s.GetTrash(ctx, bucket, key, deletedAt)
		if err != nil {
			return TrashRecord{}, err
		}
		tr := tv.Value
		cur, err := s.readSource(ctx, bucket, key, now)
		if err != nil {
			return TrashRecord{}, err
		}
		rec := cur.Value
		if rec.Pending != nil {
			return TrashRecord{}, ErrWriteInFlight
		}
		added := minus(tr.Digests, rec.Digests)
		if len(union(rec.Digests, tr.Digests)) > MaxRecordedDigests {
			return TrashRecord{}, fmt.Errorf("etcdstore: restoring would record more than %d digests for %s/%s", MaxRecordedDigests, bucket, key)
		}
		rec.Digests = union(rec.Digests, tr.Digests)
		rec.Restored = true
		rec.Updated = now
		trashKey := s.keys.Trash(bucket, key, deletedAt)
		cmps := append([]clientv3.Cmp{
			s.sourceCmp(bucket, key, cur.ModRev),
			clientv3.Compare(clientv3.ModRevision(trashKey), "=", tv.ModRev),
		}, s.notGuarded(added)...)
		put := []clientv3.Op{clientv3.OpPut(s.keys.RefSource(bucket, key), MarshalRecord(rec))}
		for _, d := range added {
			put = append(put, clientv3.OpPut(s.keys.Ref(d, bucket, key), MarshalRecord(Ref{At: now})))
		}
		put = append(put, s.refRevOps(tr.Digests)...)
		remove := []clientv3.Op{clientv3.OpDelete(trashKey)}
		for _, d := range tr.Digests {
			remove = append(remove, clientv3.OpDelete(s.keys.TrashRef(d, bucket, key, deletedAt)))
		}
		if len(put)+len(remove) <= maxTxnOps {
			ok, err := s.commitRefTxn(ctx, cmps, slices.Concat(put, remove), added)
			if err != nil {
				return TrashRecord{}, err
			}
			if ok {
				return tr, nil
			}
			continue
		}
		ok, err := s.commitRefTxn(ctx, cmps, put, added)
		if err != nil {
			return TrashRecord{}, err
		}
		if !ok {
			continue
		}
		// The references are back; removing the trash is cleanup that a
		// failure only postpones (the trash expires anyway).
		if _, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(trashKey), "=", tv.ModRev)).Then(remove...).Commit(); err != nil {
			return tr, fmt.Errorf("restore: references recorded, trash not removed: %w", err)
		}
		return tr, nil
	}
	return TrashRecord{}, ErrConflict
}

// PlaceBlob records a write of digest's blob (bucket/key) in flight, before
// its bytes go to the backend. It fails with ErrGuarded when the digest's
// guard is armed. While the placement exists no guard can be armed for the
// digest; EndPlacement turns it into the record of the finished write.
func (s *Store) PlaceBlob(ctx context.Context, digest, id, bucket, key string, now time.Time) error {
	ops := append([]clientv3.Op{clientv3.OpPut(s.keys.Placement(digest, id), MarshalRecord(Placement{Bucket: bucket, Key: key, At: now}))}, s.refRevOps([]string{digest})...)
	ok, err := s.commitRefTxn(ctx, s.notGuarded([]string{digest}), ops, []string{digest})
	if err != nil {
		return err
	}
	if !ok {
		return ErrGuarded
	}
	return nil
}

// writtenPlacement is the id of the placement that records digest's latest
// finished write through a gateway.
const writtenPlacement = "written"

// EndPlacement ends the placement id made by PlaceBlob, in one
// transaction with the record of the finished write (a placement marked
// Written, at now): the blob is retained for the placement grace from this
// write, even when the write left the stored copy as it was (a blob
// written again keeps the backend's older modification time). The record
// is kept per digest, the latest write's, and pruned once older than the
// grace.
func (s *Store) EndPlacement(ctx context.Context, digest, id, bucket, key string, now time.Time) error {
	written := Placement{Bucket: bucket, Key: key, At: now, Written: true}
	_, err := s.cli.Txn(ctx).Then(
		clientv3.OpDelete(s.keys.Placement(digest, id)),
		clientv3.OpPut(s.keys.Placement(digest, writtenPlacement), MarshalRecord(written)),
	).Commit()
	if err != nil {
		return fmt.Errorf("end placement: %w", err)
	}
	return nil
}

// HoldRefs puts a reference hold under lease: while it exists, no guard can
// be armed anywhere, and every verdict made before it is void (it advances
// every shard). With it goes a record of the complete (UnrecordedWrite of
// bucket/key), which outlives the lease. It fails with ErrGuarded while
// any guard is armed. A complete of a multipart upload into a reference
// source holds until the assembled object's references are recorded.
func (s *Store) HoldRefs(ctx context.Context, id, bucket, key string, lease clientv3.LeaseID, now time.Time) error {
	ops := []clientv3.Op{
		clientv3.OpPut(s.keys.RefHold(id), now.UTC().Format(time.RFC3339Nano), clientv3.WithLease(lease)),
		clientv3.OpPut(s.keys.UnrecordedOf(id), MarshalRecord(UnrecordedWrite{ID: id, Bucket: bucket, Key: key, At: now.UTC()})),
	}
	for _, sh := range AllRefShards() {
		ops = append(ops, clientv3.OpPut(s.keys.RefRev(sh), ""))
	}
	noGuards := clientv3.Compare(clientv3.CreateRevision(s.keys.Guards()), "=", 0).WithPrefix()
	resp, err := s.cli.Txn(ctx).If(noGuards).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("hold references: %w", err)
	}
	if !resp.Succeeded {
		return ErrGuarded
	}
	return nil
}

// ReleaseRefHold removes a hold made by HoldRefs.
func (s *Store) ReleaseRefHold(ctx context.Context, id string) error {
	if _, err := s.cli.Delete(ctx, s.keys.RefHold(id)); err != nil {
		return fmt.Errorf("release reference hold: %w", err)
	}
	return nil
}

// Guarded reports whether digest's guard is armed.
func (s *Store) Guarded(ctx context.Context, digest string) (bool, error) {
	resp, err := s.cli.Get(ctx, s.keys.Guard(digest), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read guard: %w", err)
	}
	return resp.Count > 0, nil
}

// Referenced reports whether digest is named by a recorded reference or an
// unexpired trash entry at now.
func (s *Store) Referenced(ctx context.Context, digest string, now time.Time) (bool, error) {
	resp, err := s.cli.Get(ctx, s.keys.Refs(digest), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read references: %w", err)
	}
	if resp.Count > 0 {
		return true, nil
	}
	tr, err := s.cli.Get(ctx, s.keys.TrashRefs(digest), clientv3.WithPrefix())
	if err != nil {
		return false, fmt.Errorf("read trash references: %w", err)
	}
	for _, kv := range tr.Kvs {
		var r TrashRef
		if DecodeKV(TrashRefRecord, kv, &r) != nil || r.Expires.After(now) {
			return true, nil // an unreadable or newer entry retains too
		}
	}
	return false, nil
}

// ReportFrontier records that plane has applied etcd revision rev.
func (s *Store) ReportFrontier(ctx context.Context, plane string, rev int64, by string, now time.Time) error {
	if plane == "" || rev < 0 {
		return errors.New("etcdstore: a frontier needs a plane name and a revision of 0 or more")
	}
	v := MarshalRecord(Frontier{Plane: plane, Revision: rev, At: now, By: by})
	if _, err := s.cli.Put(ctx, s.keys.Frontier(plane), v); err != nil {
		return fmt.Errorf("report frontier: %w", err)
	}
	return nil
}

// ListFrontiers returns every reported frontier in plane order, and the
// current etcd revision, against which their lag is measured.
func (s *Store) ListFrontiers(ctx context.Context) ([]Frontier, int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.Frontiers(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("list frontiers: %w", err)
	}
	out := make([]Frontier, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var f Frontier
		if err := DecodeKV(FrontierRecord, kv, &f); err != nil {
			return nil, 0, err
		}
		out = append(out, f)
	}
	return out, resp.Header.Revision, nil
}
