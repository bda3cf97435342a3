//go:build integration

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/logbuf"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestReclaimCLI drives `sweepgate reclaim` against the real admin API of
// a leading reclaimer over real MinIO and etcd.
func TestReclaimCLI(t *testing.T) {
	t.Parallel()
	e := newReclaimEnv(t)
	s := e.Scenario()
	term, _ := e.Leader.Leader()
	adminArgs := []string{"--admin", e.Base}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, nil, append(args, adminArgs...)...)
	}

	code, out, errOut := run("reclaim", "status")
	if code != ExitOK || errOut != "" || !strings.Contains(out, fmt.Sprintf("this gateway (leader@test) leads, term %d.", term)) ||
		!strings.Contains(out, "No pass report yet.") {
		t.Errorf("status: exit %d, stderr %q:\n%s", code, errOut, out)
	}

	code, out, errOut = run("reclaim", "plan")
	if code != ExitOK || errOut != "" {
		t.Fatalf("plan: exit %d, stderr %q", code, errOut)
	}
	for _, w := range []string{"Plan for pass 1 (a dry run: nothing was changed), term", "orphan/one.bin", "orphan/two.bin", "Orphans (no session; held, never deleted by a pass; see 'sweepgate reclaim orphans'): 2"} {
		if !strings.Contains(out, w) {
			t.Errorf("plan output lacks %q:\n%s", w, out)
		}
	}
	if !hasRow(out, "mark", "1", "2", "2.0", "KiB") || !hasRow(out, "keep", "1", "1", "1.0", "KiB") || !hasRow(out, "hold", "2", "2", "2.0", "KiB") {
		t.Errorf("plan table:\n%s", out)
	}
	if strings.Contains(out, "Done:") {
		t.Errorf("a plan says it did something:\n%s", out)
	}

	code, out, _ = run("reclaim", "plan", "--json")
	var plan adminapi.Report
	if err := json.Unmarshal([]byte(out), &plan); code != ExitOK || err != nil || !plan.DryRun || plan.Uploads.Mark.Parts != 2 {
		t.Errorf("plan --json: exit %d, %v:\n%s", code, err, out)
	}

	code, out, errOut = run("reclaim", "run")
	if code != ExitOK || errOut != "" || !strings.Contains(out, "Pass 1, term") || !strings.Contains(out, "Done: marked 1 upload(s) (2 parts), deleted 0 (0 parts, 0 B)") {
		t.Errorf("run: exit %d, stderr %q:\n%s", code, errOut, out)
	}

	// status --json prints the report's shape at its top level.
	code, out, _ = run("reclaim", "status", "--json")
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); code != ExitOK || err != nil {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	var uploads adminapi.Uploads
	if err := json.Unmarshal(doc["uploads"], &uploads); err != nil || uploads.Mark.Parts != 2 || string(doc["pass"]) != "1" || string(doc["refused"]) != `""` {
		t.Errorf("status --json: %v:\n%s", err, out)
	}

	code, out, _ = run("reclaim", "reports")
	if code != ExitOK || !hasRow(out, "1", fmt.Sprint(term)) || !strings.Contains(out, "PASS") {
		t.Errorf("reports: exit %d:\n%s", code, out)
	}

	checkOrphansCLI(t, e, s, run)
	checkStreamedRunAndFollower(t, e, s, adminArgs, term)
}

