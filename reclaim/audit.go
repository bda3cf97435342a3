package reclaim

import "log/slog"

// audit writes the one log line that each destructive action of the
// reclaimer and of operators leaves, so that every destructive step is
// explained and recorded: message "audit" at INFO, with the action, what
// it acted on (an upload as BUCKET/KEY?uploadId=ID, a blob by its digest),
// why, and attrs, which name the term and pass (the reclaimer's actions)
// or the principal (an operator's). The fixed names let a log pipeline
// select every destructive action with one query.
func audit(log *slog.Logger, action, what, why string, attrs ...any) {
	log.Info("audit", append([]any{"action", action, "what", what, "why", why}, attrs...)...)
}

// uploadName names an upload in audit lines, as the CLI takes it back.
func uploadName(bucket, key, uploadID string) string {
	return OrphanRef{Bucket: bucket, Key: key, UploadID: uploadID}.String()
}
