//go:build integration

package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// call sends a request to the admin API and decodes its JSON answer.
func call(t *testing.T, method, u, contentType, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, body %s", method, u, ct, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, u, err, b)
		}
	}
	return resp.StatusCode
}

func postJSON(t *testing.T, u, body string, out any) int {
	t.Helper()
	return call(t, http.MethodPost, u, "application/json", body, out)
}

func wantCount(t *testing.T, what string, got adminapi.Count, sessions, parts int64) {
	t.Helper()
	if got.Sessions != sessions || got.Parts != parts || got.Bytes != parts*admintest.PartSize {
		t.Errorf("%s = %+v, want %d session(s), %d part(s)", what, got, sessions, parts)
	}
}

// TestReclaimAPI drives every reclaim endpoint of the leader against a
// real MinIO and etcd: a plan changes nothing, a pass marks, a later one
// deletes, orphans are held, listed, previewed, adopted and deleted.
func TestReclaimAPI(t *testing.T) {
	t.Parallel()
	e := newReclaimEnv(t)
	s := e.Scenario()
	api := e.Base + "/admin/v1/reclaim"

	// Before any pass: the status names the leader and has no report, with
	// every list present.
	var raw map[string]any
	if code := call(t, http.MethodGet, api+"/status", "", "", &raw); code != http.StatusOK {
		t.Fatalf("status = %d %v", code, raw)
	}
	for _, f := range []string{"pass", "term", "dry_run", "started", "finished", "refused", "uploads", "stuck", "orphans", "missing_sessions", "reclaimer", "in_progress", "last_local"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("status lacks %q: %v", f, raw)
		}
	}
	var st adminapi.ReclaimStatus
	call(t, http.MethodGet, api+"/status", "", "", &st)
	term, _ := e.Leader.Leader()
	if st.Pass != 0 || !st.Reclaimer.Leading || st.Reclaimer.Term != term || st.Reclaimer.Leader == nil ||
		st.Reclaimer.Leader.ID != "leader@test" || st.Reclaimer.Leader.Term != term || st.Reclaimer.ID != "leader@test" || !st.Reclaimer.Enabled {
		t.Errorf("status before a pass: %+v", st)
	}
	if st.Orphans == nil || st.Stuck == nil || st.Missing == nil {
		t.Errorf("status lists are null: %+v", st)
	}

	checkPlanAndFirstPass(t, e, s, api, term)
	checkOrphanActions(t, e, s, api, term)
	checkSecondPass(t, e, s, api)
}

func checkPlanAndFirstPass(t *testing.T, e *admintest.ReclaimEnv, s admintest.Scenario, api string, term int64) {
	t.Helper()
	// A plan decides and changes nothing.
	var plan adminapi.Report
	if code := call(t, http.MethodGet, api+"/plan", "", "", &plan); code != http.StatusOK {
		t.Fatalf("plan = %d", code)
	}
	if !plan.DryRun || plan.Refused != "" || plan.Stopped != "" {
		t.Errorf("plan: %+v", plan)
	}
	wantCount(t, "plan keep", plan.Uploads.Keep, 1, 1)
	wantCount(t, "plan mark", plan.Uploads.Mark, 1, 2)
	wantCount(t, "plan hold", plan.Uploads.Hold, 2, 2)
	if got := e.State(s.Bucket, s.A); got != etcdstore.StateActive {
		t.Errorf("after a plan, A is %s; a plan must change nothing", got)
	}
	var reps adminapi.Reports
	if code := call(t, http.MethodGet, api+"/reports", "", "", &reps); code != http.StatusOK || len(reps.Reports) != 0 {
		t.Errorf("reports after a plan = %d %+v; a plan writes no report", code, reps)
	}

	// The first pass marks A, keeps K, holds the orphans.
	var pass1 adminapi.Report
	if code := postJSON(t, api+"/run", "{}", &pass1); code != http.StatusOK {
		t.Fatalf("run = %d %+v", code, pass1)
	}
	if pass1.DryRun || pass1.Pass != 1 || pass1.Term != term || pass1.Refused != "" || pass1.Stopped != "" {
		t.Errorf("pass 1: %+v", pass1)
	}
	wantCount(t, "pass 1 marked", pass1.Acted.Marked, 1, 2)
	wantCount(t, "pass 1 deleted", pass1.Acted.Deleted, 0, 0)
	if len(pass1.Orphans) != 2 || pass1.Totals.Orphans != 2 {
		t.Errorf("pass 1 orphans: %+v", pass1.Orphans)
	}
	if got := e.State(s.Bucket, s.A); got != etcdstore.StateExpired {
		t.Errorf("after pass 1, A is %s, want expired", got)
	}

	var st adminapi.ReclaimStatus
	call(t, http.MethodGet, api+"/status", "", "", &st)
	if st.Pass != 1 || st.Acted.Marked.Sessions != 1 || st.LastLocal == nil || st.LastLocal.Pass != 1 || st.InProgress != nil {
		t.Errorf("status after pass 1: %+v", st)
	}
}

