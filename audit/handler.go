package audit

import (
	"context"
	"log/slog"
)

// message is the message of every audit line (Record).
const message = "audit"

// KeepAudit returns a handler that passes to h the records at level or
// above, and every audit line whatever the level, so that an operator who
// quiets the log (log.level=warn) keeps the trail of what was deleted. h
// must accept every level; KeepAudit does the filtering.
func KeepAudit(h slog.Handler, level slog.Leveler) slog.Handler {
	return &keepAudit{h: h, level: level}
}

type keepAudit struct {
	h     slog.Handler
	level slog.Leveler
}

// Enabled admits Record's level even below the threshold: the message,
// which decides, is known only in Handle.
func (k *keepAudit) Enabled(ctx context.Context, l slog.Level) bool {
	return (l >= k.level.Level() || l == slog.LevelInfo) && k.h.Enabled(ctx, l)
}

func (k *keepAudit) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < k.level.Level() && r.Message != message {
		return nil
	}
	return k.h.Handle(ctx, r)
}

func (k *keepAudit) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &keepAudit{h: k.h.WithAttrs(attrs), level: k.level}
}

func (k *keepAudit) WithGroup(name string) slog.Handler {
	return &keepAudit{h: k.h.WithGroup(name), level: k.level}
}
