//go:build integration

package digestsweep_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// TestBoundedDigestPasses runs digest passes of at most four blobs over
// fourteen, ten of them unreferenced: each pass judges four blobs, the
// next four in key order (the pass that reaches the end going on from the
// first), and changes the tombstones and blobs of those alone; the
// unreferenced blobs of every slice become pending in the first cycle and
// are collected in the second; nothing referenced is deleted; the coverage
// time moves only when a cycle completes.
func TestBoundedDigestPasses(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("ref", 4)
	d.PutManifest("app/v1", refd...)
	unref := d.PutBlobs("unref", 10)
	d.AgeBlobs()
	// The blobs in listing order: a slice is the next four of these.
	order := slices.Concat(refd, unref)
	slices.SortFunc(order, func(a, b string) int { return strings.Compare(reclaimtest.BlobKey(a), reclaimtest.BlobKey(b)) })
	cfg := d.Config()
	cfg.Digests.PassBlobs = 4
	cfg.Digests.MaxDeleteFraction = 1
	r := d.Start(cfg)

	var reps []digestsweep.Report
	judged := 0
	for i := range 7 {
		before := d.states(order)
		rep := d.DigestPass(r)
		s := rep.Slice
		if s == nil || !s.Advanced || s.Listed != 4 || rep.Stored != 4 {
			t.Fatalf("digest pass %d: slice %+v, stored %d; want four blobs", i+1, s, rep.Stored)
		}
		if i > 0 && s.From != reps[i-1].Slice.To {
			t.Fatalf("digest pass %d started at %q, the one before stopped at %q", i+1, s.From, reps[i-1].Slice.To)
		}
		in := map[string]bool{}
		for j := range 4 {
			in[order[(judged+j)%len(order)]] = true
		}
		after := d.states(order)
		for j, dg := range order {
			if after[j] != before[j] && !in[dg] {
				t.Errorf("digest pass %d changed blob %d (%s to %s), outside its slice", i+1, j, before[j], after[j])
			}
		}
		ended := (judged+4)/len(order) > judged/len(order)
		judged += 4
		if s.CompletedCycle != ended {
			t.Errorf("digest pass %d completed a cycle: %v, want %v", i+1, s.CompletedCycle, ended)
		}
		if ended != (s.Cycles > 0 && (i == 0 || s.Cycles > reps[i-1].Slice.Cycles)) {
			t.Errorf("digest pass %d: %d cycles covered (%s), completed one: %v", i+1, s.Cycles, s.Covered, ended)
		}
		reps = append(reps, rep)
		if i == 3 {
			// The first cycle is done: every unreferenced blob is pending
			// or (judged again after the wrap) ready and gone.
			for j, dg := range order {
				if st := after[j]; slices.Contains(refd, dg) != (st == "stored") {
					t.Errorf("after the first cycle blob %d is %s", j, st)
				}
			}
		}
	}
	// Seven passes judged 28 blobs: two cycles. (The next pass would
	// begin a cycle over the four blobs left.)
	d.WantPresent("after two cycles", false, unref...)
	d.WantPresent("after two cycles", true, refd...)
	var deleted int64
	for _, rep := range reps {
		deleted += rep.Deleted
	}
	if deleted != 10 {
		t.Errorf("the passes deleted %d blobs, want 10", deleted)
	}
	cov, ok, err := d.Store.GetCoverage(t.Context(), "digests")
	if err != nil || !ok || cov.Cycles != 2 || cov.CoveredPass != 7 {
		t.Errorf("digest coverage %+v (%v, %v) after seven passes; want two cycles, the second completed by pass 7", cov, ok, err)
	}
}

// states says of each digest whether its blob is stored without a
// tombstone ("stored"), the tombstone's state, or "gone".
func (d *digestEnv) states(digests []string) []string {
	out := make([]string, len(digests))
	for i, dg := range digests {
		t, _, ok := d.Tombstone(dg)
		switch {
		case !d.Present(dg)[0]:
			out[i] = "gone"
		case ok:
			out[i] = string(t.State)
		default:
			out[i] = "stored"
		}
	}
	return out
}
