package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The rebuild's side of the reference records: what it found on the
// backend, and records it is asked to read again.

// MarkDirty marks the record of bucket/key dirty, keeping every digest it
// records, so the next rebuild reads the object and settles the record to
// what the backend stores. It does nothing when there is no record.
func (s *Store) MarkDirty(ctx context.Context, bucket, key string, now time.Time) error {
	for range refRetries {
		cur, err := s.GetRefSource(ctx, bucket, key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rec := cur.Value
		if rec.Dirty {
			return nil
		}
		rec.Dirty, rec.Updated = true, now
		ok, err := s.commitRefTxn(ctx, []clientv3.Cmp{s.sourceCmp(bucket, key, cur.ModRev)},
			[]clientv3.Op{clientv3.OpPut(s.keys.RefSource(bucket, key), MarshalRecord(rec))}, nil)
		if err != nil || ok {
			return err
		}
	}
	return ErrConflict
}

// RecordFoundRefs records the references of an object that the rebuild
// found on the backend but the gateway did not see written (or whose body
// differs from the recorded one): digests are added to the record, which is
// marked Unknown when it gains any (a producer writing around the gateway).
// A dirty record (a write of unknown outcome) is settled instead: it keeps
// exactly digests. It returns the digests that were not recorded before.
//
// modRev is the record's mod revision (0: no record) read before the body
// was: if the record changed since, a gateway write may have made the body
// older than the record, and it fails with ErrConflict so the caller looks
// again. A pending write fails it with ErrWriteInFlight: its end settles
// the record.
func (s *Store) RecordFoundRefs(ctx context.Context, bucket, key string, digests []string, etag string, modRev int64, now time.Time) ([]string, error) {
	digests = slices.Compact(slices.Sorted(slices.Values(digests)))
	cur, err := s.readSource(ctx, bucket, key, now)
	if err != nil {
		return nil, err
	}
	if cur.ModRev != modRev {
		return nil, ErrConflict
	}
	rec := cur.Value
	if rec.Pending != nil {
		return nil, ErrWriteInFlight
	}
	added := minus(digests, rec.Digests)
	var drop []string
	if rec.Dirty {
		// The body is known now: it names exactly digests, and the extra
		// ones the unknown write left can go.
		drop = minus(rec.Digests, digests)
		rec.Digests, rec.Dirty = digests, false
	} else {
		rec.Digests = union(rec.Digests, digests)
		if len(added) > 0 {
			rec.Unknown = true
		}
	}
	if len(rec.Digests) > MaxRecordedDigests {
		return nil, fmt.Errorf("etcdstore: %s/%s names more than %d digests", bucket, key, MaxRecordedDigests)
	}
	rec.ETag, rec.Updated = etag, now
	ops := []clientv3.Op{clientv3.OpPut(s.keys.RefSource(bucket, key), MarshalRecord(rec))}
	for _, d := range added {
		ops = append(ops, clientv3.OpPut(s.keys.Ref(d, bucket, key), MarshalRecord(Ref{At: now})))
	}
	for _, d := range drop {
		ops = append(ops, clientv3.OpDelete(s.keys.Ref(d, bucket, key)))
	}
	ops = append(ops, s.refRevOps(added, drop)...)
	ok, err := s.commitRefTxn(ctx, []clientv3.Cmp{s.sourceCmp(bucket, key, modRev)}, ops, nil)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrConflict
	}
	return added, nil
}
