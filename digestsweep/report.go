package digestsweep

import (
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// Report is what the digest sweep of one pass found, decided and did:
// the "digests" section of a pass report. In a dry run the counts are what
// a pass would do; Deleted and Bytes are what its collector would delete.
type Report struct {
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
	// Settling counts guards kept armed because a delete of their blob
	// may still be executed by the backend (an unclear answer, or an
	// attempt not past its deadline plus digests.guard_settle): while
	// armed, the blob reads 404 and writes naming it are refused.
	Settling int64 `json:"settling,omitempty"`
	// FutureTimes counts trash entries and tombstones whose recorded time
	// lies beyond now plus the clock skew allowance (kept longer, never
	// shorter).
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
	// sources the backend refused to the reclaimer's key (AccessDenied):
	// a denied namespace's blobs were not judged, and a denied reference
	// source keeps every blob for the pass (Kept says which).
	DeniedBuckets []string `json:"denied_buckets,omitempty"`
	// Refused is why the breaker refused the deletions; Kept why the sweep
	// kept everything (a failed or retired inventory, a reference hold, a
	// failed rebuild, a denied reference source). Either way nothing was
	// deleted.
	Refused string `json:"refused,omitempty"`
	Kept    string `json:"kept,omitempty"`
	// Paused says the sweep was found paused by an earlier refusal
	// (Refused says since when and why): nothing was deleted.
	Paused bool `json:"paused,omitempty"`
	// Revision is the etcd revision the retained set was read at.
	Revision int64         `json:"revision,omitempty"`
	Resumed  int           `json:"resumed,omitempty"`
	Breaker  Breaker       `json:"breaker"`
	Rebuild  RebuildReport `json:"rebuild"`
	Pruned   Pruned        `json:"pruned"`
	// Tombstones counts the tombstones by state once the pass is done.
	Tombstones map[etcdstore.TombstoneState]int64 `json:"tombstones,omitempty"`
	// Slice is a bounded sweep's part of the namespaces
	// (digests.pass_blobs): where it started and stopped and when every
	// namespace was last covered; nil for an unbounded sweep.
	Slice *sweep.Slice `json:"slice,omitempty"`
}

// Breaker holds the numbers the digest sweep's plan was checked against:
// blobs deleted, and blobs made pending, each against its own limits.
type Breaker struct {
	DeleteBlobs       int64   `json:"delete_blobs"`
	StoredBlobs       int64   `json:"stored_blobs"`
	MaxDelete         int64   `json:"max_delete"`
	MaxDeleteFraction float64 `json:"max_delete_fraction"`
	MarkBlobs         int64   `json:"mark_blobs"`
	MaxMark           int64   `json:"max_mark"`
	MaxMarkFraction   float64 `json:"max_mark_fraction"`
}

// RebuildReport says whether the pass rebuilt the recorded references and
// what came of it.
type RebuildReport struct {
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

// plus adds the counts of a page (or batch) to r.
func (r *Report) plus(o Report) {
	r.Pending += o.Pending
	r.Ready += o.Ready
	r.ReadyBytes += o.ReadyBytes
	r.Skipped += o.Skipped
	r.Deleted += o.Deleted
	r.Bytes += o.Bytes
	r.Stored += o.Stored
	r.StoredBytes += o.StoredBytes
	r.Retained += o.Retained
	r.NewPending += o.NewPending
	r.Changed += o.Changed
	r.Ignored += o.Ignored
	r.Duplicates += o.Duplicates
	r.Failed += o.Failed
	r.Unknown += o.Unknown
	r.Settling += o.Settling
	r.Released += o.Released
	r.StalePlacements += o.StalePlacements
	for k, v := range o.RetainedBy {
		if r.RetainedBy == nil {
			r.RetainedBy = map[string]int64{}
		}
		r.RetainedBy[k] += v
	}
}
