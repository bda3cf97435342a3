//go:build integration

package admin

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// Hostile names: an operator's browser renders whatever clients named
// their keys and uploads, and whatever a plane reported as its name.
const (
	hostileKey    = `<script>alert("key")</script>&amp;'`
	hostileUpload = `"><img src=x onerror=alert(1)>`
	hostilePlane  = `<i>"plane'&`
)

// statusEnv is a real embedded etcd with a reclaimer and the admin
// handler over it. The reclaimer runs no pass: its interval is a day and
// nobody triggers one.
type statusEnv struct {
	etcd   *etcdstore.Embedded
	store  *etcdstore.Store
	leader *reclaim.Reclaimer
	admin  *handler
	now    time.Time
}

// newStatusEnv starts the environment; with lead, the reclaimer
// campaigns and leads before it returns.
func newStatusEnv(t *testing.T, lead bool) *statusEnv {
	t.Helper()
	e, cli := etcdtest.Start(t)
	keys, err := etcdstore.NewKeys(etcdstore.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	env := &statusEnv{etcd: e, store: etcdstore.NewStore(cli, keys), now: admintest.T3.Add(time.Hour)}
	// No pass runs, so the backend is never called: nothing listens there.
	backend, err := backend.NewStatic("http://127.0.0.1:1", "us-east-1", "key", "secret")
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return env.now }
	svc, err := multipart.New(multipart.Config{Store: env.store, Backend: backend, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	env.leader, err = reclaim.New(reclaim.Config{
		Store: env.store, Sessions: svc, Backend: backend, ID: "gw-1@127.0.0.1:9001",
		Interval: 24 * time.Hour, ElectionTTL: 60 * time.Second, MaxDeleteFraction: 1,
		MaxDeleteUploadsFraction: 1, MaxMarkFraction: 1,
		Now: clock, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if lead {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			env.leader.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
		wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer wcancel()
		if _, err := env.leader.Elector().AwaitLeader(wctx); err != nil {
			t.Fatalf("the reclaimer did not win the election: %v", err)
		}
	}
	discard := slog.New(slog.DiscardHandler)
	env.admin = &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{store: env.store, log: discard},
		reclaim: reclaimAPI{r: env.leader, store: env.store, progress: NewProgressHub(), log: discard,
			info: ReclaimerInfo{ID: "gw-1@127.0.0.1:9001", Enabled: true}},
		digests: digestAPI{store: env.store, planes: []string{"nightly-backup", "dr-replica"}, now: clock, log: discard},
	}
	return env
}

// putReport stores a pass report where the reclaimer stores its own.
func (e *statusEnv) putReport(t *testing.T, rep reclaim.Report) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Client().Put(t.Context(), e.store.Keys().Pass(rep.Pass), string(b)); err != nil {
		t.Fatal(err)
	}
}

// seed writes sessions in several states (those of admintest.SeedSessions and
// more), three pass reports (ok, refused, stopped; the newest holds
// hostile names) and two frontiers.
func (e *statusEnv) seed(t *testing.T) {
	t.Helper()
	admintest.SeedSessions(t, e.store)
	for i, st := range []etcdstore.SessionState{etcdstore.StateActive, etcdstore.StateCompleting, etcdstore.StateCompleting} {
		s := etcdstore.Session{Bucket: "more", Key: hostileKey, UploadID: "u" + strconv.Itoa(i), Owner: "dave", Created: admintest.T0, LastActivity: admintest.T0}
		s.Transition(etcdstore.StateActive, admintest.T0, "gateway", "created")
		if st != etcdstore.StateActive {
			s.Transition(st, admintest.T1, "gateway", "complete")
		}
		if _, err := e.store.CreateSession(t.Context(), &s); err != nil {
			t.Fatal(err)
		}
	}
	count := func(s, p, b int64) reclaim.Count { return reclaim.Count{Sessions: s, Parts: p, Bytes: b} }
	e.putReport(t, reclaim.Report{
		Pass: 7, Term: 40, Started: admintest.T0, Finished: admintest.T0.Add(time.Second), Clock: admintest.T0,
		Uploads: reclaim.Uploads{Keep: count(2, 4, 4096), Mark: count(1, 3, 3<<20)},
		Acted:   reclaim.Acted{Marked: count(1, 3, 3<<20)},
		Digests: &digestsweep.Report{Pending: 5, Ready: 1, Deleted: 2, Bytes: 2048,
			Tombstones: map[etcdstore.TombstoneState]int64{etcdstore.TombstonePending: 99}},
	})
	e.putReport(t, reclaim.Report{
		Pass: 8, Term: 41, Started: admintest.T1, Finished: admintest.T1.Add(time.Second), Clock: admintest.T1,
		Refused: "the plan deletes 12 parts, above reclaim.max_delete (10)",
		Uploads: reclaim.Uploads{Delete: count(3, 12, 12<<20)},
	})
	// Pass 8's refusal paused the upload sweep.
	pause := etcdstore.Pause{Sweep: "uploads", Reason: "the plan deletes 12 parts, above <reclaim.max_delete> (10)", Pass: 8, Term: 41, At: admintest.T1}
	if _, err := e.store.Client().Do(t.Context(), e.store.Keys().PauseOp(pause)); err != nil {
		t.Fatal(err)
	}
	e.putReport(t, reclaim.Report{
		Pass: 9, Term: 41, Started: admintest.T2, Finished: admintest.T2.Add(1500 * time.Millisecond), Clock: admintest.T2,
		Stopped: `a recorded time is in the future: <b>"soon"</b>`,
		Uploads: reclaim.Uploads{Keep: count(3, 19, 99614720), Hold: count(2, 5, 15728640)},
		Acted:   reclaim.Acted{Deleted: count(1, 2, 2<<20)},
		Orphans: []reclaim.Orphan{
			{Bucket: "backups", Key: hostileKey, UploadID: hostileUpload, Initiated: admintest.T0, Parts: 3, Bytes: 15728640 - 1024},
			{Bucket: "backups", Key: "plain.iso", UploadID: "9~a1", Initiated: admintest.T1, Parts: 2, Bytes: 1024},
		},
		Stuck:  []reclaim.Stuck{{Bucket: "backups", Key: hostileKey, UploadID: "stuck-" + hostileUpload, Since: admintest.T1}},
		Totals: reclaim.ListTotals{Orphans: 2, Stuck: 1, Missing: 4},
		Digests: &digestsweep.Report{Pending: 3, Ready: 0, Deleted: 6, Bytes: 6 << 20, Kept: "inventory <refs> failed",
			Tombstones: map[etcdstore.TombstoneState]int64{etcdstore.TombstonePending: 3, etcdstore.TombstoneDeleted: 6, etcdstore.TombstoneSkipped: 1}},
	})
	for _, f := range []struct {
		plane string
		rev   int64
	}{{"nightly-backup", 5}, {hostilePlane, 2}} {
		if err := e.store.ReportFrontier(t.Context(), f.plane, f.rev, "job <x>", admintest.T0); err != nil {
			t.Fatal(err)
		}
	}
}

// revision is etcd's current revision.
func (e *statusEnv) revision(t *testing.T) int64 {
	t.Helper()
	resp, err := e.store.Client().Get(t.Context(), "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// metricTag finds the start tags that carry data-metric.
var metricTag = regexp.MustCompile(`<[a-z]+\s[^>]*data-metric="[^"]*"[^>]*>`)

// attrRe reads one double-quoted attribute of a start tag.
var attrRe = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)

// pageMetrics reads every data-metric of a page with its data-value,
// unescaped. A name seen twice fails the test: the names are the page's
// interface.
func pageMetrics(t *testing.T, page string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tag := range metricTag.FindAllString(page, -1) {
		attrs := map[string]string{}
		for _, m := range attrRe.FindAllStringSubmatch(tag, -1) {
			attrs[m[1]] = html.UnescapeString(m[2])
		}
		name := attrs["data-metric"]
		if name == "error" {
			out[name] += attrs["data-value"] + "\n"
			continue
		}
		if _, dup := out[name]; dup {
			t.Errorf("data-metric %q appears twice", name)
		}
		out[name] = attrs["data-value"]
	}
	return out
}

func getPage(t *testing.T, ctx context.Context, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header(), string(body)
}

func TestStatusPage(t *testing.T) {
	env := newStatusEnv(t, true)
	env.seed(t)
	rev := env.revision(t)
	h := testAdminHandler(env.admin)

	code, hdr, page := getPage(t, t.Context(), h, "/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", code, page)
	}
	if ct := hdr.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q allows more than inline style", csp)
	}
	if _, _, again := getPage(t, t.Context(), h, "/status"); !strings.Contains(again, `data-metric="sessions.total"`) {
		t.Errorf("/status is not the status page:\n%s", again)
	}

	got := pageMetrics(t, page)
	want := map[string]string{
		"leader.id": "gw-1@127.0.0.1:9001", "reclaimer.leading": "1", "reclaimer.enabled": "1",
		// Sessions: admintest.SeedSessions' four, and three more.
		"sessions.active": "2", "sessions.expired": "1", "sessions.completing": "2", "sessions.completed": "1",
		"sessions.aborting": "0", "sessions.aborted": "0", "sessions.cleanup_pending": "1", "sessions.total": "7",
		"sessions.revision": strconv.FormatInt(rev, 10),
		// Passes, newest first; each verdict with its parts and bytes.
		"pass.9.outcome": "stopped", "pass.9.reason": `a recorded time is in the future: <b>"soon"</b>`,
		"pass.9.term":                  "41",
		"pass.9.uploads.keep.sessions": "3", "pass.9.uploads.keep.parts": "19", "pass.9.uploads.keep.bytes": "99614720",
		"pass.9.uploads.hold.sessions": "2", "pass.9.uploads.hold.parts": "5", "pass.9.uploads.hold.bytes": "15728640",
		"pass.9.uploads.mark.parts": "0", "pass.9.uploads.delete.parts": "0",
		"pass.9.acted.deleted.sessions": "1", "pass.9.acted.deleted.parts": "2", "pass.9.acted.deleted.bytes": "2097152",
		"pass.9.digests.pending": "3", "pass.9.digests.ready": "0", "pass.9.digests.deleted": "6", "pass.9.digests.bytes": "6291456",
		"pass.9.digests.kept": "inventory <refs> failed",
		"pass.8.outcome":      "refused", "pass.8.reason": "the plan deletes 12 parts, above reclaim.max_delete (10)",
		"paused.uploads":                 "8",
		"pass.8.uploads.delete.sessions": "3", "pass.8.uploads.delete.parts": "12", "pass.8.uploads.delete.bytes": "12582912",
		"pass.7.outcome": "ok", "pass.7.uploads.mark.parts": "3", "pass.7.acted.marked.sessions": "1",
		"pass.7.digests.pending": "5", "pass.7.digests.ready": "1", "pass.7.digests.deleted": "2", "pass.7.digests.bytes": "2048",
		// The newest pass's lists.
		"orphans.total": "2", "orphans.parts": "5", "orphans.bytes": "15728640",
		"stuck.total": "1", "missing.total": "4",
		// Tombstones as the newest pass with a digest section left them.
		"tombstones.pass": "9", "tombstones.pending": "3", "tombstones.ready": "0", "tombstones.skipped": "1", "tombstones.deleted": "6",
		// Frontiers: configured planes first, then the others.
		"frontiers.revision":               strconv.FormatInt(rev, 10),
		"frontier.nightly-backup.revision": "5", "frontier.nightly-backup.lag": strconv.FormatInt(rev-5, 10),
		"frontier.dr-replica.revision": "0", "frontier.dr-replica.lag": strconv.FormatInt(rev, 10),
		"frontier." + hostilePlane + ".revision": "2", "frontier." + hostilePlane + ".lag": strconv.FormatInt(rev-2, 10),
	}
	term, _ := env.leader.Leader()
	want["leader.term"], want["reclaimer.term"] = strconv.FormatInt(term, 10), strconv.FormatInt(term, 10)
	for name, v := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("no data-metric %q on the page", name)
		} else if g != v {
			t.Errorf("%s = %q, want %q", name, g, v)
		}
	}
	if _, ok := got["error"]; ok {
		t.Errorf("the page shows errors: %s", got["error"])
	}
	// Counts show as they are; bytes in units, the exact number in data-value.
	for _, frag := range []string{
		`data-metric="sessions.total" data-value="7">7<`,
		`data-metric="pass.9.uploads.keep.bytes" data-value="99614720" title="99614720 bytes">95.0 MiB<`,
		"2030-05-06 07:02:01Z",
		"<strong>The uploads sweep is paused</strong> since pass 8 (term 41,",
		"above &lt;reclaim.max_delete&gt; (10)", "<code>sweepgate reclaim resume --uploads</code>",
	} {
		if !strings.Contains(page, frag) {
			t.Errorf("the page lacks %s", frag)
		}
	}
	// Orphans and stuck sessions are listed by name.
	for _, attr := range []string{`data-orphan="` + html.EscapeString(hostileUpload), `data-orphan="9~a1"`, `data-stuck="stuck-`} {
		if !strings.Contains(page, attr) {
			t.Errorf("the page lacks %s", attr)
		}
	}
}

