package gateway

import "log/slog"

// audit writes the one log line that each destructive action taken while
// serving a client leaves, so that every destructive step is explained and
// recorded: message "audit" at INFO, with the action, what it acted on
// (BUCKET/KEY, or a blob's digest), why, and attrs, which name the client's
// principal; log carries the request's id. The names match the session
// service's and the reclaimer's audit lines, so that one query finds every
// destructive action.
func audit(log *slog.Logger, action, what, why string, attrs ...any) {
	log.Info("audit", append([]any{"action", action, "what", what, "why", why}, attrs...)...)
}
