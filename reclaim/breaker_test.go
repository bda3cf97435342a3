//go:build integration

package reclaim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// logBuffer collects a reclaimer's log lines as JSON, for the audit lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// audits returns the audit lines of action.
func (b *logBuffer) audits(action string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(b.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "audit" && m["action"] == action {
			out = append(out, m)
		}
	}
	return out
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(b, nil)) }

// handOverTo makes the leader lose its term, whichever it is, and waits
// until next leads.
func (e *env) handOverTo(next *reclaim.Reclaimer) {
	e.T.Helper()
	e.RevokeLeader()
	ctx, cancel := context.WithTimeout(e.T.Context(), 30*time.Second)
	defer cancel()
	reclaimtest.WaitFor(e.T, "the next reclaimer to lead", func() bool {
		_, ok := next.Leader()
		return ok || ctx.Err() != nil
	})
}

// A refused plan pauses the upload sweep in etcd: the next pass, and the
// pass of a new leader whose settings let the same plan through, still
// mark and delete nothing, until a person resumes; the resume is audited
// and the pass after it acts.
func TestRefusedPlanStaysPaused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	cfgA := e.Config()
	cfgA.ID = "a"
	cfgA.MaxDeleteFraction = 0.1 // 5 of 27 parts is 18.5%
	a := e.Start(cfgA)
	e.marked(a)

	refused := e.MustPass(a)
	if refused.Refused == "" || refused.Paused {
		t.Fatalf("pass %d refused %q paused %v, want a fresh refusal", refused.Pass, refused.Refused, refused.Paused)
	}
	p, ok := e.Pause(reclaim.PauseUploads)
	if !ok || p.Pass != refused.Pass || p.Term != refused.Term || p.Reason != refused.Refused || p.At.IsZero() {
		t.Fatalf("pause = %+v (%v), want pass %d term %d with the refusal", p, ok, refused.Pass, refused.Term)
	}
	var compared reclaim.Breaker
	if err := json.Unmarshal(p.Compared, &compared); err != nil || compared != refused.Breaker {
		t.Errorf("pause compared %s (%v), want the refusal's breaker %+v", p.Compared, err, refused.Breaker)
	}
	again := e.MustPass(a)
	if !again.Paused || !reclaimtest.Contains(again.Refused, "paused since pass 2", "reclaim resume --uploads") {
		t.Errorf("next pass paused %v refused %q, want it paused by pass 2", again.Paused, again.Refused)
	}

	// A new leader whose ceilings let this plan through.
	var logs logBuffer
	reg := prometheus.NewRegistry()
	cfgB := e.Config()
	cfgB.ID, cfgB.Logger, cfgB.Metrics = "b", logs.logger(), reg
	cfgB.MaxDeleteFraction, cfgB.MaxDeleteUploadsFraction = 1, 1
	b := e.Run(cfgB)
	e.handOverTo(b)
	rep := e.MustPass(b)
	if !rep.Paused || rep.Breaker.MaxDeleteFraction != 1 || !reclaimtest.Contains(rep.Refused, "paused since pass 2") || strings.Contains(rep.Refused, "refused too") {
		t.Errorf("new leader's pass paused %v refused %q breaker %+v; want paused, its own plan within the ceilings", rep.Paused, rep.Refused, rep.Breaker)
	}
	if rep.Acted != (reclaim.Acted{}) || e.Backend.Aborts.Load() != 0 || e.parts(inv) != [4]int{12, 7, 5, 3} {
		t.Errorf("a paused sweep acted: %+v, %d aborts, parts %v", rep.Acted, e.Backend.Aborts.Load(), e.parts(inv))
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_paused", "sweep", "uploads"); got != 1 {
		t.Errorf("paused{uploads} = %v, want 1", got)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_breaker_refusals_total"); got != 0 {
		t.Errorf("breaker_refusals_total = %v, want 0: a paused pass is no new refusal", got)
	}
	st, err := b.Status(t.Context())
	if err != nil || len(st.Paused) != 1 || st.Paused[0].Sweep != "uploads" || st.Paused[0].Pass != refused.Pass {
		t.Errorf("status paused = %+v (%v), want the uploads pause", st.Paused, err)
	}

	res, err := b.Resume(t.Context(), "alice", reclaim.PauseUploads)
	if err != nil || len(res) != 1 || res[0].Lifted == nil || res[0].Lifted.Pass != refused.Pass {
		t.Fatalf("resume = %+v, %v; want the pause of pass %d lifted", res, err, refused.Pass)
	}
	if _, ok := e.Pause(reclaim.PauseUploads); ok {
		t.Error("the pause is still there after the resume")
	}
	lines := logs.audits("resume_sweep")
	if len(lines) != 1 || lines[0]["what"] != "uploads" || lines[0]["principal"] != "alice" || lines[0]["paused_pass"] != float64(refused.Pass) {
		t.Errorf("resume audit lines = %v, want one naming alice and pass %d", lines, refused.Pass)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_paused", "sweep", "uploads"); got != 0 {
		t.Errorf("paused{uploads} after resume = %v, want 0", got)
	}
	// Resuming again is a clear no-op.
	res, err = b.Resume(t.Context(), "alice")
	if err != nil || len(res) != 2 || res[0].Lifted != nil || res[1].Lifted != nil || len(logs.audits("resume_sweep")) != 1 {
		t.Errorf("second resume = %+v, %v; want nothing lifted and no audit line", res, err)
	}
	acted := e.MustPass(b)
	if acted.Refused != "" || acted.Acted.Deleted != count(1, 5) || e.partsOnMinIO(inv.bucket, inv.k3, inv.s3) != -1 {
		t.Errorf("pass after the resume refused %q deleted %+v; want S3 deleted", acted.Refused, acted.Acted.Deleted)
	}
}

