package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotFound says a record does not exist.
var ErrNotFound = errors.New("etcdstore: not found")

// ErrConflict says a compare-and-put lost: the record changed since it was
// read. The caller reads again and decides again.
var ErrConflict = errors.New("etcdstore: record changed since it was read")

// Store reads and writes sweepgate's typed records in etcd. Every write that
// depends on what was read is one transaction that compares the revision it
// was decided from.
type Store struct {
	cli  storeClient
	keys Keys
	// schema is the keyspace schema the store writes records in: the
	// stored schema as a SchemaCheck last read it, 1 until one has. Copies
	// of the store (withKV) share it.
	schema *atomic.Int32
}

// NewStore returns a Store over cli with keys under the given layout.
func NewStore(cli *clientv3.Client, keys Keys) *Store {
	st := &Store{cli: storeClient{Client: cli, KV: cli.KV}, keys: keys, schema: new(atomic.Int32)}
	st.schema.Store(1)
	return st
}

// WritesSchema returns the keyspace schema the store writes records in:
// the stored schema as the last SchemaCheck on the store read it (one this
// binary reads), or 1, which every release reads, until one has.
func (s *Store) WritesSchema() int { return int(s.schema.Load()) }

// Keys returns the store's key layout.
func (s *Store) Keys() Keys { return s.keys }

// Client returns the etcd client, for callers that compose their own
// transactions (the reclaimer adds its fence).
func (s *Store) Client() *clientv3.Client { return s.cli.Client }

// Versioned is a record with the etcd mod revision it was read at, which a
// later compare-and-put compares against.
type Versioned[T any] struct {
	Value  T
	ModRev int64
}

