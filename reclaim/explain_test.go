//go:build integration

package reclaim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// explainUpload explains an upload and checks that doing so wrote nothing.
func (e *env) explainUpload(r *reclaim.Reclaimer, bucket, id, key string) reclaim.UploadExplanation {
	e.T.Helper()
	before := e.Revision()
	ex, err := r.ExplainUpload(e.T.Context(), bucket, id, key)
	if err != nil {
		e.T.Fatalf("explain %s/%s: %v", bucket, id, err)
	}
	if after := e.Revision(); after != before {
		e.T.Errorf("explaining %s/%s moved etcd from revision %d to %d", bucket, id, before, after)
	}
	return ex
}

// explainDigest explains a digest and checks that doing so wrote nothing.
func (d *digestEnv) explainDigest(r *reclaim.Reclaimer, digest string) digestsweep.DigestExplanation {
	d.T.Helper()
	before := d.Revision()
	ex, err := r.ExplainDigest(d.T.Context(), digest)
	if err != nil {
		d.T.Fatalf("explain %s: %v", digest, err)
	}
	if after := d.Revision(); after != before {
		d.T.Errorf("explaining %s moved etcd from revision %d to %d", digest, before, after)
	}
	return ex
}

// at reports whether an explanation value is the time want.
func at(v any, want time.Time) bool {
	t, ok := v.(time.Time)
	return ok && t.Equal(want)
}

var uploadRules = []string{"not_on_backend", "no_session", "future_time", "completing", "within_grace", "active_idle", "expired"}

func TestExplainUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	cfg := e.Config()
	r := e.Explainer(cfg)
	now := e.Clock.Now()

	// S1: active ten minutes ago, within the grace period.
	ex := e.explainUpload(r, inv.bucket, inv.s1, "")
	reclaimtest.WantSteps(t, "S1", ex.Steps, uploadRules[:5])
	if ex.Verdict != "keep" || ex.Key != inv.k1 || !ex.Backend.Present || ex.Backend.Parts != 12 || ex.Backend.Bytes != 12*reclaimtest.PartSize ||
		ex.Session == nil || ex.Session.State != "active" || ex.Session.ModRevision == 0 || ex.Revision < ex.Session.ModRevision ||
		!ex.Now.Equal(now) || ex.Policy.Grace != "24h0m0s" || ex.Policy.DeleteAfter != "12h0m0s" || len(ex.History) != 1 || ex.Stuck {
		t.Errorf("S1 = %+v", ex)
	}
	v := reclaimtest.Step(t, ex.Steps, "within_grace").Values
	if v["idle"] != "10m0s" || v["grace"] != "24h0m0s" || !at(v["last_activity"], now.Add(-10*time.Minute)) ||
		!at(v["idle_past_grace_at"], now.Add(-10*time.Minute+24*time.Hour)) || !at(v["now"], now) {
		t.Errorf("S1 within_grace values = %v", v)
	}
	if !reclaimtest.Contains(ex.Reason, "within the grace period 24h0m0s") || ex.History[0].Actor != "gateway" || ex.History[0].To != "active" {
		t.Errorf("S1 reason %q, history %+v", ex.Reason, ex.History)
	}

	// S2: completing for 30 hours, past the stuck limit: kept, flagged.
	ex = e.explainUpload(r, inv.bucket, inv.s2, "")
	reclaimtest.WantSteps(t, "S2", ex.Steps, uploadRules[:4])
	v = reclaimtest.Step(t, ex.Steps, "completing").Values
	if ex.Verdict != "keep" || !ex.Stuck || !reclaimtest.Contains(ex.Reason, "past the stuck limit 1h0m0s", "needs a person") ||
		v["stuck"] != true || v["completing_for"] != "30h0m0s" || !at(v["state_since"], now.Add(-30*time.Hour)) {
		t.Errorf("S2 = %+v, completing values %v", ex, v)
	}

	// S3: active, idle 30 hours: marked.
	ex = e.explainUpload(r, inv.bucket, inv.s3, "")
	reclaimtest.WantSteps(t, "S3", ex.Steps, uploadRules[:6])
	v = reclaimtest.Step(t, ex.Steps, "active_idle").Values
	if ex.Verdict != "mark" || ex.Backend.Parts != 5 || !reclaimtest.Contains(ex.Reason, "idle for 30h0m0s, past the grace period 24h0m0s") ||
		v["idle"] != "30h0m0s" || v["state"] != etcdstore.StateActive {
		t.Errorf("S3 = %+v, active_idle values %v", ex, v)
	}
	if v["session_mod_revision"] != ex.Session.ModRevision || v["activity_mod_revision"] != int64(0) ||
		len(ex.Notes) != 2 || !reclaimtest.Contains(ex.Notes[0], "mod revision", "absent, and must stay absent") || !reclaimtest.Contains(ex.Notes[1], "a mark is not a delete") {
		t.Errorf("S3 compared revisions %v, notes %q", v, ex.Notes)
	}
	if d := reclaimtest.Step(t, ex.Steps, "within_grace").Detail; d != "idle for 30h0m0s, past the grace period 24h0m0s" {
		t.Errorf("S3 within_grace detail %q", d)
	}

	// S4: no session: held. Its key is found by listing the bucket.
	ex = e.explainUpload(r, inv.bucket, inv.s4, "")
	reclaimtest.WantSteps(t, "S4", ex.Steps, uploadRules[:2])
	if ex.Verdict != "hold" || ex.Session != nil || ex.Key != inv.k4 || ex.Backend.Parts != 3 || ex.Backend.Initiated == nil ||
		len(ex.History) != 0 || ex.Orphan != nil || len(ex.Notes) != 1 || !reclaimtest.Contains(ex.Notes[0], "reclaim orphans adopt") {
		t.Errorf("S4 = %+v", ex)
	}
	// With its key named, no listing is needed; the answer is the same.
	if ex2 := e.explainUpload(r, inv.bucket, inv.s4, inv.k4); ex2.Verdict != "hold" || ex2.Backend.Parts != 3 {
		t.Errorf("S4 with its key = %+v", ex2)
	}

	// A session whose upload the backend does not have: nothing to delete.
	e.session(inv.bucket, "gone/object", "gone-upload", etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-40*time.Hour))
	ex = e.explainUpload(r, inv.bucket, "gone-upload", "")
	reclaimtest.WantSteps(t, "gone", ex.Steps, uploadRules[:1])
	if ex.Verdict != "absent" || ex.Backend.Present || !reclaimtest.Contains(ex.Reason, "missing sessions") {
		t.Errorf("gone = %+v", ex)
	}

	// Nothing known: no session, no upload.
	for _, key := range []string{"", "some/key"} {
		if _, err := r.ExplainUpload(t.Context(), inv.bucket, "no-such-upload", key); !errors.Is(err, reclaim.ErrNotKnown) {
			t.Errorf("unknown upload (key %q): %v, want ErrNotKnown", key, err)
		}
	}
	if _, err := r.ExplainUpload(t.Context(), "no-such-bucket", "no-such-upload", ""); !errors.Is(err, reclaim.ErrNotKnown) {
		t.Errorf("unknown bucket: %v, want ErrNotKnown", err)
	}

	// A recorded time beyond the skew allowance keeps the upload, and the
	// step says so.
	id := e.Upload(inv.bucket, "future/object", 1)
	e.session(inv.bucket, "future/object", id, etcdstore.StateActive, now, now.Add(time.Hour))
	ex = e.explainUpload(r, inv.bucket, id, "")
	reclaimtest.WantSteps(t, "future", ex.Steps, uploadRules[:3])
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "in the future", "kept until that time has passed") {
		t.Errorf("future = %+v", ex)
	}
}

