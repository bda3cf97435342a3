package etcdstore

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SessionState is where a multipart upload session stands. The multipart
// package enforces who may move a session out of each state.
type SessionState string

// The session states.
const (
	// StateActive: the upload takes parts.
	StateActive SessionState = "active"
	// StateExpired: the reclaimer marked it idle past the grace; a part
	// from the client brings it back to active, else a later pass
	// deletes it.
	StateExpired SessionState = "expired"
	// StateCompleting: a complete is on the backend.
	StateCompleting SessionState = "completing"
	// StateCompleted: the object is stored; the upload is gone.
	StateCompleted SessionState = "completed"
	// StateAborting: an abort is on the backend.
	StateAborting SessionState = "aborting"
	// StateAborted: the upload is gone without an object.
	StateAborted SessionState = "aborted"
	// StateCleanupPending: an abort's outcome was unclear; the reclaimer
	// finishes it, and it never returns to active.
	StateCleanupPending SessionState = "cleanup_pending"
)

// AllStates lists the states in the order a session usually passes them.
var AllStates = []SessionState{
	StateActive, StateExpired, StateCompleting, StateCompleted,
	StateAborting, StateAborted, StateCleanupPending,
}

// Terminal reports whether no client call moves a session out of s.
func (s SessionState) Terminal() bool {
	return s == StateCompleted || s == StateAborted
}

// sessionVersion is the version of the Session record's JSON layout.
const sessionVersion = 1

// maxHistory bounds the transitions a session keeps, so a record that is
// revived and marked many times stays small.
const maxHistory = 32

// Session is the durable record of one multipart upload made through the
// gateway.
type Session struct {
	Version  int          `json:"v"`
	Bucket   string       `json:"bucket"`
	Key      string       `json:"key"`
	UploadID string       `json:"upload_id"`
	Owner    string       `json:"owner"`
	State    SessionState `json:"state"`
	Created  time.Time    `json:"created"`
	// LastActivity is the last activity recorded on the session itself; the
	// activity key (Keys.Activity) may hold a later one.
	LastActivity time.Time  `json:"last_activity"`
	ExpiredAt    *time.Time `json:"expired_at,omitempty"`
	// ExpiredElapsed is the reclaimer's elapsed clock (ElapsedClock) at the
	// mark; a delete needs delete_after on it as well as on the wall clock.
	ExpiredElapsed *time.Duration `json:"expired_elapsed,omitempty"`
	// PartsDigest identifies the part list of the complete that moved the
	// session to completing, so a retry with the same list is recognised.
	PartsDigest string `json:"parts_digest,omitempty"`
	// ExpectedETag is the multipart ETag the complete should produce, which
	// lets the reconciler recognise a complete that succeeded unseen.
	ExpectedETag string      `json:"expected_etag,omitempty"`
	Completion   *Completion `json:"completion,omitempty"`
	// Uncertain says what is not known about the last backend call, if
	// anything (a lost response, a timeout).
	Uncertain     string       `json:"uncertain,omitempty"`
	AbortAttempts int          `json:"abort_attempts,omitempty"`
	History       []Transition `json:"history"`
}

