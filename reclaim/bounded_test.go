//go:build integration

package reclaim_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// orphansOf names the uploads a report holds as orphans, as
// backendUploads does: in a test whose uploads have no session, they are
// the uploads the pass listed.
func orphansOf(rep reclaim.Report) []string {
	var out []string
	for _, o := range rep.Orphans {
		out = append(out, o.Bucket+"/"+o.Key+"/"+o.UploadID)
	}
	return out
}

// backendUploads is every upload MinIO holds in buckets, as
// "bucket/key/uploadID", sorted.
func (e *env) backendUploads(buckets ...string) []string {
	e.T.Helper()
	var out []string
	for _, b := range buckets {
		for u := range e.Direct.ListIncompleteUploads(e.T.Context(), b, "", true) {
			if u.Err != nil {
				e.T.Fatal(u.Err)
			}
			out = append(out, b+"/"+u.Key+"/"+u.UploadID)
		}
	}
	slices.Sort(out)
	return out
}

// boundedConfig is a configuration whose passes list at most budget
// uploads each, with ceilings a slice of the tests' few uploads is within.
func (e *env) boundedConfig(budget int64) reclaim.Config {
	cfg := e.Config()
	cfg.PassUploads = budget
	cfg.MaxDeleteFraction, cfg.MaxDeleteUploadsFraction, cfg.MaxMarkFraction = 1, 1, 1
	return cfg
}

// cycle runs bounded passes until one completes a cycle of the keyspace
// and returns their reports and every upload they listed (held as an
// orphan: the test's uploads have no session). It fails the test when a
// pass does not start where the one before stopped, lists more than its
// budget, lists an upload twice in the cycle, or moves the coverage time
// without completing the cycle.
func (e *env) cycle(r *reclaim.Reclaimer, maxPasses int) ([]reclaim.Report, []string) {
	e.T.Helper()
	var reps []reclaim.Report
	var listed []string
	for i := 0; i < maxPasses; i++ {
		rep := e.MustPass(r)
		got := orphansOf(rep)
		s := rep.Slice
		if s == nil {
			e.T.Fatalf("pass %d has no slice in its report", rep.Pass)
		}
		if int64(len(got)) != s.Listed || s.Listed > s.Budget || !s.Advanced {
			e.T.Fatalf("pass %d held %d uploads, reports %+v", rep.Pass, len(got), *s)
		}
		if len(reps) > 0 && s.From != reps[len(reps)-1].Slice.To {
			e.T.Fatalf("pass %d started at %q, the pass before stopped at %q", rep.Pass, s.From, reps[len(reps)-1].Slice.To)
		}
		if len(reps) == 0 && s.From != "" {
			e.T.Fatalf("pass %d begins a cycle at %q, want the start", rep.Pass, s.From)
		}
		for _, u := range got {
			if slices.Contains(listed, u) {
				e.T.Fatalf("pass %d listed %s again in the same cycle", rep.Pass, u)
			}
		}
		listed = append(listed, got...)
		reps = append(reps, rep)
		if s.CompletedCycle {
			slices.Sort(listed)
			return reps, listed
		}
		if !s.Covered.Equal(reps[0].Slice.Covered) {
			e.T.Fatalf("pass %d moved the coverage time to %s without completing a cycle", rep.Pass, s.Covered)
		}
	}
	e.T.Fatalf("no cycle completed in %d passes", maxPasses)
	return nil, nil
}

