package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Witness returns the key of etcd's copy of the restore witness: a record
// the reclaim leader advances every few seconds, first here and then on
// the backend (reclaim.witness_bucket, reclaim.witness_key). The backend
// copy never runs ahead of this one unless etcd lost writes, which is how
// a restore of etcd from a snapshot is detected (see reclaim/witness.go).
func (k Keys) Witness() string {
	return k.Reclaim() + "witness"
}

// Restored returns the key of the restore mark: written when the leader
// found the backend's witness ahead of etcd's. While it stands (Cleared
// unset) no pass deletes anything; once cleared it stays, and its Rev is
// the revision below which a session's record predates the restore.
func (k Keys) Restored() string {
	return k.Reclaim() + "restored"
}

// witnessVersion and restoredVersion are the versions of the layouts below.
const (
	witnessVersion  = 1
	restoredVersion = 1
)

// Witness is the value of both copies of the restore witness. Epoch names
// the witness's lineage (a random id chosen when etcd had none and the
// backend had none either); Seq only grows within an epoch.
type Witness struct {
	Version int    `json:"v"`
	Epoch   string `json:"epoch"`
	Seq     int64  `json:"seq"`
	// At is the leader's wall clock when it advanced the witness, and
	// Term the leader's term: for a person reading the record.
	At   time.Time `json:"at"`
	Term int64     `json:"term,omitempty"`
}

// MarshalWitness encodes w with its version set.
func MarshalWitness(w Witness) string {
	w.Version = witnessVersion
	b, _ := json.Marshal(w) // plain data always marshals
	return string(b)
}

// UnmarshalWitness decodes the witness copy stored at where (its etcd key
// or backend object).
func UnmarshalWitness(where string, b []byte) (Witness, error) {
	var w Witness
	if err := DecodeRecord(WitnessRecord, where, b, &w); err != nil {
		return w, err
	}
	if w.Epoch == "" {
		return w, fmt.Errorf("decode witness: no epoch")
	}
	return w, nil
}

// Restored is the restore mark: the leader found that etcd lost writes
// the backend's witness saw, so every record in etcd may be older than
// the backend. Rev is the etcd revision the detection read etcd's
// witness at: every record whose mod revision is at or below it may be
// from the snapshot.
type Restored struct {
	Version int    `json:"v"`
	Rev     int64  `json:"rev"`
	Reason  string `json:"reason"`
	// Etcd is etcd's witness as read (nil: none), Backend the backend's.
	Etcd    *Witness `json:"etcd,omitempty"`
	Backend Witness  `json:"backend"`
	// DetectedAt is the leader's wall clock at the detection; Term and By
	// the leader's term and process.
	DetectedAt time.Time `json:"detected_at"`
	Term       int64     `json:"term"`
	By         string    `json:"by,omitempty"`
	// Cleared is when the leader found every condition of clearing met
	// (ClearedWhy says which); nil while the mark stands.
	Cleared    *time.Time `json:"cleared,omitempty"`
	ClearedWhy string     `json:"cleared_why,omitempty"`
}

// Standing reports whether the mark holds the passes' deletions.
func (r Restored) Standing() bool { return r.Cleared == nil }

// MarshalRestored encodes r with its version set.
func MarshalRestored(r Restored) string {
	r.Version = restoredVersion
	b, _ := json.Marshal(r) // plain data always marshals
	return string(b)
}

// GetRestored reads the restore mark; ErrNotFound when etcd was never
// found restored. A record that does not decode is returned standing,
// with its reason saying so, so that it holds the deletions for a person.
func (s *Store) GetRestored(ctx context.Context) (Versioned[Restored], error) {
	resp, err := s.cli.Get(ctx, s.keys.Restored())
	if err != nil {
		return Versioned[Restored]{}, fmt.Errorf("read the restore mark: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Versioned[Restored]{}, ErrNotFound
	}
	kv := resp.Kvs[0]
	var r Restored
	if err := DecodeKV(RestoredRecord, kv, &r); err != nil {
		r = Restored{Rev: kv.ModRevision, Reason: fmt.Sprintf("a restore mark that does not decode (%v)", err)}
	}
	return Versioned[Restored]{Value: r, ModRev: kv.ModRevision}, nil
}