// TestStatusPageEscapes checks that names clients and planes chose reach
// the page as text: html/template escapes them in text and in attributes.
func TestStatusPageEscapes(t *testing.T) {
	env := newStatusEnv(t, true)
	env.seed(t)
	_, _, page := getPage(t, t.Context(), testAdminHandler(env.admin), "/")
	for _, raw := range []string{hostileKey, hostileUpload, hostilePlane, "<script", "<img", "<i>", "<b>", "<refs>", "job <x>"} {
		if strings.Contains(page, raw) {
			t.Errorf("the page holds %q unescaped", raw)
		}
	}
	for _, escaped := range []string{
		"&lt;script&gt;alert(&#34;key&#34;)&lt;/script&gt;&amp;amp;&#39;", // the key, in text
		"&#34;&gt;&lt;img src=x onerror=alert(1)&gt;",                     // the upload id
		"&lt;i&gt;&#34;plane&#39;&amp;",                                   // the plane
	} {
		if !strings.Contains(page, escaped) {
			t.Errorf("the page lacks the escaped %q", escaped)
		}
	}
	if n := strings.Count(page, "<script"); n != 0 {
		t.Errorf("the page has %d script elements", n)
	}
}

// TestStatusPageEtcdDown stops etcd: the page still answers, at once
// with what it knows, saying what it could not read, with 503 so that
// nothing takes it for a healthy answer. (The reclaimer does not campaign:
// a leader whose etcd went away takes a lease's lifetime to stop.)
func TestStatusPageEtcdDown(t *testing.T) {
	env := newStatusEnv(t, false)
	env.seed(t)
	env.etcd.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	code, hdr, page := getPage(t, ctx, testAdminHandler(env.admin), "/")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("GET / with etcd down: %d, want 503\n%s", code, page)
	}
	if took := time.Since(start); took > statusPageTimeout {
		t.Errorf("the page took %v with etcd down", took)
	}
	if ct := hdr.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	got := pageMetrics(t, page)
	for _, what := range []string{"reading the reclaimer's status failed", "reading the pass reports failed", "counting the sessions failed", "reading the frontiers failed"} {
		if !strings.Contains(got["error"], what) {
			t.Errorf("the page does not say %q; errors:\n%s", what, got["error"])
		}
	}
	for _, absent := range []string{"sessions.total", "orphans.total", "frontiers.revision", "passes.count"} {
		if v, ok := got[absent]; ok {
			t.Errorf("with etcd down, the page shows %s = %q", absent, v)
		}
	}
	for _, says := range []string{"etcd could not be read", "The pass reports could not be read.", "The sessions could not be counted.", "The frontiers could not be read.", "status could not be read."} {
		if !strings.Contains(page, says) {
			t.Errorf("the page does not say %q", says)
		}
	}
}

// TestStatusPageSessionsOff: a gateway without sessions has nothing in
// etcd to show, and says why.
func TestStatusPageSessionsOff(t *testing.T) {
	a := &handler{registry: prometheus.NewRegistry(), draining: new(atomic.Bool),
		reclaim: reclaimAPI{info: ReclaimerInfo{ID: "gw", Off: "sessions.enabled is false"}}}
	h := testAdminHandler(a)
	code, _, page := getPage(t, t.Context(), h, "/")
	if code != http.StatusOK || !strings.Contains(pageMetrics(t, page)["off"], "sessions.enabled is false") {
		t.Fatalf("GET / with sessions off: %d\n%s", code, page)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodHead, "/status", http.StatusOK},
		{http.MethodGet, "/nothing-here", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), c.method, c.path, nil))
		if rec.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{99614720, "95.0 MiB"}, {5 << 30, "5.0 GiB"}, {1 << 62, "4.0 EiB"}, {-2048, "-2.0 KiB"},
	} {
		if got := humanBytes(c.n); got != c.want {
			t.Errorf("humanBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