// TestExplainUploadMarkedThenDue follows an idle upload through a real
// pass: marked, kept until DeleteAfter has passed, then due for deletion,
// with the reclaimer's transition (actor, term, reason) in its history.
func TestExplainUploadMarkedThenDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bucket("idle")
	now := e.Clock.Now()
	id := e.Upload("idle", "idle/object", 2)
	e.session("idle", "idle/object", id, etcdstore.StateActive, now.Add(-31*time.Hour), now.Add(-30*time.Hour))
	r := e.Start(e.Config())
	term, _ := r.Leader()

	if ex := e.explainUpload(r, "idle", id, ""); ex.Verdict != "mark" {
		t.Fatalf("before the pass: %+v", ex)
	}
	rep := e.MustPass(r)
	if rep.Acted.Marked.Sessions != 1 {
		t.Fatalf("the pass marked %+v", rep.Acted)
	}

	// Just marked: kept until the mark has stood for DeleteAfter.
	ex := e.explainUpload(r, "idle", id, "")
	reclaimtest.WantSteps(t, "just marked", ex.Steps, uploadRules)
	v := reclaimtest.Step(t, ex.Steps, "expired").Values
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "marked expired 0s ago; deletable after 12h0m0s") ||
		!at(v["expired_at"], now) || !at(v["deletable_after"], now.Add(12*time.Hour)) || v["unchanged_since_mark"] != true || v["delete_after"] != "12h0m0s" {
		t.Errorf("just marked = %+v, expired values %v", ex, v)
	}
	if ex.LastPass == nil || ex.LastPass.Pass != rep.Pass || ex.LastPass.Term != term || ex.LastPass.Refused != "" {
		t.Errorf("last pass = %+v", ex.LastPass)
	}
	last := ex.History[len(ex.History)-1]
	if len(ex.History) != 2 || last.Actor != "reclaimer" || last.Term != term || last.From != "active" || last.To != "expired" ||
		!reclaimtest.Contains(last.Reason, "pass 1:", "idle for 30h0m0s") {
		t.Errorf("history = %+v", ex.History)
	}
	if ex.Session.ExpiredAt == nil || !ex.Session.ExpiredAt.Equal(now) || ex.Session.State != "expired" {
		t.Errorf("session = %+v", ex.Session)
	}

	// Thirteen hours on, unchanged: due for deletion.
	e.Clock.Advance(13 * time.Hour)
	ex = e.explainUpload(r, "idle", id, "")
	reclaimtest.WantSteps(t, "due", ex.Steps, uploadRules)
	if v := reclaimtest.Step(t, ex.Steps, "expired").Values; ex.Verdict != "delete" || v["marked_for"] != "13h0m0s" || v["marked_for_elapsed"] != "13h0m0s" ||
		!reclaimtest.Contains(ex.Reason, "marked expired 13h0m0s ago (13h0m0s by the elapsed clock), longer than 12h0m0s, and unchanged since") {
		t.Errorf("due = %+v, expired values %v", ex, v)
	}
	if e.partsOnMinIO("idle", "idle/object", id) != 2 {
		t.Error("explaining deleted parts")
	}
}

// blobRules are the rules of a stored blob up to the inventories.
var blobRules = []string{"not_stored", "reference_holds", "references", "trash", "placements", "uploads"}

// judged is blobRules followed by the judgement's rules up to rule.
func judged(rule string) []string {
	all := []string{"retained_live_tombstone", "retained", "tombstone_elsewhere", "no_live_tombstone", "waiting_this_pass",
		"confirmed_this_pass", "rebuild_wait", "frontier_applied", "frontier_wait"}
	for i, r := range all {
		if r == rule {
			return append(append([]string{}, blobRules...), all[:i+1]...)
		}
	}
	panic(rule)
}