// TestBoundedPassesCoverTheKeyspace runs passes of at most five uploads
// over thirteen in two buckets, none with a session, so that each pass
// holds exactly what it listed: the passes list the keyspace in order, five
// each, the pass that reaches the end going on from the start (every
// upload once per cycle), and the time the keyspace was last covered moves
// only when a cycle completes, to the clock of the pass that began it.
func TestBoundedPassesCoverTheKeyspace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, b := range []string{"bounded-a", "bounded-b"} {
		e.Bucket(b)
		for i := range 6 {
			e.Upload(b, string(rune('k'+i))+"/object", 0)
		}
	}
	// Two uploads of one key: the slices cut between them.
	e.Upload("bounded-a", "k/object", 0)
	all := e.backendUploads("bounded-a", "bounded-b")
	cfg := e.boundedConfig(5)
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	r := e.Start(cfg)

	var reps []reclaim.Report
	var seq []string
	for i := range 6 {
		rep := e.MustPass(r)
		got, s := orphansOf(rep), rep.Slice
		if s == nil || s.Listed != 5 || int64(len(got)) != s.Listed || !s.Advanced {
			t.Fatalf("pass %d held %v, slice %+v; want five uploads", rep.Pass, got, s)
		}
		if i > 0 && s.From != reps[i-1].Slice.To {
			t.Fatalf("pass %d started at %q, the pass before stopped at %q", rep.Pass, s.From, reps[i-1].Slice.To)
		}
		for j, u := range got {
			if want := all[(len(seq)+j)%len(all)]; u != want {
				t.Fatalf("pass %d listed %s as its upload %d, want %s: every cycle lists the keyspace once, in order", rep.Pass, u, j, want)
			}
		}
		ended := (len(seq)+len(got))/len(all) > len(seq)/len(all)
		seq = append(seq, got...)
		if s.CompletedCycle != ended {
			t.Errorf("pass %d completed a cycle: %v, want %v", rep.Pass, s.CompletedCycle, ended)
		}
		reps = append(reps, rep)
		e.Clock.Advance(time.Minute)
	}
	// Cycles: passes 1 to 3 (which goes on from the start), then 3 to 6.
	for i, want := range []time.Time{{}, {}, reps[0].Clock, reps[0].Clock, reps[0].Clock, reps[2].Clock} {
		if got := reps[i].Slice.Covered; !got.Equal(want) {
			t.Errorf("pass %d says the keyspace was covered %s, want %s", reps[i].Pass, got, want)
		}
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_covered_timestamp_seconds", "sweep", "uploads"); got != float64(reps[2].Clock.Unix()) {
		t.Errorf("covered_timestamp_seconds = %v, want %d", got, reps[2].Clock.Unix())
	}
	cov, ok, err := e.Store.GetCoverage(t.Context(), "uploads")
	if err != nil || !ok || !cov.Covered.Equal(reps[2].Clock) || cov.Cycles != 2 || !cov.CycleStarted.Equal(reps[5].Clock) || cov.CycleListed != 4 {
		t.Errorf("coverage record %+v (%v, %v) after six passes", cov, ok, err)
	}
}

// TestBoundedPassesReclaimEverySlice runs passes of at most five uploads
// over abandoned, live and ownerless uploads in two buckets: every
// abandoned upload is marked once and then deleted, whatever slice it is
// in, and nothing live or held is deleted.
func TestBoundedPassesReclaimEverySlice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.Clock.Now()
	type up struct{ bucket, key, id, kind string }
	var ups []up
	for _, b := range []string{"bounded-a", "bounded-b"} {
		e.Bucket(b)
		for i := range 6 {
			key := string(rune('k'+i)) + "/object"
			id := e.Upload(b, key, 1)
			u := up{b, key, id, []string{"abandoned", "live", "orphan"}[i%3]}
			switch u.kind {
			case "abandoned":
				e.session(b, key, id, etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-30*time.Hour))
			case "live":
				e.session(b, key, id, etcdstore.StateActive, now.Add(-time.Hour), now.Add(-10*time.Minute))
			}
			ups = append(ups, u)
		}
	}
	r := e.Start(e.boundedConfig(5))
	var marked, deleted int64
	for i := range 9 {
		rep := e.MustPass(r)
		marked += rep.Acted.Marked.Sessions
		deleted += rep.Acted.Deleted.Sessions
		if i == 2 {
			// A cycle is complete: every abandoned upload is marked.
			if marked != 4 || deleted != 0 {
				t.Fatalf("after the first cycle %d marked and %d deleted, want 4 and 0", marked, deleted)
			}
			e.Clock.Advance(13 * time.Hour)
		}
	}
	if marked != 4 || deleted != 4 {
		t.Errorf("nine passes marked %d and deleted %d uploads, want 4 and 4", marked, deleted)
	}
	for _, u := range ups {
		gone := e.partsOnMinIO(u.bucket, u.key, u.id) == -1
		if gone != (u.kind == "abandoned") {
			t.Errorf("%s upload %s/%s: gone = %v", u.kind, u.bucket, u.key, gone)
		}
	}
}

