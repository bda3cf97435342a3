package etcdstore

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestZapLogDemotesTermNotYetRecorded checks that etcd's storage version
// check failing for want of a first raft term (it retries, and finds it)
// reaches the log only at debug level, while any other error keeps its
// level.
func TestZapLogDemotesTermNotYetRecorded(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	z := newZapLogger(log, "etcd", nil)
	z.Warn("Failed to detect schema version", zap.Error(errors.New("missing term information")))
	z.Error("failed to update storage version", zap.String("cluster-version", "3.6.0"),
		zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	if buf.Len() != 0 {
		t.Fatalf("the storage version check before the first term was logged at info or above:\n%s", buf.String())
	}
	z.Error("failed to update storage version", zap.Error(errors.New("disk full")))
	if !strings.Contains(buf.String(), "level=ERROR") || !strings.Contains(buf.String(), "disk full") {
		t.Fatalf("another storage version error was not logged as an error:\n%s", buf.String())
	}
}
