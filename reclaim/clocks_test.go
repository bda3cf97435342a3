//go:build integration

package reclaim_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// jumpable is a reclaimer configuration whose wall clock is the world's
// plus an offset the test sets: a clock set wrong on the reclaimer's
// machine alone. Its monotonic clock is the world's: a jump does not move
// it.
func (e *env) jumpable(cfg reclaim.Config) (reclaim.Config, *atomic.Int64) {
	var jump atomic.Int64
	cfg.Now = func() time.Time { return e.Clock.Now().Add(time.Duration(jump.Load())) }
	return cfg, &jump
}

// publish publishes a gateway's clock, offset from the world's by off,
// until the returned stop is called (which removes it) or the test ends.
func (e *env) publish(id string, off time.Duration) (stop func()) {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := reclaim.PublishClock(ctx, reclaim.PublishConfig{
		Store: e.Store, ID: id, Refresh: time.Second,
		Now: func() time.Time { return e.Clock.Now().Add(off) },
	})
	stop = func() { cancel(); <-done }
	e.T.Cleanup(stop)
	e.awaitClock(id, off)
	return stop
}

// awaitClock waits until gateway id has published the world's clock plus
// off: after the test moves the clock, its next refresh.
func (e *env) awaitClock(id string, off time.Duration) {
	e.T.Helper()
	reclaimtest.WaitFor(e.T, "gateway "+id+" to publish its clock", func() bool {
		resp, err := e.Cli.Get(e.T.Context(), e.Store.Keys().Gateway(id))
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		var g etcdstore.GatewayClock
		return json.Unmarshal(resp.Kvs[0].Value, &g) == nil && g.At.Equal(e.Clock.Now().Add(off))
	})
}

// deletable is e's configuration with no fraction limits, so that a pass
// may mark and delete the one upload a test stores.
func (e *env) deletable() reclaim.Config {
	cfg := e.Config()
	cfg.MaxDeleteFraction, cfg.MaxDeleteUploadsFraction, cfg.MaxMarkFraction = 1, 1, 1
	return cfg
}

// idleMarked makes an upload idle past the grace and runs the pass that
// marks it; it returns the upload's id.
func (e *env) idleMarked(r *reclaim.Reclaimer) string {
	e.T.Helper()
	now := e.Clock.Now()
	e.Bucket("idle")
	id := e.Upload("idle", "idle/object", 2)
	e.session("idle", "idle/object", id, etcdstore.StateActive, now.Add(-31*time.Hour), now.Add(-30*time.Hour))
	if rep := e.MustPass(r); rep.Acted.Marked.Sessions != 1 {
		e.T.Fatalf("the first pass marked %+v, want the idle upload", rep.Acted)
	}
	return id
}

// wantStanding fails unless the marked upload id is still on MinIO with
// its session expired.
func (e *env) wantStanding(what, id string) {
	e.T.Helper()
	if n := e.partsOnMinIO("idle", "idle/object", id); n != 2 {
		e.T.Errorf("%s: the marked upload has %d parts on MinIO, want 2", what, n)
	}
	if s := e.getSession("idle", id); s.State != etcdstore.StateExpired {
		e.T.Errorf("%s: session %s, want expired", what, s.State)
	}
}

// wantClockStop runs a pass and fails unless it stopped on a clock skew
// naming clock, counted under label, without marking or deleting.
func (e *env) wantClockStop(r *reclaim.Reclaimer, reg *prometheus.Registry, clock, label string, stops float64) reclaim.Report {
	e.T.Helper()
	rep, err := e.Trigger(r)
	var cs *reclaim.ClockSkewError
	if !errors.As(err, &cs) || !errors.Is(err, reclaim.ErrClockSkew) || cs.Clock != clock {
		e.T.Fatalf("pass = %v, want a clock skew of %s (report %+v)", err, clock, rep)
	}
	if !reclaimtest.Contains(rep.Stopped, clock, "nothing marked or deleted") || rep.Acted != (reclaim.Acted{}) {
		e.T.Errorf("report stopped %q, acted %+v", rep.Stopped, rep.Acted)
	}
	if got := reclaimtest.Metric(e.T, reg, "sweepgate_reclaim_clock_skew_stops_total", "clock", label); got != stops {
		e.T.Errorf("clock_skew_stops_total{clock=%s} = %v, want %v", label, got, stops)
	}
	if e.Backend.Aborts.Load() != 0 {
		e.T.Errorf("%d aborts sent", e.Backend.Aborts.Load())
	}
	return rep
}

