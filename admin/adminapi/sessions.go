package adminapi

import "time"

// The sessions documents: every field is always present (null or empty
// when there is nothing).

// Session is one upload session as the list shows it.
type Session struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	// Shard is the etcd shard that holds the session (etcd.shards);
	// absent without shards.
	Shard string `json:"shard,omitempty"`
	Owner string `json:"owner"`
	State string `json:"state"`
	// StateSince is when the session entered its state: its last
	// transition, or its creation.
	StateSince time.Time `json:"state_since"`
	Created    time.Time `json:"created"`
	// LastActivity is the latest of the activity recorded on the session
	// and on its activity key (parts record activity there).
	LastActivity  time.Time  `json:"last_activity"`
	ExpiredAt     *time.Time `json:"expired_at"`
	Uncertain     string     `json:"uncertain"`
	AbortAttempts int        `json:"abort_attempts"`
	ModRevision   int64      `json:"mod_revision"`
}

// SessionDetail is one session with everything recorded about it.
type SessionDetail struct {
	Session
	ExpectedETag string       `json:"expected_etag"`
	PartsDigest  string       `json:"parts_digest"`
	Completion   *Completion  `json:"completion"`
	Activity     *Activity    `json:"activity"`
	History      []Transition `json:"history"`
	PartCount    int          `json:"part_count"`
	PartBytes    int64        `json:"part_bytes"`
	Parts        []Part       `json:"parts"`
}

// Completion is the result of a completed upload.
type Completion struct {
	Location  string            `json:"location"`
	Bucket    string            `json:"bucket"`
	Key       string            `json:"key"`
	ETag      string            `json:"etag"`
	VersionID string            `json:"version_id"`
	Checksums map[string]string `json:"checksums"`
	At        time.Time         `json:"at"`
}

// Activity is the upload's activity key: the last part written.
type Activity struct {
	At         time.Time `json:"at"`
	What       string    `json:"what"`
	PartNumber int       `json:"part_number"`
}

// Transition is one recorded state change of a session.
type Transition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Actor  string    `json:"actor"`
	Term   int64     `json:"term"`
	Reason string    `json:"reason"`
}

// Part is one recorded part of an upload.
type Part struct {
	PartNumber int       `json:"part_number"`
	ETag       string    `json:"etag"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	At         time.Time `json:"at"`
}

// SessionList answers GET /admin/v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
	// Revision is the etcd revision the sessions were read at.
	Revision int64 `json:"revision"`
	// Truncated says more sessions match; Next is the cursor (the after
	// parameter) that continues the list.
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
	// Warnings are records that could not be shown, for a person to look at.
	Warnings []string `json:"warnings"`
}

// SessionAnswer answers GET /admin/v1/sessions/{bucket}/{uploadID}.
type SessionAnswer struct {
	Session SessionDetail `json:"session"`
}