func TestExplainDigests(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlob("referenced")
	unref := d.PutBlob("unreferenced")
	trashed := d.PutBlob("trashed")
	d.PutManifest("app/v1", refd)
	d.PutManifest("app/v2", trashed)
	d.AgeBlobs()
	now := d.Clock.Now()
	tr := d.DeleteManifest("app/v2", now.Add(2*time.Hour))
	r := d.Start(d.Config())

	// Referenced: kept, naming the manifest.
	ex := d.explainDigest(r, refd)
	reclaimtest.WantSteps(t, "referenced", ex.Steps, judged("retained"), "references")
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "retained by references", "cas/manifests/app/v1 (manifests)") ||
		ex.Blob == nil || ex.Blob.Key != reclaimtest.BlobKey(refd) || ex.Blob.Namespace != "blobs" || ex.Blob.Size != int64(len(reclaimtest.BlobContent("referenced"))) ||
		len(ex.References) != 1 || ex.References[0].Key != reclaimtest.ManifestPrefix+"app/v1" || ex.References[0].Source != "manifests" ||
		ex.Tombstone != nil || ex.Guard != nil || ex.NextPass != 1 || ex.Shard != refd[7:8] || ex.ShardRefRevision == 0 {
		t.Errorf("referenced = %+v", ex)
	}
	if v := reclaimtest.Step(t, ex.Steps, "placements").Values; v["young_blob"] != false || v["placement_grace"] != "24h0m0s" {
		t.Errorf("referenced placements values = %v", v)
	}

	// In the trash until it expires: kept, with the expiry.
	ex = d.explainDigest(r, trashed)
	reclaimtest.WantSteps(t, "trashed", ex.Steps, judged("retained"), "trash")
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "retained by trash", tr.Expires.Format(time.RFC3339)) ||
		len(ex.Trash) != 1 || !ex.Trash[0].Expires.Equal(tr.Expires) || ex.Trash[0].Expired || ex.Trash[0].Principal != "alice" ||
		!ex.Trash[0].DeletedAt.Equal(tr.DeletedAt) || len(ex.References) != 0 {
		t.Errorf("trashed = %+v", ex)
	}

	// Unreferenced and old: the next pass tombstones it.
	ex = d.explainDigest(r, unref)
	reclaimtest.WantSteps(t, "unreferenced", ex.Steps, judged("no_live_tombstone"))
	if ex.Verdict != "tombstone" || !reclaimtest.Contains(ex.Reason, "nothing retains it", "pending") {
		t.Errorf("unreferenced = %+v", ex)
	}
	if v := reclaimtest.Step(t, ex.Steps, "placements").Values; v["young_blob"] != false || v["placements"] != int64(0) {
		t.Errorf("unreferenced placements values = %v", v)
	}

	// One pass later it is pending; with no plane to wait for, the next
	// pass deletes it.
	one := d.DigestPass(r)
	reclaimtest.WantCounts(t, "pass one", one, 1, 0, 0, 0)
	ex = d.explainDigest(r, unref)
	reclaimtest.WantSteps(t, "pending", ex.Steps, judged("frontier_applied"))
	term, _ := r.Leader()
	if ex.Verdict != "delete" || ex.NextPass != 2 || ex.Tombstone == nil || ex.Tombstone.State != "pending" || ex.Tombstone.Pass != 1 ||
		ex.Tombstone.Term != term || ex.Tombstone.Attempts != 1 || ex.RequiredFrontier != ex.Tombstone.Frontier || len(ex.Planes) != 0 {
		t.Errorf("pending = %+v (tombstone %+v)", ex, ex.Tombstone)
	}

	// Its trash expired, the trashed blob is no longer retained.
	d.Clock.Advance(3 * time.Hour)
	ex = d.explainDigest(r, trashed)
	if ex.Verdict != "tombstone" || !ex.Trash[0].Expired ||
		reclaimtest.Step(t, ex.Steps, "trash").Matched || !reclaimtest.Contains(reclaimtest.Step(t, ex.Steps, "trash").Detail, "expired") {
		t.Errorf("trash expired = %+v", ex)
	}

	// Deleted by the second pass: why it went.
	two := d.DigestPass(r)
	if two.Deleted != 1 {
		t.Fatalf("pass two deleted %d", two.Deleted)
	}
	ex = d.explainDigest(r, unref)
	reclaimtest.WantSteps(t, "deleted", ex.Steps, []string{"not_stored"})
	if ex.Verdict != "deleted" || ex.Blob != nil || ex.Tombstone == nil || ex.Tombstone.State != "deleted" ||
		!reclaimtest.Contains(ex.Reason, "deleted by pass 2") {
		t.Errorf("deleted = %+v", ex)
	}

	// Nothing known, a malformed digest.
	if _, err := r.ExplainDigest(t.Context(), reclaimtest.DigestOf([]byte("never stored"))); !errors.Is(err, reclaim.ErrNotKnown) {
		t.Errorf("unknown digest: %v", err)
	}
	if _, err := r.ExplainDigest(t.Context(), "sha256:abc"); !errors.Is(err, digestsweep.ErrBadDigest) {
		t.Errorf("bad digest: %v", err)
	}
	// Without the digest sweep there is nothing to judge blobs by.
	if _, err := d.Explainer(d.Env.Config()).ExplainDigest(t.Context(), refd); !errors.Is(err, reclaim.ErrDigestSweepOff) {
		t.Errorf("digest sweep off: %v", err)
	}
}

