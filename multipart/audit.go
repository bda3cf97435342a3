package multipart

import "log/slog"

// audit writes the one log line that each destructive action of the
// session service and its reconciler leaves, so that every destructive
// step is explained and recorded: message "audit" at INFO, with the action,
// what it acted on (an upload as BUCKET/KEY?uploadId=ID), why, and attrs,
// which name who acted (principal: the client, or the reconciler's actor,
// with its term) and, for a client's request, its id. The names match the
// reclaimer's audit lines, so that one query finds every destructive
// action.
func audit(log *slog.Logger, action, what, why string, attrs ...any) {
	log.Info("audit", append([]any{"action", action, "what", what, "why", why}, attrs...)...)
}

// uploadName names an upload in audit lines, as the CLI takes it back.
func uploadName(bucket, key, uploadID string) string {
	return bucket + "/" + key + "?uploadId=" + uploadID
}
