package main

import "log/slog"

// audit writes the one log line that each destructive action an operator
// takes through the admin API leaves: message "audit" at INFO, with the
// action, what it acted on, why, and attrs naming who acted. The names
// match the gateway's, the session service's and the reclaimer's audit
// lines (the reclaimer writes those of orphan adoptions and deletes), so
// that one query finds every destructive action.
func audit(log *slog.Logger, action, what, why string, attrs ...any) {
	log.Info("audit", append([]any{"action", action, "what", what, "why", why}, attrs...)...)
}