func checkOrphanActions(t *testing.T, e *admintest.ReclaimEnv, s admintest.Scenario, api string, term int64) {
	t.Helper()
	// Orphans, from the report and from the backend.
	var orphans adminapi.Orphans
	if code := call(t, http.MethodGet, api+"/orphans", "", "", &orphans); code != http.StatusOK ||
		orphans.Fresh || orphans.Pass != 1 || orphans.Total != 2 || len(orphans.Orphans) != 2 || orphans.Truncated {
		t.Errorf("orphans = %d %+v", code, orphans)
	}
	if code := call(t, http.MethodGet, api+"/orphans?fresh=1&limit=1", "", "", &orphans); code != http.StatusOK ||
		!orphans.Fresh || orphans.Pass != 0 || orphans.Total != 2 || len(orphans.Orphans) != 1 || !orphans.Truncated {
		t.Errorf("fresh orphans = %d %+v", code, orphans)
	}
	for _, o := range orphans.Orphans {
		if o.Parts != 1 || o.Bytes != admintest.PartSize || o.Initiated.IsZero() {
			t.Errorf("orphan %+v", o)
		}
	}

	// A delete without confirmation deletes nothing and says what it would.
	del := `{"refs": [{"bucket": "` + s.Bucket + `", "key": "` + s.K2 + `", "upload_id": "` + s.O2 + `"}], "principal": "ops"}`
	var deletion adminapi.OrphanDeletion
	if code := postJSON(t, api+"/orphans/delete", del, &deletion); code != http.StatusConflict ||
		deletion.Error == nil || deletion.Error.Code != adminapi.CodeNotConfirmed || len(deletion.Results) != 1 ||
		deletion.Results[0].Deleted || deletion.Results[0].Parts != 1 || deletion.Deleted != 0 {
		t.Errorf("unconfirmed delete = %d %+v", code, deletion)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.K2, s.O2); n != 1 {
		t.Fatalf("after an unconfirmed delete, O2 has %d parts on MinIO; want 1", n)
	}

	// Adopt O1: a session owned by the principal, recorded.
	adopt := `{"bucket": "` + s.Bucket + `", "key": "` + s.KeyO1 + `", "upload_id": "` + s.O1 + `", "principal": "backup-tool"}`
	var adopted adminapi.Adopted
	if code := postJSON(t, api+"/orphans/adopt", adopt, &adopted); code != http.StatusOK {
		t.Fatalf("adopt = %d", code)
	}
	if a := adopted.Adopted; a.Action != string(etcdstore.OrphanAdopted) || a.Principal != "backup-tool" || a.Term != term || a.Parts != 1 || a.Outcome != "active" {
		t.Errorf("adopted: %+v", a)
	}
	if v, err := e.Store.GetSession(t.Context(), s.Bucket, s.O1); err != nil || v.Value.Owner != "backup-tool" || v.Value.State != etcdstore.StateActive {
		t.Errorf("adopted session: %+v %v", v.Value, err)
	}
	var apiErr adminapi.ErrorBody
	if code := postJSON(t, api+"/orphans/adopt", adopt, &apiErr); code != http.StatusConflict || apiErr.Error.Code != adminapi.CodeNotOrphan {
		t.Errorf("adopting again = %d %+v", code, apiErr)
	}
	missing := `{"bucket": "` + s.Bucket + `", "key": "nope", "upload_id": "nope", "principal": "p"}`
	if code := postJSON(t, api+"/orphans/adopt", missing, &apiErr); code != http.StatusNotFound || apiErr.Error.Code != adminapi.CodeNotFound {
		t.Errorf("adopting a missing upload = %d %+v", code, apiErr)
	}

	// A confirmed delete aborts O2 on MinIO.
	confirmed := strings.Replace(del, `"principal"`, `"confirm": true, "principal"`, 1)
	deletion = adminapi.OrphanDeletion{}
	if code := postJSON(t, api+"/orphans/delete", confirmed, &deletion); code != http.StatusOK || deletion.Error != nil ||
		deletion.Deleted != 1 || !deletion.Results[0].Deleted || deletion.Results[0].Outcome != "aborted" {
		t.Errorf("confirmed delete = %d %+v", code, deletion)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.K2, s.O2); n != -1 {
		t.Errorf("after a confirmed delete, O2 has %d parts on MinIO", n)
	}
	// Deleting a named upload that has a session does nothing to it.
	notOrphan := `{"refs": [{"bucket": "` + s.Bucket + `", "key": "` + s.KeyK + `", "upload_id": "` + s.K + `"}], "confirm": true}`
	deletion = adminapi.OrphanDeletion{}
	if code := postJSON(t, api+"/orphans/delete", notOrphan, &deletion); code != http.StatusOK || deletion.Deleted != 0 ||
		deletion.Results[0].Outcome != reclaim.ErrNotOrphan.Error() {
		t.Errorf("deleting a live upload = %d %+v", code, deletion)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.KeyK, s.K); n != 1 {
		t.Fatalf("K has %d parts on MinIO; want 1", n)
	}
}

