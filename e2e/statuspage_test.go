//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// chromiumPath is Debian's chromium package, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// chromiumTimeout bounds one headless Chromium run.
const chromiumTimeout = 2 * time.Minute

// TestStatusPageInChromium loads the admin listener's status page in
// headless Chromium against the real binary with real state (an upload
// abandoned through the gateway and marked by a pass, an orphan made
// directly on MinIO, a registry layout whose unreferenced blob waits as a
// pending tombstone for a plane that never reported), and checks that
// every number the browser shows is the one the JSON API answers. The
// screenshot is kept as a test artifact, for a person to look at.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless Chromium is needed to test the status page, and %s is missing (%v): "+
			"install Debian's chromium package (as root: apt-get install -y --no-install-recommends chromium; .ci/run does)", chromiumPath, err)
	}
	bucket := harness.BucketName(t)
	e := harness.Start(t, harness.Options{Config: map[string]any{
		// An idle upload is marked after a second and then kept for an
		// hour, so that the page shows it expired.
		"reclaim": map[string]any{"grace": "1s", "delete_after": "1h", "interval": "1h"},
		"digests": map[string]any{
			"namespaces":      []string{bucket + "/blobs/sha256/"},
			"sources":         []string{bucket + "/manifests/"},
			"placement_grace": "1s",
			// dr-replica never reports: the unreferenced blob stays pending.
			"planes":              []string{"nightly-backup", "dr-replica"},
			"max_delete_fraction": 1,
			"max_mark_fraction":   1,
		},
	}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	awaitLeading(t, e.Gateway)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	ctx := t.Context()
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	idA := createUpload(t, sdk, bucket, "abandoned/a.bin")
	mustUploadPart(t, sdk, bucket, "abandoned/a.bin", idA, 1, smallPart())
	idO := createUpload(t, direct, bucket, "orphan/o.bin")
	mustUploadPart(t, direct, bucket, "orphan/o.bin", idO, 1, smallPart())
	blob := func(body string) (digest string) {
		digest, key := casBlobKey([]byte(body))
		if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		return digest
	}
	kept := blob("a layer a manifest names")
	blob("a layer nothing names")
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/app/v1"),
		Body: strings.NewReader(`{"layers":[{"digest":"` + kept + `"}]}`)}); err != nil {
		t.Fatal(err)
	}
	mustSweepgate(t, 0, admin, "frontier", "report", "--plane", "nightly-backup", "--revision", "1", "--by", "e2e")
	time.Sleep(1500 * time.Millisecond) // past the grace and the placement grace

	var marked bool
	eventually(t, 30*time.Second, func() (bool, string) {
		rep := runPass(t, admin)
		marked = marked || rep.Acted.Marked.Sessions == 1
		pending := int64(0)
		if rep.Digests != nil {
			pending = rep.Digests.Tombstones["pending"]
		}
		return marked && pending == 1, fmt.Sprintf("pass %d: marked %+v, digests %+v", rep.Pass, rep.Acted.Marked, rep.Digests)
	})
	// One more, which keeps what the others marked: the page lists passes.
	runPass(t, admin)

	// Read the API around the page: the numbers must agree, and etcd's
	// revision may move in between only by writes nobody here makes.
	before := apiSnapshot(t, admin)
	dom := runChromium(t, "--dump-dom", adminBrowserURL(t, admin)+"/")
	after := apiSnapshot(t, admin)
	got := domMetrics(t, dom)
	if errs, ok := got["error"]; ok {
		t.Fatalf("the page shows errors: %s", errs)
	}
	want := expectedMetrics(t, before, after, got, dom)

	// What this test made, as a person reads it.
	for name, v := range map[string]string{"orphans.total": "1", "sessions.expired": "1", "tombstones.pending": "1",
		"frontier.nightly-backup.revision": "1", "frontier.dr-replica.revision": "0"} {
		if want[name] != v {
			t.Errorf("the API says %s = %s; this test made %s", name, want[name], v)
		}
	}
	if !strings.Contains(dom, idO) {
		t.Errorf("the page does not show the orphan's upload id %s", idO)
	}

	for name, v := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("the page has no data-metric %q (the API says %s)", name, v)
		} else if g != v {
			t.Errorf("the page shows %s = %q, the API says %q", name, g, v)
		}
	}

	statusScreenshot(t, admin)
}

