//go:build integration

package admin

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// newAdminServer serves the real admin handler over store (nil: sessions
// off) and returns its base URL.
func newAdminServer(t *testing.T, store *etcdstore.Store) string {
	t.Helper()
	a := &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{store: store, log: slog.New(slog.DiscardHandler)},
	}
	srv := httptest.NewServer(testAdminHandler(a))
	t.Cleanup(srv.Close)
	return srv.URL
}

// getJSON fetches u and decodes its JSON body into out.
func getJSON(t *testing.T, method, u string, out any) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, body %s", method, u, ct, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s %s: %v in %s", method, u, err, body)
	}
	return resp.StatusCode, resp.Header
}

func listIDs(l adminapi.SessionList) []string {
	var ids []string
	for _, s := range l.Sessions {
		ids = append(ids, s.UploadID)
	}
	return ids
}

func TestAdminAPIListSessions(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedSessions(t, st)
	base := newAdminServer(t, st)

	tests := []struct {
		query string
		want  []string
	}{
		// Key order: bucket, then upload id as escaped in the key, where
		// "up%2Fdone%2B1" sorts before "up-pending".
		{"", []string{"up/done+1", "up-pending", "up-active", "up-expired"}},
		{"state=active", []string{"up-active"}},
		{"state=expired,cleanup_pending", []string{"up-pending", "up-expired"}},
		{"state=expired&state=active", []string{"up-active", "up-expired"}},
		{"bucket=photos", []string{"up-active", "up-expired"}},
		{"bucket=backups&state=completed", []string{"up/done+1"}},
		{"bucket=nothing", nil},
		{"state=aborted", nil},
	}
	for _, tt := range tests {
		var l adminapi.SessionList
		code, _ := getJSON(t, "GET", base+"/admin/v1/sessions?"+tt.query, &l)
		want := tt.want
		if code != http.StatusOK || !slices.Equal(listIDs(l), want) || l.Truncated || l.Next != "" || l.Revision == 0 {
			t.Errorf("?%s: %d %+v, want %q", tt.query, code, l, want)
		}
		if l.Sessions == nil || l.Warnings == nil {
			t.Errorf("?%s: sessions or warnings is null, want []", tt.query)
		}
	}

	// One session's fields, with the later activity from its activity key.
	var l adminapi.SessionList
	getJSON(t, "GET", base+"/admin/v1/sessions?state=active", &l)
	got := l.Sessions[0]
	want := adminapi.Session{Bucket: "photos", Key: "2030/big.iso", UploadID: "up-active", Owner: "alice", State: "active",
		StateSince: admintest.T0, Created: admintest.T0, LastActivity: admintest.T3, ModRevision: got.ModRevision}
	if got != want || got.ModRevision == 0 {
		t.Errorf("active session = %+v\nwant %+v", got, want)
	}

	// Paging: limit, next, after, until the end.
	var all []string
	after := ""
	for range 10 {
		var page adminapi.SessionList
		q := url.Values{"limit": {"3"}}
		if after != "" {
			q.Set("after", after)
		}
		if code, _ := getJSON(t, "GET", base+"/admin/v1/sessions?"+q.Encode(), &page); code != http.StatusOK {
			t.Fatalf("page after %q: %d", after, code)
		}
		all = append(all, listIDs(page)...)
		if !page.Truncated {
			break
		}
		if len(page.Sessions) != 3 || page.Next == "" {
			t.Fatalf("truncated page %+v", page)
		}
		after = page.Next
	}
	if want := []string{"up/done+1", "up-pending", "up-active", "up-expired"}; !slices.Equal(all, want) {
		t.Errorf("paged list = %q, want %q", all, want)
	}
	// A page that ends exactly at the last session says so.
	var exact adminapi.SessionList
	getJSON(t, "GET", base+"/admin/v1/sessions?limit=4", &exact)
	if exact.Truncated || len(exact.Sessions) != 4 {
		t.Errorf("limit=4 of 4: %+v", exact)
	}

	// A damaged record is reported, not fatal.
	if _, err := st.Client().Put(t.Context(), st.Keys().Session("photos", "zz-broken"), "{"); err != nil {
		t.Fatal(err)
	}
	var warned adminapi.SessionList
	getJSON(t, "GET", base+"/admin/v1/sessions?bucket=photos", &warned)
	if len(warned.Sessions) != 2 || len(warned.Warnings) != 1 || !strings.Contains(warned.Warnings[0], "zz-broken") {
		t.Errorf("with a damaged record: %+v", warned)
	}
}

