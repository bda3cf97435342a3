package audit_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/audit"
)

// TestKeepAuditSurvivesTheLevel quiets a logger to warn, as an operator
// would to drop per-request lines, and checks that every audit line still
// goes out, through loggers with attributes and groups too, while the other
// info and debug lines do not.
func TestKeepAuditSurvivesTheLevel(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	log := slog.New(audit.KeepAudit(h, slog.LevelWarn))
	reqLog := log.With("request_id", "R1").WithGroup("g")

	log.Info("request", "status", 200)
	log.Debug("detail")
	reqLog.Info("request", "status", 404)
	audit.Record(log, audit.DeleteBlob, "sha256:ab", "unreferenced", "term", 3)
	audit.Record(reqLog, audit.AbortUpload, audit.Upload("b", "k", "u"), "client abort")
	log.Warn("slow etcd")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var audits, warns int
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"msg":"audit"`):
			audits++
		case strings.Contains(l, `"msg":"slow etcd"`):
			warns++
		default:
			t.Errorf("a line below the level went out: %s", l)
		}
	}
	if audits != 2 || warns != 1 {
		t.Errorf("%d audit lines and %d warnings went out, want 2 and 1:\n%s", audits, warns, buf.String())
	}
	if !strings.Contains(buf.String(), `"request_id":"R1"`) {
		t.Errorf("the request's audit line lost its attributes:\n%s", buf.String())
	}
}