// expectedMetrics returns the data-metric values the status page must show,
// from the API's answers read just before and after the page (got, read
// from dom); they must agree with each other where they overlap.
func expectedMetrics(t *testing.T, before, after statusSnapshot, got map[string]string, dom string) map[string]string {
	t.Helper()
	want := map[string]string{}
	expect := func(name string, v any) { want[name] = fmt.Sprint(v) }

	st := after.Status
	expect("reclaimer.leading", 1)
	expect("reclaimer.term", st.Reclaimer.Term)
	if st.Reclaimer.Leader == nil {
		t.Fatalf("the API says nobody leads: %+v", st)
	}
	expect("leader.id", st.Reclaimer.Leader.ID)
	expect("leader.term", st.Reclaimer.Leader.Term)

	if len(after.Reports) == 0 || after.Reports[0].Pass != before.Reports[0].Pass {
		t.Fatalf("a pass ran while the page was read: %d, then %d", before.Reports[0].Pass, after.Reports[0].Pass)
	}
	for _, rep := range after.Reports {
		p := fmt.Sprintf("pass.%d", rep.Pass)
		expect(p+".term", rep.Term)
		outcome := "ok"
		if rep.Refused != "" {
			outcome = "refused"
		} else if rep.Stopped != "" {
			outcome = "stopped"
		}
		expect(p+".outcome", outcome)
		for verdict, c := range map[string]reclaim.Count{"keep": rep.Uploads.Keep, "mark": rep.Uploads.Mark,
			"delete": rep.Uploads.Delete, "hold": rep.Uploads.Hold, "acted.marked": rep.Acted.Marked, "acted.deleted": rep.Acted.Deleted} {
			if !strings.HasPrefix(verdict, "acted.") {
				verdict = "uploads." + verdict
			}
			expect(p+"."+verdict+".sessions", c.Sessions)
			expect(p+"."+verdict+".parts", c.Parts)
			expect(p+"."+verdict+".bytes", c.Bytes)
		}
		if d := rep.Digests; d != nil {
			expect(p+".digests.pending", d.Pending)
			expect(p+".digests.ready", d.Ready)
			expect(p+".digests.deleted", d.Deleted)
			expect(p+".digests.bytes", d.Bytes)
		}
	}
	shown := 0
	for name := range got {
		if strings.HasPrefix(name, "pass.") && strings.HasSuffix(name, ".outcome") {
			shown++
		}
	}
	if shown != len(after.Reports) {
		t.Errorf("the page shows %d passes, the API %d", shown, len(after.Reports))
	}

	last := after.Reports[0]
	expect("orphans.total", after.Orphans.Total)
	expect("orphans.parts", last.Uploads.Hold.Parts)
	expect("orphans.bytes", last.Uploads.Hold.Bytes)
	expect("stuck.total", last.Totals.Stuck)
	expect("missing.total", last.Totals.Missing)
	for _, o := range after.Orphans.Orphans {
		if !strings.Contains(dom, `data-orphan="`+o.UploadID+`"`) {
			t.Errorf("the page does not list orphan %s", o.UploadID)
		}
	}
	for state, n := range after.Sessions {
		expect("sessions."+state, n)
	}
	if last.Digests == nil {
		t.Fatalf("pass %d has no digest section", last.Pass)
	}
	expect("tombstones.pass", last.Pass)
	for _, state := range etcdstore.AllTombstoneStates {
		expect("tombstones."+string(state), last.Digests.Tombstones[state])
	}
	for _, pl := range after.Frontiers.Planes {
		expect("frontier."+pl.Plane+".revision", pl.Revision)
	}

	// Frontier lag is measured against etcd's revision when the page was
	// read: between the API's two answers, and the page's own sum.
	pageRev, err := strconv.ParseInt(got["frontiers.revision"], 10, 64)
	if err != nil || pageRev < before.Frontiers.Revision || pageRev > after.Frontiers.Revision {
		t.Errorf("the page reads etcd revision %q; the API read %d before and %d after", got["frontiers.revision"], before.Frontiers.Revision, after.Frontiers.Revision)
	}
	for _, pl := range after.Frontiers.Planes {
		expect("frontier."+pl.Plane+".lag", pageRev-pl.Revision)
	}
	return want
}

