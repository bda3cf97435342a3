package reclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// Orphans are backend uploads without a session. A pass only holds and
// reports them: nothing known owns them, so a person decides, and each
// decision is recorded (a record under reclaim/orphans/ and a log line).

// ErrNotConfirmed says a destructive operator action was asked for without
// its confirmation; nothing was done.
var ErrNotConfirmed = errors.New("reclaim: not confirmed; nothing was deleted")

// ErrNotOrphan says the upload has a session, so it is not an orphan and
// follows the normal rules.
var ErrNotOrphan = errors.New("reclaim: the upload has a session; it is not an orphan")

// ErrOtherShard says the bucket is one of Config.ExcludeBuckets: its
// sessions are kept on another etcd shard, whose reclaimer alone may judge
// or act on its uploads.
var ErrOtherShard = errors.New("reclaim: the bucket's state is on another shard, whose reclaimer acts on its uploads")

// otherShard reports whether bucket's sessions are on another shard.
func (r *Reclaimer) otherShard(bucket string) bool {
	return slices.Contains(r.cfg.ExcludeBuckets, bucket)
}

// ErrNoSuchUpload says the backend does not have the upload.
var ErrNoSuchUpload = errors.New("reclaim: the backend has no such upload")

// OrphanRef names one upload.
type OrphanRef struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
}

// String renders r as ParseOrphanRef reads it: bucket/key?uploadId=id.
func (r OrphanRef) String() string {
	return r.Bucket + "/" + r.Key + "?uploadId=" + r.UploadID
}

// ParseOrphanRef reads "bucket/key?uploadId=id", the form the CLI takes and
// String prints. The last "?uploadId=" separates the id, so a key may hold
// '?' and '/'.
func ParseOrphanRef(s string) (OrphanRef, error) {
	i := strings.LastIndex(s, "?uploadId=")
	if i < 0 {
		return OrphanRef{}, fmt.Errorf("reclaim: %q: want bucket/key?uploadId=ID", s)
	}
	path, id := s[:i], s[i+len("?uploadId="):]
	bucket, key, ok := strings.Cut(path, "/")
	if !ok || bucket == "" || key == "" || id == "" {
		return OrphanRef{}, fmt.Errorf("reclaim: %q: want bucket/key?uploadId=ID", s)
	}
	return OrphanRef{Bucket: bucket, Key: key, UploadID: id}, nil
}

// Orphans returns the orphans held by the newest stored pass report, and
// how many it held in all (the list may be cut short).
func (r *Reclaimer) Orphans(ctx context.Context) ([]Orphan, int64, error) {
	rep, ok, err := LastReport(ctx, r.store)
	if err != nil || !ok {
		return nil, 0, err
	}
	return rep.Orphans, rep.Totals.Orphans, nil
}

// ScanOrphans lists the backend's uploads now and calls fn for each one
// that has no session. It writes nothing.
func (r *Reclaimer) ScanOrphans(ctx context.Context, fn func(Orphan) error) error {
	resp, err := r.cli().Get(ctx, r.keys().Cursor(uploadSweep), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("reclaim: read etcd revision: %w", err)
	}
	rev := resp.Header.Revision
	inv := &inventory{
		s3: r.s3, store: r.store, policy: r.policy(), now: r.now().UTC(), rev: rev,
		batch: r.cfg.BatchSize, parallel: r.cfg.Parallel, orphansOnly: true, buckets: r.cfg.Buckets, exclude: r.cfg.ExcludeBuckets,
	}
	return inv.walk(ctx, position{}, orphanHandler(fn))
}

// orphanHandler passes the held uploads of an inventory to a function.
type orphanHandler func(Orphan) error

