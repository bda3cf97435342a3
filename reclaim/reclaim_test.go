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
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// TestScenarioInventory runs the reclaimer's acceptance scenario against real
// MinIO and etcd: pass one marks S3 and holds S4; pass two deletes exactly
// S3's five parts, unless a part was sent to S3 in between.
func TestScenarioInventory(t *testing.T) {
	t.Parallel()
	for _, variant := range []string{"idle", "activity between passes"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			inv := e.scenarioInventory()
			reg := prometheus.NewRegistry()
			cfg := e.Config()
			cfg.Metrics = reg
			r := e.Start(cfg)
			term, _ := r.Leader()

			one := e.MustPass(r)
			wantScenarioPassOne(t, e, inv, one, term)

			e.Clock.Advance(time.Hour)
			if variant == "activity between passes" {
				e.uploadPart(inv.bucket, inv.k3, inv.s3, 5)
				if st := e.getSession(inv.bucket, inv.s3).State; st != etcdstore.StateActive {
					t.Fatalf("S3 after a part = %s, want active again", st)
				}
			}
			e.Clock.Advance(12 * time.Hour)

			two := e.MustPass(r)
			if variant == "idle" {
				wantScenarioS3Deleted(t, e, inv, reg, two, term)
			} else {
				// A kept upload with part records counts those: S3's part
				// through the gateway, not the four made around it.
				wantUploads(t, two.Uploads, count(3, 20), count(0, 0), count(0, 0), count(1, 3))
				if two.Acted != (reclaim.Acted{}) {
					t.Errorf("pass two acted %+v, want nothing", two.Acted)
				}
				if got := e.parts(inv); got != [4]int{12, 7, 5, 3} {
					t.Errorf("parts on MinIO after pass two = %v, want all 27", got)
				}
			}
			if e.Backend.Aborts.Load() > 1 {
				t.Errorf("%d backend aborts, want at most one", e.Backend.Aborts.Load())
			}
			wantScenarioMetrics(t, reg, term)
			wantScenarioReportsStored(t, e)
		})
	}
}

// wantScenarioPassOne checks pass one over the scenario's inventory: S3 marked,
// S2 stuck, S4 held as an orphan, every part still on MinIO.
func wantScenarioPassOne(t *testing.T, e *env, inv inventory, one reclaim.Report, term int64) {
	t.Helper()
	wantUploads(t, one.Uploads, count(2, 19), count(1, 5), count(0, 0), count(1, 3))
	if one.Acted.Marked != count(1, 5) || one.Acted.Deleted != (reclaim.Count{}) {
		t.Errorf("pass one acted %+v, want 5 parts marked, none deleted", one.Acted)
	}
	if len(one.Stuck) != 1 || one.Stuck[0].UploadID != inv.s2 {
		t.Errorf("stuck = %+v, want S2 only (report %+v)", one.Stuck, one)
	}
	if len(one.Orphans) != 1 || one.Orphans[0].UploadID != inv.s4 || one.Orphans[0].Parts != 3 || one.Orphans[0].Bytes != 3*reclaimtest.PartSize {
		t.Errorf("orphans = %+v, want S4 with 3 parts", one.Orphans)
	}
	if one.Pass != 1 || one.Term != term || one.DryRun || one.Refused != "" || one.Stopped != "" {
		t.Errorf("pass one header = pass %d term %d (leader %d) dry %v refused %q stopped %q", one.Pass, one.Term, term, one.DryRun, one.Refused, one.Stopped)
	}
	s3 := e.getSession(inv.bucket, inv.s3)
	last := s3.History[len(s3.History)-1]
	if s3.State != etcdstore.StateExpired || s3.ExpiredAt == nil || !s3.ExpiredAt.Equal(e.Clock.Now()) || last.Term != term || last.Actor != "reclaimer" {
		t.Errorf("S3 after pass one: state %s expired-at %v, last transition %+v", s3.State, s3.ExpiredAt, last)
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} {
		t.Fatalf("parts on MinIO after pass one = %v, want all 27", got)
	}
}

