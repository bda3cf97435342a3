package adminapi

import (
	"encoding/json"
	"time"
)

// The reclaim documents. Pass reports are Report, whose fields are those
// the reclaimer stores.

// ReclaimStatus answers GET /admin/v1/reclaim/status. Its top-level
// fields are those of the newest stored pass report (pass 0 when there is
// none), so that `reclaim status --json` prints a report like `plan --json`
// does; what is not about that pass is under reclaimer, in_progress and
// last_local.
type ReclaimStatus struct {
	Report
	// Shard is the etcd shard whose reclaimer this is (etcd.shards);
	// absent without shards.
	Shard     string    `json:"shard,omitempty"`
	Reclaimer Reclaimer `json:"reclaimer"`
	// InProgress is the real pass whose cursor etcd holds, if any.
	InProgress *Progress `json:"in_progress"`
	// LastLocal is the last pass or plan this process made.
	LastLocal *Report `json:"last_local"`
	// Paused are the sweeps the breaker paused; empty when none is.
	Paused []Pause `json:"paused"`
	// Restored is the restore mark, standing or cleared: when etcd was
	// last found restored from a snapshot; absent when never.
	Restored *RestoreMark `json:"restored,omitempty"`
}

// RestoreMark says when the reclaim leader found etcd restored from a
// snapshot (the backend's copy of the restore witness ahead of etcd's).
// While it stands (Cleared absent) no pass marks, aborts or deletes.
type RestoreMark struct {
	// Revision is the etcd revision the detection read etcd's witness at:
	// a session last written at or below it is marked afresh, never
	// aborted on its restored mark.
	Revision   int64     `json:"revision"`
	Reason     string    `json:"reason"`
	DetectedAt time.Time `json:"detected_at"`
	Term       int64     `json:"term"`
	By         string    `json:"by,omitempty"`
	// Cleared is when every live gateway had published its clock after the
	// mark and a complete rebuild started after it had finished.
	Cleared    *time.Time `json:"cleared,omitempty"`
	ClearedWhy string     `json:"cleared_why,omitempty"`
}

// Pause is a sweep that the breaker paused when it refused a plan: while
// it stands the sweep plans and reports, and marks and deletes nothing,
// until a person resumes it (POST /admin/v1/reclaim/resume).
type Pause struct {
	// Sweep is uploads or digests.
	Sweep string `json:"sweep"`
	// Reason is the refusal, with the numbers and limits compared.
	Reason string `json:"reason"`
	// Compared is the refused pass's breaker section (Breaker for uploads,
	// DigestBreaker for digests).
	Compared json.RawMessage `json:"compared,omitempty"`
	// Pass, Term and At are those of the refusal.
	Pass int64     `json:"pass"`
	Term int64     `json:"term"`
	At   time.Time `json:"at"`
}

// ResumeRequest is the document of POST /admin/v1/reclaim/resume.
type ResumeRequest struct {
	// Sweeps names the sweeps to resume (uploads, digests); empty
	// resumes both.
	Sweeps []string `json:"sweeps"`
	// Principal is who resumes, recorded in the audit line (required).
	Principal string `json:"principal"`
}

// Resumed answers POST /admin/v1/reclaim/resume: one result per sweep
// named.
type Resumed struct {
	Results []ResumeResult `json:"results"`
}

// ResumeResult says what a resume did about one sweep.
type ResumeResult struct {
	Sweep string `json:"sweep"`
	// Resumed says a pause was lifted: Lifted is that pause. False when
	// the sweep was not paused: nothing was changed.
	Resumed bool   `json:"resumed"`
	Lifted  *Pause `json:"lifted,omitempty"`
	// Message says in words what was done.
	Message string `json:"message"`
}