// The breaker counts uploads, not only parts: an upload with no parts is
// not free.
func TestBreakerCountsUploadsWithoutParts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.Clock.Now()
	e.Bucket("empty")
	busy := e.Upload("empty", "busy", 2)
	e.session("empty", "busy", busy, etcdstore.StateActive, now.Add(-time.Hour), now.Add(-time.Minute))
	var idle []string
	for _, k := range []string{"idle-1", "idle-2"} {
		id := e.Upload("empty", k, 0)
		e.session("empty", k, id, etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-30*time.Hour))
		idle = append(idle, id)
	}
	cfg := e.Config()
	cfg.MaxMarkFraction = 1
	cfg.MaxDeleteUploads = 1
	r := e.Start(cfg)
	if one := e.MustPass(r); one.Acted.Marked != count(2, 0) {
		t.Fatalf("pass one marked %+v, want the two empty uploads", one.Acted.Marked)
	}
	e.Clock.Advance(13 * time.Hour)
	rep := e.MustPass(r)
	if !reclaimtest.Contains(rep.Refused, "deletes 2 of 3 stored uploads", "above max_delete_uploads", "max_delete_uploads is 1 uploads") {
		t.Errorf("refused = %q, want the uploads ceiling", rep.Refused)
	}
	if b := rep.Breaker; b.DeleteUploads != 2 || b.StoredUploads != 3 || b.DeleteParts != 0 || b.MaxDeleteUploads != 1 {
		t.Errorf("breaker = %+v", b)
	}
	for _, id := range idle {
		if st := e.getSession("empty", id).State; st != etcdstore.StateExpired || e.Backend.Aborts.Load() != 0 {
			t.Errorf("%s = %s after %d aborts, want expired and nothing aborted", id, st, e.Backend.Aborts.Load())
		}
	}
}

