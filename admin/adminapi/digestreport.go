package adminapi

import "time"

// The digest sweep's part of a pass report and of its progress, and the
// explanation of one digest.

// DigestReport is what the digest sweep of one pass found, decided and did:
// the "digests" section of a pass report. In a dry run the counts are what
// a pass would do; Deleted and Bytes are what its collector would delete.
type DigestReport struct {
	// Pending counts stored blobs outside the retained set whose tombstone
	// waits (new this pass, or for its frontier).
	Pending int64 `json:"pending"`
	// Ready counts blobs confirmed for the collector in this pass.
	Ready int64 `json:"ready"`
	// Skipped counts tombstones whose blob came back into the retained set.
	Skipped int64 `json:"skipped"`
	// Deleted counts blobs the collector deleted, Bytes their size.
	Deleted int64 `json:"deleted"`
	Bytes   int64 `json:"bytes"`
	// Stored counts the blobs listed in the namespaces, StoredBytes their
	// size, ReadyBytes the size of the ready ones.
	Stored      int64 `json:"stored"`
	StoredBytes int64 `json:"stored_bytes"`
	ReadyBytes  int64 `json:"ready_bytes"`
	// Retained counts the stored blobs inside the retained set, RetainedBy
	// by the inventory that retained them.
	Retained   int64            `json:"retained"`
	RetainedBy map[string]int64 `json:"retained_by,omitempty"`
	// NewPending counts blobs that became pending in this pass.
	NewPending int64 `json:"new_pending,omitempty"`
	// Changed counts verdicts not written because a reference, placement or
	// the tombstone itself moved since they were made: left alone.
	Changed int64 `json:"changed,omitempty"`
	// Ignored counts keys in a namespace prefix that carry no digest.
	Ignored int64 `json:"ignored,omitempty"`
	// Duplicates counts blobs whose digest's tombstone is about a copy
	// stored elsewhere; they wait until that copy is settled.
	Duplicates int64 `json:"duplicates,omitempty"`
	// Failed counts blobs the collector found still present after its
	// delete: they stay ready for the next pass.
	Failed int64 `json:"failed,omitempty"`
	// Unknown counts deletes whose outcome could not be learnt: their
	// guards stay armed until a later pass finds out.
	Unknown int64 `json:"unknown,omitempty"`
	// Settling counts guards kept armed because a delete of their blob may
	// still be executed by the backend (docs/digests.md).
	Settling int64 `json:"settling,omitempty"`
	// FutureTimes counts trash entries and tombstones whose recorded time
	// lies beyond now plus the clock skew allowance: kept longer, never
	// shorter.
	FutureTimes int64 `json:"future_times,omitempty"`
	// Guards counts guards found armed when the sweep started (left by an
	// interrupted collector; a resumed pass counts again those an earlier
	// attempt took over); Released those released without a delete.
	Guards   int64 `json:"guards,omitempty"`
	Released int64 `json:"released,omitempty"`
	// StalePlacements counts placements older than the placement grace
	// seen by the inventory (pruned by the pass).
	StalePlacements int64 `json:"stale_placements,omitempty"`
	// DeniedBuckets are the buckets of the namespaces and reference
	// sources the backend refused to the reclaimer's key (AccessDenied): a
	// denied namespace's blobs were not judged, and a denied reference
	// source keeps every blob for the pass (Kept says which).
	DeniedBuckets []string `json:"denied_buckets,omitempty"`
	// Refused is why the breaker refused the deletions; Kept why the sweep
	// kept everything (a failed or retired inventory, a reference hold, a
	// failed rebuild, a denied reference source). Either way nothing was
	// deleted.
	Refused string `json:"refused,omitempty"`
	// Paused says the sweep was found paused by an earlier refusal
	// (Refused says since when and why): nothing was deleted.
	Paused bool   `json:"paused,omitempty"`
	Kept   string `json:"kept,omitempty"`
	// Revision is the etcd revision the retained set was read at.
	Revision int64         `json:"revision,omitempty"`
	Resumed  int           `json:"resumed,omitempty"`
	Breaker  DigestBreaker `json:"breaker"`
	Rebuild  DigestRebuild `json:"rebuild"`
	Pruned   Pruned        `json:"pruned"`
	// Tombstones counts the tombstones by state once the pass is done.
	Tombstones map[string]int64 `json:"tombstones,omitempty"`
	// Slice is a bounded digest sweep's part of the namespaces
	// (digests.pass_blobs); absent for an unbounded one.
	Slice *Slice `json:"slice,omitempty"`
}

