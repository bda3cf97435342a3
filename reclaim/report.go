package reclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/sweep"
)

// Report is what one pass found, decided and did. Its first fields are the
// shape `sweepgate reclaim status --json` and `plan --json` print; the
// rest say more for whoever has to explain a pass.
type Report struct {
	// Version is the stored layout's version; version 1 is stored without
	// it.
	Version  int       `json:"v,omitempty"`
	Pass     int64     `json:"pass"`
	Term     int64     `json:"term"`
	DryRun   bool      `json:"dry_run"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Refused is why the breaker refused the plan, with both numbers; empty
	// when it did not.
	Refused string `json:"refused"`
	// Paused says the upload sweep was found paused by an earlier
	// refusal (Refused says since when and why): nothing was marked or
	// deleted.
	Paused bool `json:"paused,omitempty"`
	// Restored is set while the restore mark stands (etcd was restored
	// from a snapshot): why nothing was marked or deleted, and what the
	// mark waits for. Refused says the same.
	Restored string `json:"restored,omitempty"`
	// Uploads is the plan: every backend upload the pass saw, by verdict.
	Uploads Uploads   `json:"uploads"`
	Stuck   []Stuck   `json:"stuck"`
	Orphans []Orphan  `json:"orphans"`
	Missing []Missing `json:"missing_sessions"`
	// DeniedBuckets are the buckets the backend refused to list to the
	// reclaimer's key (AccessDenied): skipped, nothing in them judged,
	// marked or deleted.
	DeniedBuckets []string `json:"denied_buckets,omitempty"`

	// Stopped is why the pass ended before finishing (a failed read, a time
	// in the future, a lost term); empty when it finished.
	Stopped string `json:"stopped,omitempty"`
	// Clock is the time the pass decided at; Revision the etcd revision it
	// read sessions at.
	Clock    time.Time `json:"clock"`
	Revision int64     `json:"revision"`
	// Resumed counts how often the pass was picked up after an interruption.
	Resumed int     `json:"resumed,omitempty"`
	Breaker Breaker `json:"breaker"`
	// Acted is what the pass did with its plan.
	Acted Acted `json:"acted"`
	// Vanished counts uploads that were listed but gone before their parts
	// could be listed (completed or aborted meanwhile).
	Vanished int64 `json:"vanished,omitempty"`
	// Totals count every stuck session, orphan and missing session, where
	// the lists above may be cut short to keep the report small.
	Totals    ListTotals                 `json:"totals"`
	Reconcile *multipart.ReconcileReport `json:"reconcile,omitempty"`
	// Digests is the digest sweep's part of the pass, when it is on.
	Digests *digestsweep.Report `json:"digests,omitempty"`
	// Slice is a bounded pass's part of the keyspace (reclaim.pass_uploads):
	// where it started and stopped and when the whole keyspace was last
	// covered; nil for an unbounded pass.
	Slice *sweep.Slice `json:"slice,omitempty"`
}

// Count is a number of uploads (sessions) with their parts and bytes.
type Count struct {
	Sessions int64 `json:"sessions"`
	Parts    int64 `json:"parts"`
	Bytes    int64 `json:"bytes"`
}

func (c *Count) add(parts int, size int64) {
	c.Sessions++
	c.Parts += int64(parts)
	c.Bytes += size
}

func (c *Count) plus(o Count) {
	c.Sessions += o.Sessions
	c.Parts += o.Parts
	c.Bytes += o.Bytes
}

// Uploads counts the plan by verdict.
type Uploads struct {
	Keep   Count `json:"keep"`
	Mark   Count `json:"mark"`
	Delete Count `json:"delete"`
	Hold   Count `json:"hold"`
}

func (u *Uploads) of(v Verdict) *Count {
	switch v {
	case Mark:
		return &u.Mark
	case Delete:
		return &u.Delete
	case Hold:
		return &u.Hold
	}
	return &u.Keep
}

func (u *Uploads) plus(o Uploads) {
	u.Keep.plus(o.Keep)
	u.Mark.plus(o.Mark)
	u.Delete.plus(o.Delete)
	u.Hold.plus(o.Hold)
}

// Stored is everything the backend holds in multipart uploads.
func (u Uploads) Stored() Count {
	var c Count
	c.plus(u.Keep)
	c.plus(u.Mark)
	c.plus(u.Delete)
	c.plus(u.Hold)
	return c
}

// Stuck is a session completing for longer than the stuck limit.
type Stuck struct {
	Bucket   string    `json:"bucket"`
	Key      string    `json:"key"`
	UploadID string    `json:"upload_id"`
	Since    time.Time `json:"since"`
}

// Orphan is a backend upload with no session.
type Orphan struct {
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	UploadID  string    `json:"upload_id"`
	Initiated time.Time `json:"initiated"`
	Parts     int       `json:"parts"`
	Bytes     int64     `json:"bytes"`
}

// Missing is a session that expects a backend upload the backend does not
// have.
type Missing struct {
	Bucket       string                 `json:"bucket"`
	Key          string                 `json:"key"`
	UploadID     string                 `json:"upload_id"`
	State        etcdstore.SessionState `json:"state"`
	LastActivity time.Time              `json:"last_activity"`
}

// Breaker holds the numbers the plan was checked against: parts and
// uploads deleted, and uploads marked, each against its own limits.
type Breaker struct {
	DeleteParts              int64   `json:"delete_parts"`
	StoredParts              int64   `json:"stored_parts"`
	MaxDelete                int64   `json:"max_delete"`
	MaxDeleteFraction        float64 `json:"max_delete_fraction"`
	DeleteUploads            int64   `json:"delete_uploads"`
	StoredUploads            int64   `json:"stored_uploads"`
	MaxDeleteUploads         int64   `json:"max_delete_uploads"`
	MaxDeleteUploadsFraction float64 `json:"max_delete_uploads_fraction"`
	MarkUploads              int64   `json:"mark_uploads"`
	MaxMark                  int64   `json:"max_mark"`
	MaxMarkFraction          float64 `json:"max_mark_fraction"`
}

// Acted is what a pass did. Marks and deletes that found their session
// changed since the plan are Changed and were not done.
type Acted struct {
	Marked Count `json:"marked"`
	// Intents are deletes whose "aborting" was recorded; each then ends in
	// Deleted, CleanupPending, or (after a crash) is left to the reconciler.
	Intents        Count `json:"delete_intents"`
	Deleted        Count `json:"deleted"`
	CleanupPending Count `json:"cleanup_pending"`
	Changed        Count `json:"changed"`
	// AroundGateway are marks and deletes not done because the backend
	// holds a part the gateway did not record (a writer around it); a
	// delete's mark was reverted.
	AroundGateway Count `json:"activity_around_gateway"`
	// Unread are marks and deletes not done because the upload's parts
	// could not be read from the backend right before: kept on a failed
	// read.
	Unread Count `json:"parts_unread"`
}

// ListTotals are the full lengths of the report's lists.
type ListTotals struct {
	Stuck   int64 `json:"stuck"`
	Orphans int64 `json:"orphans"`
	Missing int64 `json:"missing_sessions"`
	// MissingUnverified counts sessions without a listed upload that were
	// not checked on the backend because the pass's check budget ran out.
	MissingUnverified int64 `json:"missing_unverified,omitempty"`
	// Unlisted counts uploads the backend's listing did not show but that
	// were found through their sessions and judged all the same.
	Unlisted int64 `json:"unlisted,omitempty"`
}

// maxReportList bounds each list in a stored report; the totals say how
// many there were.
const maxReportList = 1000

// maxReportBytes keeps a stored report well inside etcd's request limit
// (1.5 MiB); lists are halved until the report fits.
const maxReportBytes = 1 << 20

// reportsKept is how many pass reports etcd keeps.
const reportsKept = 100

// encodeReport encodes r for etcd, shortening its lists until it fits.
func encodeReport(r *Report) ([]byte, error) {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if len(b) <= maxReportBytes {
			return b, nil
		}
		if len(r.Stuck) <= 1 && len(r.Orphans) <= 1 && len(r.Missing) <= 1 {
			return nil, fmt.Errorf("reclaim: report of pass %d is %d bytes even without its lists", r.Pass, len(b))
		}
		r.Stuck = r.Stuck[:len(r.Stuck)/2]
		r.Orphans = r.Orphans[:len(r.Orphans)/2]
		r.Missing = r.Missing[:len(r.Missing)/2]
	}
}

// reportOps are the writes that store pass n's report and drop the oldest
// ones past the bounded history.
func reportOps(keys etcdstore.Keys, n int64, body []byte) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpPut(keys.Pass(n), string(body))}
	if oldest := n - reportsKept + 1; oldest > 0 {
		ops = append(ops, clientv3.OpDelete(keys.Pass(0), clientv3.WithRange(keys.Pass(oldest))))
	}
	return ops
}

// LastReport reads the newest pass report. ok is false when there is none.
func LastReport(ctx context.Context, store *etcdstore.Store) (r Report, ok bool, err error) {
	rs, err := Reports(ctx, store, 1)
	if err != nil || len(rs) == 0 {
		return Report{}, false, err
	}
	return rs[0], true, nil
}

// Reports reads up to limit pass reports, newest first.
func Reports(ctx context.Context, store *etcdstore.Store, limit int64) ([]Report, error) {
	keys := store.Keys()
	resp, err := store.Client().Get(ctx, keys.PassesPrefix(), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("reclaim: read pass reports: %w", err)
	}
	out := make([]Report, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r Report
		if err := etcdstore.DecodeKV(reportRecord, kv, &r); err != nil {
			return nil, fmt.Errorf("reclaim: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// lastPassNumber returns the number of the newest stored report, 0 if none.
func lastPassNumber(ctx context.Context, store *etcdstore.Store) (int64, error) {
	keys := store.Keys()
	resp, err := store.Client().Get(ctx, keys.PassesPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("reclaim: read pass reports: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	n, ok := keys.ParsePass(string(resp.Kvs[0].Key))
	if !ok {
		return 0, fmt.Errorf("reclaim: unexpected report key %q", resp.Kvs[0].Key)
	}
	return n, nil
}
