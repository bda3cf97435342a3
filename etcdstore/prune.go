package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrUndecodable says a record's value is not one this version can read.
var ErrUndecodable = errors.New("etcdstore: record does not decode")

// UndecodableError lists the records a scan passed over because their values
// did not decode. It wraps ErrUndecodable.
type UndecodableError struct {
	Keys []string
	// First is the decode error of the first such record.
	First error
}

func (e *UndecodableError) Error() string {
	return fmt.Sprintf("etcdstore: %d record(s) do not decode, first %s: %v", len(e.Keys), e.Keys[0], e.First)
}

// Unwrap makes errors.Is(err, ErrUndecodable) hold.
func (e *UndecodableError) Unwrap() error { return ErrUndecodable }

// ScanSessions calls fn for every session of bucket ("" for all buckets) as
// they stood at one etcd revision, read in pages of pageSize keys (500 when
// zero or less), and returns that revision. Unlike ListSessions it holds one
// page at a time, so a caller that keeps only what it will act on needs
// memory for that alone.
//
// A session of a newer release's layout (*NewerRecordError) stops the scan
// with that error. Any other session whose value does not decode is passed
// over and the scan goes on;
// it then ends with an *UndecodableError naming every such key, after fn has
// seen every session that did decode. An error from fn stops the scan and is
// returned as it is, with the revision.
//
// fn must be quick: the later pages are read at the first page's revision,
// which etcd's compaction may remove while fn dawdles (the scan then fails
// with the compaction error and the caller starts again).
func (s *Store) ScanSessions(ctx context.Context, bucket string, pageSize int64, fn func(Versioned[Session]) error) (int64, error) {
	prefix := s.keys.AllSessions()
	if bucket != "" {
		prefix = s.keys.Sessions(bucket)
	}
	var (
		bad   *UndecodableError
		fnErr error
	)
	rev, err := s.rangeScan(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), 0, pageSize, func(kv *mvccpb.KeyValue) bool {
		var sess Session
		if err := DecodeKV(SessionRecord, kv, &sess); err != nil {
			if errors.Is(err, ErrNewerRecord) {
				fnErr = err // never passed over: a newer release's record stops the scan
				return false
			}
			if bad == nil {
				bad = &UndecodableError{First: err}
			}
			bad.Keys = append(bad.Keys, string(kv.Key))
			return true
		}
		fnErr = fn(Versioned[Session]{Value: sess, ModRev: kv.ModRevision})
		return fnErr == nil
	})
	switch {
	case err != nil:
		return rev, err
	case fnErr != nil:
		return rev, fnErr
	case bad != nil:
		return rev, bad
	}
	return rev, nil
}

// DeleteSession deletes a session together with its part records and its
// activity key, in one transaction that requires the session to be unchanged
// since modRev and every comparison in also (a reclaimer's fence) to hold.
// It returns ErrConflict when any of them does not, including when the
// session no longer exists: a concurrent change wins, and the caller decides
// again from what it reads next.
//
// The parts go as one range delete, so a session with all 10000 parts is
// still one small transaction.
func (s *Store) DeleteSession(ctx context.Context, bucket, uploadID string, modRev int64, also ...clientv3.Cmp) error {
	if modRev <= 0 {
		// ModRevision of a missing key is 0: comparing with it would
		// "delete" a session that is not there, or race its creation.
		return fmt.Errorf("delete session %s/%s: no mod revision to compare", bucket, uploadID)
	}
	key := s.keys.Session(bucket, uploadID)
	// Keys.Parts ends in '/', so upload "a"'s prefix never covers "ab"'s.
	parts := s.keys.Parts(uploadID)
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)}, also...)
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(
		clientv3.OpDelete(key),
		clientv3.OpDelete(parts, clientv3.WithPrefix()),
		clientv3.OpDelete(s.keys.Activity(uploadID)),
	).Commit()
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	if !resp.Succeeded {
		return ErrConflict
	}
	return nil
}
