//go:build integration

package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// newDigestServer serves the real admin handler with the digest API over
// store (nil: sessions off) with planes configured, and returns its URL.
func newDigestServer(t *testing.T, store *etcdstore.Store, planes ...string) string {
	t.Helper()
	a := &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{store: store, log: slog.New(slog.DiscardHandler)},
		digests:  digestAPI{store: store, planes: planes, now: func() time.Time { return admintest.DigestNow }, log: slog.New(slog.DiscardHandler)},
	}
	srv := httptest.NewServer(testAdminHandler(a))
	t.Cleanup(srv.Close)
	return srv.URL
}

// sendRaw sends a request with body (a JSON document unless it is a string,
// which is sent as it is) and returns the status and the raw answer.
func sendRaw(t *testing.T, method, u, contentType string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, r)
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
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, body %s", method, u, ct, data)
	}
	return resp.StatusCode, data
}

func decodeAs[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v in %s", err, data)
	}
	return v
}

// wantError checks an error answer's status and code.
func wantError(t *testing.T, what string, status int, data []byte, wantStatus int, wantCode string) {
	t.Helper()
	e, ok := decodeAPIError(data)
	if status != wantStatus || !ok || e.Code != wantCode {
		t.Errorf("%s: %d %s, want %d with code %s", what, status, data, wantStatus, wantCode)
	}
}

// currentRevision is etcd's revision now.
func currentRevision(t *testing.T, st *etcdstore.Store) int64 {
	t.Helper()
	_, rev, err := st.ListFrontiers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// jsonType is the content type of the API's request documents.
const jsonType = "application/json"

func TestFrontiersAPI(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	base := newDigestServer(t, st, "backup", "dr")

	// Nothing reported: every configured plane is listed at revision 0,
	// lagging by all of etcd's history.
	status, data := sendRaw(t, http.MethodGet, base+"/admin/v1/frontiers", "", nil)
	list := decodeAs[adminapi.Frontiers](t, data)
	if status != http.StatusOK || list.Revision < 1 || len(list.Planes) != 2 {
		t.Fatalf("empty list: %d %s", status, data)
	}
	for i, name := range []string{"backup", "dr"} {
		want := adminapi.Plane{Plane: name, Lag: list.Revision, Configured: true}
		if !reflect.DeepEqual(list.Planes[i], want) {
			t.Errorf("plane %d = %+v, want %+v", i, list.Planes[i], want)
		}
	}
	for _, field := range []string{`"reported_at": null`, `"reported": false`, `"by": ""`, `"revision": 0`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("the list lacks %s: %s", field, data)
		}
	}

	// Report a revision etcd has reached.
	rev := currentRevision(t, st)
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/frontiers/backup", jsonType, map[string]any{"revision": rev})
	p := decodeAs[adminapi.Plane](t, data)
	if status != http.StatusOK || p.Plane != "backup" || p.Revision != rev || p.Lag < 0 || !p.Configured || !p.Reported ||
		p.By != "127.0.0.1" || p.ReportedAt == nil || !p.ReportedAt.Equal(admintest.DigestNow) {
		t.Fatalf("report: %d %s", status, data)
	}
	// A plane that is not configured may report, and names its reporter.
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/frontiers/extra", jsonType, map[string]any{"revision": 1, "by": "restore-test"})
	p = decodeAs[adminapi.Plane](t, data)
	if status != http.StatusOK || p.Configured || p.By != "restore-test" || p.Revision != 1 {
		t.Fatalf("unconfigured report: %d %s", status, data)
	}

	status, data = sendRaw(t, http.MethodGet, base+"/admin/v1/frontiers", "", nil)
	list = decodeAs[adminapi.Frontiers](t, data)
	if status != http.StatusOK || len(list.Planes) != 3 {
		t.Fatalf("list: %d %s", status, data)
	}
	got := []string{list.Planes[0].Plane, list.Planes[1].Plane, list.Planes[2].Plane}
	if !reflect.DeepEqual(got, []string{"backup", "dr", "extra"}) {
		t.Errorf("order %q: configured planes first, in configured order, then the others", got)
	}
	if b := list.Planes[0]; b.Revision != rev || b.Lag != list.Revision-rev || !b.Reported {
		t.Errorf("backup: %+v at revision %d", b, list.Revision)
	}
	if dr := list.Planes[1]; dr.Reported || dr.Revision != 0 || dr.Lag != list.Revision {
		t.Errorf("dr has not reported: %+v", dr)
	}

	checkBadFrontierReports(t, st, base)
}

