package etcdstore

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that writes etcd's zap records to a slog.Logger,
// so that etcd logs through the same handler, format and level as the rest
// of the process instead of printing its own JSON to stderr.
//
// etcd is chatty at info level about routine raft and snapshot work, so its
// info records are demoted to slog's debug level: an operator sees them only
// after asking for debug logs. Its warnings and errors keep their level,
// except the few that etcd prints on every start or stop of a correctly
// configured single node: an operator who is told about them each time
// learns to ignore etcd's warnings.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
	// closing reports whether the server is being shut down on purpose; its
	// listeners then fail with errors that are expected, not alarming.
	closing *atomic.Bool
}

// isBenign reports whether an etcd record says nothing actionable for an
// embedded single node: one port for gRPC and HTTP is how we configure it,
// and the simple auth token is unused because auth is off.
func isBenign(msg string) bool {
	switch msg {
	case "Running http and grpc server on single port. This is not recommended for production.",
		"simple token is not cryptographically signed":
		return true
	}
	return false
}

// newZapLogger returns a zap logger that writes to log, or a no-op logger when
// log is nil. closing may be nil.
func newZapLogger(log *slog.Logger, component string, closing *atomic.Bool) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	if closing == nil {
		closing = new(atomic.Bool)
	}
	return zap.New(&slogCore{log: log.With(slog.String("component", component)), closing: closing})
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.InfoLevel:
		return slog.LevelDebug
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// level is the slog level a record is written at, after demotion.
func (c *slogCore) level(e zapcore.Entry) slog.Level {
	if c.closing.Load() || isBenign(e.Message) {
		return slog.LevelDebug
	}
	return slogLevel(e.Level)
}

// Enabled answers for the level before demotion, which zap uses to skip
// building fields; Check then decides on the demoted level.
func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	all := make([]zapcore.Field, 0, len(c.fields)+len(fields))
	all = append(all, c.fields...)
	all = append(all, fields...)
	return &slogCore{log: c.log, fields: all, closing: c.closing}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.log.Enabled(context.Background(), c.level(e)) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	level := c.level(e)
	if termNotYetRecorded(enc.Fields) {
		level = slog.LevelDebug
	}
	c.log.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

// termNotYetRecorded reports a record whose error is etcd's storage version
// check running before the backend has recorded its first raft term: on a
// node just elected, or stopped right after its start, etcd says it cannot
// detect the schema version and retries at its next check, which finds the
// term. Nothing is wrong, so it is not an operator's warning.
func termNotYetRecorded(fields map[string]any) bool {
	err, ok := fields["error"].(string)
	return ok && strings.Contains(err, "missing term information")
}

func (c *slogCore) Sync() error { return nil }
