//go:build integration

package admin

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

func TestExplainAPI(t *testing.T) {
	t.Parallel()
	e := newExplainEnv(t)
	w := e.World()
	get := func(path string) (int, []byte) {
		t.Helper()
		return sendRaw(t, http.MethodGet, e.Base+path, "", nil)
	}

	// The idle upload: the pass just marked it, so it is expired now and
	// kept until the mark has stood for delete_after.
	status, data := get("/admin/v1/explain/uploads/" + admintest.ExplainBucket + "/" + url.PathEscape(w.Idle))
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
		status, data = get("/admin/v1/explain/uploads/" + admintest.ExplainBucket + "/" + url.PathEscape(w.Orphan) + q)
		ex = decodeAs[adminapi.UploadExplanation](t, data)
		if status != http.StatusOK || ex.Verdict != "hold" || ex.Session != nil || ex.Key != "orphan/object" || ex.Backend.Parts != 3 ||
			!bytes.Contains(data, []byte(`"session": null`)) {
			t.Errorf("orphan%s: %d %s", q, status, data)
		}
	}

	// Path segments are escaped: an upload id with '/' and '+'.
	e.Session("odd/object", "a/b+c", etcdstore.StateActive, e.Clock.Now())
	status, data = get("/admin/v1/explain/uploads/" + admintest.ExplainBucket + "/" + url.PathEscape("a/b+c"))
	if ex = decodeAs[adminapi.UploadExplanation](t, data); status != http.StatusOK || ex.UploadID != "a/b+c" || ex.Verdict != "absent" {
		t.Errorf("escaped upload id: %d %s", status, data)
	}

	// Nothing known, a bad parameter, another method.
	status, data = get("/admin/v1/explain/uploads/" + admintest.ExplainBucket + "/no-such-upload")
	wantError(t, "unknown upload", status, data, http.StatusNotFound, adminapi.CodeNotFound)
	if !bytes.Contains(data, []byte(`nothing is known about upload \"no-such-upload\" in bucket \"uploads\"`)) {
		t.Errorf("unknown upload: %s", data)
	}
	status, data = get("/admin/v1/explain/uploads/" + admintest.ExplainBucket + "/x?limit=3")
	wantError(t, "unknown parameter", status, data, http.StatusBadRequest, adminapi.CodeBadRequest)
	status, data = sendRaw(t, http.MethodPost, e.Base+"/admin/v1/explain/uploads/"+admintest.ExplainBucket+"/x", "application/json", "{}")
	wantError(t, "POST", status, data, http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed)

	checkDigestExplanations(t, e, w, get)
}

func checkDigestExplanations(t *testing.T, e *admintest.ExplainEnv, w admintest.ExplainWorld, get func(path string) (int, []byte)) {
	t.Helper()
	// The referenced blob: kept, naming the manifest.
	status, data := get("/admin/v1/explain/digests/" + w.Refd)
	dx := decodeAs[adminapi.DigestExplanation](t, data)
	if status != http.StatusOK || dx.Verdict != "keep" || len(dx.References) != 1 || dx.References[0].Key != admintest.ExplainManifests+"app/v1" ||
		!strings.Contains(dx.Reason, "cas/manifests/app/v1") || dx.Blob == nil || dx.Blob.Bucket != admintest.ExplainCAS {
		t.Errorf("referenced blob: %d %s", status, data)
	}
	// The unreferenced one: pending, waiting for the backup plane.
	status, data = get("/admin/v1/explain/digests/" + w.Unrefd)
	dx = decodeAs[adminapi.DigestExplanation](t, data)
	if status != http.StatusOK || dx.Verdict != "pending" || dx.Tombstone == nil || dx.Tombstone.State != "pending" ||
		dx.RequiredFrontier != w.TombstoneRequire || len(dx.Planes) != 1 || dx.Planes[0] != (adminapi.ExplainPlane{Plane: "backup"}) ||
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
	cfg := e.Cfg
	cfg.Digests, cfg.Metrics = nil, prometheus.NewRegistry()
	plain, err := reclaim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	status, data = sendRaw(t, http.MethodGet, serveLeader(t, e.Store, plain)+"/admin/v1/explain/digests/"+w.Refd, "", nil)
	wantError(t, "digest sweep off", status, data, http.StatusServiceUnavailable, adminapi.CodeDigestSweepOff)
	status, data = sendRaw(t, http.MethodGet, serveLeader(t, e.Store, nil)+"/admin/v1/explain/uploads/"+admintest.ExplainBucket+"/"+url.PathEscape(w.Idle), "", nil)
	wantError(t, "no reclaimer", status, data, http.StatusServiceUnavailable, adminapi.CodeReclaimDisabled)
}