// DigestBreaker holds the numbers the digest sweep's plan was checked
// against: blobs deleted, and blobs made pending, each against its own
// limits.
type DigestBreaker struct {
	DeleteBlobs       int64   `json:"delete_blobs"`
	StoredBlobs       int64   `json:"stored_blobs"`
	MaxDelete         int64   `json:"max_delete"`
	MaxDeleteFraction float64 `json:"max_delete_fraction"`
	MarkBlobs         int64   `json:"mark_blobs"`
	MaxMark           int64   `json:"max_mark"`
	MaxMarkFraction   float64 `json:"max_mark_fraction"`
}

// DigestRebuild says whether the pass rebuilt the recorded references and
// what came of it.
type DigestRebuild struct {
	// Ran says a rebuild ran (or resumed) in this pass; NotRun why not.
	Ran    bool   `json:"ran"`
	NotRun string `json:"not_run,omitempty"`
	// Failed is why it failed: the pass then deleted nothing.
	Failed string         `json:"failed,omitempty"`
	Result *RebuildResult `json:"result,omitempty"`
	// Last is when the last complete rebuild finished.
	Last time.Time `json:"last,omitzero"`
}

// Pruned counts what the pass removed from etcd (or, in a dry run, would).
type Pruned struct {
	Tombstones int64 `json:"tombstones"`
	Trash      int64 `json:"trash"`
	Placements int64 `json:"placements"`
}

// RebuildResult is what one rebuild of the recorded references found.
type RebuildResult struct {
	Objects     int64 `json:"objects"`      // reference objects listed on the backend
	Read        int64 `json:"read"`         // bodies read (no record, ETag differs, or dirty)
	Unknown     int64 `json:"unknown"`      // objects whose references the gateway had not recorded: a producer writing around it
	UnknownRefs int64 `json:"unknown_refs"` // references added for them
	Settled     int64 `json:"settled"`      // dirty records settled by reading the body
	Stale       int64 `json:"stale"`        // pending writes older than the stale limit turned into dirty records
}

// DigestProgress is how far the digest sweep of a pass in progress got:
// its phase and its counts so far.
type DigestProgress struct {
	Phase  string       `json:"phase"`
	Report DigestReport `json:"report"`
}

// DigestExplanation says what the digest sweep does with one digest's blob
// now, and why.
type DigestExplanation struct {
	Digest string `json:"digest"`
	// Now is the clock the checklist ran at; Revision the etcd revision the
	// references, trash, placements and tombstone were read at.
	Now      time.Time `json:"now"`
	Revision int64     `json:"revision"`
	// NextPass is the pass the judgement is made for: the one in progress,
	// or the next one.
	NextPass int64 `json:"next_pass"`
	// Verdict is keep, tombstone (the next pass records a pending
	// tombstone), pending (its tombstone waits), delete (the next pass
	// deletes the blob), deleted (the bytes are gone) or absent (no blob is
	// stored).
	Verdict        string `json:"verdict"`
	Reason         string `json:"reason"`
	DryRun         bool   `json:"dry_run"`
	PlacementGrace string `json:"placement_grace"`
	// Blob is the stored copy judged (null when none is stored); Copies every
	// stored copy found, Blob first.
	Blob   *ExplainBlob  `json:"blob"`
	Copies []ExplainBlob `json:"copies"`
	Steps  []Step        `json:"steps"`
	// References, Trash and Placements are what may retain the digest (at
	// most 100 of each; the steps' values count them all).
	References []ExplainRef       `json:"references"`
	Trash      []ExplainTrash     `json:"trash"`
	Placements []ExplainPlacement `json:"placements"`
	// Shard is the digest's reference revision shard and ShardRefRevision
	// its revision: the last reference, trash or placement write of any
	// digest of the shard.
	Shard            string `json:"shard"`
	ShardRefRevision int64  `json:"shard_ref_revision"`
	// ReferenceHolds counts holds in place: while one exists, the sweep
	// judges no blob.
	ReferenceHolds int64 `json:"reference_holds"`
	// Tombstone is the digest's reclamation record, null when none.
	Tombstone *ExplainTombstone `json:"tombstone"`
	// RequiredFrontier is the revision the planes were compared with (0
	// when the checklist did not get that far); Planes each configured
	// plane's frontier against it.
	RequiredFrontier int64          `json:"required_frontier"`
	Planes           []ExplainPlane `json:"planes"`
	Guard            *ExplainGuard  `json:"guard"`
	LastPass         *PassSummary   `json:"last_pass"`
	Notes            []string       `json:"notes"`
}

