package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// explainEnv is a real MinIO and a real etcd with a leading reclaimer that
// sweeps uploads and the CAS bucket (one plane, "backup", gates deletes),
// and the admin API over it.
type explainEnv struct {
	t      *testing.T
	direct minio.Core
	store  *etcdstore.Store
	clock  *testClock
	r      *reclaim.Reclaimer
	cfg    reclaim.Config
	base   string
}

const (
	exBucket    = "uploads"
	exCAS       = "cas"
	exBlobs     = "blobs/sha256/"
	exManifests = "manifests/"
)

func newExplainEnv(t *testing.T) *explainEnv {
	t.Helper()
	e := &explainEnv{t: t, clock: &testClock{now: time.Now().UTC().Truncate(time.Second)}}
	m := harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.direct = minio.Core{Client: mc}
	backend, err := gateway.NewBackendClient(m.Endpoint, m.Region, m.AccessKey, m.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	e.store = newAPITestStore(t)
	svc, err := multipart.New(multipart.Config{Store: e.store, Backend: backend, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{exBucket, exCAS} {
		if err := e.direct.MakeBucket(t.Context(), b, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := cas.NewNamespace("blobs", exCAS, exBlobs, "", false)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", exCAS, exManifests, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = reclaim.Config{
		Store: e.store, Sessions: svc, Backend: backend, ID: "leader@test",
		Grace: 24 * time.Hour, DeleteAfter: 12 * time.Hour, StuckLimit: time.Hour,
		MaxDelete: 1000, MaxDeleteFraction: 1,
		Interval: 24 * time.Hour, ElectionTTL: 60 * time.Second,
		Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
		Digests: &reclaim.DigestsConfig{
			Layout:         &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}},
			PlacementGrace: 24 * time.Hour, Planes: []string{"backup"}, MaxDelete: 1000, MaxDeleteFraction: 1,
		},
	}
	if e.r, err = reclaim.New(e.cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if _, err := e.r.Elector().AwaitLeader(wctx); err != nil {
		t.Fatalf("the reclaimer did not win the election: %v", err)
	}
	e.base = e.serve(e.r)
	return e
}

// serve serves the real admin handler with r as its reclaimer (nil: none).
func (e *explainEnv) serve(r *reclaim.Reclaimer) string {
	e.t.Helper()
	a := &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{store: e.store, log: slog.New(slog.DiscardHandler)},
		reclaim:  reclaimAPI{r: r, store: e.store, info: ReclaimerInfo{ID: "leader@test", Enabled: true}, progress: NewProgressHub(), log: slog.New(slog.DiscardHandler)},
	}
	srv := httptest.NewServer(testAdminHandler(a))
	e.t.Cleanup(srv.Close)
	return srv.URL
}

// upload creates an upload of n parts directly on MinIO and, unless the
// state is "", its session, created 31 hours ago and last active at last.
func (e *explainEnv) upload(key string, n int, st etcdstore.SessionState, last time.Time) string {
	e.t.Helper()
	ctx := e.t.Context()
	id, err := e.direct.NewMultipartUpload(ctx, exBucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for p := 1; p <= n; p++ {
		if _, err := e.direct.PutObjectPart(ctx, exBucket, key, id, p, bytes.NewReader(bytes.Repeat([]byte{1}, testPartSize)), testPartSize, minio.PutObjectPartOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	if st != "" {
		e.session(key, id, st, last)
	}
	return id
}

func (e *explainEnv) session(key, id string, st etcdstore.SessionState, last time.Time) {
	e.t.Helper()
	created := e.clock.Now().Add(-31 * time.Hour)
	s := &etcdstore.Session{Bucket: exBucket, Key: key, UploadID: id, Owner: "alice", Created: created, LastActivity: last}
	s.Transition(etcdstore.StateActive, created, "gateway", "created")
	if st != etcdstore.StateActive {
		s.Transition(st, last, "gateway", "test")
	}
	if _, err := e.store.CreateSession(e.t.Context(), s); err != nil {
		e.t.Fatal(err)
	}
}

// blob stores the blob called name directly on MinIO and returns its
// digest and its modification time as the backend lists it.
func (e *explainEnv) blob(name string) (string, time.Time) {
	e.t.Helper()
	body := []byte("content of blob " + name)
	sum := sha256.Sum256(body)
	dg := "sha256:" + hex.EncodeToString(sum[:])
	key := exBlobs + hex.EncodeToString(sum[:])
	if _, err := e.direct.Client.PutObject(e.t.Context(), exCAS, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		e.t.Fatal(err)
	}
	var modified time.Time
	for o := range e.direct.Client.ListObjects(e.t.Context(), exCAS, minio.ListObjectsOptions{Prefix: key}) {
		if o.Err != nil {
			e.t.Fatal(o.Err)
		}
		if o.Key == key {
			modified = o.LastModified
		}
	}
	if modified.IsZero() {
		e.t.Fatalf("blob %s is not listed", key)
	}
	return dg, modified
}

// manifest writes a manifest naming digests the way the gateway does.
func (e *explainEnv) manifest(key string, digests ...string) {
	e.t.Helper()
	ctx := e.t.Context()
	now := e.clock.Now()
	if err := e.store.BeginRefWrite(ctx, exCAS, exManifests+key, etcdstore.RefWrite{ID: "w-" + key, Digests: digests, At: now}); err != nil {
		e.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"layers": digests})
	info, err := e.direct.Client.PutObject(ctx, exCAS, exManifests+key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.EndRefWrite(ctx, exCAS, exManifests+key, "w-"+key, etcdstore.WriteCommitted, info.ETag, now); err != nil {
		e.t.Fatal(err)
	}
}

// pass runs one pass on the leader.
func (e *explainEnv) pass() reclaim.Report {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	rep, err := e.r.Trigger(ctx)
	if err != nil {
		e.t.Fatalf("pass: %v (%+v)", err, rep)
	}
	return rep
}

// explainWorld is what the API and CLI tests explain: an idle upload, an
// orphan, a referenced blob and an unreferenced old blob whose tombstone
// waits for the backup plane after one pass.
type explainWorld struct {
	idle, orphan     string
	refd, unrefd     string
	tombstoneRequire int64
}

func (e *explainEnv) world() explainWorld {
	e.t.Helper()
	now := e.clock.Now()
	w := explainWorld{
		idle:   e.upload("idle/object", 2, etcdstore.StateActive, now.Add(-30*time.Hour)),
		orphan: e.upload("orphan/object", 3, "", time.Time{}),
	}
	var at time.Time
	w.refd, _ = e.blob("referenced")
	w.unrefd, at = e.blob("unreferenced")
	e.manifest("app/v1", w.refd)
	// Both blobs are old by the time the pass runs.
	e.clock.mu.Lock()
	e.clock.now = at.Add(25 * time.Hour).Truncate(time.Second)
	e.clock.mu.Unlock()
	rep := e.pass()
	if rep.Digests == nil || rep.Digests.NewPending != 1 {
		e.t.Fatalf("the pass did not tombstone the unreferenced blob: %+v", rep.Digests)
	}
	var tomb etcdstore.Tombstone
	resp, err := e.store.Client().Get(e.t.Context(), e.store.Keys().Tombstone(w.unrefd))
	if err != nil || len(resp.Kvs) != 1 || json.Unmarshal(resp.Kvs[0].Value, &tomb) != nil || tomb.State != etcdstore.TombstonePending {
		e.t.Fatalf("tombstone of the unreferenced blob: %v %+v", err, tomb)
	}
	w.tombstoneRequire = tomb.Frontier
	return w
}

func TestExplainAPI(t *testing.T) {
	t.Parallel()
	e := newExplainEnv(t)
	w := e.world()
	get := func(path string) (int, []byte) {
		t.Helper()
		return sendRaw(t, http.MethodGet, e.base+path, "", nil)
	}

	// The idle upload: the pass just marked it, so it is expired now and
	// kept until the mark has stood for delete_after.
	status, data := get("/admin/v1/explain/uploads/" + exBucket + "/" + url.PathEscape(w.idle))
	ex := decodeAs[adminapi.UploadExplanation](t, data)
	if status != http.StatusOK || ex.Verdict != "keep" || ex.Session == nil || ex.Session.State != "expired" || ex.Key != "idle/object" ||
		!ex.Backend.Present || ex.Backend.Parts != 2 || len(ex.History) != 2 || ex.History[1].Actor != "reclaimer" || ex.History[1].Term == 0 ||
		ex.LastPass == nil || ex.LastPass.Pass != 1 {
		t.Fatalf("idle upload: %d %s", status, data)
	}
	last := ex.Steps[len(ex.Steps)-1]
	if last.Rule != "expired" || !last.Matched || !strings.Contains(last.Detail, "deletable after 12h0m0s") {
		t.Errorf("idle upload decided by %+v", last)
	}
	// The field names are the API: every one present, snake_case.
	for _, field := range []string{`"verdict": "keep"`, `"reason": "marked expired`, `"steps": [`, `"rule": "within_grace"`, `"matched": false`,
		`"values": {`, `"delete_after": "12h0m0s"`, `"unchanged_since_mark": true`, `"mod_revision": `, `"history": [`, `"actor": "reclaimer"`,
		`"orphan": null`, `"last_pass": {`, `"notes": []`, `"policy": {`, `"backend": {`, `"initiated": null`, `"stuck": false`, `"dry_run": false`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("the upload explanation lacks %s:\n%s", field, data)
		}
	}

	// The orphan: held; its key found by listing, or named.
	for _, q := range []string{"", "?key=orphan%2Fobject"} {
		status, data = get("/admin/v1/explain/uploads/" + exBucket + "/" + url.PathEscape(w.orphan) + q)
		ex = decodeAs[adminapi.UploadExplanation](t, data)
		if status != http.StatusOK || ex.Verdict != "hold" || ex.Session != nil || ex.Key != "orphan/object" || ex.Backend.Parts != 3 ||
			!bytes.Contains(data, []byte(`"session": null`)) {
			t.Errorf("orphan%s: %d %s", q, status, data)
		}
	}

	// Path segments are escaped: an upload id with '/' and '+'.
	e.session("odd/object", "a/b+c", etcdstore.StateActive, e.clock.Now())
	status, data = get("/admin/v1/explain/uploads/" + exBucket + "/" + url.PathEscape("a/b+c"))
	if ex = decodeAs[adminapi.UploadExplanation](t, data); status != http.StatusOK || ex.UploadID != "a/b+c" || ex.Verdict != "absent" {
		t.Errorf("escaped upload id: %d %s", status, data)
	}

	// Nothing known, a bad parameter, another method.
	status, data = get("/admin/v1/explain/uploads/" + exBucket + "/no-such-upload")
	wantError(t, "unknown upload", status, data, http.StatusNotFound, adminapi.CodeNotFound)
	if !bytes.Contains(data, []byte(`nothing is known about upload \"no-such-upload\" in bucket \"uploads\"`)) {
		t.Errorf("unknown upload: %s", data)
	}
	status, data = get("/admin/v1/explain/uploads/" + exBucket + "/x?limit=3")
	wantError(t, "unknown parameter", status, data, http.StatusBadRequest, adminapi.CodeBadRequest)
	status, data = sendRaw(t, http.MethodPost, e.base+"/admin/v1/explain/uploads/"+exBucket+"/x", "application/json", "{}")
	wantError(t, "POST", status, data, http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed)

	checkDigestExplanations(t, e, w, get)
}

func checkDigestExplanations(t *testing.T, e *explainEnv, w explainWorld, get func(path string) (int, []byte)) {
	t.Helper()
	// The referenced blob: kept, naming the manifest.
	status, data := get("/admin/v1/explain/digests/" + w.refd)
	dx := decodeAs[adminapi.DigestExplanation](t, data)
	if status != http.StatusOK || dx.Verdict != "keep" || len(dx.References) != 1 || dx.References[0].Key != exManifests+"app/v1" ||
		!strings.Contains(dx.Reason, "cas/manifests/app/v1") || dx.Blob == nil || dx.Blob.Bucket != exCAS {
		t.Errorf("referenced blob: %d %s", status, data)
	}
	// The unreferenced one: pending, waiting for the backup plane.
	status, data = get("/admin/v1/explain/digests/" + w.unrefd)
	dx = decodeAs[adminapi.DigestExplanation](t, data)
	if status != http.StatusOK || dx.Verdict != "pending" || dx.Tombstone == nil || dx.Tombstone.State != "pending" ||
		dx.RequiredFrontier != w.tombstoneRequire || len(dx.Planes) != 1 || dx.Planes[0] != (adminapi.ExplainPlane{Plane: "backup"}) ||
		dx.Steps[len(dx.Steps)-1].Rule != "frontier_wait" || dx.NextPass != 2 {
		t.Errorf("pending blob: %d %s", status, data)
	}
	for _, field := range []string{`"verdict": "pending"`, `"tombstone": {`, `"state": "pending"`, `"frontier": `, `"ref_rev": `, `"attempts": 1`,
		`"planes": [`, `"plane": "backup"`, `"applied": false`, `"required_frontier": `, `"guard": null`, `"references": []`, `"trash": []`,
		`"placements": []`, `"shard": `, `"shard_ref_revision": `, `"reference_holds": 0`, `"placement_grace": "24h0m0s"`, `"copies": [`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("the digest explanation lacks %s:\n%s", field, data)
		}
	}

	// A malformed digest, one nothing is known about.
	status, data = get("/admin/v1/explain/digests/sha256:abc")
	wantError(t, "bad digest", status, data, http.StatusBadRequest, adminapi.CodeBadRequest)
	status, data = get("/admin/v1/explain/digests/sha256:" + strings.Repeat("0", 64))
	wantError(t, "unknown digest", status, data, http.StatusNotFound, adminapi.CodeNotFound)

	// A reclaimer without the digest sweep, and a gateway without a
	// reclaimer.
	cfg := e.cfg
	cfg.Digests, cfg.Metrics = nil, prometheus.NewRegistry()
	plain, err := reclaim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	status, data = sendRaw(t, http.MethodGet, e.serve(plain)+"/admin/v1/explain/digests/"+w.refd, "", nil)
	wantError(t, "digest sweep off", status, data, http.StatusServiceUnavailable, adminapi.CodeDigestSweepOff)
	status, data = sendRaw(t, http.MethodGet, e.serve(nil)+"/admin/v1/explain/uploads/"+exBucket+"/"+url.PathEscape(w.idle), "", nil)
	wantError(t, "no reclaimer", status, data, http.StatusServiceUnavailable, adminapi.CodeReclaimDisabled)
}
