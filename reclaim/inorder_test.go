//go:build integration

package reclaim_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// switchBackend passes listings on whole, as MinIO answers them, or cut
// into pages by pagingBackend.
type switchBackend struct {
	*pagingBackend
	paged atomic.Bool
}

func (b *switchBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.paged.Load() {
		return b.pagingBackend.RoundTrip(req)
	}
	return b.pagingBackend.Backend.RoundTrip(req)
}

// planView is what a plan decided, without when it ran.
type planView struct {
	Uploads reclaim.Uploads
	Stuck   []reclaim.Stuck
	Orphans []reclaim.Orphan
	Missing []reclaim.Missing
	Totals  reclaim.ListTotals
	Breaker reclaim.Breaker
}

// TestPlanInOrderOracle: a plan over whole listings (judged in session key
// order, the reads of each bucket's sessions serving the search for
// sessions without an upload) equals the plan over the same uploads
// listed in pages (judged a page at a time by upload, the sessions
// without an upload found by a scan of their own), over generated
// buckets of uploads with sessions present, absent, terminal, without an
// upload, naming an upload of another bucket, and in a bucket the
// backend does not have; with a check budget that lasts and one that
// runs out.
func TestPlanInOrderOracle(t *testing.T) {
	for _, budget := range []int64{1000, 4} {
		t.Run(fmt.Sprint("budget ", budget), func(t *testing.T) { planInOrderOracle(t, budget) })
	}
}

func planInOrderOracle(t *testing.T, budget int64) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(15, 16))
	now := e.Clock.Now()
	states := []etcdstore.SessionState{etcdstore.StateActive, etcdstore.StateActive, etcdstore.StateExpired, etcdstore.StateCompleting, etcdstore.StateCompleted, etcdstore.StateAborted}
	ago := func() time.Time { return now.Add(-time.Duration(rng.IntN(60)) * time.Hour) }
	buckets := []string{"inorder-a", "inorder-b", "inorder-c"}
	var foreign []string // upload ids of inorder-a
	for bi, b := range buckets {
		e.Bucket(b)
		for i := range 9 + 4*bi {
			key := fmt.Sprintf("k%02d-%c", i, "xyz"[rng.IntN(3)]) // the pager does not decode keys
			id := e.Upload(b, key, rng.IntN(3))
			if b == "inorder-a" {
				foreign = append(foreign, id)
			}
			if rng.IntN(5) > 0 {
				created := ago()
				e.session(b, key, id, states[rng.IntN(4)], created, created.Add(time.Duration(rng.IntN(30))*time.Minute))
			}
		}
		// Sessions without an upload, some ended.
		for i := range 5 {
			e.session(b, fmt.Sprintf("gone-%d", i), fmt.Sprintf("gone-%s-%d-%x", b, i, rng.Uint32()), states[rng.IntN(len(states))], ago(), ago())
		}
	}
	// Sessions naming uploads of inorder-a in inorder-b, and a bucket the
	// backend does not have.
	for _, id := range foreign[:3] {
		e.session("inorder-b", "foreign", id, etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-39*time.Hour))
		e.session("inorder-none", "elsewhere", id+"-x", etcdstore.StateActive, now.Add(-40*time.Hour), now.Add(-39*time.Hour))
	}
	sw := &switchBackend{pagingBackend: &pagingBackend{Backend: e.Backend, size: 2}}
	cfg := e.Config()
	cfg.Backend = sw
	cfg.BatchSize = 3
	cfg.MissingCheckBudget = budget
	r := e.Start(cfg)
	plan := func(paged bool) planView {
		t.Helper()
		sw.paged.Store(paged)
		rep, err := r.Plan(t.Context())
		if err != nil {
			t.Fatalf("plan (paged %v): %v", paged, err)
		}
		return planView{rep.Uploads, rep.Stuck, rep.Orphans, rep.Missing, rep.Totals, rep.Breaker}
	}
	lists := sw.lists.Load()
	whole := plan(false)
	if sw.lists.Load() != lists {
		t.Fatal("the whole listings went through the pager")
	}
	paged := plan(true)
	if sw.lists.Load()-lists < 10 {
		t.Fatalf("the paged plan listed %d pages; want at least 10", sw.lists.Load()-lists)
	}
	if !reflect.DeepEqual(whole, paged) {
		t.Fatalf("budget %d: the plan over whole listings\n%+v\ndiffers from the plan over pages\n%+v", budget, whole, paged)
	}
	tot := whole.Totals
	if tot.Missing+tot.MissingUnverified < 10 || tot.Orphans == 0 || whole.Uploads.Keep.Sessions == 0 || whole.Uploads.Mark.Sessions+whole.Uploads.Delete.Sessions == 0 {
		t.Fatalf("budget %d: the plan %+v has too few of some verdict to compare", budget, whole)
	}
	if budget < 10 && tot.MissingUnverified == 0 {
		t.Fatalf("budget %d: no session left unverified", budget)
	}
}
