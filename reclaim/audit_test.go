//go:build integration

package reclaim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3op"
)

// auditLog keeps the JSON log lines of one component, for the tests to
// pick out its audit lines.
type auditLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *auditLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *auditLog) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// audits returns the audit lines of action.
func (l *auditLog) audits(t *testing.T, action string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	data := bytes.Clone(l.b.Bytes())
	l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == "audit" && m["action"] == action {
			out = append(out, m)
		}
	}
	return out
}

// TestAuditLines checks that a reclaimer's delete and a client's abort
// each leave exactly one audit line, at INFO, saying what, why and who:
// the term and pass for the reclaimer, the principal and request id for
// the client.
func TestAuditLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const bucket = "audit"
	e.Bucket(bucket)
	now := e.Clock.Now()
	idle := e.Upload(bucket, "idle.bin", 2)
	e.session(bucket, "idle.bin", idle, etcdstore.StateActive, now.Add(-48*time.Hour), now.Add(-48*time.Hour))
	// Enough live parts that deleting the idle ones stays under the
	// breaker's fraction.
	live := e.Upload(bucket, "live.bin", 4)
	e.session(bucket, "live.bin", live, etcdstore.StateActive, now, now)

	t.Run("reclaimer delete", func(t *testing.T) {
		logs := &auditLog{}
		cfg := e.Config()
		cfg.Logger = logs.logger()
		r := e.Start(cfg)
		term, _ := r.Leader()

		one := e.MustPass(r)
		e.Clock.Advance(13 * time.Hour)
		two := e.MustPass(r)
		if two.Acted.Deleted != count(1, 2) {
			t.Fatalf("pass two acted %+v, want the idle upload deleted", two.Acted)
		}
		want := bucket + "/idle.bin?uploadId=" + idle
		for _, c := range []struct {
			action string
			pass   int64
		}{{"mark_expired", one.Pass}, {"abort_upload", two.Pass}} {
			lines := logs.audits(t, c.action)
			if len(lines) != 1 {
				t.Fatalf("%d %s audit lines, want exactly 1: %v", len(lines), c.action, lines)
			}
			l := lines[0]
			if l["level"] != "INFO" || l["what"] != want || l["why"] == "" ||
				l["term"] != float64(term) || l["pass"] != float64(c.pass) || l["parts"] != float64(2) {
				t.Errorf("%s audit line %v, want what %s, a why, term %d, pass %d, 2 parts", c.action, l, want, term, c.pass)
			}
			if c.action == "abort_upload" && (l["outcome"] != "aborted" || l["recorded"] != true) {
				t.Errorf("abort audit line %v, want outcome aborted, recorded", l)
			}
		}
	})

	t.Run("client abort", func(t *testing.T) {
		logs := &auditLog{}
		svc, err := multipart.New(multipart.Config{Store: e.Store, Backend: e.Backend, Now: e.Clock.Now, Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		abort, err := e.Backend.NewRequest(t.Context(), http.MethodDelete, bucket, "live.bin", url.Values{"uploadId": {live}})
		if err != nil {
			t.Fatal(err)
		}
		call := &multipart.Call{
			Op: s3op.AbortMultipartUpload, Bucket: bucket, Key: "live.bin", UploadID: live,
			Principal: "alice", RequestID: "REQ-ABORT-1", Resource: "/" + bucket + "/live.bin", Header: http.Header{},
			Forward:    backend.NewForward(abort, nil),
			PayloadErr: func() error { return nil },
		}
		if answer := svc.Serve(t.Context(), call); answer.Status != http.StatusNoContent || answer.Err != nil {
			t.Fatalf("abort: %d %v", answer.Status, answer.Err)
		}
		lines := logs.audits(t, "abort_upload")
		if len(lines) != 1 {
			t.Fatalf("%d abort_upload audit lines, want exactly 1: %v", len(lines), lines)
		}
		l := lines[0]
		if l["level"] != "INFO" || l["what"] != bucket+"/live.bin?uploadId="+live || l["why"] != "client abort" ||
			l["principal"] != "alice" || l["id"] != "REQ-ABORT-1" || l["outcome"] != "aborted" {
			t.Errorf("audit line %v, want the upload, client abort, principal alice, its request id, outcome aborted", l)
		}
		if n := e.partsOnMinIO(bucket, "live.bin", live); n != -1 {
			t.Errorf("the upload has %d parts on MinIO after the abort, want none", n)
		}
	})
}