func checkBadFrontierReports(t *testing.T, st *etcdstore.Store, base string) {
	t.Helper()
	// Bad reports answer 400 (or 405, 415) and write nothing.
	before, _, err := st.ListFrontiers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, contentType string
		body                    any
		status                  int
		code                    string
	}{
		{"no revision", "backup", jsonType, "{}", 400, adminapi.CodeBadRequest},
		{"empty body", "backup", jsonType, "", 400, adminapi.CodeBadRequest},
		{"negative", "backup", jsonType, `{"revision": -1}`, 400, adminapi.CodeBadRequest},
		{"not a whole number", "backup", jsonType, `{"revision": 1.5}`, 400, adminapi.CodeBadRequest},
		{"a string", "backup", jsonType, `{"revision": "12"}`, 400, adminapi.CodeBadRequest},
		{"unknown field", "backup", jsonType, `{"revision": 1, "plane": "x"}`, 400, adminapi.CodeBadRequest},
		{"two documents", "backup", jsonType, `{"revision": 1} {"revision": 2}`, 400, adminapi.CodeBadRequest},
		{"ahead of etcd", "backup", jsonType, `{"revision": 999999999}`, 400, adminapi.CodeBadRequest},
		{"plane with a slash", "a%2Fb", jsonType, `{"revision": 1}`, 400, adminapi.CodeBadRequest},
		{"plane with a space", "a%20b", jsonType, `{"revision": 1}`, 400, adminapi.CodeBadRequest},
		{"reporter too long", "backup", jsonType, `{"revision": 1, "by": "` + strings.Repeat("x", maxReporter+1) + `"}`, 400, adminapi.CodeBadRequest},
		{"not JSON", "backup", "text/plain", `{"revision": 1}`, 415, adminapi.CodeUnsupportedMediaType},
	} {
		status, data := sendRaw(t, http.MethodPost, base+"/admin/v1/frontiers/"+tt.path, tt.contentType, tt.body)
		wantError(t, tt.name, status, data, tt.status, tt.code)
	}
	status, data := sendRaw(t, http.MethodGet, base+"/admin/v1/frontiers/backup", "", nil)
	wantError(t, "GET a plane", status, data, http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed)
	status, data = sendRaw(t, http.MethodDelete, base+"/admin/v1/frontiers", "", nil)
	wantError(t, "DELETE the list", status, data, http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed)
	status, data = sendRaw(t, http.MethodGet, base+"/admin/v1/frontiers?plane=backup", "", nil)
	wantError(t, "unknown parameter", status, data, http.StatusBadRequest, adminapi.CodeBadRequest)
	after, _, err := st.ListFrontiers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("refused reports changed the frontiers:\n%+v\n%+v", before, after)
	}

	// A plane may go back, as one restored from an older backup does.
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/frontiers/backup", jsonType, `{"revision": 0}`)
	if p := decodeAs[adminapi.Plane](t, data); status != http.StatusOK || p.Revision != 0 || !p.Reported {
		t.Errorf("lower report: %d %s", status, data)
	}
}