func checkSecondPass(t *testing.T, e *admintest.ReclaimEnv, s admintest.Scenario, api string) {
	t.Helper()
	// A day later A stayed expired: the next pass deletes it, streaming
	// its answer.
	e.Clock.Advance(25 * time.Hour)
	resp, err := http.Post(api+"/run?progress=1", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, resp)
	last := lines[len(lines)-1]
	if resp.Header.Get("Content-Type") != "application/x-ndjson" || last.Report == nil || last.Error != nil {
		t.Fatalf("streamed run: %s %+v", resp.Header.Get("Content-Type"), last)
	}
	pass2 := *last.Report
	if pass2.Pass != 2 {
		t.Errorf("pass 2: %+v", pass2)
	}
	wantCount(t, "pass 2 deleted", pass2.Acted.Deleted, 1, 2)
	if n := e.PartsOnMinIO(s.Bucket, s.KeyA, s.A); n != -1 {
		t.Errorf("after pass 2, A has %d parts on MinIO; want it deleted", n)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.KeyK, s.K); n != 1 {
		t.Errorf("after pass 2, K has %d parts on MinIO; only marking may touch it", n)
	}

	var reps adminapi.Reports
	if code := call(t, http.MethodGet, api+"/reports?limit=1", "", "", &reps); code != http.StatusOK || len(reps.Reports) != 1 || reps.Reports[0].Pass != 2 {
		t.Errorf("reports?limit=1 = %d %+v", code, reps)
	}
	if code := call(t, http.MethodGet, api+"/reports", "", "", &reps); code != http.StatusOK || len(reps.Reports) != 2 || reps.Reports[1].Pass != 1 {
		t.Errorf("reports = %d %+v", code, reps)
	}
}

func readLines(t *testing.T, resp *http.Response) []adminapi.StreamLine {
	t.Helper()
	defer resp.Body.Close()
	var lines []adminapi.StreamLine
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l adminapi.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil || len(lines) == 0 {
		t.Fatalf("stream: %v, %d lines", err, len(lines))
	}
	return lines
}