// TestClockJumpOfTheReclaimerStopsThePass jumps the reclaimer's clock 48
// hours forward between the pass that marks an upload and the next: the
// gateways and the backend keep the real time, so the pass stops on the
// clock check and deletes nothing, and once the clock is right again the
// mark still waits for delete_after.
func TestClockJumpOfTheReclaimerStopsThePass(t *testing.T) {
	t.Parallel()
	for _, withGateway := range []bool{true, false} {
		name, clock, label := "gateway and backend", "gateway gw-1", "gateway"
		if !withGateway {
			name, clock, label = "backend alone", "backend", "backend"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if withGateway {
				e.publish("gw-1", 0)
			}
			reg := prometheus.NewRegistry()
			cfg, jump := e.jumpable(e.deletable())
			cfg.Metrics = reg
			r := e.Start(cfg)
			id := e.idleMarked(r)

			e.Clock.Advance(time.Hour)
			if withGateway {
				e.awaitClock("gw-1", 0)
			}
			jump.Store(int64(48 * time.Hour))
			rep := e.wantClockStop(r, reg, clock, label, 1)
			if !reclaimtest.Contains(rep.Stopped, "48h0m0s ahead of") && !reclaimtest.Contains(rep.Stopped, "behind the reclaimer's") {
				t.Errorf("stopped %q does not say by how much", rep.Stopped)
			}
			e.wantStanding("after the jump", id)
			plan, err := r.Plan(t.Context())
			if err == nil || !reclaimtest.Contains(plan.Stopped, clock) {
				t.Errorf("a plan under the jumped clock = %v, stopped %q; want the same stop", err, plan.Stopped)
			}

			jump.Store(0)
			if rep := e.MustPass(r); rep.Acted.Deleted.Sessions != 0 {
				t.Errorf("the clock set right: deleted %+v, before delete_after passed", rep.Acted.Deleted)
			}
			e.wantStanding("clock set right", id)
		})
	}
}

// TestClockJumpOfEveryClockKeepsMarks jumps every clock 48 hours forward
// together (a single machine whose clock jumped: gateway, reclaimer and
// backend agree), so the checks pass: the elapsed clock keeps the mark
// standing until delete_after has really passed.
func TestClockJumpOfEveryClockKeepsMarks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("gw-1", 0)
	r := e.Start(e.deletable())
	id := e.idleMarked(r)

	e.Clock.Advance(time.Hour)
	e.Clock.Jump(48 * time.Hour)
	e.awaitClock("gw-1", 0)
	rep := e.MustPass(r)
	if rep.Stopped != "" || rep.Uploads.Delete.Sessions != 0 || rep.Acted.Deleted.Sessions != 0 {
		t.Errorf("after the jump: stopped %q, planned %+v, deleted %+v; want nothing deleted", rep.Stopped, rep.Uploads.Delete, rep.Acted.Deleted)
	}
	e.wantStanding("after the jump", id)
	ex, err := r.ExplainUpload(t.Context(), "idle", id, "")
	if err != nil {
		t.Fatal(err)
	}
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "marked expired 49h0m0s ago by the wall clock but only 1h0m0s ago by the reclaimer's elapsed clock") {
		t.Errorf("explanation after the jump: %s: %s", ex.Verdict, ex.Reason)
	}

	// delete_after (12h) really passes: now it goes.
	e.Clock.Advance(12 * time.Hour)
	e.awaitClock("gw-1", 0)
	if rep := e.MustPass(r); rep.Acted.Deleted.Sessions != 1 {
		t.Errorf("delete_after passed on both clocks: deleted %+v, want the upload", rep.Acted.Deleted)
	}
	if n := e.partsOnMinIO("idle", "idle/object", id); n != -1 {
		t.Errorf("the upload has %d parts left, want it gone", n)
	}
}

