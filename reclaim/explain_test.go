//go:build integration

package reclaim_test

import (
	"errors"
	"testing"
	"time"

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