func TestTrashAPI(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedTrash(t, st)
	base := newDigestServer(t, st)

	status, data := sendRaw(t, http.MethodGet, base+"/admin/v1/trash", "", nil)
	list := decodeAs[adminapi.TrashList](t, data)
	if status != http.StatusOK || len(list.Trash) != 3 || list.Truncated {
		t.Fatalf("list: %d %s", status, data)
	}
	// Bucket and key order, oldest first within an object.
	want := []adminapi.Trash{
		{Bucket: "lfs", Key: "p/x", Digests: []string{admintest.DigestC}, DeletedAt: admintest.TrashLFS, Expires: admintest.TrashLFS.Add(7 * 24 * time.Hour), Principal: ""},
		{Bucket: "reg", Key: "manifests/app", Digests: []string{admintest.DigestA, admintest.DigestB}, DeletedAt: admintest.TrashOld, Expires: admintest.TrashOld.Add(7 * 24 * time.Hour), Principal: "alice", Expired: true},
		{Bucket: "reg", Key: "manifests/app", Digests: []string{admintest.DigestB, admintest.DigestC}, DeletedAt: admintest.TrashNew, Expires: admintest.TrashNew.Add(7 * 24 * time.Hour), Principal: "bob"},
	}
	for i := range want {
		got := list.Trash[i]
		if got.Bucket != want[i].Bucket || got.Key != want[i].Key || !reflect.DeepEqual(got.Digests, want[i].Digests) ||
			!got.DeletedAt.Equal(want[i].DeletedAt) || !got.Expires.Equal(want[i].Expires) || got.Principal != want[i].Principal || got.Expired != want[i].Expired {
			t.Errorf("record %d = %+v, want %+v", i, got, want[i])
		}
	}
	if !bytes.Contains(data, []byte(`"deleted_at": "`+admintest.TrashOld.Format(time.RFC3339Nano)+`"`)) || !bytes.Contains(data, []byte(`"principal": ""`)) {
		t.Errorf("deleted_at must carry every nanosecond, and every field be present: %s", data)
	}

	for _, tt := range []struct {
		query string
		n     int
		trunc bool
	}{
		{"?bucket=reg", 2, false},
		{"?bucket=reg&key=manifests/app", 2, false},
		{"?bucket=reg&key=manifests", 0, false}, // a key is not a prefix
		{"?bucket=lfs&key=p%2Fx", 1, false},
		{"?limit=1", 1, true},
		{"?bucket=reg&limit=2", 2, false},
	} {
		status, data := sendRaw(t, http.MethodGet, base+"/admin/v1/trash"+tt.query, "", nil)
		l := decodeAs[adminapi.TrashList](t, data)
		if status != http.StatusOK || len(l.Trash) != tt.n || l.Truncated != tt.trunc || l.Trash == nil {
			t.Errorf("%s: %d %s", tt.query, status, data)
		}
	}
	for _, q := range []string{"?key=manifests/app", "?limit=0", "?limit=1001", "?limit=x", "?prefix=m"} {
		status, data := sendRaw(t, http.MethodGet, base+"/admin/v1/trash"+q, "", nil)
		wantError(t, q, status, data, http.StatusBadRequest, adminapi.CodeBadRequest)
	}

	checkTrashRestore(t, st, base)
}