func (h orphanHandler) page(_ context.Context, items []item, _ position, _ bool) error {
	for _, it := range items {
		if it.Verdict == Hold && !it.Vanished {
			if err := h(Orphan{Bucket: it.Bucket, Key: it.Key, UploadID: it.UploadID, Initiated: it.Initiated, Parts: it.Parts, Bytes: it.Bytes}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h orphanHandler) missing(context.Context, []Missing, int64, position) error { return nil }
func (h orphanHandler) denied(context.Context, string, position) error            { return nil }

// leadership returns the current term, or ErrNotLeader: operator actions
// are writes of the reclaimer, fenced like every other.
func (r *Reclaimer) leadership() (term, error) {
	l := r.elector.Current()
	if l == nil {
		return term{}, ErrNotLeader
	}
	return termOf(l), nil
}

// Adopt creates an active session owned by principal for an orphan, so
// that it follows the normal grace period from now on. It fails with
// ErrNotOrphan if a session exists, ErrNoSuchUpload if the backend does not
// have the upload under that key, and ErrNotLeader off the leader.
func (r *Reclaimer) Adopt(ctx context.Context, bucket, key, uploadID, principal string) (etcdstore.OrphanRecord, error) {
	if r.otherShard(bucket) {
		return etcdstore.OrphanRecord{}, ErrOtherShard
	}
	t, err := r.leadership()
	if err != nil {
		return etcdstore.OrphanRecord{}, err
	}
	parts, size, err := r.s3.CountParts(ctx, bucket, key, uploadID)
	if errors.Is(err, s3client.ErrNoSuchUpload) || errors.Is(err, s3client.ErrNoSuchBucket) {
		return etcdstore.OrphanRecord{}, ErrNoSuchUpload
	}
	if err != nil {
		return etcdstore.OrphanRecord{}, fmt.Errorf("reclaim: list parts of %s/%s: %w", bucket, key, err)
	}
	now := r.now().UTC()
	sess := etcdstore.Session{Bucket: bucket, Key: key, UploadID: uploadID, Owner: principal, Created: now, LastActivity: now}
	transition(&sess, etcdstore.StateActive, t, now, "adopted by operator")
	rec := etcdstore.OrphanRecord{Action: etcdstore.OrphanAdopted, Bucket: bucket, Key: key, UploadID: uploadID,
		Principal: principal, Term: t.N, At: now, Parts: parts, Bytes: size, Outcome: string(etcdstore.StateActive)}
	if _, err := r.createOrphanSession(ctx, t, &sess, rec); err != nil {
		return rec, err
	}
	audit.Record(r.log, audit.AdoptOrphan, audit.Upload(bucket, key, uploadID), "adopted by operator: it follows the grace period from now on",
		"owner", principal, "term", t.N, "parts", parts, "bytes", size)
	return rec, nil
}

// createOrphanSession writes a session for an upload that has none, with
// the operator's record, in one fenced transaction that fails if a session
// appeared meanwhile.
func (r *Reclaimer) createOrphanSession(ctx context.Context, t term, sess *etcdstore.Session, rec etcdstore.OrphanRecord) (int64, error) {
	keys := r.keys()
	skey := keys.Session(sess.Bucket, sess.UploadID)
	val, err := etcdstore.MarshalSession(sess)
	if err != nil {
		return 0, err
	}
	rv, err := etcdstore.MarshalOrphanRecord(rec)
	if err != nil {
		return 0, err
	}
	resp, err := fencedTxn(ctx, r.cli(), t, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(skey), "=", 0)},
		clientv3.OpPut(skey, val), clientv3.OpPut(keys.OrphanRecord(sess.Bucket, sess.UploadID), rv))
	if errors.Is(err, errChanged) {
		return 0, ErrNotOrphan
	}
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// OrphanResult says what DeleteOrphans did with one named upload.
type OrphanResult struct {
	OrphanRef
	Parts int   `json:"parts"`
	Bytes int64 `json:"bytes"`
	// Outcome is the session state the upload ended in (aborted,
	// cleanup_pending), or what stopped the delete.
	Outcome string `json:"outcome"`
	// Uncertain is the doubt recorded about the backend's answer, if any.
	Uncertain string `json:"uncertain,omitempty"`
	Deleted   bool   `json:"deleted"`
}

// DeleteOrphans aborts the named orphans, when confirm is true and each
// still has no session. The delete takes the same path as a pass's: a
// session is created for the upload in state aborting with the operator's
// record (fenced, and refused if a session appeared), then the backend
// abort, then the outcome, with an unclear answer settled by listing again.
// Without confirm it only says what it would do and returns ErrNotConfirmed.
func (r *Reclaimer) DeleteOrphans(ctx context.Context, principal string, refs []OrphanRef, confirm bool) ([]OrphanResult, error) {
	var t term
	if confirm {
		var err error
		if t, err = r.leadership(); err != nil {
			return nil, err
		}
	}
	out := make([]OrphanResult, 0, len(refs))
	for _, ref := range refs {
		res, err := r.deleteOrphan(ctx, t, principal, ref, confirm)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	if !confirm {
		return out, ErrNotConfirmed
	}
	return out, nil
}

func (r *Reclaimer) deleteOrphan(ctx context.Context, t term, principal string, ref OrphanRef, confirm bool) (OrphanResult, error) {
	res := OrphanResult{OrphanRef: ref}
	if r.otherShard(ref.Bucket) {
		res.Outcome = ErrOtherShard.Error()
		return res, nil
	}
	if _, err := r.store.GetSession(ctx, ref.Bucket, ref.UploadID); err == nil {
		res.Outcome = ErrNotOrphan.Error()
		return res, nil
	} else if !errors.Is(err, etcdstore.ErrNotFound) {
		return res, err
	}
	parts, size, err := r.s3.CountParts(ctx, ref.Bucket, ref.Key, ref.UploadID)
	if errors.Is(err, s3client.ErrNoSuchUpload) || errors.Is(err, s3client.ErrNoSuchBucket) {
		res.Outcome = ErrNoSuchUpload.Error()
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("reclaim: list parts of %s: %w", ref, err)
	}
	res.Parts, res.Bytes = parts, size
	if !confirm {
		res.Outcome = "would delete (not confirmed)"
		return res, nil
	}
	now := r.now().UTC()
	reason := "orphan deleted by operator"
	if principal != "" {
		reason += " " + principal
	}
	sess := etcdstore.Session{Bucket: ref.Bucket, Key: ref.Key, UploadID: ref.UploadID, Created: now, LastActivity: now}
	transition(&sess, etcdstore.StateAborting, t, now, reason)
	rec := etcdstore.OrphanRecord{Action: etcdstore.OrphanDeleted, Bucket: ref.Bucket, Key: ref.Key, UploadID: ref.UploadID,
		Principal: principal, Term: t.N, At: now, Parts: parts, Bytes: size, Outcome: string(etcdstore.StateAborting)}
	rev, err := r.createOrphanSession(ctx, t, &sess, rec)
	if errors.Is(err, ErrNotOrphan) {
		res.Outcome = err.Error()
		return res, nil
	}
	if err != nil {
		return res, err
	}
	to, doubt, err := r.abortAndSettle(ctx, t, sess, rev, func(to etcdstore.SessionState) []clientv3.Op {
		rec.Outcome = string(to)
		rv, _ := etcdstore.MarshalOrphanRecord(rec) // plain data always marshals
		return []clientv3.Op{clientv3.OpPut(r.keys().OrphanRecord(ref.Bucket, ref.UploadID), rv)}
	})
	res.Outcome, res.Uncertain, res.Deleted = string(to), doubt, to == etcdstore.StateAborted
	// The abort went to the backend whatever became of its record.
	audit.Record(r.log, audit.DeleteOrphan, ref.String(), "orphan deleted by operator, confirmed",
		"principal", principal, "term", t.N, "parts", parts, "bytes", size, "outcome", to, "uncertain", doubt, "recorded", err == nil)
	if err != nil && !errors.Is(err, errChanged) {
		// The session stays aborting; the reconciler finishes it.
		res.Outcome = string(etcdstore.StateAborting)
		res.Deleted = false
		return res, fmt.Errorf("reclaim: record outcome of deleting %s: %w", ref, err)
	}
	r.metrics.deleted(string(to), parts, size)
	return res, nil
}