func TestAdminAPIShowSession(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedSessions(t, st)
	base := newAdminServer(t, st)

	var ans adminapi.SessionAnswer
	// The upload id holds '/' and '+': escaped, it is one path segment.
	code, hdr := getJSON(t, "GET", base+"/admin/v1/sessions/backups/"+url.PathEscape("up/done+1"), &ans)
	if code != http.StatusOK || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("show: %d %v", code, hdr)
	}
	s := ans.Session
	if s.UploadID != "up/done+1" || s.State != "completed" || !s.StateSince.Equal(admintest.T3) || !s.LastActivity.Equal(admintest.T1) {
		t.Errorf("summary fields: %+v", s.Session)
	}
	// No activity key: the activity shown is the end of the newest part
	// record, which is activity from keyspace schema 2.
	if a := s.Activity; a == nil || !a.At.Equal(admintest.T1) || a.What != "part recorded" || a.PartNumber != 1 {
		t.Errorf("activity %+v; want the end of part 1 at %s", a, admintest.T1)
	}
	if s.Completion == nil || s.Completion.ETag != `"abc-2"` || s.Completion.VersionID != "v1" || s.Completion.Checksums == nil || s.ExpectedETag != `"abc-2"` {
		t.Errorf("completion: %+v, expected etag %q", s.Completion, s.ExpectedETag)
	}
	wantHist := []adminapi.Transition{
		{At: admintest.T0, To: "active", Actor: "gateway", Reason: "created"},
		{At: admintest.T2, From: "active", To: "completing", Actor: "gateway", Reason: "complete"},
		{At: admintest.T3, From: "completing", To: "completed", Actor: "gateway", Reason: "backend completed"},
	}
	if !slices.Equal(s.History, wantHist) {
		t.Errorf("history = %+v\nwant %+v", s.History, wantHist)
	}
	if s.PartCount != 2 || s.PartBytes != 6<<20 || len(s.Parts) != 2 || s.Parts[0] != (adminapi.Part{PartNumber: 1, ETag: `"e1"`, Size: 5 << 20, SHA256: "sha", At: admintest.T1}) {
		t.Errorf("parts: %d, %d bytes, %+v", s.PartCount, s.PartBytes, s.Parts)
	}

	// Activity from the activity key; a reclaimer's term in the history.
	getJSON(t, "GET", base+"/admin/v1/sessions/photos/up-active", &ans)
	if a := ans.Session.Activity; a == nil || *a != (adminapi.Activity{At: admintest.T3, What: "UploadPart", PartNumber: 7}) || !ans.Session.LastActivity.Equal(admintest.T3) {
		t.Errorf("activity %+v, last activity %v", a, ans.Session.LastActivity)
	}
	if ans.Session.Parts == nil || ans.Session.History == nil {
		t.Error("parts or history is null, want []")
	}
	getJSON(t, "GET", base+"/admin/v1/sessions/photos/up-expired", &ans)
	if h := ans.Session.History; len(h) != 2 || h[1].Term != 42 || h[1].Actor != "reclaimer" || ans.Session.ExpiredAt == nil || !ans.Session.ExpiredAt.Equal(admintest.T2) {
		t.Errorf("expired session: %+v", ans.Session)
	}

	// The raw document uses the documented names.
	resp, err := http.Get(base + "/admin/v1/sessions/backups/up-pending")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{`"session"`, `"upload_id": "up-pending"`, `"state": "cleanup_pending"`, `"uncertain": "abort response lost"`,
		`"abort_attempts": 2`, `"state_since"`, `"last_activity"`, `"mod_revision"`, `"history"`, `"parts": []`, `"part_count": 0`,
		`"part_bytes": 0`, `"completion": null`, `"activity": null`, `"expired_at": null`} {
		if !strings.Contains(string(raw), name) {
			t.Errorf("show document lacks %s:\n%s", name, raw)
		}
	}
}

func TestAdminAPIErrors(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedSessions(t, st)
	base := newAdminServer(t, st)
	off := newAdminServer(t, nil)

	tests := []struct {
		method, url string
		status      int
		code, msg   string
	}{
		{"GET", base + "/admin/v1/sessions/photos/nope", 404, adminapi.CodeNotFound, `no session for upload "nope" in bucket "photos"`},
		{"GET", base + "/admin/v1/sessions/nobucket/up-active", 404, adminapi.CodeNotFound, "no session"},
		{"GET", base + "/admin/v1/sessions/photos", 404, adminapi.CodeNotFound, "no admin API endpoint"},
		{"GET", base + "/admin/v1/nothing", 404, adminapi.CodeNotFound, "no admin API endpoint"},
		{"GET", base + "/admin/v1/sessions?state=lost", 400, adminapi.CodeBadRequest, `unknown state "lost"`},
		{"GET", base + "/admin/v1/sessions?limit=0", 400, adminapi.CodeBadRequest, "limit"},
		{"GET", base + "/admin/v1/sessions?limit=1001", 400, adminapi.CodeBadRequest, "limit"},
		{"GET", base + "/admin/v1/sessions?limit=ten", 400, adminapi.CodeBadRequest, "limit"},
		{"GET", base + "/admin/v1/sessions?after=nonsense", 400, adminapi.CodeBadRequest, "after"},
		{"GET", base + "/admin/v1/sessions?sate=active", 400, adminapi.CodeBadRequest, `unknown parameter "sate"`},
		{"POST", base + "/admin/v1/sessions", 405, adminapi.CodeMethodNotAllowed, "POST"},
		{"DELETE", base + "/admin/v1/sessions/photos/up-active", 405, adminapi.CodeMethodNotAllowed, "DELETE"},
		{"GET", off + "/admin/v1/sessions", 503, adminapi.CodeSessionsDisabled, "sessions.enabled"},
		{"GET", off + "/admin/v1/sessions/photos/up-active", 503, adminapi.CodeSessionsDisabled, "off"},
	}
	for _, tt := range tests {
		var e adminapi.ErrorBody
		status, _ := getJSON(t, tt.method, tt.url, &e)
		if status != tt.status || e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.msg) {
			t.Errorf("%s %s = %d %+v, want %d %s containing %q", tt.method, tt.url, status, e.Error, tt.status, tt.code, tt.msg)
		}
	}

	// The probes are not part of the API and keep answering in text.
	if code, body := get(t, http.DefaultClient, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
}

// The etcd read failing is a 503 the operator can retry, not a 404.
func TestAdminAPIEtcdDown(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	base := newAdminServer(t, st)
	st.Client().Close()
	for _, path := range []string{"/admin/v1/sessions", "/admin/v1/sessions/b/u"} {
		var e adminapi.ErrorBody
		status, _ := getJSON(t, "GET", base+path, &e)
		if status != http.StatusServiceUnavailable || e.Error.Code != adminapi.CodeEtcdUnavailable {
			t.Errorf("%s with etcd gone = %d %+v", path, status, e)
		}
	}
}
