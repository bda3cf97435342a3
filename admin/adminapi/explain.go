package adminapi

import "time"

// The explanation of one upload, and the checklist and pass summary every
// explanation shows.

// Step is one rule of a checklist as an explanation shows it. Matched says
// the rule decided; the rules before it did not, and the checklist stops
// there, as the sweep does.
type Step struct {
	Rule    string `json:"rule"`
	Matched bool   `json:"matched"`
	// Detail says in words what the rule found.
	Detail string `json:"detail"`
	// Values are what the rule compared, by name. Times are RFC 3339,
	// durations Go duration strings ("24h0m0s"), revisions and counts
	// numbers; null says the record compared with was absent.
	Values map[string]any `json:"values"`
}

// PassSummary is the newest stored pass report, as far as it bears on an
// explanation: a verdict is carried out only by a pass that is not refused,
// stopped, or (for blobs) keeping everything.
type PassSummary struct {
	Pass     int64     `json:"pass"`
	Term     int64     `json:"term"`
	Finished time.Time `json:"finished"`
	DryRun   bool      `json:"dry_run"`
	// Refused and Stopped are the upload sweep's; DigestsRefused,
	// DigestsKept and RebuildFailed the digest sweep's. Empty when not.
	Refused        string `json:"refused"`
	Stopped        string `json:"stopped"`
	DigestsRefused string `json:"digests_refused"`
	DigestsKept    string `json:"digests_kept"`
	RebuildFailed  string `json:"rebuild_failed"`
}

// ExplainPolicy is the upload sweep's policy as an explanation shows it.
type ExplainPolicy struct {
	Grace       string `json:"grace"`
	DeleteAfter string `json:"delete_after"`
	StuckLimit  string `json:"stuck_limit"`
	ClockSkew   string `json:"clock_skew"`
}

// UploadExplanation says what the upload sweep does with one upload now,
// and why.
type UploadExplanation struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	// Now is the clock the checklist ran at; Revision the etcd revision
	// the session and activity were read at.
	Now      time.Time `json:"now"`
	Revision int64     `json:"revision"`
	// Verdict is keep, mark, delete or hold (as a pass would decide now), or
	// absent: the backend has no such upload, so there is nothing to keep or
	// delete.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Stuck flags a session completing past the stuck limit.
	Stuck   bool          `json:"stuck"`
	DryRun  bool          `json:"dry_run"`
	Policy  ExplainPolicy `json:"policy"`
	Backend ExplainUpload `json:"backend"`
	// Session is null for an orphan.
	Session *ExplainSession `json:"session"`
	Steps   []Step          `json:"steps"`
	// History is the session's recorded transitions, oldest first.
	History []ExplainTransition `json:"history"`
	// Orphan is the operator's recorded decision about the upload when it
	// had no session (adopted, deleted), if any.
	Orphan   *ExplainOrphan `json:"orphan"`
	LastPass *PassSummary   `json:"last_pass"`
	// Notes are what else bears on the verdict (a refused last pass, dry
	// run).
	Notes []string `json:"notes"`
}

// ExplainUpload is what the backend holds of the upload.
type ExplainUpload struct {
	Present bool  `json:"present"`
	Parts   int   `json:"parts"`
	Bytes   int64 `json:"bytes"`
	// Initiated is known when the upload was found by listing (an orphan).
	Initiated *time.Time `json:"initiated"`
	// NewestPart is the newest part's time on the backend's clock, null
	// without parts; NewestUnrecorded the newest among the parts the
	// gateway did not record (null: none).
	NewestPart       *time.Time `json:"newest_part"`
	NewestUnrecorded *time.Time `json:"newest_unrecorded_part"`
}

// ExplainSession is the session record.
type ExplainSession struct {
	State      string    `json:"state"`
	StateSince time.Time `json:"state_since"`
	Owner      string    `json:"owner"`
	Created    time.Time `json:"created"`
	// LastActivity is the session record's own; Activity the activity key,
	// which parts write. The checklist uses the latest of both and Created.
	LastActivity  time.Time        `json:"last_activity"`
	ExpiredAt     *time.Time       `json:"expired_at"`
	Uncertain     string           `json:"uncertain"`
	AbortAttempts int              `json:"abort_attempts"`
	ModRevision   int64            `json:"mod_revision"`
	Activity      *ExplainActivity `json:"activity"`
	// PartsInFlight counts the in-flight records of the upload: in
	// keyspace schema 1 one per part streaming through a gateway, from
	// schema 2 one per gateway with parts of it in flight or ended within
	// the linger (5 s).
	PartsInFlight int `json:"parts_in_flight"`
}

// ExplainActivity is the upload's activity key.
type ExplainActivity struct {
	At          time.Time `json:"at"`
	What        string    `json:"what"`
	PartNumber  int       `json:"part_number"`
	ModRevision int64     `json:"mod_revision"`
}

// ExplainTransition is one recorded state change.
type ExplainTransition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Actor  string    `json:"actor"`
	Term   int64     `json:"term"`
	Reason string    `json:"reason"`
}

// ExplainOrphan is an operator's recorded decision about an orphan.
type ExplainOrphan struct {
	Action    string    `json:"action"`
	Principal string    `json:"principal"`
	Term      int64     `json:"term"`
	At        time.Time `json:"at"`
	Parts     int       `json:"parts"`
	Bytes     int64     `json:"bytes"`
	Outcome   string    `json:"outcome"`
}