// TestBoundedPassPlanDoesNotMove checks that a plan starts where the next
// pass would and leaves the coverage record alone, and that a pass the
// breaker refuses (judged over its own slice) does not move it either: the
// next pass lists the same slice again.
func TestBoundedPassPlanDoesNotMove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.Clock.Now()
	e.Bucket("bounded-r")
	for i := range 4 {
		key := string(rune('a'+i)) + "/object"
		id := e.Upload("bounded-r", key, 1)
		last := now.Add(-10 * time.Minute)
		if i >= 2 {
			last = now.Add(-30 * time.Hour) // the second slice is all idle
		}
		e.session("bounded-r", key, id, etcdstore.StateActive, now.Add(-40*time.Hour), last)
	}
	cfg := e.boundedConfig(2)
	cfg.MaxMarkFraction = 0.75
	r := e.Start(cfg)
	one := e.MustPass(r)
	if one.Slice.To == "" || one.Refused != "" {
		t.Fatalf("pass one: %+v refused %q", *one.Slice, one.Refused)
	}
	plan, err := r.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Slice.From != one.Slice.To || plan.Slice.Advanced || plan.Uploads.Mark.Sessions != 2 || plan.Refused == "" {
		t.Errorf("plan: slice %+v marks %d refused %q; want it to start where pass one stopped, refused over its own slice", *plan.Slice, plan.Uploads.Mark.Sessions, plan.Refused)
	}
	two := e.MustPass(r)
	if two.Refused == "" || two.Slice.From != one.Slice.To || two.Slice.Advanced {
		t.Fatalf("pass two: refused %q slice %+v; want refused over its slice of two idle uploads", two.Refused, *two.Slice)
	}
	if _, err := r.Resume(t.Context(), "alice", reclaim.PauseUploads); err != nil {
		t.Fatal(err)
	}
	r2 := e.MustPass(r)
	if r2.Slice.From != one.Slice.To || r2.Refused == "" {
		t.Errorf("pass after resume: slice %+v refused %q; want the same slice again, still above the fraction", *r2.Slice, r2.Refused)
	}
	cov, _, err := e.Store.GetCoverage(t.Context(), "uploads")
	if err != nil || cov.Pass != one.Pass {
		t.Errorf("coverage %+v (%v): want the record of pass %d", cov, err, one.Pass)
	}
}