// Completion is the result of a successful CompleteMultipartUpload, kept so a
// retried complete gets the same answer.
type Completion struct {
	Location  string    `json:"location"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	ETag      string    `json:"etag"`
	VersionID string    `json:"version_id,omitempty"`
	Checksums Checksums `json:"checksums,omitempty"`
	At        time.Time `json:"at"`
}

// Checksums are the whole-object checksums S3 may return for a multipart
// object, by response element name (ChecksumCRC32, ...).
type Checksums map[string]string

// Transition records one change of state: when, from what, to what, who did
// it and why.
type Transition struct {
	At     time.Time    `json:"at"`
	From   SessionState `json:"from,omitempty"`
	To     SessionState `json:"to"`
	Actor  string       `json:"actor"`
	Term   int64        `json:"term,omitempty"`
	Reason string       `json:"reason,omitempty"`
}

// Transition moves the session to state to and appends the change to its
// history, dropping the oldest entries past the bound.
func (s *Session) Transition(to SessionState, at time.Time, actor, reason string) {
	s.History = append(s.History, Transition{At: at, From: s.State, To: to, Actor: actor, Reason: reason})
	if len(s.History) > maxHistory {
		s.History = append(s.History[:1], s.History[len(s.History)-maxHistory+1:]...)
	}
	s.State = to
}

// LastChange is when the session last changed state (its last history
// entry), or, without history, its last activity or creation.
func (s *Session) LastChange() time.Time {
	if n := len(s.History); n > 0 {
		return s.History[n-1].At
	}
	if !s.LastActivity.IsZero() {
		return s.LastActivity
	}
	return s.Created
}

// StateSince is when the session entered its current state. Re-recording
// the same state (a doubt noted on a completing session, a stuck flag) does
// not restart the clock that limits such as the stuck limit run on.
func (s *Session) StateSince() time.Time {
	var since time.Time
	for i := len(s.History) - 1; i >= 0; i-- {
		h := s.History[i]
		if h.To != s.State {
			break
		}
		since = h.At
		if h.From != s.State {
			break
		}
	}
	if since.IsZero() {
		return s.LastChange()
	}
	return since
}

// Activity is the latest client activity on an upload, kept at Keys.Activity.
type Activity struct {
	// Version is the layout's version; version 1 is stored without it.
	Version int       `json:"v,omitempty"`
	At      time.Time `json:"at"`
	// What names the call: UploadPart, UploadPartCopy, ListParts; a part's
	// end is recorded as "UploadPart ended" or "UploadPartCopy ended".
	What string `json:"what"`
	// Part is the part number for part uploads.
	Part int `json:"part,omitempty"`
}

// Part is what the gateway recorded about one uploaded part. It is stored
// in one of two layouts (EncodePart, DecodePart): version 1, this struct's
// own JSON, which every release reads; and version 2, a compact form of
// the same fields, written once the keyspace is in schema 2.
type Part struct {
	// Version is the layout's version; version 1 is stored without it.
	Version int       `json:"v,omitempty"`
	Number  int       `json:"n"`
	ETag    string    `json:"etag"`
	Size    int64     `json:"size"`
	SHA256  string    `json:"sha256,omitempty"`
	At      time.Time `json:"at"`
}

// partWire is a part record as stored, in either layout. Version 1 spells
// its fields out (Part's own JSON). Version 2 is about a quarter smaller,
// which matters for the most numerous record: e is the ETag without its
// double quotes (eu marks one stored without them), s the size, h the
// SHA-256 in unpadded base64 (a value that is not a hex SHA-256 stays in
// sha256), t the time in Unix nanoseconds.
type partWire struct {
	Version int       `json:"v,omitempty"`
	Number  int       `json:"n"`
	ETag    string    `json:"etag,omitempty"`
	Size    int64     `json:"size,omitempty"`
	SHA256  string    `json:"sha256,omitempty"`
	At      time.Time `json:"at,omitzero"`

	E        string `json:"e,omitempty"`
	Unquoted bool   `json:"eu,omitempty"`
	S        int64  `json:"s,omitempty"`
	H        string `json:"h,omitempty"`
	T        int64  `json:"t,omitempty"`
}

// PartLayout returns the part record layout written in keyspace schema n:
// version 2 from schema 2 on, version 1 before.
func PartLayout(schema int) int {
	if schema >= 2 {
		return 2
	}
	return 1
}

// EncodePart returns p stored in part record layout version (1 or 2).
func EncodePart(p Part, version int) ([]byte, error) {
	if version < 2 {
		p.Version = 0
		return json.Marshal(p)
	}
	w := partWire{Version: 2, Number: p.Number, S: p.Size}
	if e, ok := strings.CutPrefix(p.ETag, `"`); ok && strings.HasSuffix(e, `"`) {
		w.E = e[:len(e)-1]
	} else {
		w.E, w.Unquoted = p.ETag, true
	}
	if sum, err := hex.DecodeString(p.SHA256); err == nil && len(sum) == sha256.Size && hex.EncodeToString(sum) == p.SHA256 {
		w.H = base64.RawStdEncoding.EncodeToString(sum)
	} else {
		w.SHA256 = p.SHA256
	}
	if !p.At.IsZero() {
		w.T = p.At.UnixNano()
	}
	return json.Marshal(w)
}

// DecodePart reads a stored part record of either layout through the
// versioned decoder: a layout newer than version 2 is a *NewerRecordError.
// The Part returned carries the layout it was stored in.
func DecodePart(key string, value []byte) (Part, error) {
	var w partWire
	if err := DecodeRecord(PartRecord, key, value, &w); err != nil {
		return Part{}, err
	}
	v2 := w.E != "" || w.Unquoted || w.S != 0 || w.H != "" || w.T != 0
	if w.Version < 2 {
		if v2 {
			return Part{}, fmt.Errorf("etcdstore: the part record %s has version 1 and fields of version 2", key)
		}
		return Part{Version: 1, Number: w.Number, ETag: w.ETag, Size: w.Size, SHA256: w.SHA256, At: w.At}, nil
	}
	if w.ETag != "" || w.Size != 0 || !w.At.IsZero() {
		return Part{}, fmt.Errorf("etcdstore: the part record %s has version 2 and fields of version 1", key)
	}
	p := Part{Version: 2, Number: w.Number, ETag: w.E, Size: w.S, SHA256: w.SHA256}
	if !w.Unquoted {
		p.ETag = `"` + w.E + `"`
	}
	if w.H != "" {
		sum, err := base64.RawStdEncoding.DecodeString(w.H)
		if err != nil {
			return Part{}, fmt.Errorf("etcdstore: the part record %s: its SHA-256: %w", key, err)
		}
		p.SHA256 = hex.EncodeToString(sum)
	}
	if w.T != 0 {
		p.At = time.Unix(0, w.T).UTC()
	}
	return p, nil
}

// IdempotentOutcome is the recorded answer to a request that carried an
// Idempotency-Key, replayed to retries with the same key.
type IdempotentOutcome struct {
	// Version is the layout's version; version 1 is stored without it.
	Version int `json:"v,omitempty"`
	// Request identifies what the key was first used for, so a key reused
	// for another request is refused rather than answered wrongly.
	Request string              `json:"request"`
	Status  int                 `json:"status"`
	Header  map[string][]string `json:"header,omitempty"`
	Body    []byte              `json:"body,omitempty"`
	At      time.Time           `json:"at"`
}
