package adminapi

import "time"

// The pass report and its parts, with the fields and JSON names of the
// reports the reclaimer stores.

// Report is what one pass found, decided and did. Its first fields are the
// shape `sweepgate reclaim status --json` and `plan --json` print; the
// rest say more for whoever has to explain a pass.
type Report struct {
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
	// mark waits for.
	Restored string `json:"restored,omitempty"`
	// Uploads is the plan: every backend upload the pass saw, by verdict.
	Uploads Uploads   `json:"uploads"`
	Stuck   []Stuck   `json:"stuck"`
	Orphans []Orphan  `json:"orphans"`
	Missing []Missing `json:"missing_sessions"`
	// DeniedBuckets are the buckets the backend refused to list to the
	// reclaimer's key (AccessDenied): skipped, nothing in them judged.
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
	Totals    ListTotals       `json:"totals"`
	Reconcile *ReconcileReport `json:"reconcile,omitempty"`
	// Digests is the digest sweep's part of the pass, when it is on.
	Digests *DigestReport `json:"digests,omitempty"`
	// Slice is a bounded pass's part of the keyspace
	// (reclaim.pass_uploads); absent for an unbounded pass.
	Slice *Slice `json:"slice,omitempty"`
}

// Slice is what a bounded pass did of its sweep's keyspace: its budget
// and how much it listed, where it started and stopped ("" is the start
// of the keyspace), whether it completed a cycle, and when the whole
// keyspace was last covered (the decision clock of the pass that began
// the last complete cycle; absent: never).
type Slice struct {
	Budget         int64     `json:"budget"`
	Listed         int64     `json:"listed"`
	From           string    `json:"from"`
	To             string    `json:"to"`
	CompletedCycle bool      `json:"completed_cycle"`
	CycleStarted   time.Time `json:"cycle_started"`
	Covered        time.Time `json:"covered,omitzero"`
	Cycles         int64     `json:"cycles"`
	Advanced       bool      `json:"advanced"`
}

// Count is a number of uploads (sessions) with their parts and bytes.
type Count struct {
	Sessions int64 `json:"sessions"`
	Parts    int64 `json:"parts"`
	Bytes    int64 `json:"bytes"`
}

// Uploads counts the plan by verdict.
type Uploads struct {
	Keep   Count `json:"keep"`
	Mark   Count `json:"mark"`
	Delete Count `json:"delete"`
	Hold   Count `json:"hold"`
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
	Bucket       string    `json:"bucket"`
	Key          string    `json:"key"`
	UploadID     string    `json:"upload_id"`
	State        string    `json:"state"`
	LastActivity time.Time `json:"last_activity"`
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
	// held a part newer than the gateway recorded (a writer around the
	// gateway); a delete's mark was reverted.
	AroundGateway Count `json:"activity_around_gateway"`
	// Unread are marks and deletes not done because the upload's parts
	// could not be read from the backend right before: kept.
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

// ReconcileReport counts what one reconciler run found and did.
type ReconcileReport struct {
	// Revision is the etcd revision the sessions were read at.
	Revision int64 `json:"revision"`
	// Scanned counts every session read.
	Scanned int `json:"scanned"`
	// Examined counts the aborting, cleanup_pending and completing sessions
	// old enough to act on that the run looked up on the backend.
	Examined int `json:"examined"`
	// Young counts aborting, cleanup_pending and completing sessions left
	// alone because they changed less than sessions.reconcile_after ago
	// (or, by the clock, in the future).
	Young int `json:"young"`
	// Aborted counts sessions moved to aborted, Completed to completed.
	Aborted   int `json:"aborted"`
	Completed int `json:"completed"`
	// Retried counts aborts sent to the backend again.
	Retried int `json:"retried"`
	// Stuck counts sessions completing past the stuck limit at the end of
	// the run (suits a gauge); Flagged those newly flagged in this run.
	Stuck   int `json:"stuck"`
	Flagged int `json:"flagged"`
	// Pruned counts terminal sessions deleted with their parts.
	Pruned int `json:"pruned"`
	// Conflicts counts sessions that changed between the read and the
	// write; the change won and the next run decides again.
	Conflicts int `json:"conflicts"`
	// Deferred counts sessions due for a decision or a prune that this run
	// left to the next one (past its bound on actions or prunes).
	Deferred int `json:"deferred"`
	// Errors counts sessions the run could not check, settle or read.
	Errors int `json:"errors"`
}

// Progress describes a pass in progress: the uploads counted so far and
// what it did so far.
type Progress struct {
	Pass    int64     `json:"pass"`
	Term    int64     `json:"term"`
	Phase   string    `json:"phase"`
	Bucket  string    `json:"bucket,omitempty"`
	Started time.Time `json:"started"`
	DryRun  bool      `json:"dry_run,omitempty"`
	Uploads Uploads   `json:"uploads"`
	Acted   Acted     `json:"acted"`
	// Digests is how far the pass's digest sweep got, once it started.
	Digests *DigestProgress `json:"digests,omitempty"`
}

// Leader describes whoever leads the election.
type Leader struct {
	ID   string `json:"id"`
	Term int64  `json:"term"`
}