// TestClockOfANewLeaderCountsNothing hands the lead to another process
// between the mark and delete_after: the new leader's first pass adds no
// time to the elapsed clock, so the mark stands for longer, never shorter.
func TestClockOfANewLeaderCountsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.deletable()
	a := e.Start(cfg)
	id := e.idleMarked(a)

	e.Clock.Advance(13 * time.Hour)
	cfg.ID = "b"
	b := e.Run(cfg)
	e.RevokeLeader()
	reclaimtest.WaitFor(t, "b to lead", func() bool { _, ok := b.Leader(); return ok })
	if rep := e.MustPass(b); rep.Acted.Deleted.Sessions != 0 {
		t.Errorf("the new leader's first pass deleted %+v; its elapsed clock has measured nothing yet", rep.Acted.Deleted)
	}
	e.wantStanding("new leader, first pass", id)
	e.Clock.Advance(13 * time.Hour)
	if rep := e.MustPass(b); rep.Acted.Deleted.Sessions != 1 {
		t.Errorf("after 13h measured by the new leader: deleted %+v, want the upload", rep.Acted.Deleted)
	}
}

// TestClockOfAGatewayBehindStopsThePass publishes a gateway clock three
// days behind: a part it stamps a minute ago would look idle, so the pass
// stops; once that gateway is gone (its record removed on shutdown) the
// passes go on.
func TestClockOfAGatewayBehindStopsThePass(t *testing.T) {
	t.Parallel()
	// Days behind, and just past what a fresh record may lag (the skew and
	// the slack of its write and delivery).
	for _, off := range []time.Duration{-72 * time.Hour, -(5*time.Minute + 3*time.Second)} {
		t.Run(off.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.publish("gw-ok", 0)
			stop := e.publish("gw-late", off)
			reg := prometheus.NewRegistry()
			cfg := e.Config()
			cfg.Metrics = reg
			r := e.Start(cfg)
			inv := e.scenarioInventory()
			rep := e.wantClockStop(r, reg, "gateway gw-late", "gateway", 1)
			if !reclaimtest.Contains(rep.Stopped, "behind the reclaimer's") {
				t.Errorf("stopped %q, want it to say behind", rep.Stopped)
			}
			if got := e.parts(inv); got != [4]int{12, 7, 5, 3} {
				t.Errorf("parts on MinIO = %v, want nothing changed", got)
			}
			if s := e.getSession(inv.bucket, inv.s3); s.State != etcdstore.StateActive {
				t.Errorf("the idle session is %s, want it unmarked", s.State)
			}

			stop()
			if rep := e.MustPass(r); rep.Stopped != "" || rep.Acted.Marked.Sessions != 1 {
				t.Errorf("with the late gateway gone: stopped %q, marked %+v", rep.Stopped, rep.Acted.Marked)
			}
		})
	}
}

// TestClockOfAGatewayRecordOnlyOldDoesNotStop moves the world's clock past
// the skew allowance while a gateway's stored record still holds the time
// of its last refresh: the record looks behind only because it is old, so
// the pass waits for the gateway's next refresh, finds it in step, and
// goes on. A gateway whose fresh record is behind still stops it.
func TestClockOfAGatewayRecordOnlyOldDoesNotStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("gw-1", 0)
	reg := prometheus.NewRegistry()
	cfg := e.Config()
	cfg.Metrics = reg
	r := e.Start(cfg)
	inv := e.scenarioInventory()

	e.Clock.Advance(10 * time.Minute)
	if rep := e.MustPass(r); rep.Stopped != "" || rep.Acted.Marked.Sessions != 1 {
		t.Errorf("with an old but true record: stopped %q, marked %+v", rep.Stopped, rep.Acted.Marked)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_clock_skew_stops_total", "clock", "gateway"); got != 0 {
		t.Errorf("clock_skew_stops_total{clock=gateway} = %v, want 0", got)
	}
	if s := e.getSession(inv.bucket, inv.s3); s.State != etcdstore.StateExpired {
		t.Errorf("the idle session is %s, want it marked", s.State)
	}
}