// GetSession reads one session. It returns ErrNotFound when there is none.
func (s *Store) GetSession(ctx context.Context, bucket, uploadID string) (Versioned[Session], error) {
	resp, err := s.cli.Get(ctx, s.keys.Session(bucket, uploadID))
	if err != nil {
		return Versioned[Session]{}, fmt.Errorf("read session: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Versioned[Session]{}, ErrNotFound
	}
	var sess Session
	if err := DecodeKV(SessionRecord, resp.Kvs[0], &sess); err != nil {
		return Versioned[Session]{}, err
	}
	return Versioned[Session]{Value: sess, ModRev: resp.Kvs[0].ModRevision}, nil
}

// CreateSession writes a new session. It fails with ErrConflict if one with
// the same bucket and upload id exists.
func (s *Store) CreateSession(ctx context.Context, sess *Session) (int64, error) {
	sess.Version = sessionVersion
	val, err := json.Marshal(sess)
	if err != nil {
		return 0, err
	}
	key := s.keys.Session(sess.Bucket, sess.UploadID)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("create session: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// SessionUpdate is one compare-and-put of a session: the new value, the
// revision it was decided from, and anything else that must hold or happen
// in the same transaction.
type SessionUpdate struct {
	Session *Session
	// ModRev is the session's mod revision when it was read.
	ModRev int64
	// If holds further comparisons (a reclaimer's fence, an activity key).
	If []clientv3.Cmp
	// Then holds further writes made atomically with the session's.
	Then []clientv3.Op
}

// UpdateSession writes u.Session if the session is unchanged since u.ModRev
// and u.If holds. It returns the new revision, or ErrConflict.
func (s *Store) UpdateSession(ctx context.Context, u SessionUpdate) (int64, error) {
	u.Session.Version = sessionVersion
	val, err := json.Marshal(u.Session)
	if err != nil {
		return 0, err
	}
	key := s.keys.Session(u.Session.Bucket, u.Session.UploadID)
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", u.ModRev)}, u.If...)
	ops := append([]clientv3.Op{clientv3.OpPut(key, string(val))}, u.Then...)
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("update session: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// RecordActivity records client activity on an upload whose session is
// unchanged since modRev, together with the writes also (a part in flight
// begun or ended). It does not write the session itself, so parallel parts
// of one upload do not conflict.
func (s *Store) RecordActivity(ctx context.Context, bucket, uploadID string, modRev int64, a Activity, also ...clientv3.Op) error {
	return s.IfSession(ctx, bucket, uploadID, modRev, append([]clientv3.Op{s.ActivityOp(uploadID, a)}, also...)...)
}

// IfSession commits ops in one transaction if the session of uploadID is
// still at modRev, and returns ErrConflict otherwise.
func (s *Store) IfSession(ctx context.Context, bucket, uploadID string, modRev int64, ops ...clientv3.Op) error {
	key := s.keys.Session(bucket, uploadID)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(ops...).
		Commit()
	if err != nil {
		return fmt.Errorf("write with the session unchanged: %w", err)
	}
	if !resp.Succeeded {
		return ErrConflict
	}
	return nil
}

// ActivityOp returns the write that records activity, for callers that put it
// in a transaction of their own.
func (s *Store) ActivityOp(uploadID string, a Activity) clientv3.Op {
	val, _ := json.Marshal(a) // a plain struct always marshals
	return clientv3.OpPut(s.keys.Activity(uploadID), string(val))
}

// InFlightOp returns the write that records a part in flight of an upload
// under lease, for the transaction that records the part's activity.
func (s *Store) InFlightOp(uploadID, id string, a Activity, lease clientv3.LeaseID) clientv3.Op {
	val, _ := json.Marshal(a) // a plain struct always marshals
	return clientv3.OpPut(s.keys.InFlightPart(uploadID, id), string(val), clientv3.WithLease(lease))
}

// EndInFlightOp returns the delete of a part in flight's record.
func (s *Store) EndInFlightOp(uploadID, id string) clientv3.Op {
	return clientv3.OpDelete(s.keys.InFlightPart(uploadID, id))
}

// SessionHolding reads, in one read-only transaction (one linearizable
// read, no raft commit), an upload's session and whether the in-flight
// record id of the upload exists. It returns ErrNotFound when there is no
// session. A part that finds the session active and the record there, both
// at one revision, is covered by the record as if it had written it.
func (s *Store) SessionHolding(ctx context.Context, bucket, uploadID, id string) (v Versioned[Session], held bool, err error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.Session(bucket, uploadID)),
		clientv3.OpGet(s.keys.InFlightPart(uploadID, id), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return v, false, fmt.Errorf("read session and in-flight record: %w", err)
	}
	sr := resp.Responses[0].GetResponseRange()
	if len(sr.Kvs) == 0 {
		return v, false, ErrNotFound
	}
	got, err := decodeSession(sr.Kvs[0])
	if err != nil {
		return v, false, err
	}
	return *got, resp.Responses[1].GetResponseRange().Count > 0, nil
}

// InFlightAt counts an upload's parts in flight at revision rev (0: now)
// and returns the latest start among them (zero when none).
func (s *Store) InFlightAt(ctx context.Context, uploadID string, rev int64) (n int, latest time.Time, err error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithLimit(100)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, s.keys.InFlight(uploadID), opts...)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("read parts in flight: %w", err)
	}
	for _, kv := range resp.Kvs {
		var a Activity
		if err := DecodeKV(ActivityRecord, kv, &a); err != nil {
			return 0, time.Time{}, err
		}
		if a.At.After(latest) {
			latest = a.At
		}
	}
	return int(resp.Count), latest, nil
}

// GetActivity reads an upload's latest recorded activity, and ErrNotFound
// when none was recorded.
func (s *Store) GetActivity(ctx context.Context, uploadID string) (Versioned[Activity], error) {
	resp, err := s.cli.Get(ctx, s.keys.Activity(uploadID))
	if err != nil {
		return Versioned[Activity]{}, fmt.Errorf("read activity: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Versioned[Activity]{}, ErrNotFound
	}
	var a Activity
	if err := DecodeKV(ActivityRecord, resp.Kvs[0], &a); err != nil {
		return Versioned[Activity]{}, err
	}
	return Versioned[Activity]{Value: a, ModRev: resp.Kvs[0].ModRevision}, nil
}

// PutPart records an uploaded part. A re-upload of the same part number
// replaces the record, as it replaces the part.
func (s *Store) PutPart(ctx context.Context, uploadID string, p Part) error {
	val, _ := EncodePart(p, PartLayout(s.WritesSchema())) // a plain struct always marshals
	if _, err := s.cli.Put(ctx, s.keys.Part(uploadID, p.Number), string(val)); err != nil {
		return fmt.Errorf("record part: %w", err)
	}
	return nil
}

// PartOp returns the write that records part p of an upload, in the layout
// of the schema the store writes, for the transaction that ends the part.
func (s *Store) PartOp(uploadID string, p Part) clientv3.Op {
	val, _ := EncodePart(p, PartLayout(s.WritesSchema())) // a plain struct always marshals
	return clientv3.OpPut(s.keys.Part(uploadID, p.Number), string(val))
}

// ListParts reads the recorded parts of an upload in part-number order.
func (s *Store) ListParts(ctx context.Context, uploadID string) ([]Part, error) {
	resp, err := s.cli.Get(ctx, s.keys.Parts(uploadID), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list parts: %w", err)
	}
	parts := make([]Part, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		p, err := DecodePart(string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// GetIdempotent reads the recorded outcome for an idempotency key, and
// ErrNotFound when there is none (never used, or expired).
func (s *Store) GetIdempotent(ctx context.Context, id string) (IdempotentOutcome, error) {
	resp, err := s.cli.Get(ctx, s.keys.Idempotency(id))
	if err != nil {
		return IdempotentOutcome{}, fmt.Errorf("read idempotency record: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return IdempotentOutcome{}, ErrNotFound
	}
	var o IdempotentOutcome
	if err := DecodeKV(IdempotencyRecord, resp.Kvs[0], &o); err != nil {
		return IdempotentOutcome{}, err
	}
	return o, nil
}

// PutIdempotent records the first outcome for an idempotency key under a
// lease of the given retention. If an outcome is already recorded, it is kept
// and returned with ErrConflict: the first answer is the one replayed.
func (s *Store) PutIdempotent(ctx context.Context, id string, o IdempotentOutcome, retention time.Duration) (IdempotentOutcome, error) {
	val, err := json.Marshal(o)
	if err != nil {
		return IdempotentOutcome{}, err
	}
	secs := int64(retention / time.Second)
	if secs < 1 {
		secs = 1
	}
	lease, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return IdempotentOutcome{}, fmt.Errorf("grant idempotency lease: %w", err)
	}
	key := s.keys.Idempotency(id)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease.ID))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return IdempotentOutcome{}, fmt.Errorf("record idempotency outcome: %w", err)
	}
	if resp.Succeeded {
		return o, nil
	}
	_, _ = s.cli.Revoke(ctx, lease.ID)
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return IdempotentOutcome{}, ErrConflict
	}
	var prev IdempotentOutcome
	if err := DecodeKV(IdempotencyRecord, kvs[0], &prev); err != nil {
		return IdempotentOutcome{}, err
	}
	return prev, ErrConflict
}

// Holds reports whether every comparison in cmps holds now, such as a
// reclaimer's fence, so that a caller whose fenced write failed can tell a
// lost fence from a record that changed.
func (s *Store) Holds(ctx context.Context, cmps ...clientv3.Cmp) (bool, error) {
	if len(cmps) == 0 {
		return true, nil
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Commit()
	if err != nil {
		return false, fmt.Errorf("check comparisons: %w", err)
	}
	return resp.Succeeded, nil
}