// wantScenarioS3Deleted checks pass two over an idle inventory: exactly S3's
// five parts deleted, under the reclaimer's term.
func wantScenarioS3Deleted(t *testing.T, e *env, inv inventory, reg *prometheus.Registry, two reclaim.Report, term int64) {
	t.Helper()
	wantUploads(t, two.Uploads, count(2, 19), count(0, 0), count(1, 5), count(1, 3))
	if two.Acted.Deleted != count(1, 5) || two.Acted.Marked != (reclaim.Count{}) {
		t.Errorf("pass two acted %+v, want exactly S3's 5 parts deleted", two.Acted)
	}
	if got := e.parts(inv); got != [4]int{12, 7, -1, 3} {
		t.Errorf("parts on MinIO after pass two = %v, want S3 gone (NoSuchUpload) and the rest intact", got)
	}
	s3 := e.getSession(inv.bucket, inv.s3)
	if s3.State != etcdstore.StateAborted || s3.Uncertain != "" {
		t.Errorf("S3 after pass two: %s (uncertain %q), want aborted", s3.State, s3.Uncertain)
	}
	for _, tr := range s3.History[len(s3.History)-2:] {
		if tr.Term != term || tr.Actor != "reclaimer" {
			t.Errorf("transition %+v does not record the reclaimer's term %d", tr, term)
		}
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_deleted_parts_total", "outcome", "aborted"); got != 5 {
		t.Errorf("deleted_parts_total{aborted} = %v, want 5", got)
	}
}

// wantScenarioMetrics checks the metrics after the two passes.
func wantScenarioMetrics(t *testing.T, reg *prometheus.Registry, term int64) {
	t.Helper()
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_passes_total", "result", "ok"); got != 2 {
		t.Errorf("passes_total{ok} = %v, want 2", got)
	}
	if reclaimtest.Metric(t, reg, "sweepgate_reclaim_leading") != 1 || reclaimtest.Metric(t, reg, "sweepgate_reclaim_term") != float64(term) {
		t.Error("leading/term metrics do not show this process leading")
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_orphans_held"); got != 1 {
		t.Errorf("orphans_held = %v, want 1", got)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_stuck_sessions"); got != 1 {
		t.Errorf("stuck_sessions = %v, want 1", got)
	}
}

// wantScenarioReportsStored checks that the reports are in etcd, newest
// first, in the documented shape, and that no plan chunk is left.
func wantScenarioReportsStored(t *testing.T, e *env) {
	t.Helper()
	reports, err := reclaim.Reports(t.Context(), e.Store, 10)
	if err != nil || len(reports) != 2 || reports[0].Pass != 2 || reports[1].Pass != 1 {
		t.Fatalf("stored reports = %d (%v)", len(reports), err)
	}
	resp, err := e.Cli.Get(t.Context(), e.Store.Keys().Pass(2))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(err)
	}
	var shape map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &shape); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"pass", "term", "dry_run", "started", "finished", "refused", "uploads", "stuck", "orphans"} {
		if _, ok := shape[field]; !ok {
			t.Errorf("stored report lacks %q", field)
		}
	}
	if left, _ := e.Cli.Get(t.Context(), e.Store.Keys().Reclaim()+"plans/", clientv3.WithPrefix(), clientv3.WithCountOnly()); left.Count != 0 {
		t.Errorf("%d plan chunks left after the passes", left.Count)
	}
}

// marked runs pass one of the scenario's inventory and moves the clock past
// DeleteAfter, so that the next pass would delete S3.
func (e *env) marked(r *reclaim.Reclaimer) {
	e.T.Helper()
	one := e.MustPass(r)
	if one.Acted.Marked != count(1, 5) {
		e.T.Fatalf("pass one marked %+v, want S3's 5 parts", one.Acted.Marked)
	}
	e.Clock.Advance(13 * time.Hour)
}

func TestBreakerRefusesAboveTheFraction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	reg := prometheus.NewRegistry()
	cfg := e.Config()
	cfg.Metrics = reg
	cfg.MaxDeleteFraction = 0.1 // 5 of 27 parts is 18.5%
	r := e.Start(cfg)
	e.marked(r)

	rep := e.MustPass(r)
	if !reclaimtest.Contains(rep.Refused, "5", "27", "max_delete_fraction", "0.1", "max_delete is 1000") {
		t.Errorf("refused = %q, want both limits and both numbers", rep.Refused)
	}
	if rep.Breaker != (reclaim.Breaker{DeleteParts: 5, StoredParts: 27, MaxDelete: 1000, MaxDeleteFraction: 0.1,
		DeleteUploads: 1, StoredUploads: 4, MaxDeleteUploads: reclaim.DefaultMaxDeleteUploads, MaxDeleteUploadsFraction: 0.5,
		MaxMark: reclaim.DefaultMaxMark, MaxMarkFraction: 1}) {
		t.Errorf("breaker = %+v", rep.Breaker)
	}
	if rep.Acted != (reclaim.Acted{}) || e.Backend.Aborts.Load() != 0 {
		t.Errorf("a refused pass acted: %+v, %d aborts", rep.Acted, e.Backend.Aborts.Load())
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} {
		t.Errorf("parts on MinIO = %v, want all 27", got)
	}
	if st := e.getSession(inv.bucket, inv.s3).State; st != etcdstore.StateExpired {
		t.Errorf("S3 = %s, want still expired", st)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_breaker_refusals_total"); got != 1 {
		t.Errorf("breaker_refusals_total = %v, want 1", got)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_passes_total", "result", "refused"); got != 1 {
		t.Errorf("passes_total{refused} = %v, want 1", got)
	}
	last, ok, err := reclaim.LastReport(t.Context(), e.Store)
	if err != nil || !ok || last.Refused != rep.Refused {
		t.Errorf("stored report refused = %q (%v), want the refusal", last.Refused, err)
	}
}

func TestBreakerRefusesAboveTheCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	cfg := e.Config()
	cfg.MaxDelete = 4
	r := e.Start(cfg)
	e.marked(r)
	rep := e.MustPass(r)
	if !reclaimtest.Contains(rep.Refused, "5 of 27", "above max_delete:", "max_delete is 4 parts") {
		t.Errorf("refused = %q", rep.Refused)
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} || e.Backend.Aborts.Load() != 0 {
		t.Errorf("parts on MinIO = %v, %d aborts; want nothing deleted", got, e.Backend.Aborts.Load())
	}
}

// TestFutureActivityKeepsTheUpload records activity an hour in the future
// on S1 (a gateway whose clock ran ahead wrote it): S1 is kept, with the
// future time as its reason, and the pass goes on to delete S3 as planned,
// so one such record does not stop reclamation until its time comes.
func TestFutureActivityKeepsTheUpload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	r := e.Start(e.Config())
	e.marked(r)

	act := etcdstore.Activity{At: e.Clock.Now().Add(time.Hour), What: "UploadPart", Part: 13}
	v, err := e.Store.GetSession(t.Context(), inv.bucket, inv.s1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.RecordActivity(t.Context(), inv.bucket, inv.s1, v.ModRev, act); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Trigger(r)
	if err != nil || rep.Stopped != "" {
		t.Fatalf("pass = %v (stopped %q), want it to go on", err, rep.Stopped)
	}
	if rep.Acted.Deleted != count(1, 5) {
		t.Errorf("acted %+v, want S3 deleted", rep.Acted)
	}
	if got := e.parts(inv); got != [4]int{12, 7, -1, 3} {
		t.Errorf("parts on MinIO = %v, want S3 alone gone", got)
	}
	ex := e.explainUpload(r, inv.bucket, inv.s1, "")
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "in the future", "kept until that time has passed") {
		t.Errorf("S1 explained %s: %q, want kept for its future time", ex.Verdict, ex.Reason)
	}
}

// TestEtcdUnreachableDeletesNothing loses the pass's etcd client once the
// pass started: reads and writes fail alike, so this shows only that a pass
// without etcd deletes nothing. That a failed lookup stops a pass that
// could still write is TestUploadLookupFailureKeepsEverything's part.
func TestEtcdUnreachableDeletesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	// The pass reads and writes through a client of its own; the election
	// has another, so that only the session lookups fail.
	passCli := e.connect()
	cfg := e.Config()
	cfg.Store = etcdstore.NewStore(passCli, e.Store.Keys())
	el, err := reclaim.NewElector(reclaim.ElectorConfig{Client: e.Cli, Prefix: e.Store.Keys().Election(), ID: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Elector = el
	var cut bool
	cfg.Fault = func(point string) {
		if point == reclaim.FaultPassStarted && cut {
			passCli.Close()
		}
	}
	r := e.Start(cfg)
	e.marked(r)

	cut = true
	rep, err := e.Trigger(r)
	if err == nil {
		t.Fatalf("pass succeeded without etcd: %+v", rep)
	}
	t.Logf("pass stopped: %v", err)
	if rep.Stopped == "" || rep.Acted != (reclaim.Acted{}) {
		t.Errorf("report stopped %q acted %+v", rep.Stopped, rep.Acted)
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} || e.Backend.Aborts.Load() != 0 {
		t.Errorf("parts on MinIO = %v, %d aborts; want nothing deleted", got, e.Backend.Aborts.Load())
	}
	if st := e.getSession(inv.bucket, inv.s3).State; st != etcdstore.StateExpired {
		t.Errorf("S3 = %s, want still expired", st)
	}
}

// TestCompactedRevisionStartsOver compacts etcd past the revision a pass
// reads at: the pass keeps everything, says why, and the next pass starts
// over at a new revision.
func TestCompactedRevisionStartsOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	cfg := e.Config()
	var compact bool
	cfg.Fault = func(point string) {
		if point == reclaim.FaultPassStarted && compact {
			compact = false
			if _, err := e.Cli.Compact(context.Background(), e.Revision()); err != nil {
				t.Error(err)
			}
		}
	}
	r := e.Start(cfg)
	compact = true
	rep, err := e.Trigger(r)
	if err == nil || !reclaimtest.Contains(rep.Stopped, "compacted", "starts over") || rep.Acted != (reclaim.Acted{}) {
		t.Fatalf("pass over a compacted revision: %v, stopped %q, acted %+v", err, rep.Stopped, rep.Acted)
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} {
		t.Errorf("parts on MinIO = %v", got)
	}
	next := e.MustPass(r)
	if next.Pass != rep.Pass+1 || next.Resumed != 0 || next.Acted.Marked != count(1, 5) {
		t.Errorf("next pass = %d resumed %d acted %+v; want a fresh pass that marks S3", next.Pass, next.Resumed, next.Acted)
	}
}