// Marks are limited on their own: a plan that marks too many uploads is
// refused before it marks any, and pauses the sweep.
func TestBreakerLimitsMarks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	cfg := e.Config()
	cfg.MaxMarkFraction = 0.2 // 1 of 4 uploads is 25%
	r := e.Start(cfg)
	rep := e.MustPass(r)
	if !reclaimtest.Contains(rep.Refused, "marks 1 of 4 stored uploads", "above max_mark_fraction") {
		t.Errorf("refused = %q, want the marks ceiling", rep.Refused)
	}
	if b := rep.Breaker; b.MarkUploads != 1 || b.StoredUploads != 4 || b.MaxMarkFraction != 0.2 {
		t.Errorf("breaker = %+v", b)
	}
	if rep.Acted != (reclaim.Acted{}) || e.getSession(inv.bucket, inv.s3).State != etcdstore.StateActive {
		t.Errorf("a refused plan acted: %+v, S3 %s", rep.Acted, e.getSession(inv.bucket, inv.s3).State)
	}
	if _, ok := e.Pause(reclaim.PauseUploads); !ok {
		t.Error("the refusal did not pause the upload sweep")
	}
}

// A pass interrupted after its plan passed the breaker is resumed by the
// next leader, which checks the pause and the breaker again, with its own
// settings, before it acts: stricter settings, or a pause, mean it acts on
// nothing.
func TestResumedPassChecksAgain(t *testing.T) {
	t.Parallel()
	for _, tt := range []string{"stricter settings", "paused meanwhile"} {
		t.Run(tt, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			now := e.Clock.Now()
			var idle [][2]string
			for _, bk := range []string{"bucket-a", "bucket-b"} {
				e.Bucket(bk)
				id := e.Upload(bk, "idle", 2)
				e.session(bk, "idle", id, etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-30*time.Hour))
				idle = append(idle, [2]string{bk, id})
				id = e.Upload(bk, "busy", 3)
				e.session(bk, "busy", id, etcdstore.StateActive, now.Add(-time.Hour), now.Add(-time.Minute))
			}
			cfgA := e.Config()
			cfgA.ID = "a"
			var once sync.Once
			cfgA.Fault = func(point string) {
				if point == reclaim.FaultPlanned {
					once.Do(e.RevokeLeader)
				}
			}
			a := e.Start(cfgA)
			cfgB := e.Config()
			cfgB.ID = "b"
			if tt == "stricter settings" {
				cfgB.MaxMark = 1 // the plan marks 2
			}
			b := e.Run(cfgB)
			if _, err := e.Trigger(a); !errors.Is(err, reclaim.ErrFenced) {
				t.Fatalf("interrupted pass error = %v, want ErrFenced", err)
			}
			if tt == "paused meanwhile" {
				op := e.Store.Keys().PauseOp(etcdstore.Pause{Sweep: reclaim.PauseUploads, Reason: "set by the test", Pass: 1, At: now})
				if _, err := e.Cli.Do(t.Context(), op); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if _, err := b.Elector().AwaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			rep := e.MustPass(b)
			if rep.Pass != 1 || rep.Resumed != 1 || rep.Refused == "" {
				t.Errorf("pass %d resumed %d times refused %q; want pass 1 resumed once and refused", rep.Pass, rep.Resumed, rep.Refused)
			}
			if rep.Acted != (reclaim.Acted{}) {
				t.Errorf("the resumed pass acted: %+v", rep.Acted)
			}
			for _, u := range idle {
				if st := e.getSession(u[0], u[1]).State; st != etcdstore.StateActive {
					t.Errorf("%s/%s = %s, want still active", u[0], u[1], st)
				}
			}
			if p, ok := e.Pause(reclaim.PauseUploads); !ok || tt == "stricter settings" && !reclaimtest.Contains(p.Reason, "above max_mark:") {
				t.Errorf("pause = %+v (%v), want the upload sweep paused", p, ok)
			}
		})
	}
}