func checkOrphansCLI(t *testing.T, e *admintest.ReclaimEnv, s admintest.Scenario, run func(args ...string) (int, string, string)) {
	t.Helper()
	ref1 := reclaim.OrphanRef{Bucket: s.Bucket, Key: s.KeyO1, UploadID: s.O1}.String()
	ref2 := reclaim.OrphanRef{Bucket: s.Bucket, Key: s.K2, UploadID: s.O2}.String()
	code, out, errOut := run("reclaim", "orphans")
	if code != ExitOK || errOut != "" || !strings.Contains(out, "2 orphan(s)") || !strings.Contains(out, "pass 1, finished") ||
		!hasRow(out, s.Bucket, s.KeyO1, s.O1) || !strings.Contains(out, "sweepgate reclaim orphans delete --confirm") {
		t.Errorf("orphans: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, out, _ = run("reclaim", "orphans", "list", "--fresh", "--json")
	var list adminapi.Orphans
	if err := json.Unmarshal([]byte(out), &list); code != ExitOK || err != nil || !list.Fresh || list.Total != 2 {
		t.Errorf("orphans --fresh --json: exit %d %v:\n%s", code, err, out)
	}

	// Without --confirm nothing is deleted, and the exit status says so.
	code, out, errOut = run("reclaim", "orphans", "delete", ref2)
	if code != ExitRefused || !strings.Contains(errOut, "Nothing was deleted. Run again with --confirm") || !strings.Contains(out, "would delete") {
		t.Errorf("unconfirmed delete: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.K2, s.O2); n != 1 {
		t.Fatalf("O2 has %d parts after an unconfirmed delete", n)
	}

	code, out, errOut = run("reclaim", "orphans", "adopt", "--principal", "backup-tool", ref1)
	if code != ExitOK || errOut != "" || !strings.Contains(out, "Adopted "+ref1) || !strings.Contains(out, "owned by backup-tool") {
		t.Errorf("adopt: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, _, errOut = run("reclaim", "orphans", "adopt", "--principal", "backup-tool", ref1)
	if code != ExitError || !strings.Contains(errOut, "not an orphan") {
		t.Errorf("adopt again: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = run("reclaim", "orphans", "adopt", "--principal", "p", s.Bucket+"/nope?uploadId=nope")
	if code != ExitNotFound || !strings.Contains(errOut, "no upload") {
		t.Errorf("adopt a missing upload: exit %d, stderr %q", code, errOut)
	}

	code, out, errOut = run("reclaim", "orphans", "delete", "--confirm", "--principal", "ops", ref2)
	if code != ExitOK || errOut != "" || !strings.Contains(out, "Deleted 1 of 1.") || !hasRow(out, s.Bucket, s.K2, s.O2, "1", "1024", "aborted") {
		t.Errorf("confirmed delete: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.K2, s.O2); n != -1 {
		t.Errorf("O2 has %d parts after a confirmed delete", n)
	}
	// Its delete was recorded as a session, so it is no orphan any more.
	code, out, _ = run("reclaim", "orphans", "delete", "--confirm", ref2)
	if code != ExitRefused || !strings.Contains(out, "Deleted 0 of 1") || !strings.Contains(out, "not an orphan") {
		t.Errorf("deleting a deleted upload: exit %d:\n%s", code, out)
	}
	code, out, _ = run("reclaim", "orphans", "delete", "--confirm", s.Bucket+"/nope?uploadId=nope")
	if code != ExitNotFound || !strings.Contains(out, "no such upload") {
		t.Errorf("deleting an upload the backend does not have: exit %d:\n%s", code, out)
	}
	code, _, _ = run("reclaim", "orphans", "delete", "--confirm", reclaim.OrphanRef{Bucket: s.Bucket, Key: s.KeyK, UploadID: s.K}.String())
	if code != ExitRefused {
		t.Errorf("deleting a live upload: exit %d, want %d", code, ExitRefused)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.KeyK, s.K); n != 1 {
		t.Fatalf("K has %d parts on MinIO; want 1", n)
	}
}

func checkStreamedRunAndFollower(t *testing.T, e *admintest.ReclaimEnv, s admintest.Scenario, adminArgs []string, term int64) {
	t.Helper()
	// On a terminal, the pass is streamed and its report printed the same.
	e.Clock.Advance(25 * time.Hour)
	var stdout, stderr logbuf.Buffer
	c := &Client{Stdout: &stdout, Stderr: &stderr, IsTerminal: func(io.Writer) bool { return true }}
	if code := runClient(t, c, append([]string{"reclaim", "run"}, adminArgs...)); code != ExitOK ||
		!strings.Contains(stdout.String(), "Pass 2, term") || !strings.Contains(stdout.String(), "deleted 1 (2 parts, 2.0 KiB)") {
		t.Errorf("streamed run: exit %d, stderr %q:\n%s", code, stderr.String(), stdout.String())
	}
	if n := e.PartsOnMinIO(s.Bucket, s.KeyA, s.A); n != -1 {
		t.Errorf("A has %d parts after pass 2", n)
	}

	// A gateway that does not lead names the one that does.
	follower := serveWithReclaimer(t, e.Store, e.Reclaimer("follower@test"), admin.ReclaimerInfo{ID: "follower@test", Enabled: true})
	code, _, errOut := runCLI(t, nil, "reclaim", "run", "--admin", follower)
	if code != ExitError || !strings.Contains(errOut, "the leader is leader@test") {
		t.Errorf("run on a follower: exit %d, stderr %q", code, errOut)
	}
	code, out, _ := runCLI(t, nil, "reclaim", "status", "--admin", follower)
	if code != ExitOK || !strings.Contains(out, fmt.Sprintf("leader@test leads, term %d; this gateway (follower@test) does not.", term)) {
		t.Errorf("status on a follower: exit %d:\n%s", code, out)
	}
}

// hasRow reports whether some line of out has these fields, in order, at
// its start.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// stubAPI answers the reclaim endpoints with canned documents, for the
// answers a real reclaimer gives only in rare cases.
func stubAPI(t *testing.T, routes map[string]func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, "no such endpoint in the stub")
			return
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestReclaimCLIExitStatus(t *testing.T) {
	t.Parallel()
	started := time.Date(2030, 5, 6, 7, 0, 0, 0, time.UTC)
	refused := adminapi.Report{Pass: 9, Term: 4, Started: started, Finished: started.Add(2 * time.Second),
		Refused: "plan deletes 30 of 40 stored parts (75.0%), above max_delete_fraction",
		Uploads: adminapi.Uploads{Delete: adminapi.Count{Sessions: 3, Parts: 30, Bytes: 30 << 20}, Keep: adminapi.Count{Sessions: 1, Parts: 10, Bytes: 10 << 20}},
		Breaker: adminapi.Breaker{DeleteParts: 30, StoredParts: 40, MaxDelete: -1, MaxDeleteFraction: 0.25}}
	stopped := adminapi.Report{Pass: 10, Term: 4, Started: started, Finished: started.Add(time.Second),
		Stopped: "recorded activity in the future", Totals: adminapi.ListTotals{Orphans: 3},
		Orphans: []adminapi.Orphan{{Bucket: "b", Key: "k", UploadID: "u", Parts: 2, Bytes: 2048, Initiated: started}}}
	ok := adminapi.Report{Pass: 11, Term: 4, Started: started, Finished: started.Add(time.Second)}
	status := func(rep adminapi.Report) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, adminapi.ReclaimStatus{Report: rep, Reclaimer: adminapi.Reclaimer{ID: "a@x", Enabled: true}})
		}
	}
	report := func(rep adminapi.Report) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, rep) }
	}
	tests := []struct {
		name   string
		routes map[string]func(w http.ResponseWriter, r *http.Request)
		args   []string
		code   int
		out    []string
		errOut string
	}{
		{"run refused", map[string]func(http.ResponseWriter, *http.Request){"POST /admin/v1/reclaim/run": report(refused)},
			[]string{"run"}, ExitRefused, []string{"REFUSED by the breaker, nothing marked or deleted: plan deletes 30 of 40", "max_delete none, max_delete_fraction 0.25"}, ""},
		{"run stopped", map[string]func(http.ResponseWriter, *http.Request){"POST /admin/v1/reclaim/run": report(stopped)},
			[]string{"run"}, ExitRefused, []string{"STOPPED, nothing further marked or deleted: recorded activity in the future", "(The lists are cut short; the counts are complete.)"}, ""},
		{"run ok", map[string]func(http.ResponseWriter, *http.Request){"POST /admin/v1/reclaim/run": report(ok)},
			[]string{"run"}, ExitOK, []string{"Pass 11, term 4"}, ""},
		{"plan would refuse", map[string]func(http.ResponseWriter, *http.Request){"GET /admin/v1/reclaim/plan": report(func() adminapi.Report { r := refused; r.DryRun = true; return r }())},
			[]string{"plan", "--json"}, ExitRefused, []string{`"refused": "plan deletes 30`}, ""},
		{"status refused", map[string]func(http.ResponseWriter, *http.Request){"GET /admin/v1/reclaim/status": status(refused)},
			[]string{"status"}, ExitRefused, []string{"Newest pass report:", "REFUSED"}, ""},
		{"status stopped json", map[string]func(http.ResponseWriter, *http.Request){"GET /admin/v1/reclaim/status": status(stopped)},
			[]string{"status", "--json"}, ExitRefused, []string{`"stopped": "recorded activity in the future"`}, ""},
		{"status nothing yet", map[string]func(http.ResponseWriter, *http.Request){"GET /admin/v1/reclaim/status": status(adminapi.Report{})},
			[]string{"status"}, ExitOK, []string{"no gateway leads now", "No pass report yet."}, ""},
		{"no reports", map[string]func(http.ResponseWriter, *http.Request){"GET /admin/v1/reclaim/reports": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, adminapi.Reports{Reports: []adminapi.Report{}})
		}}, []string{"reports"}, ExitOK, []string{"No pass reports yet."}, ""},
		{"not leader", map[string]func(http.ResponseWriter, *http.Request){"POST /admin/v1/reclaim/run": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusConflict, adminapi.NotLeader{Error: adminapi.ErrorDetail{Code: adminapi.CodeNotLeader, Message: "the leader is b@y (term 3)"}, Leader: &adminapi.Leader{ID: "b@y", Term: 3}})
		}}, []string{"run"}, ExitError, nil, "the leader is b@y"},
		{"not the API", map[string]func(http.ResponseWriter, *http.Request){"GET /admin/v1/reclaim/status": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>")
		}}, []string{"status"}, ExitError, nil, "not the sweepgate admin API"},
		{"old gateway", nil, []string{"plan"}, ExitNotFound, nil, "no such endpoint"},
		{"disabled", map[string]func(http.ResponseWriter, *http.Request){"GET /admin/v1/reclaim/orphans": func(w http.ResponseWriter, r *http.Request) {
			writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeReclaimDisabled, "this gateway has no reclaimer")
		}}, []string{"orphans"}, ExitError, nil, "this gateway has no reclaimer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := stubAPI(t, tt.routes)
			code, out, errOut := runCLI(t, nil, append(append([]string{"reclaim"}, tt.args...), "--admin", base)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, errOut)
			}
			for _, w := range tt.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, tt.errOut) {
				t.Errorf("stderr %q lacks %q", errOut, tt.errOut)
			}
		})
	}
}