// TestReclaimAPIFollower checks what a gateway that does not lead answers:
// reads and plans, and for actions a 409 that names the leader.
func TestReclaimAPIFollower(t *testing.T) {
	t.Parallel()
	e := newReclaimEnv(t)
	s := e.Scenario()
	follower := serveWithReclaimer(t, e.Store, e.Reclaimer("follower@test"), ReclaimerInfo{ID: "follower@test", Enabled: false})
	api := follower + "/admin/v1/reclaim"
	term, _ := e.Leader.Leader()

	var st adminapi.ReclaimStatus
	if code := call(t, http.MethodGet, api+"/status", "", "", &st); code != http.StatusOK ||
		st.Reclaimer.Leading || st.Reclaimer.Enabled || st.Reclaimer.Leader == nil || st.Reclaimer.Leader.ID != "leader@test" {
		t.Errorf("follower status = %d %+v", code, st)
	}
	var plan adminapi.Report
	if code := call(t, http.MethodGet, api+"/plan", "", "", &plan); code != http.StatusOK || !plan.DryRun || plan.Uploads.Mark.Sessions != 1 {
		t.Errorf("follower plan = %d %+v", code, plan)
	}

	for _, tt := range []struct{ path, body string }{
		{"/run", "{}"},
		{"/orphans/adopt", `{"bucket": "` + s.Bucket + `", "key": "` + s.KeyO1 + `", "upload_id": "` + s.O1 + `", "principal": "p"}`},
		{"/orphans/delete", `{"refs": [{"bucket": "` + s.Bucket + `", "key": "` + s.KeyO1 + `", "upload_id": "` + s.O1 + `"}], "confirm": true}`},
	} {
		var nl adminapi.NotLeader
		if code := postJSON(t, api+tt.path, tt.body, &nl); code != http.StatusConflict || nl.Error.Code != adminapi.CodeNotLeader ||
			nl.Leader == nil || nl.Leader.ID != "leader@test" || nl.Leader.Term != term || !strings.Contains(nl.Error.Message, "leader@test") {
			t.Errorf("POST %s on a follower = %d %+v", tt.path, code, nl)
		}
	}
	// The stream answers the same in its last line when the lead is lost
	// on the way; a follower refuses before streaming.
	resp, err := http.Post(api+"/run?progress=1", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("streamed run on a follower = %d", resp.StatusCode)
	}
	// A preview needs no lead.
	var deletion adminapi.OrphanDeletion
	del := `{"refs": [{"bucket": "` + s.Bucket + `", "key": "` + s.KeyO1 + `", "upload_id": "` + s.O1 + `"}]}`
	if code := postJSON(t, api+"/orphans/delete", del, &deletion); code != http.StatusConflict || deletion.Error.Code != adminapi.CodeNotConfirmed || deletion.Results[0].Parts != 1 {
		t.Errorf("preview on a follower = %d %+v", code, deletion)
	}
	if n := e.PartsOnMinIO(s.Bucket, s.KeyO1, s.O1); n != 1 {
		t.Errorf("O1 has %d parts on MinIO after the follower's refusals; want 1", n)
	}
	if got := e.State(s.Bucket, s.A); got != etcdstore.StateActive {
		t.Errorf("A is %s after the follower's refusals", got)
	}
}

