package etcdstore

import (
	"encoding/json"
	"time"
)

// digestRecordVersion is the version of the digest reclamation records'
// JSON layout.
const digestRecordVersion = 1

// RefWrite is a write of a reference object in flight through a gateway:
// the digests its new body names, recorded before the body goes to the
// backend.
type RefWrite struct {
	ID      string    `json:"id"`
	Digests []string  `json:"digests"`
	At      time.Time `json:"at"`
}

// RefSource is the record of the digests one reference object names, so
// that an overwrite or a delete can undo them.
type RefSource struct {
	Version int    `json:"v"`
	Bucket  string `json:"bucket"`
	Key     string `json:"key"`
	// Digests are the digests the object's body names, sorted.
	Digests []string `json:"digests"`
	// ETag is the backend's ETag of the body Digests came from, so the
	// rebuild can skip an object it need not read again.
	ETag string `json:"etag,omitempty"`
	// Pending is the write in flight, if any; its digests are recorded as
	// references too until it ends.
	Pending *RefWrite `json:"pending,omitempty"`
	// Dirty says a write ended with an unknown outcome, so Digests holds the
	// digests of both bodies; the rebuild reads the object and settles it.
	Dirty bool `json:"dirty,omitempty"`
	// Restored says the references came back from the trash by an
	// operator's restore, with no object behind them until one is written.
	Restored bool `json:"restored,omitempty"`
	// Unknown says the rebuild found the object on the backend without the
	// gateway having seen it written: a producer writing around the gateway.
	Unknown bool      `json:"unknown,omitempty"`
	Updated time.Time `json:"updated"`
}

// All returns every digest the record retains: Digests and the pending
// write's, sorted, without repeats.
func (r *RefSource) All() []string {
	if r.Pending == nil {
		return r.Digests
	}
	return union(r.Digests, r.Pending.Digests)
}

// Ref is the value of one reference key.
type Ref struct {
	Version int       `json:"v"`
	At      time.Time `json:"at"`
}