// TestBoundedPassFencedCoverage holds a leader after its plan while its
// term ends: the former leader cannot move the coverage record, and the
// next leader resumes the pass from its cursor and moves it.
func TestBoundedPassFencedCoverage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.Clock.Now()
	e.Bucket("bounded-f")
	for i := range 6 {
		key := string(rune('a'+i)) + "/object"
		id := e.Upload("bounded-f", key, 1)
		e.session("bounded-f", key, id, etcdstore.StateActive, now.Add(-time.Hour), now.Add(-10*time.Minute))
	}
	var armed bool
	cfgA := e.boundedConfig(2)
	cfgA.ID = "a"
	cfgA.Fault = func(point string) {
		if point == reclaim.FaultPlanned && armed {
			e.RevokeLeader()
		}
	}
	a := e.Start(cfgA)
	one := e.MustPass(a)
	cfgB := e.boundedConfig(2)
	cfgB.ID = "b"
	b := e.Run(cfgB)

	armed = true
	if _, err := e.Trigger(a); !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("former leader's pass error = %v, want ErrFenced", err)
	}
	cov, _, err := e.Store.GetCoverage(t.Context(), "uploads")
	if err != nil || cov.Pass != one.Pass {
		t.Fatalf("coverage after the fenced pass: %+v (%v); want pass %d's", cov, err, one.Pass)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	termB, err := b.Elector().AwaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	two := e.MustPass(b)
	if two.Resumed != 1 || two.Slice.From != one.Slice.To || !two.Slice.Advanced || two.Slice.Listed != 2 {
		t.Errorf("new leader's pass: resumed %d slice %+v; want pass two resumed from %q", two.Resumed, *two.Slice, one.Slice.To)
	}
	cov, _, err = e.Store.GetCoverage(t.Context(), "uploads")
	if err != nil || cov.Pass != two.Pass || cov.Term != termB {
		t.Errorf("coverage %+v (%v); want pass %d under term %d", cov, err, two.Pass, termB)
	}
	three := e.MustPass(b)
	if three.Slice.From != two.Slice.To || !three.Slice.CompletedCycle || !three.Slice.Covered.Equal(one.Clock) {
		t.Errorf("pass three: slice %+v; want it to complete the cycle begun by pass one at %s", *three.Slice, one.Clock)
	}
}

// TestBoundedPassBucketsChange deletes the bucket a cycle stopped in and
// adds one before and one after it: the cycle goes on from the next
// bucket, lists the new bucket after its position, and the next cycle
// lists everything there is.
func TestBoundedPassBucketsChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	add := func(bucket string, n int) {
		e.Bucket(bucket)
		for i := range n {
			e.Upload(bucket, string(rune('a'+i))+"/object", 0)
		}
	}
	add("bounded-b", 2)
	add("bounded-d", 4)
	add("bounded-f", 2)
	r := e.Start(e.boundedConfig(3))
	one := e.MustPass(r)
	if first := orphansOf(one); len(first) != 3 || !strings.HasPrefix(one.Slice.To, "bounded-d/") {
		t.Fatalf("pass one stopped at %q after %v; want inside bounded-d", one.Slice.To, first)
	}
	// bounded-d goes; bounded-c (before the position) and bounded-e
	// (after it) come.
	for u := range e.Direct.ListIncompleteUploads(t.Context(), "bounded-d", "", true) {
		if err := e.Direct.AbortMultipartUpload(t.Context(), "bounded-d", u.Key, u.UploadID); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Direct.RemoveBucket(t.Context(), "bounded-d"); err != nil {
		t.Fatal(err)
	}
	add("bounded-c", 1)
	add("bounded-e", 1)
	rest := e.rest(r)
	if want := e.backendUploads("bounded-e", "bounded-f"); !slices.Equal(rest, want) {
		t.Errorf("the rest of cycle one listed %v, want bounded-e's and bounded-f's %v", rest, want)
	}
	two, listed := e.cycle(r, 5)
	if all := e.backendUploads("bounded-b", "bounded-c", "bounded-e", "bounded-f"); !slices.Equal(listed, all) {
		t.Errorf("cycle two (%d passes) listed %v, want %v", len(two), listed, all)
	}
}

// rest runs passes until one completes the cycle in progress and returns
// what they listed, sorted.
func (e *env) rest(r *reclaim.Reclaimer) []string {
	e.T.Helper()
	var out []string
	for i := 0; ; i++ {
		rep := e.MustPass(r)
		out = append(out, orphansOf(rep)...)
		if rep.Slice.CompletedCycle {
			slices.Sort(out)
			return out
		}
		if i == 5 {
			e.T.Fatal("the cycle did not complete")
		}
	}
}