// A refused digest plan pauses the digest sweep: a new leader whose
// ceilings let the plan through still deletes nothing (the tombstones are
// still judged), until a person resumes; then the next pass deletes.
func TestDigestPauseHolds(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 4)
	d.AgeBlobs()
	cfgA := d.Config()
	cfgA.ID = "a"
	cfgA.Digests.MaxDelete = 3
	a := d.Start(cfgA)
	d.DigestPass(a)
	refused := d.DigestPass(a)
	if !reclaimtest.Contains(refused.Refused, "4 of 10 stored blobs", "above max_delete:") || refused.Paused {
		t.Fatalf("refused = %q paused %v, want a fresh refusal", refused.Refused, refused.Paused)
	}
	if p, ok := d.Pause(reclaim.PauseDigests); !ok || p.Pass != 2 || p.Reason != refused.Refused {
		t.Fatalf("pause = %+v (%v), want pass 2 with the refusal", p, ok)
	}

	cfgB := d.Config()
	cfgB.ID, cfgB.Metrics = "b", nil
	b := d.Run(cfgB)
	d.env().handOverTo(b)
	rep := d.DigestPass(b)
	if !rep.Paused || rep.Deleted != 0 || !reclaimtest.Contains(rep.Refused, "digests sweep is paused since pass 2", "resume --digests") {
		t.Errorf("new leader's digest sweep paused %v deleted %d refused %q; want paused", rep.Paused, rep.Deleted, rep.Refused)
	}
	if rep.Ready != 4 || d.Be.Deletes.Load() != 0 {
		t.Errorf("paused sweep: %d ready, %d deletes; want the 4 judged ready and none deleted", rep.Ready, d.Be.Deletes.Load())
	}
	d.WantPresent("paused", true, append(refd, unref...)...)

	if _, err := b.Resume(t.Context(), "bob", reclaim.PauseDigests); err != nil {
		t.Fatal(err)
	}
	rep = d.DigestPass(b)
	if rep.Refused != "" || rep.Deleted != 4 {
		t.Errorf("after the resume: refused %q, deleted %d; want the 4 deleted", rep.Refused, rep.Deleted)
	}
	d.WantPresent("resumed", false, unref...)
	d.WantPresent("resumed", true, refd...)
}

// TestDigestBreaker refuses deletions above either ceiling: nothing is
// deleted, the tombstones stay ready, the refusal is reported and counted.
// (It stays beside the reclaimer's breaker tests: package digestsweep has
// a unit test of the same name.)
func TestDigestBreaker(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		max       int64
		frac      float64
		wantWhich string
	}{
		{"count", 3, 0.5, "above max_delete:"},
		{"fraction", 1000, 0.2, "above max_delete_fraction"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.PutBlobs("r", 6)
			d.PutManifest("m", refd...)
			unref := d.PutBlobs("u", 4)
			d.AgeBlobs()
			cfg := d.Config()
			cfg.Digests.MaxDelete, cfg.Digests.MaxDeleteFraction = tt.max, tt.frac
			r := d.Start(cfg)

			d.DigestPass(r)
			rep := d.DigestPass(r)
			if !reclaimtest.Contains(rep.Refused, "4 of 10 stored blobs", tt.wantWhich) || rep.Deleted != 0 {
				t.Errorf("refused = %q, deleted %d", rep.Refused, rep.Deleted)
			}
			if rep.Breaker != (digestsweep.Breaker{DeleteBlobs: 4, StoredBlobs: 10, MaxDelete: tt.max, MaxDeleteFraction: tt.frac, MaxMark: digestsweep.DefaultMaxMark, MaxMarkFraction: 1}) {
				t.Errorf("breaker = %+v", rep.Breaker)
			}
			if d.Be.Deletes.Load() != 0 || d.Count(d.Store.Keys().Guards()) != 0 {
				t.Errorf("a refused pass sent %d deletes, left %d guards", d.Be.Deletes.Load(), d.Count(d.Store.Keys().Guards()))
			}
			d.WantPresent("refused", true, append(refd, unref...)...)
			d.WantStates("refused", etcdstore.TombstoneReady, unref...)
			if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_digest_breaker_refusals_total"); got != 1 {
				t.Errorf("digest_breaker_refusals_total = %v, want 1", got)
			}
		})
	}
}
