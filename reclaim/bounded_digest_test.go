package reclaim_test

import (
	"slices"
	"testing"

	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestBoundedDigestPasses runs digest passes of at most four blobs over
// fourteen, ten of them unreferenced: each pass judges only the blobs of
// its slice, in key order, and each cycle judges every blob once; the
// unreferenced blobs of every slice become pending in the first cycle and
// are collected, slice by slice, in the second; nothing referenced is
// deleted; the coverage time moves only when a cycle completes.
func TestBoundedDigestPasses(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("ref", 4)
	d.putManifest("app/v1", refd...)
	unref := d.putBlobs("unref", 10)
	d.ageBlobs()
	isUnref := map[string]bool{}
	for _, dg := range unref {
		isUnref[dg] = true
	}
	// The blobs in listing order: a slice of four is four of these.
	order := slices.Concat(refd, unref)
	slices.SortFunc(order, func(a, b string) int {
		if blobKey(a) < blobKey(b) {
			return -1
		}
		return 1
	})
	cfg := d.config()
	cfg.Digests.PassBlobs = 4
	cfg.Digests.MaxDeleteFraction = 1
	r := d.start(cfg)

	one := d.digestCycle(r, order, func(rep digests.Report, slice []string) {
		var want int64
		for _, dg := range slice {
			if isUnref[dg] {
				want++
			}
		}
		if rep.NewPending != want {
			t.Errorf("slice %v: %d new pending, want %d", rep.Slice, rep.NewPending, want)
		}
		// Every unreferenced blob up to this slice's end has its
		// tombstone, none after it.
		end := slices.Index(order, slice[len(slice)-1])
		for i, dg := range order {
			_, _, ok := d.tombstone(dg)
			if ok != (isUnref[dg] && i <= end) {
				t.Errorf("after slice ending at %d: blob %d has a tombstone: %v", end, i, ok)
			}
		}
	})
	if len(one) != 4 {
		t.Errorf("cycle one took %d passes, want 4", len(one))
	}
	d.wantStates("after cycle one", etcdstore.TombstonePending, unref...)
	if c := one[len(one)-1].Slice; c.Cycles != 1 || c.Covered.IsZero() || !one[0].Slice.Covered.IsZero() {
		t.Errorf("after cycle one: %+v; want one cycle covered", c)
	}

	two := d.digestCycle(r, order, func(rep digests.Report, slice []string) {
		var want int64
		for _, dg := range slice {
			if isUnref[dg] {
				want++
			}
		}
		if rep.Deleted != want || rep.NewPending != 0 {
			t.Errorf("slice %v: deleted %d, new pending %d; want %d deleted", rep.Slice, rep.Deleted, rep.NewPending, want)
		}
		end := slices.Index(order, slice[len(slice)-1])
		for i, dg := range order {
			if gone := !d.present(dg)[0]; gone != (isUnref[dg] && i <= end) {
				t.Errorf("after slice ending at %d: blob %d gone = %v", end, i, gone)
			}
		}
	})
	d.wantPresent("after cycle two", false, unref...)
	d.wantPresent("after cycle two", true, refd...)
	cov, ok, err := d.store.GetCoverage(t.Context(), "digests")
	if err != nil || !ok || cov.Cycles != 2 || cov.CoveredPass != int64(len(one)+len(two)) {
		t.Errorf("digest coverage %+v (%v, %v) after two cycles of %d and %d passes", cov, ok, err, len(one), len(two))
	}
}

// digestCycle runs the bounded digest passes of one cycle over the blobs
// of order (in listing order, four to a slice), calling check after each
// with its report and its slice's blobs, and returns their reports. It
// fails the test when a pass judges another number of blobs, does not
// start where the one before stopped, or moves the coverage time without
// completing the cycle.
func (d *digestEnv) digestCycle(r *reclaim.Reclaimer, order []string, check func(rep digests.Report, slice []string)) []digests.Report {
	t := d.t
	t.Helper()
	var reps []digests.Report
	for i := 0; ; i += 4 {
		rep := d.digestPass(r)
		s := rep.Slice
		if s == nil || !s.Advanced || s.Listed != rep.Stored || s.Listed > s.Budget {
			t.Fatalf("digest pass %d: slice %+v, stored %d", len(reps)+1, s, rep.Stored)
		}
		if want := min(4, len(order)-i); rep.Stored != int64(want) {
			t.Fatalf("digest pass %d judged %d blobs, want %d", len(reps)+1, rep.Stored, want)
		}
		if len(reps) > 0 && s.From != reps[len(reps)-1].Slice.To {
			t.Fatalf("digest pass %d started at %q, the one before stopped at %q", len(reps)+1, s.From, reps[len(reps)-1].Slice.To)
		}
		check(rep, order[i:i+int(rep.Stored)])
		reps = append(reps, rep)
		if s.CompletedCycle {
			if i+4 < len(order) {
				t.Fatalf("the cycle completed after %d of %d blobs", i+4, len(order))
			}
			return reps
		}
		if len(reps) > 1 && !s.Covered.Equal(reps[0].Slice.Covered) {
			t.Fatalf("digest pass %d moved the coverage time without completing a cycle", len(reps))
		}
	}
}