// TestFormerLeaderCannotDelete revokes the leader's lease while it holds a
// plan to delete S3: its fenced write fails before any backend abort, and
// the next leader, with a higher term, resumes the pass and deletes.
func TestFormerLeaderCannotDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	var armed bool
	cfgA := e.Config()
	cfgA.ID = "a"
	cfgA.Fault = func(point string) {
		if point == reclaim.FaultPlanned && armed {
			// Paused while holding the plan; meanwhile its lease runs out.
			e.RevokeLeader()
		}
	}
	a := e.Start(cfgA)
	termA, _ := a.Leader()
	e.marked(a)

	cfgB := e.Config()
	cfgB.ID = "b"
	b := e.Run(cfgB)

	armed = true
	rep, err := e.Trigger(a)
	if !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("former leader's pass error = %v, want ErrFenced", err)
	}
	if e.Backend.Aborts.Load() != 0 || rep.Acted.Intents != (reclaim.Count{}) {
		t.Fatalf("former leader sent %d aborts (acted %+v)", e.Backend.Aborts.Load(), rep.Acted)
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} {
		t.Fatalf("parts on MinIO = %v, want all 27", got)
	}
	if st := e.getSession(inv.bucket, inv.s3).State; st != etcdstore.StateExpired {
		t.Fatalf("S3 = %s, want still expired", st)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	termB, err := b.Elector().AwaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if termB <= termA {
		t.Fatalf("new term %d is not above the old %d", termB, termA)
	}
	two := e.MustPass(b)
	if two.Pass != 2 || two.Resumed != 1 || two.Term != termB {
		t.Errorf("pass after hand-over = pass %d resumed %d term %d; want pass 2 resumed under term %d", two.Pass, two.Resumed, two.Term, termB)
	}
	if two.Acted.Deleted != count(1, 5) || e.parts(inv) != [4]int{12, 7, -1, 3} {
		t.Errorf("new leader acted %+v, parts %v; want S3 deleted", two.Acted, e.parts(inv))
	}
	s3 := e.getSession(inv.bucket, inv.s3)
	if tr := s3.History[len(s3.History)-1]; tr.Term != termB {
		t.Errorf("S3's last transition %+v is not recorded under term %d", tr, termB)
	}
}