// TestReclaimCLIProgress checks that a streamed plan shows its progress on
// the terminal and prints its report once it ends, and that a stream cut
// short is an error.
func TestReclaimCLIProgress(t *testing.T) {
	t.Parallel()
	started := time.Now().UTC().Add(-3 * time.Second)
	base := stubAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /admin/v1/reclaim/plan": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("progress") != "1" {
				t.Errorf("plan on a terminal asked %q", r.URL.RawQuery)
			}
			w.Header().Set("Content-Type", "application/x-ndjson")
			enc := json.NewEncoder(w)
			for i := range 3 {
				enc.Encode(adminapi.StreamLine{Progress: &adminapi.Progress{Pass: 3, DryRun: true, Phase: "inventory", Bucket: "photos", Started: started,
					Uploads: adminapi.Uploads{Keep: adminapi.Count{Sessions: int64(1000 * (i + 1))}}}})
			}
			enc.Encode(adminapi.StreamLine{Report: &adminapi.Report{Pass: 3, DryRun: true, Started: started, Finished: time.Now().UTC()}})
		},
		"POST /admin/v1/reclaim/run": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			json.NewEncoder(w).Encode(adminapi.StreamLine{Progress: &adminapi.Progress{Pass: 4, Phase: "act"}})
		},
	})
	terminal := func(args ...string) (int, string, string) {
		var stdout, stderr logbuf.Buffer
		c := &Client{Stdout: &stdout, Stderr: &stderr, IsTerminal: func(io.Writer) bool { return true }}
		code := runClient(t, c, append(args, "--admin", base))
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := terminal("reclaim", "plan")
	if code != ExitOK || !strings.Contains(out, "(a dry run: nothing was changed)") {
		t.Errorf("plan: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if !strings.Contains(errOut, "\r\x1b[Kplan 3: inventory photos, 3000 uploads seen (keep 3000, mark 0, delete 0, hold 0), 3s") || !strings.HasSuffix(errOut, "\r\x1b[K") {
		t.Errorf("progress on stderr: %q", errOut)
	}
	code, _, errOut = terminal("reclaim", "run")
	if code != ExitError || !strings.Contains(errOut, "the answer ended early") || !strings.Contains(errOut, "sweepgate reclaim status") {
		t.Errorf("cut-short stream: exit %d, stderr %q", code, errOut)
	}
}

// TestProgressText checks the line a terminal shows for a streamed pass's
// progress (TestReclaimStream in package admin checks the stream).
func TestProgressText(t *testing.T) {
	t.Parallel()
	started := time.Now().UTC()
	p := &adminapi.Progress{Pass: 7, DryRun: true, Phase: "inventory", Started: started,
		Uploads: adminapi.Uploads{Keep: adminapi.Count{Sessions: 3}}}
	if got := progressText(p, started.Add(90*time.Second)); !strings.Contains(got, "plan 7: inventory") || !strings.Contains(got, "1m30s") {
		t.Errorf("progress text %q", got)
	}
}