// TestExplainDigestPlanes explains a pending tombstone that waits for a
// plane, and the young blob the placement grace keeps.
func TestExplainDigestPlanes(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	// The young blob must be listed as stored later than the old one, to
	// the millisecond the backend keeps; the clock stands between them.
	old := d.PutBlob("old")
	oldAt := d.Modified()[reclaimtest.BlobKey(old)]
	var young string
	for i := 0; young == "" || !d.Modified()[reclaimtest.BlobKey(young)].After(oldAt); i++ {
		if i == 100 {
			t.Fatal("the young blob is not listed as newer than the old one")
		}
		young = d.PutBlob(fmt.Sprint("young", i))
	}
	d.Clock.Set(oldAt.Add(reclaimtest.PlacementGrace + d.Modified()[reclaimtest.BlobKey(young)].Sub(oldAt)/2))
	cfg := d.Config()
	cfg.Digests.Planes = []string{"backup", "replica"}
	r := d.Start(cfg)

	ex := d.explainDigest(r, young)
	reclaimtest.WantSteps(t, "young", ex.Steps, judged("retained"), "placements")
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "retained by placements", "within the placement grace 24h0m0s") {
		t.Errorf("young = %+v", ex)
	}

	d.DigestPass(r)
	tomb, _, ok := d.Tombstone(old)
	if !ok || tomb.State != etcdstore.TombstonePending {
		t.Fatalf("tombstone after a pass: %+v", tomb)
	}
	if err := d.Store.ReportFrontier(t.Context(), "backup", tomb.Frontier, "test", d.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	ex = d.explainDigest(r, old)
	reclaimtest.WantSteps(t, "waiting", ex.Steps, judged("frontier_wait"))
	want := []digestsweep.ExplainPlane{{Plane: "backup", Revision: tomb.Frontier, Applied: true}, {Plane: "replica", Revision: 0, Applied: false}}
	if ex.Verdict != "pending" || ex.RequiredFrontier != tomb.Frontier || len(ex.Planes) != 2 || ex.Planes[0] != want[0] || ex.Planes[1] != want[1] ||
		!reclaimtest.Contains(ex.Reason, "pending until every plane has applied revision", "; not there yet: replica (at 0)") || reclaimtest.Contains(ex.Reason, "backup (") {
		t.Errorf("waiting = %+v", ex)
	}
	if v := reclaimtest.Step(t, ex.Steps, "frontier_wait").Values; v["required_frontier"] != tomb.Frontier || v["tombstone"] != etcdstore.TombstonePending {
		t.Errorf("frontier_wait values = %v", v)
	}

	// The replica catches up: the next pass deletes it.
	if err := d.Store.ReportFrontier(t.Context(), "replica", d.Revision(), "test", d.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	ex = d.explainDigest(r, old)
	if ex.Verdict != "delete" || !ex.Planes[0].Applied || !ex.Planes[1].Applied {
		t.Errorf("caught up = %+v", ex)
	}

	// A guard armed by hand (as a cut-short collector leaves it) is told.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := d.Cli.Put(ctx, d.Store.Keys().Guard(old), etcdstore.MarshalRecord(etcdstore.Guard{Digest: old, Bucket: reclaimtest.CASBucket, Key: reclaimtest.BlobKey(old), Term: 7, Pass: 3})); err != nil {
		t.Fatal(err)
	}
	ex = d.explainDigest(r, old)
	if ex.Guard == nil || ex.Guard.Term != 7 || ex.Guard.Pass != 3 || len(ex.Notes) == 0 || !reclaimtest.Contains(ex.Notes[0], "guard is armed (term 7, pass 3") {
		t.Errorf("guarded = %+v", ex)
	}
}
