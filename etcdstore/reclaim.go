package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The reclaimer's keys all live under Reclaim(), apart from the sessions it
// transitions, so that its own bookkeeping can be listed, watched or removed
// as one range without touching client data.

// Reclaim returns the prefix of everything the reclaimer records about itself.
func (k Keys) Reclaim() string {
	return k.Root() + "reclaim/"
}

// Election returns the prefix of the reclaimer's etcd election. Candidates'
// keys live under it; the one with the lowest create revision leads, and that
// revision is the leader's term.
func (k Keys) Election() string {
	return k.Reclaim() + "election/"
}

// Cursor returns the key where a sweep records how far its current pass got,
// so a pass interrupted by a crash or a lost election resumes there.
func (k Keys) Cursor(sweep string) string {
	return k.Reclaim() + "cursors/" + url.PathEscape(sweep)
}

// PassesPrefix returns the prefix of the pass reports.
func (k Keys) PassesPrefix() string {
	return k.Reclaim() + "passes/"
}

// passDigits is wide enough for any int64, so that reports sort by key in
// pass order and the newest is the last key of the range.
const passDigits = 20

// Pass returns the key of pass n's report.
func (k Keys) Pass(n int64) string {
	return fmt.Sprintf("%s%0*d", k.PassesPrefix(), passDigits, n)
}