// ExplainBlob is one stored copy of the digest's blob, as the backend lists
// it (the listing's time is the one the placement grace is measured from).
type ExplainBlob struct {
	Namespace string    `json:"namespace"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	Size      int64     `json:"size"`
	Modified  time.Time `json:"modified"`
	Age       string    `json:"age"`
}

// ExplainRef is one recorded reference: an object of a reference source
// (a manifest) that names the digest.
type ExplainRef struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// Source is the reference source the object lies in ("" when none does
	// any more).
	Source string    `json:"source"`
	At     time.Time `json:"at"`
	// The object's record: a write in flight (pending), a write of unknown
	// outcome (dirty), restored from the trash, found by the rebuild
	// without the gateway having seen it written (unknown).
	Pending  bool `json:"pending"`
	Dirty    bool `json:"dirty"`
	Restored bool `json:"restored"`
	Unknown  bool `json:"unknown"`
}

// ExplainTrash is one trash entry naming the digest.
type ExplainTrash struct {
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	DeletedAt time.Time `json:"deleted_at"`
	Expires   time.Time `json:"expires"`
	// Expired says it no longer retains the digest.
	Expired   bool   `json:"expired"`
	Principal string `json:"principal"`
}

// ExplainPlacement is one write of the blob in flight through a gateway.
type ExplainPlacement struct {
	ID     string    `json:"id"`
	Bucket string    `json:"bucket"`
	Key    string    `json:"key"`
	At     time.Time `json:"at"`
	Age    string    `json:"age"`
	// Stale says it is older than the placement grace: left by a gateway
	// that died, retaining nothing, pruned by the next pass.
	Stale bool `json:"stale"`
}

// ExplainTombstone is the digest's tombstone.
type ExplainTombstone struct {
	State       string    `json:"state"`
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	Size        int64     `json:"size"`
	Frontier    int64     `json:"frontier"`
	RefRev      int64     `json:"ref_rev"`
	Term        int64     `json:"term"`
	Pass        int64     `json:"pass"`
	Attempts    int       `json:"attempts"`
	Since       time.Time `json:"since"`
	Reason      string    `json:"reason"`
	ModRevision int64     `json:"mod_revision"`
}

// ExplainPlane is one configured plane's frontier against the revision the
// tombstone needs.
type ExplainPlane struct {
	Plane string `json:"plane"`
	// Revision is what the plane reported; 0 when it has not, which is what
	// it counts as.
	Revision int64 `json:"revision"`
	Applied  bool  `json:"applied"`
}

// ExplainGuard is the digest's guard, armed around the delete of its bytes;
// while it is armed every write naming the digest is refused.
type ExplainGuard struct {
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	Term        int64     `json:"term"`
	Pass        int64     `json:"pass"`
	At          time.Time `json:"at"`
	ModRevision int64     `json:"mod_revision"`
	// Undecodable: the guard does not decode and stays armed for a person.
	Undecodable bool `json:"undecodable,omitempty"`
	// Attempt is the last delete sent under the guard; SettledAfter when
	// it can no longer be executed (the guard stays armed until then).
	Attempt      *GuardAttempt `json:"attempt,omitempty"`
	SettledAfter *time.Time    `json:"settled_after,omitempty"`
}

// GuardAttempt is a delete of a guarded blob sent to the backend: when,
// its deadline on the sender's clock, and the term and pass that sent it.
type GuardAttempt struct {
	Sent     time.Time `json:"sent"`
	Deadline time.Time `json:"deadline"`
	Term     int64     `json:"term"`
	Pass     int64     `json:"pass"`
}