// TestResumeAfterInterruption cuts passes short (the leader's term ends
// mid-inventory, then mid-act) and checks that the next leader resumes
// from the recorded position with every upload counted exactly once.
func TestResumeAfterInterruption(t *testing.T) {
	t.Parallel()
	for _, at := range []string{reclaim.FaultPageRecorded, reclaim.FaultActed} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			now := e.Clock.Now()
			// Three buckets, each with an idle session and a recent one.
			var idle [][2]string
			for _, b := range []string{"bucket-a", "bucket-b", "bucket-c"} {
				e.Bucket(b)
				id := e.Upload(b, "idle", 2)
				e.session(b, "idle", id, etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-30*time.Hour))
				idle = append(idle, [2]string{b, id})
				id = e.Upload(b, "busy", 3)
				e.session(b, "busy", id, etcdstore.StateActive, now.Add(-time.Hour), now.Add(-time.Minute))
			}
			var hits int
			cfgA := e.Config()
			cfgA.ID = "a"
			cfgA.Fault = func(point string) {
				if point == at {
					if hits++; hits == 1 {
						e.RevokeLeader()
					}
				}
			}
			a := e.Start(cfgA)
			cfgB := e.Config()
			cfgB.ID = "b"
			b := e.Run(cfgB)

			if _, err := e.Trigger(a); !errors.Is(err, reclaim.ErrFenced) {
				t.Fatalf("interrupted pass error = %v, want ErrFenced", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if _, err := b.Elector().AwaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			rep := e.MustPass(b)
			if rep.Pass != 1 || rep.Resumed != 1 {
				t.Errorf("pass %d resumed %d times, want pass 1 resumed once", rep.Pass, rep.Resumed)
			}
			wantUploads(t, rep.Uploads, count(3, 9), count(3, 6), count(0, 0), count(0, 0))
			if rep.Acted.Marked != count(3, 6) || rep.Acted.Changed != (reclaim.Count{}) {
				t.Errorf("acted %+v, want the three idle uploads marked once each", rep.Acted)
			}
			for _, u := range idle {
				if st := e.getSession(u[0], u[1]).State; st != etcdstore.StateExpired {
					t.Errorf("%s/%s = %s, want expired", u[0], u[1], st)
				}
			}
		})
	}
}

func TestUnclearAbortListsAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	r := e.Start(e.Config())
	e.marked(r)

	e.Backend.LoseAbortAnswer.Store(true)
	rep := e.MustPass(r)
	if n := e.Backend.Aborts.Load(); n != 1 {
		t.Errorf("%d aborts sent, want exactly one (no blind retry)", n)
	}
	if rep.Acted.Deleted != count(1, 5) {
		t.Errorf("acted %+v, want S3 deleted", rep.Acted)
	}
	s3 := e.getSession(inv.bucket, inv.s3)
	if s3.State != etcdstore.StateAborted || !reclaimtest.Contains(s3.Uncertain, "unclear", "gone") || s3.AbortAttempts != 1 {
		t.Errorf("S3 = %s, uncertain %q, attempts %d; want aborted with the doubt recorded", s3.State, s3.Uncertain, s3.AbortAttempts)
	}
	if got := e.parts(inv); got != [4]int{12, 7, -1, 3} {
		t.Errorf("parts on MinIO = %v", got)
	}
}

// TestDryRunChangesNothing plans on a process that does not lead, and
// passes on a leader configured for dry runs: neither writes to etcd or
// MinIO.
func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	r := e.Start(e.Config())
	e.marked(r)

	dryCfg := e.Config()
	dryCfg.DryRun = true
	dryCfg.ID = "dry"
	dryCfg.Elector, _ = reclaim.NewElector(reclaim.ElectorConfig{Client: e.Cli, Prefix: "/elsewhere/election/"})
	var progress atomic.Int64
	dryCfg.Progress = func(p reclaim.Progress) {
		if p.DryRun && p.Pass == 2 {
			progress.Add(1)
		}
	}
	dry := e.Start(dryCfg)

	before := e.Revision()
	plan, err := r.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	passed := e.MustPass(dry)
	for _, rep := range []reclaim.Report{plan, passed} {
		if !rep.DryRun || rep.Pass != 2 {
			t.Errorf("dry report: dry_run %v pass %d", rep.DryRun, rep.Pass)
		}
		wantUploads(t, rep.Uploads, count(2, 19), count(0, 0), count(1, 5), count(1, 3))
		if rep.Acted != (reclaim.Acted{}) {
			t.Errorf("dry run acted %+v", rep.Acted)
		}
	}
	if progress.Load() == 0 {
		t.Error("a dry-run pass reported no progress")
	}
	if after := e.Revision(); after != before {
		t.Errorf("etcd revision moved from %d to %d during dry runs", before, after)
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} || e.Backend.Aborts.Load() != 0 {
		t.Errorf("parts on MinIO = %v, %d aborts; want nothing changed", got, e.Backend.Aborts.Load())
	}
}

func TestTriggerOffTheLeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, err := reclaim.New(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Trigger(t.Context()); !errors.Is(err, reclaim.ErrNotLeader) {
		t.Errorf("Trigger off the leader = %v, want ErrNotLeader", err)
	}
	if _, err := r.Adopt(t.Context(), "b", "k", "u", "p"); !errors.Is(err, reclaim.ErrNotLeader) {
		t.Errorf("Adopt off the leader = %v, want ErrNotLeader", err)
	}
}
