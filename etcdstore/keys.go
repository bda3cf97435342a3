package etcdstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// DefaultPrefix is the key prefix when none is configured.
const DefaultPrefix = "/sweepgate/"

// Keys builds the etcd keys of sweepgate's records; its methods are the
// key layout. Every key lives under Prefix so that several gateways, or other
// applications, can share one etcd cluster without touching each other's
// keys, and so that one range scan covers all of sweepgate's state.
//
// Variable parts of a key (bucket names, upload IDs) are path-escaped, so a
// '/' inside one can never make a key of one record a prefix of another's.
type Keys struct {
	// Prefix is the common prefix. Methods treat a missing trailing '/' as
	// present and an empty Prefix as DefaultPrefix; NewKeys checks it.
	Prefix string
}

// NewKeys returns Keys for prefix after checking and normalizing it (a
// trailing '/' is added when missing).
func NewKeys(prefix string) (Keys, error) {
	if prefix == "" {
		return Keys{}, errors.New("etcdstore: key prefix is empty; use a dedicated prefix such as " + DefaultPrefix)
	}
	if strings.ContainsRune(prefix, 0) {
		return Keys{}, fmt.Errorf("etcdstore: key prefix %q contains a NUL byte", prefix)
	}
	return Keys{Prefix: Keys{Prefix: prefix}.Root()}, nil
}

// Root returns the normalized prefix, ending in '/'. A range over Root covers
// every sweepgate key.
func (k Keys) Root() string {
	p := k.Prefix
	if p == "" {
		return DefaultPrefix
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// Sessions returns the prefix of all upload sessions in bucket.
func (k Keys) Sessions(bucket string) string {
	return k.Root() + "sessions/" + url.PathEscape(bucket) + "/"
}

// Session returns the key of one multipart upload session.
func (k Keys) Session(bucket, uploadID string) string {
	return k.Sessions(bucket) + url.PathEscape(uploadID)
}

// Parts returns the prefix of all part records of one upload.
func (k Keys) Parts(uploadID string) string {
	return k.Root() + "parts/" + url.PathEscape(uploadID) + "/"
}

// Part returns the key of one part record. The part number is zero-padded to
// five digits (S3 allows 1 to 10000) so that a range scan returns parts in
// numeric order, which CompleteMultipartUpload and ListParts need.
func (k Keys) Part(uploadID string, partNumber int) string {
	return fmt.Sprintf("%s%05d", k.Parts(uploadID), partNumber)
}

// Activity returns the key that records an upload's latest client activity
// (a part started, parts listed). It is separate from the session so that
// parallel parts of one upload never conflict with each other: they all
// compare the session and write here.
func (k Keys) Activity(uploadID string) string {
	return k.Root() + "activity/" + url.PathEscape(uploadID)
}

// InFlight returns the prefix of an upload's parts in flight: one record
// per UploadPart or UploadPartCopy streaming to the backend, under a lease
// of the gateway serving it, so that a gateway that dies stops keeping the
// upload alive. While any exists the reclaimer neither marks nor deletes
// the upload.
func (k Keys) InFlight(uploadID string) string {
	return k.Root() + "inflight/" + url.PathEscape(uploadID) + "/"
}

// InFlightPart returns the key of one part in flight of an upload.
func (k Keys) InFlightPart(uploadID, id string) string {
	return k.InFlight(uploadID) + url.PathEscape(id)
}

// Idempotency returns the key of a recorded outcome for an idempotency key.
func (k Keys) Idempotency(id string) string {
	return k.Root() + "idem/" + url.PathEscape(id)
}

// AllSessions returns the prefix of every session in every bucket.
func (k Keys) AllSessions() string {
	return k.Root() + "sessions/"
}

// CompleteAttempt returns the key that marks a CompleteMultipartUpload in
// flight on the backend. It lives under a lease of the gateway that sends the
// complete, so it vanishes if that gateway dies, and while it exists no
// other complete of the upload is sent.
func (k Keys) CompleteAttempt(uploadID string) string {
	return k.Root() + "completing/" + url.PathEscape(uploadID)
}

// Gateways returns the prefix of the gateways' published clocks.
func (k Keys) Gateways() string {
	return k.Root() + "gateways/"
}

// Gateway returns the key where the gateway process id publishes its clock
// with its liveness: the key lives under that process's lease, so it is
// gone soon after the process is.
func (k Keys) Gateway(id string) string {
	return k.Gateways() + url.PathEscape(id)
}

// ElapsedClock returns the key of the reclaimer's elapsed clock: the time
// its leaders have measured on their monotonic clocks, added up.
func (k Keys) ElapsedClock() string {
	return k.Root() + "reclaim/clock"
}