// TestReclaimAPIErrors checks the answers to malformed requests, which
// need no reclaimer to run.
func TestReclaimAPIErrors(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	// A reclaimer that never campaigns: the checks come before any use.
	be, err := backend.NewStatic("http://127.0.0.1:1", "us-east-1", "AK", "SK")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := multipart.New(multipart.Config{Store: st, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	r, err := reclaim.New(reclaim.Config{Store: st, Sessions: svc, Backend: be, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	api := serveWithReclaimer(t, st, r, ReclaimerInfo{ID: "x@test", Enabled: true}) + "/admin/v1/reclaim"
	off := serveWithReclaimer(t, st, nil, ReclaimerInfo{ID: "off@test", Off: "sessions.enabled is false"}) + "/admin/v1/reclaim"

	tests := []struct {
		name             string
		method, url, ct  string
		body             string
		status           int
		code, msg, allow string
	}{
		{"run with GET", http.MethodGet, api + "/run", "", "", http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed, "use POST", "POST"},
		{"plan with POST", http.MethodPost, api + "/plan", "application/json", "{}", http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed, "use GET", "GET, HEAD"},
		{"delete with GET", http.MethodGet, api + "/orphans/delete", "", "", http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed, "", "POST"},
		{"run without JSON", http.MethodPost, api + "/run", "text/plain", "{}", http.StatusUnsupportedMediaType, adminapi.CodeUnsupportedMediaType, "application/json", ""},
		{"adopt as a form", http.MethodPost, api + "/orphans/adopt", "application/x-www-form-urlencoded", "bucket=b", http.StatusUnsupportedMediaType, adminapi.CodeUnsupportedMediaType, "", ""},
		{"run with a field", http.MethodPost, api + "/run", "application/json", `{"force": true}`, http.StatusBadRequest, adminapi.CodeBadRequest, "force", ""},
		{"adopt incomplete", http.MethodPost, api + "/orphans/adopt", "application/json", `{"bucket": "b", "key": "k", "upload_id": "u"}`, http.StatusBadRequest, adminapi.CodeBadRequest, "principal", ""},
		{"adopt not JSON", http.MethodPost, api + "/orphans/adopt", "application/json", `{"bucket":`, http.StatusBadRequest, adminapi.CodeBadRequest, "request document", ""},
		{"delete no refs", http.MethodPost, api + "/orphans/delete", "application/json", `{"confirm": true}`, http.StatusBadRequest, adminapi.CodeBadRequest, "refs", ""},
		{"delete ref without key", http.MethodPost, api + "/orphans/delete", "application/json", `{"refs": [{"bucket": "b", "upload_id": "u"}]}`, http.StatusBadRequest, adminapi.CodeBadRequest, "refs[0]", ""},
		{"delete two documents", http.MethodPost, api + "/orphans/delete", "application/json", `{} {}`, http.StatusBadRequest, adminapi.CodeBadRequest, "more than one", ""},
		{"reports limit", http.MethodGet, api + "/reports?limit=101", "", "", http.StatusBadRequest, adminapi.CodeBadRequest, "1 to 100", ""},
		{"reports unknown", http.MethodGet, api + "/reports?pass=3", "", "", http.StatusBadRequest, adminapi.CodeBadRequest, "pass", ""},
		{"orphans fresh", http.MethodGet, api + "/orphans?fresh=maybe", "", "", http.StatusBadRequest, adminapi.CodeBadRequest, "fresh", ""},
		{"orphans limit", http.MethodGet, api + "/orphans?limit=0", "", "", http.StatusBadRequest, adminapi.CodeBadRequest, "limit", ""},
		{"plan unknown", http.MethodGet, api + "/plan?dry=1", "", "", http.StatusBadRequest, adminapi.CodeBadRequest, "dry", ""},
		{"unknown endpoint", http.MethodGet, api + "/sweep", "", "", http.StatusNotFound, adminapi.CodeNotFound, "", ""},
		{"off: status", http.MethodGet, off + "/status", "", "", http.StatusServiceUnavailable, adminapi.CodeReclaimDisabled, "sessions.enabled is false", ""},
		{"off: run", http.MethodPost, off + "/run", "application/json", "{}", http.StatusServiceUnavailable, adminapi.CodeReclaimDisabled, "", ""},
		{"off: orphans", http.MethodGet, off + "/orphans", "", "", http.StatusServiceUnavailable, adminapi.CodeReclaimDisabled, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, tt.url, strings.NewReader(tt.body))
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body adminapi.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || body.Error.Code != tt.code || !strings.Contains(body.Error.Message, tt.msg) {
				t.Errorf("= %d %+v, want %d %s mentioning %q", resp.StatusCode, body, tt.status, tt.code, tt.msg)
			}
			if got := resp.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}

	// Not leading, with nobody leading: a 409 without a leader.
	var nl adminapi.NotLeader
	if code := postJSON(t, api+"/run", "", &nl); code != http.StatusConflict || nl.Leader != nil || !strings.Contains(nl.Error.Message, "no gateway leads") {
		t.Errorf("run with nobody leading = %d %+v", code, nl)
	}
}

// TestReclaimStream checks the streamed answer: progress lines while the
// pass runs, only those that match, at a bounded rate, then the report.
func TestReclaimStream(t *testing.T) {
	t.Parallel()
	a := &reclaimAPI{info: ReclaimerInfo{ID: "x"}, progress: NewProgressHub(), log: slog.New(slog.DiscardHandler)}
	started := time.Now().UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.stream(w, r, "plan", func(p reclaim.Progress) bool { return p.DryRun }, func(context.Context) (reclaim.Report, error) {
			for i := range 40 {
				a.progress.Publish(reclaim.Progress{Pass: 7, DryRun: true, Phase: "inventory", Started: started,
					Uploads: reclaim.Uploads{Keep: reclaim.Count{Sessions: int64(i)}}})
				a.progress.Publish(reclaim.Progress{Pass: 6, Phase: "act"}) // another pass's
				time.Sleep(30 * time.Millisecond)
			}
			return reclaim.Report{Pass: 7, DryRun: true, Started: started, Refused: "too much"}, nil
		})
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, resp)
	last := lines[len(lines)-1]
	if last.Report == nil || last.Report.Refused != "too much" || last.Report.Orphans == nil {
		t.Fatalf("last line %+v", last)
	}
	progress := lines[:len(lines)-1]
	// 1.2s of progress at most every 500ms.
	if len(progress) < 1 || len(progress) > 3 {
		t.Errorf("%d progress lines, want 1 to 3", len(progress))
	}
	for _, l := range progress {
		if l.Progress == nil || l.Progress.Pass != 7 || l.Report != nil {
			t.Errorf("progress line %+v", l)
		}
	}
	if p := progress[0].Progress; p.Pass != 7 || !p.DryRun || p.Phase != "inventory" || !p.Started.Equal(started) {
		t.Errorf("progress %+v", p)
	}
}