// statusScreenshot keeps a screenshot of the status page at admin, for a
// person, under SWEEPGATE_TEST_ARTIFACTS when that is set.
func statusScreenshot(t *testing.T, admin string) {
	t.Helper()
	dir := os.Getenv("SWEEPGATE_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, t.Name()+".png")
	runChromium(t, "--screenshot="+shot, "--window-size=1280,2000", adminBrowserURL(t, admin)+"/")
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10<<10 {
		t.Fatalf("the screenshot %s is no PNG of a page (%d bytes, %v)", shot, len(png), err)
	}
	t.Logf("status page screenshot: %s", shot)
}

// statusSnapshot is what the JSON API says about what the page shows.
type statusSnapshot struct {
	Status  reclaimStatus
	Reports []reclaim.Report
	Orphans struct {
		Orphans []reclaim.Orphan `json:"orphans"`
		Total   int64            `json:"total"`
	}
	// Sessions counts the listed sessions by state, every state present.
	Sessions  map[string]int64
	Frontiers struct {
		Revision int64 `json:"revision"`
		Planes   []struct {
			Plane    string `json:"plane"`
			Revision int64  `json:"revision"`
			Lag      int64  `json:"lag"`
		} `json:"planes"`
	}
}

// apiSnapshot reads the admin API's endpoints behind the status page.
func apiSnapshot(t *testing.T, admin string) statusSnapshot {
	t.Helper()
	var s statusSnapshot
	adminGet(t, admin+"/admin/v1/reclaim/status", &s.Status)
	var reps struct{ Reports []reclaim.Report }
	adminGet(t, admin+"/admin/v1/reclaim/reports?limit=10", &reps)
	s.Reports = reps.Reports
	adminGet(t, admin+"/admin/v1/reclaim/orphans", &s.Orphans)
	adminGet(t, admin+"/admin/v1/frontiers", &s.Frontiers)
	var list struct {
		Sessions []struct {
			State string `json:"state"`
		} `json:"sessions"`
		Truncated bool `json:"truncated"`
	}
	adminGet(t, admin+"/admin/v1/sessions?limit=1000", &list)
	if list.Truncated {
		t.Fatal("more than 1000 sessions")
	}
	s.Sessions = map[string]int64{"active": 0, "expired": 0, "completing": 0, "completed": 0,
		"aborting": 0, "aborted": 0, "cleanup_pending": 0, "total": int64(len(list.Sessions))}
	for _, sess := range list.Sessions {
		s.Sessions[sess.State]++
	}
	return s
}

// adminGet GETs an admin API document into out.
func adminGet(t *testing.T, u string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	authorizeAdmin(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", u, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v\n%s", u, err, body)
	}
}

// runChromium runs headless Chromium with args and returns what it prints.
// It talks to nothing but the URL it is given: no sync, no updates, no
// background requests, a profile of its own.
func runChromium(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), chromiumTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(),
	}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\nstderr (end):\n%s", strings.Join(args, " "), err, lastBytes(errOut.String(), 4000))
	}
	return out.String()
}

// lastBytes is the end of s, at most n bytes.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// metricStartTag finds the start tags that carry data-metric, and
// metricAttr one double-quoted attribute of such a tag (Chromium
// serializes every attribute so, with quotes and angle brackets escaped).
var (
	metricStartTag = regexp.MustCompile(`<[a-z0-9]+\s[^>]*data-metric="[^"]*"[^>]*>`)
	metricAttr     = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
)

// domMetrics reads every data-metric of a page with its data-value.
func domMetrics(t *testing.T, dom string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tag := range metricStartTag.FindAllString(dom, -1) {
		attrs := map[string]string{}
		for _, m := range metricAttr.FindAllStringSubmatch(tag, -1) {
			attrs[m[1]] = html.UnescapeString(m[2])
		}
		name := attrs["data-metric"]
		if _, dup := out[name]; dup && name != "error" {
			t.Errorf("data-metric %q appears twice on the page", name)
		}
		out[name] += attrs["data-value"]
	}
	if len(out) == 0 {
		t.Fatalf("the page has no data-metric at all:\n%s", lastBytes(dom, 4000))
	}
	return out
}