// Reclaimer is this process's reclaimer and whoever leads.
type Reclaimer struct {
	// ID is what this process campaigns with.
	ID string `json:"id"`
	// Enabled says this process campaigns (reclaim.enabled).
	Enabled bool `json:"enabled"`
	// DryRun is the reclaim.dry_run setting: every pass is a plan.
	DryRun bool `json:"dry_run"`
	// Leading says this process leads, in Term.
	Leading bool  `json:"leading"`
	Term    int64 `json:"term"`
	// Leader is whoever leads, as etcd says; null when nobody does.
	Leader *Leader `json:"leader"`
}

// Reports answers GET /admin/v1/reclaim/reports.
type Reports struct {
	Reports []Report `json:"reports"`
}

// Orphans answers GET /admin/v1/reclaim/orphans.
type Orphans struct {
	Orphans []Orphan `json:"orphans"`
	// Total counts every orphan found; Truncated says the list is shorter.
	Total     int64 `json:"total"`
	Truncated bool  `json:"truncated"`
	// Fresh says the backend was listed for this answer; otherwise the
	// orphans are those the newest pass report held (Pass, 0 when none).
	Fresh bool      `json:"fresh"`
	Pass  int64     `json:"pass"`
	AsOf  time.Time `json:"as_of"`
}

// OrphanRecord is what an operator's decision about an orphan recorded.
type OrphanRecord struct {
	Action    string    `json:"action"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	UploadID  string    `json:"upload_id"`
	Principal string    `json:"principal"`
	Term      int64     `json:"term"`
	At        time.Time `json:"at"`
	Parts     int       `json:"parts"`
	Bytes     int64     `json:"bytes"`
	Outcome   string    `json:"outcome"`
}

// Adopted answers POST /admin/v1/reclaim/orphans/adopt.
type Adopted struct {
	Adopted OrphanRecord `json:"adopted"`
}

// OrphanResult is what a delete did, or would do, with one orphan.
type OrphanResult struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	Parts    int    `json:"parts"`
	Bytes    int64  `json:"bytes"`
	// Outcome is the state the upload ended in (aborted, cleanup_pending),
	// or why it was not deleted.
	Outcome   string `json:"outcome"`
	Uncertain string `json:"uncertain"`
	Deleted   bool   `json:"deleted"`
}

// OrphanDeletion answers POST /admin/v1/reclaim/orphans/delete; with an
// error (not confirmed, a failure part way) it carries the error too.
type OrphanDeletion struct {
	Error   *ErrorDetail   `json:"error,omitempty"`
	Results []OrphanResult `json:"results"`
	Deleted int            `json:"deleted"`
}

// NotLeader is the 409 answer of an action that only the leader may take.
type NotLeader struct {
	Error  ErrorDetail `json:"error"`
	Leader *Leader     `json:"leader"`
}

// StreamLine is one line of a streamed run or plan (?progress=1):
// progress lines, then one line with the report or an error.
type StreamLine struct {
	Progress *Progress    `json:"progress,omitempty"`
	Report   *Report      `json:"report,omitempty"`
	Error    *ErrorDetail `json:"error,omitempty"`
	Leader   *Leader      `json:"leader,omitempty"`
}

// OrphanRef names one backend upload.
type OrphanRef struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
}

// AdoptRequest is the document of POST /admin/v1/reclaim/orphans/adopt.
type AdoptRequest struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	UploadID  string `json:"upload_id"`
	Principal string `json:"principal"`
}

// DeleteRequest is the document of POST /admin/v1/reclaim/orphans/delete.
type DeleteRequest struct {
	Refs    []OrphanRef `json:"refs"`
	Confirm bool        `json:"confirm"`
	// Principal is who deletes, recorded with the decision.
	Principal string `json:"principal"`
}

// ShardStatuses answers GET /admin/v1/reclaim/status?shard=all: every
// shard's reclaimer, the default shard first.
type ShardStatuses struct {
	Shards []ShardStatus `json:"shards"`
}

// ShardStatus is one shard's reclaimer status, or the error reading it.
type ShardStatus struct {
	Shard  string         `json:"shard"`
	Status *ReclaimStatus `json:"status,omitempty"`
	Error  *ErrorDetail   `json:"error,omitempty"`
}