// TrashRecord is a deleted reference object's digests, kept (and retained)
// until Expires so that an operator can restore them.
type TrashRecord struct {
	Version   int       `json:"v"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	Digests   []string  `json:"digests"`
	DeletedAt time.Time `json:"deleted_at"`
	Expires   time.Time `json:"expires"`
	Principal string    `json:"principal,omitempty"`
	ETag      string    `json:"etag,omitempty"`
	// ExpiresElapsed is when the trash expires on the reclaimer's elapsed
	// clock (ElapsedClock): set by the first pass that sees the record, to
	// that pass's elapsed value plus the window. Until it is set, and until
	// the elapsed clock reaches it, the trash has not expired, whatever the
	// wall clock says.
	ExpiresElapsed *time.Duration `json:"expires_elapsed,omitempty"`
}

// TrashRef is the value of one trash reference key.
type TrashRef struct {
	Version int       `json:"v"`
	Expires time.Time `json:"expires"`
	// ExpiresElapsed is its record's TrashRecord.ExpiresElapsed.
	ExpiresElapsed *time.Duration `json:"expires_elapsed,omitempty"`
}

// Placement is the value of a placement key: a write of a blob in flight.
type Placement struct {
	Version int       `json:"v"`
	Bucket  string    `json:"bucket"`
	Key     string    `json:"key"`
	At      time.Time `json:"at"`
	// Written says the write is over (at At): the record gives the blob
	// the placement grace from its latest write through a gateway.
	Written bool `json:"written,omitempty"`
}

// TombstoneState is where a digest's reclamation stands.
type TombstoneState string

// The tombstone states of the digest sweep (docs/digests.md).
const (
	// TombstonePending: outside the retained set; waits until every plane
	// has applied its required frontier.
	TombstonePending TombstoneState = "pending"
	// TombstoneReady: every plane has applied the frontier; the collector
	// may delete the bytes.
	TombstoneReady TombstoneState = "ready"
	// TombstoneSkipped: a reference or placement came back. Terminal.
	TombstoneSkipped TombstoneState = "skipped"
	// TombstoneDeleted: the bytes are gone. Terminal.
	TombstoneDeleted TombstoneState = "deleted"
)

// AllTombstoneStates lists the states in order.
var AllTombstoneStates = []TombstoneState{TombstonePending, TombstoneReady, TombstoneSkipped, TombstoneDeleted}

// Terminal reports whether the state is final.
func (s TombstoneState) Terminal() bool { return s == TombstoneSkipped || s == TombstoneDeleted }

// Tombstone is a digest's reclamation record.
type Tombstone struct {
	Version int            `json:"v"`
	Digest  string         `json:"digest"`
	State   TombstoneState `json:"state"`
	// Bucket and Key are where the blob is stored; Size its bytes.
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	// Frontier is the etcd revision every plane must have applied before
	// the bytes may go.
	Frontier int64 `json:"frontier"`
	// RefRev is the reference revision (of the digest's shard) the verdict
	// came from; a write made from it compares it.
	RefRev int64 `json:"ref_rev"`
	// Term is the reclaimer term that wrote this state, Pass its pass.
	Term int64 `json:"term"`
	Pass int64 `json:"pass"`
	// Attempts counts how often the digest was selected.
	Attempts int       `json:"attempts"`
	Since    time.Time `json:"since"`
	Reason   string    `json:"reason,omitempty"`
}

// Guard is the value of an armed guard.
type Guard struct {
	Version int       `json:"v"`
	Digest  string    `json:"digest"`
	Bucket  string    `json:"bucket"`
	Key     string    `json:"key"`
	Term    int64     `json:"term"`
	Pass    int64     `json:"pass"`
	At      time.Time `json:"at"`
	// Attempt is the last delete of the blob that was, or may have been,
	// sent while the guard was armed; nil when none was. It is recorded
	// (fenced) before the request is sent, so a guard read without one
	// proves that no delete of its blob can still be executed.
	Attempt *DeleteAttempt `json:"attempt,omitempty"`
}

// DeleteAttempt is a delete of a guarded blob sent to the backend: when,
// the deadline its sender gave it (on the sender's clock), and the term
// and pass that sent it.
type DeleteAttempt struct {
	Sent     time.Time `json:"sent"`
	Deadline time.Time `json:"deadline"`
	Term     int64     `json:"term"`
	Pass     int64     `json:"pass"`
}

// Frontier is the revision a replica or backup plane has applied.
type Frontier struct {
	Version  int       `json:"v"`
	Plane    string    `json:"plane"`
	Revision int64     `json:"revision"`
	At       time.Time `json:"at"`
	// By names who reported it (a principal or host), for the operator.
	By string `json:"by,omitempty"`
}

// MarshalRecord encodes one of the digest records above with its version
// set.
func MarshalRecord[T RefSource | Ref | TrashRecord | TrashRef | Placement | Tombstone | Guard | Frontier | UnrecordedWrite](r T) string {
	switch v := any(&r).(type) {
	case *RefSource:
		v.Version = digestRecordVersion
	case *Ref:
		v.Version = digestRecordVersion
	case *TrashRecord:
		v.Version = digestRecordVersion
	case *TrashRef:
		v.Version = digestRecordVersion
	case *Placement:
		v.Version = digestRecordVersion
	case *Tombstone:
		v.Version = digestRecordVersion
	case *Guard:
		v.Version = digestRecordVersion
	case *Frontier:
		v.Version = digestRecordVersion
	case *UnrecordedWrite:
		v.Version = digestRecordVersion
	}
	b, _ := json.Marshal(r) // plain structs always marshal
	return string(b)
}

// union returns the sorted union of two sorted digest lists.
func union(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// minus returns the digests of a (sorted) that are not in b (sorted).
func minus(a, b []string) []string {
	var out []string
	j := 0
	for _, d := range a {
		for j < len(b) && b[j] < d {
			j++
		}
		if j == len(b) || b[j] != d {
			out = append(out, d)
		}
	}
	return out
}