// TestClockOfTheBackendOffStopsThePass makes the backend's Date three days
// off either way: the pass and a plan stop, nothing is marked.
func TestClockOfTheBackendOffStopsThePass(t *testing.T) {
	t.Parallel()
	for _, off := range []time.Duration{-72 * time.Hour, 72 * time.Hour} {
		t.Run(off.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			reg := prometheus.NewRegistry()
			cfg := e.Config()
			cfg.Metrics = reg
			r := e.Start(cfg)
			inv := e.scenarioInventory()
			e.SetBackendDate(func() time.Time { return e.Clock.Now().Add(off) })
			e.wantClockStop(r, reg, "backend", "backend", 1)
			if plan, err := r.Plan(t.Context()); !errors.Is(err, reclaim.ErrClockSkew) || !reclaimtest.Contains(plan.Stopped, "backend") {
				t.Errorf("plan = %v, stopped %q; want the same stop", err, plan.Stopped)
			}
			if s := e.getSession(inv.bucket, inv.s3); s.State != etcdstore.StateActive {
				t.Errorf("the idle session is %s, want it unmarked", s.State)
			}

			// Within the allowance (and Date's second) the pass goes on.
			e.SetBackendDate(func() time.Time { return e.Clock.Now().Add(4 * time.Minute) })
			if rep := e.MustPass(r); rep.Stopped != "" || rep.Acted.Marked.Sessions != 1 {
				t.Errorf("backend 4m ahead: stopped %q, marked %+v", rep.Stopped, rep.Acted.Marked)
			}
		})
	}
}

// TestClockAheadOfTheTrashWindowDeletesNothing trashes the only manifest
// naming two blobs, then moves the reclaimer's clock further ahead than the
// trash window: alone (the clock check stops the pass) and with every clock
// (the trash window has not passed on the elapsed clock). No blob that
// only the trash keeps is deleted; once the window has really passed, they
// go.
func TestClockAheadOfTheTrashWindowDeletesNothing(t *testing.T) {
	t.Parallel()
	const window = 168 * time.Hour
	for _, alone := range []bool{true, false} {
		name := "every clock"
		if alone {
			name = "the reclaimer alone"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			b := d.PutBlobs("b", 4)
			d.PutManifest("one", b[0], b[1])
			d.PutManifest("two", b[2], b[3])
			d.AgeBlobs()
			cfg, jump := d.env().jumpable(d.Config())
			cfg.Digests.MaxDeleteFraction = 1
			r := d.Start(cfg)
			d.DeleteManifest("one", d.Clock.Now().Add(window))
			if rep := d.DigestPass(r); rep.RetainedBy["trash"] != 2 {
				t.Fatalf("with the manifest in the trash: retained by %v, want 2 by the trash", rep.RetainedBy)
			}

			d.Clock.Advance(time.Hour)
			if alone {
				jump.Store(int64(window + time.Hour))
				for range 2 {
					rep, err := d.Trigger(r)
					if !errors.Is(err, reclaim.ErrClockSkew) || !reclaimtest.Contains(rep.Stopped, "backend") {
						t.Fatalf("pass with the reclaimer's clock ahead = %v (stopped %q), want a clock skew stop", err, rep.Stopped)
					}
				}
				jump.Store(0)
			} else {
				d.Clock.Jump(window + time.Hour)
				for i := range 2 {
					rep := d.DigestPass(r)
					reclaimtest.WantCounts(t, "every clock ahead", rep, 0, 0, 0, 0)
					if rep.RetainedBy["trash"] != 2 || rep.Pruned.Trash != 0 {
						t.Errorf("pass %d after the jump: retained by %v, pruned %d trash; want the trash to keep both", i, rep.RetainedBy, rep.Pruned.Trash)
					}
				}
			}
			d.WantPresent("after the jump", true, b...)
			d.WantStates("after the jump", "", b...)

			// The window really passes: the trash expires, the blobs go.
			d.Clock.Advance(window)
			one, two := d.DigestPass(r), d.DigestPass(r)
			reclaimtest.WantCounts(t, "window passed, pass one", one, 2, 0, 0, 0)
			reclaimtest.WantCounts(t, "window passed, pass two", two, 0, 2, 0, 2)
			d.WantPresent("window passed", false, b[0], b[1])
			d.WantPresent("window passed", true, b[2], b[3])
		})
	}
}
