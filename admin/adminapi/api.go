// Package adminapi holds the JSON documents of sweepgate's admin API
// (docs/admin-api.md): what the admin listener answers and accepts, shared
// by the server (package admin) and the sweepgate commands that call it.
//
// These types are the API, not the records kept in etcd: the server
// converts its domain values into them, so that a stored format may change
// without changing an answer. Field names may be added, never renamed or
// removed.
package adminapi

import "time"

// ErrorBody is every error's document.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: Code for programs, Message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of the admin API.
const (
	CodeNotFound         = "not_found"
	CodeBadRequest       = "bad_request"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeSessionsDisabled = "sessions_disabled"
	CodeEtcdUnavailable  = "etcd_unavailable"
	// CodeUnauthorized answers a request without the admin token.
	CodeUnauthorized = "unauthorized"
	// CodeHostNotAllowed answers a request addressed to a name that is not
	// the listener's.
	CodeHostNotAllowed = "host_not_allowed"

	CodeReclaimDisabled      = "reclaim_disabled"
	CodeNotLeader            = "not_leader"
	CodeNotConfirmed         = "not_confirmed"
	CodeNotOrphan            = "not_orphan"
	CodeReclaimFailed        = "reclaim_failed"
	CodeUnsupportedMediaType = "unsupported_media_type"

	CodeDigestsDisabled = "digests_disabled"
	CodeGuarded         = "guarded"
	CodeWriteInFlight   = "write_in_flight"
	CodeConflict        = "conflict"

	// CodeDigestSweepOff says the reclaimer judges no blobs.
	CodeDigestSweepOff = "digest_sweep_off"
)

// Limits of the parameters and request documents the API accepts.
const (
	// DefaultListLimit keeps an accidental `sessions list` cheap;
	// MaxListLimit keeps one answer a few MiB at most.
	DefaultListLimit = 100
	MaxListLimit     = 1000

	DefaultReportsLimit = 10
	// MaxReportsLimit is the reclaimer's bounded report history.
	MaxReportsLimit     = 100
	DefaultOrphansLimit = 1000
	MaxOrphansLimit     = 10000
	// MaxOrphanRefs bounds one delete request.
	MaxOrphanRefs = 1000

	DefaultTrashLimit = 100
	MaxTrashLimit     = 1000
)

// ExplainTimeout bounds one explanation on the server. Explaining an
// orphan may list the bucket's uploads to find its key, and a blob whose
// namespace pattern cannot spell its key may list the namespace, which
// takes longer than an etcd read.
const ExplainTimeout = 2 * time.Minute