func checkTrashRestore(t *testing.T, st *etcdstore.Store, base string) {
	t.Helper()
	// Refusals write nothing.
	// rec reads the object's reference record; ModRev 0 when it has none.
	rec := func() etcdstore.Versioned[etcdstore.RefSource] {
		t.Helper()
		v, err := st.GetRefSource(t.Context(), "reg", "manifests/app")
		if err != nil && !errors.Is(err, etcdstore.ErrNotFound) {
			t.Fatal(err)
		}
		return v
	}
	newReq := map[string]any{"bucket": "reg", "key": "manifests/app", "deleted_at": admintest.TrashNew}
	for _, tt := range []struct {
		name        string
		contentType string
		body        any
		status      int
		code        string
	}{
		{"no deleted_at", jsonType, map[string]any{"bucket": "reg", "key": "manifests/app"}, 400, adminapi.CodeBadRequest},
		{"no key", jsonType, map[string]any{"bucket": "reg", "deleted_at": admintest.TrashNew}, 400, adminapi.CodeBadRequest},
		{"bad time", jsonType, `{"bucket": "reg", "key": "manifests/app", "deleted_at": "yesterday"}`, 400, adminapi.CodeBadRequest},
		{"unknown field", jsonType, `{"bucket": "reg", "key": "manifests/app", "deleted_at": "2030-01-01T00:00:00Z", "force": true}`, 400, adminapi.CodeBadRequest},
		{"no such record", jsonType, map[string]any{"bucket": "reg", "key": "manifests/app", "deleted_at": admintest.TrashNew.Add(time.Nanosecond)}, 404, adminapi.CodeNotFound},
		{"not JSON", "application/x-www-form-urlencoded", "bucket=reg", 415, adminapi.CodeUnsupportedMediaType},
	} {
		status, data := sendRaw(t, http.MethodPost, base+"/admin/v1/trash/restore", tt.contentType, tt.body)
		wantError(t, tt.name, status, data, tt.status, tt.code)
	}
	status, data := sendRaw(t, http.MethodGet, base+"/admin/v1/trash/restore", "", nil)
	wantError(t, "GET restore", status, data, http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed)

	// A write of the object in flight: 409, nothing restored.
	ctx := t.Context()
	if err := st.BeginRefWrite(ctx, "reg", "manifests/app", etcdstore.RefWrite{ID: "inflight", Digests: []string{admintest.DigestA}, At: admintest.DigestNow}); err != nil {
		t.Fatal(err)
	}
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/trash/restore", jsonType, newReq)
	wantError(t, "write in flight", status, data, http.StatusConflict, adminapi.CodeWriteInFlight)
	if err := st.EndRefWrite(ctx, "reg", "manifests/app", "inflight", etcdstore.WriteFailed, "", admintest.DigestNow); err != nil {
		t.Fatal(err)
	}
	before := rec()

	// A digest whose bytes are being deleted: 409, nothing restored.
	if _, err := st.Client().Put(ctx, st.Keys().Guard(admintest.DigestC), `{"v":1}`); err != nil {
		t.Fatal(err)
	}
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/trash/restore", jsonType, newReq)
	wantError(t, "guarded", status, data, http.StatusConflict, adminapi.CodeGuarded)
	if after := rec(); after.ModRev != before.ModRev {
		t.Errorf("a refused restore changed the record: %+v", after.Value)
	}
	if _, err := st.Client().Delete(ctx, st.Keys().Guard(admintest.DigestC)); err != nil {
		t.Fatal(err)
	}

	// The restore itself.
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/trash/restore", jsonType, newReq)
	ans := decodeAs[adminapi.Restored](t, data)
	if status != http.StatusOK || ans.Restored.Key != "manifests/app" || !ans.Restored.DeletedAt.Equal(admintest.TrashNew) ||
		!reflect.DeepEqual(ans.Restored.Digests, []string{admintest.DigestB, admintest.DigestC}) || ans.Restored.Expired || ans.Restored.Principal != "bob" {
		t.Fatalf("restore: %d %s", status, data)
	}
	after := rec().Value
	if !after.Restored || !reflect.DeepEqual(after.Digests, []string{admintest.DigestB, admintest.DigestC}) {
		t.Errorf("the references are not back: %+v", after)
	}
	for _, d := range []string{admintest.DigestB, admintest.DigestC} {
		if ok, err := st.Referenced(ctx, d, admintest.DigestNow.Add(365*24*time.Hour)); err != nil || !ok {
			t.Errorf("%s is not referenced after the restore (past every trash expiry): %t, %v", d, ok, err)
		}
	}
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/trash/restore", jsonType, newReq)
	wantError(t, "restored twice", status, data, http.StatusNotFound, adminapi.CodeNotFound)
	status, data = sendRaw(t, http.MethodGet, base+"/admin/v1/trash?bucket=reg", "", nil)
	if l := decodeAs[adminapi.TrashList](t, data); status != http.StatusOK || len(l.Trash) != 1 || !l.Trash[0].DeletedAt.Equal(admintest.TrashOld) {
		t.Errorf("after the restore the older record remains: %d %s", status, data)
	}

	// An expired record is still restorable while it exists, and says so.
	status, data = sendRaw(t, http.MethodPost, base+"/admin/v1/trash/restore", jsonType, map[string]any{"bucket": "reg", "key": "manifests/app", "deleted_at": admintest.TrashOld})
	if ans := decodeAs[adminapi.Restored](t, data); status != http.StatusOK || !ans.Restored.Expired {
		t.Errorf("expired restore: %d %s", status, data)
	}
	if got := rec().Value.Digests; !reflect.DeepEqual(got, []string{admintest.DigestA, admintest.DigestB, admintest.DigestC}) {
		t.Errorf("restores merge: %q", got)
	}
}

func TestDigestAPIWithoutStore(t *testing.T) {
	t.Parallel()
	base := newDigestServer(t, nil, "backup")
	for _, rt := range []struct{ method, path, body string }{
		{http.MethodGet, "/admin/v1/frontiers", ""},
		{http.MethodPost, "/admin/v1/frontiers/backup", `{"revision": 1}`},
		{http.MethodGet, "/admin/v1/trash", ""},
		{http.MethodPost, "/admin/v1/trash/restore", `{}`},
	} {
		status, data := sendRaw(t, rt.method, base+rt.path, "application/json", rt.body)
		wantError(t, rt.method+" "+rt.path, status, data, http.StatusServiceUnavailable, adminapi.CodeDigestsDisabled)
	}
}
