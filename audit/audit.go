// Package audit writes the one log line that every destructive action in
// sweepgate leaves: a client's abort, the reclaimer's mark or delete, an
// operator's adoption, restore or confirmed delete. Every such line has the
// message "audit" at INFO with the same attribute names (KeepAudit keeps them
// whatever the log level), so one query over
// the logs selects every destructive action and says what was acted on and
// why.
package audit

import "log/slog"

// Action names what a destructive step did. The set is closed: a log
// pipeline may alert on any value it does not know.
type Action string

// The actions, each written by exactly the code path its comment names.
const (
	// AbortUpload: a multipart upload's parts were aborted on the backend
	// (a client's abort, the reconciler finishing one, the reclaimer's
	// delete of an expired upload, or a create whose session could not be
	// recorded).
	AbortUpload Action = "abort_upload"
	// PruneSession: a settled session record was removed from etcd.
	PruneSession Action = "prune_session"
	// MarkExpired: the reclaimer marked an upload expired (first pass).
	MarkExpired Action = "mark_expired"
	// AdoptOrphan: an operator adopted an upload that has no session.
	AdoptOrphan Action = "adopt_orphan"
	// DeleteOrphan: an operator deleted an orphan upload, confirmed.
	DeleteOrphan Action = "delete_orphan"
	// DeleteBlob: a content-addressed blob was deleted from the backend.
	DeleteBlob Action = "delete_blob"
	// TrashObject: a reference object was deleted; its references stay
	// retained in the trash until it expires.
	TrashObject Action = "trash_object"
	// RestoreTrash: a trashed object's references came back.
	RestoreTrash Action = "restore_trash"
	// ResumeSweep: a person lifted the pause that the breaker put on a
	// sweep (uploads or digests), so its next pass may mark and delete
	// again.
	ResumeSweep Action = "resume_sweep"
)

// Record writes the audit line of one destructive action: what it acted on
// (an upload as Upload names it, BUCKET/KEY, or a blob's digest), why, and
// attrs, which name who acted (a principal, or a term and pass). log should
// carry the request's id when a client's request caused the action.
func Record(log *slog.Logger, action Action, what, why string, attrs ...any) {
	log.Info(message, append([]any{"action", string(action), "what", what, "why", why}, attrs...)...)
}

// Upload names an upload in audit lines the way the CLI takes it back:
// BUCKET/KEY?uploadId=ID.
func Upload(bucket, key, uploadID string) string {
	return bucket + "/" + key + "?uploadId=" + uploadID
}