// ParsePass returns the pass number of a key made by Pass.
func (k Keys) ParsePass(key string) (int64, bool) {
	s, ok := strings.CutPrefix(key, k.PassesPrefix())
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// PlansPrefix returns the prefix of the plan chunks of pass n: the decisions
// of a pass that is still running, kept in etcd so that the pass's memory
// stays bounded and a successor can finish what it planned.
func (k Keys) PlansPrefix(pass int64) string {
	return fmt.Sprintf("%splans/%0*d/", k.Reclaim(), passDigits, pass)
}

// PlanChunk returns the key of chunk i of pass n's plan; chunks sort in the
// order they were written.
func (k Keys) PlanChunk(pass int64, i int) string {
	return fmt.Sprintf("%s%08d", k.PlansPrefix(pass), i)
}

// OrphanRecords returns the prefix of the records of operator decisions on
// orphans (uploads with no session).
func (k Keys) OrphanRecords() string {
	return k.Reclaim() + "orphans/"
}

// OrphanRecord returns the key of the operator's decision on one orphan.
func (k Keys) OrphanRecord(bucket, uploadID string) string {
	return k.OrphanRecords() + url.PathEscape(bucket) + "/" + url.PathEscape(uploadID)
}

// OrphanAction names what an operator decided about an orphan.
type OrphanAction string

// The operator's decisions on an orphan.
const (
	// OrphanAdopted: a session was created for the upload, which from then
	// on follows the normal grace period.
	OrphanAdopted OrphanAction = "adopted"
	// OrphanDeleted: the upload was aborted on the operator's confirmation.
	OrphanDeleted OrphanAction = "deleted"
)

// orphanRecordVersion is the version of the OrphanRecord layout.
const orphanRecordVersion = 1

// OrphanRecord is the durable record of an operator's decision about an
// upload that had no session: who decided what, when, under which
// reclaimer term, and what it held at the time.
type OrphanRecord struct {
	Version   int          `json:"v"`
	Action    OrphanAction `json:"action"`
	Bucket    string       `json:"bucket"`
	Key       string       `json:"key"`
	UploadID  string       `json:"upload_id"`
	Principal string       `json:"principal,omitempty"`
	Term      int64        `json:"term"`
	At        time.Time    `json:"at"`
	Parts     int          `json:"parts"`
	Bytes     int64        `json:"bytes"`
	// Outcome is what became of a delete: the session state it ended in
	// and any doubt about the backend's answer.
	Outcome string `json:"outcome,omitempty"`
}

// MarshalOrphanRecord encodes r with its version set.
func MarshalOrphanRecord(r OrphanRecord) (string, error) {
	r.Version = orphanRecordVersion
	b, err := json.Marshal(r)
	return string(b), err
}

// MarshalSession encodes a session with its version set, for callers that
// write it in a transaction of their own (CreateSession and UpdateSession
// cannot carry a fence on a create).
func MarshalSession(sess *Session) (string, error) {
	sess.Version = sessionVersion
	b, err := json.Marshal(sess)
	return string(b), err
}

// GetSessionAt reads one session as it was at etcd revision rev, so that a
// whole pass decides from one consistent picture. It returns ErrNotFound
// when there was none; a compacted rev is an error (rpctypes.ErrCompacted).
func (s *Store) GetSessionAt(ctx context.Context, bucket, uploadID string, rev int64) (Versioned[Session], error) {
	resp, err := s.cli.Get(ctx, s.keys.Session(bucket, uploadID), clientv3.WithRev(rev))
	if err != nil {
		return Versioned[Session]{}, fmt.Errorf("read session at revision %d: %w", rev, err)
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

// GetActivityAt reads an upload's recorded activity as it was at revision
// rev, and ErrNotFound when none was recorded then.
func (s *Store) GetActivityAt(ctx context.Context, uploadID string, rev int64) (Versioned[Activity], error) {
	resp, err := s.cli.Get(ctx, s.keys.Activity(uploadID), clientv3.WithRev(rev))
	if err != nil {
		return Versioned[Activity]{}, fmt.Errorf("read activity at revision %d: %w", rev, err)
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

// ScanSessionsAt calls fn for every session of bucket ("" for all buckets)
// as they were at revision rev, reading pageSize keys at a time, so that a
// scan over millions of sessions holds one page in memory. It stops at the
// first error fn returns.
func (s *Store) ScanSessionsAt(ctx context.Context, bucket string, rev, pageSize int64, fn func(Versioned[Session]) error) error {
	return s.ScanSessionsExceptAt(ctx, bucket, rev, pageSize, nil, fn)
}

// ScanSessionsExceptAt is ScanSessionsAt without the sessions whose upload
// id (as their key names it) skip reports: those are neither decoded nor
// passed to fn. A nil skip skips none.
func (s *Store) ScanSessionsExceptAt(ctx context.Context, bucket string, rev, pageSize int64, skip func(uploadID string) bool, fn func(Versioned[Session]) error) error {
	prefix := s.keys.AllSessions()
	if bucket != "" {
		prefix = s.keys.Sessions(bucket)
	}
	var fnErr error
	_, err := s.rangeScan(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), rev, pageSize, func(kv *mvccpb.KeyValue) bool {
		if skip != nil {
			key := string(kv.Key)
			if id, err := url.PathUnescape(key[strings.LastIndexByte(key, '/')+1:]); err == nil && skip(id) {
				return true
			}
		}
		var sess Session
		if fnErr = DecodeKV(SessionRecord, kv, &sess); fnErr != nil {
			return false
		}
		fnErr = fn(Versioned[Session]{Value: sess, ModRev: kv.ModRevision})
		return fnErr == nil
	})
	if err != nil {
		return fmt.Errorf("scan sessions at revision %d: %w", rev, err)
	}
	return fnErr
}

// SessionBucketsAt returns the buckets that had at least one session at
// revision rev, in key order. It probes for the first key of each bucket
// with one-key requests over bounded stretches of the key space (see
// ScanRange for why a request's end must be bounded), jumping over each
// bucket's sessions once found: a probe starts one character wide past
// the last bucket and doubles after each empty one, so the request that
// finds the next bucket spans less than twice the gap before it and counts
// the sessions of that stretch, not every session after the last bucket.
func (s *Store) SessionBucketsAt(ctx context.Context, rev int64) ([]string, error) {
	prefix := s.keys.AllSessions()
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	var out []string
	span := narrowSpan(from)
	for from < end {
		to, ok := escapedKeys.stretchEnd(from, span)
		if !ok || to > end {
			to = end
		}
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(to), clientv3.WithLimit(1), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
		if err != nil {
			return nil, fmt.Errorf("list session buckets at revision %d: %w", rev, err)
		}
		if len(resp.Kvs) == 0 {
			span = min(0, span+1)
			from = to
			continue
		}
		rest := strings.TrimPrefix(string(resp.Kvs[0].Key), prefix)
		esc, _, ok := strings.Cut(rest, "/")
		if !ok {
			return nil, fmt.Errorf("session key %q has no bucket", resp.Kvs[0].Key)
		}
		bucket, err := url.PathUnescape(esc)
		if err != nil {
			return nil, fmt.Errorf("session key %q: %w", resp.Kvs[0].Key, err)
		}
		out = append(out, bucket)
		from = clientv3.GetPrefixRangeEnd(prefix + esc + "/")
		span = narrowSpan(from)
	}
	return out, nil
}

// narrowSpan is the width a probe for the next bucket starts with: one
// character past from.
func narrowSpan(from string) float64 {
	return -math.Log2(float64(escapedKeys.radix)) * float64(len(from)+1)
}
