//go:build integration

package digestsweep_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// publishLayout publishes gateway id's clock with layout fingerprint fp
// until the test ends, and waits for its record.
func (d *digestEnv) publishLayout(id, fp string) (stop func()) {
	d.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := reclaim.PublishClock(ctx, reclaim.PublishConfig{
		Store: d.Store, ID: id, Refresh: time.Second, Layout: fp, Now: d.Clock.Now,
	})
	stop = func() { cancel(); <-done }
	d.T.Cleanup(stop)
	reclaimtest.WaitFor(d.T, "gateway "+id+" to publish its layout", func() bool {
		resp, err := d.Cli.Get(d.T.Context(), d.Store.Keys().Gateway(id))
		return err == nil && len(resp.Kvs) == 1
	})
	return stop
}

// TestDigestLayoutMismatchKeepsEverything runs a gateway that publishes
// another layout than the reclaimer's (a source the reclaimer lacks, so
// the objects it stores there name blobs the reclaimer would not see)
// beside one with the same layout. While it is live the digest sweep
// deletes nothing, says which gateway differs, and sets the gauge; once it
// is gone the sweep goes on.
func TestDigestLayoutMismatchKeepsEverything(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	r := d.Start(d.Config())
	wider := *d.Layout
	extra, err := cas.NewSource("elsewhere", reclaimtest.CASBucket, "elsewhere/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	wider.Sources = append(append([]cas.Source{}, wider.Sources...), extra)
	if wider.Fingerprint() == d.Layout.Fingerprint() {
		t.Fatal("a layout with another source has the same fingerprint")
	}
	d.publishLayout("gw-alike", d.Layout.Fingerprint())
	stop := d.publishLayout("gw-other", wider.Fingerprint())
	for i := range 3 {
		rep := d.DigestPass(r)
		if !strings.Contains(rep.Kept, "gw-other") || !strings.Contains(rep.Kept, "layout") || rep.Pending != 0 || rep.Deleted != 0 {
			t.Fatalf("pass %d with a gateway of another layout: kept %q pending %d deleted %d; want everything kept, naming it", i, rep.Kept, rep.Pending, rep.Deleted)
		}
		if strings.Contains(rep.Kept, "gw-alike") {
			t.Errorf("the report names a gateway whose layout is the reclaimer's: %q", rep.Kept)
		}
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_layout_mismatch_gateways"); got != 1 {
		t.Errorf("layout mismatch gauge %v, want 1", got)
	}
	d.WantPresent("layouts differ", true, unref...)
	stop()
	if rep := d.DigestPass(r); rep.Kept != "" || rep.Pending != 2 {
		t.Errorf("pass once the other gateway is gone: kept %q pending %d", rep.Kept, rep.Pending)
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_layout_mismatch_gateways"); got != 0 {
		t.Errorf("layout mismatch gauge %v after the gateway went, want 0", got)
	}
}

// TestDigestLayoutChangeRebuilds records the last rebuild as made under
// another layout, as after a configuration change, with a rebuild due only
// every hour: the next pass rebuilds before it advances anything.
func TestDigestLayoutChangeRebuilds(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	d.PutBlobs("u", 2)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.RebuildInterval = time.Hour
	r := d.Start(cfg)
	if rep := d.DigestPass(r); !rep.Rebuild.Ran {
		t.Fatal("first pass did not rebuild")
	}
	d.Clock.Advance(time.Minute)
	if rep := d.DigestPass(r); rep.Rebuild.Ran {
		t.Fatal("second pass rebuilt within the interval")
	}
	key := d.Store.Keys().Cursor("rebuild")
	resp, err := d.Cli.Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("last rebuild record: %v", err)
	}
	var last map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &last); err != nil {
		t.Fatal(err)
	}
	if last["layout"] != d.Layout.Fingerprint() {
		t.Fatalf("the last rebuild recorded layout %v, want %s", last["layout"], d.Layout.Fingerprint())
	}
	last["layout"] = "another"
	b, _ := json.Marshal(last)
	if _, err := d.Cli.Put(t.Context(), key, string(b)); err != nil {
		t.Fatal(err)
	}
	d.Clock.Advance(time.Minute)
	if rep := d.DigestPass(r); !rep.Rebuild.Ran {
		t.Errorf("first pass after the layout changed did not rebuild (report %+v)", rep.Rebuild)
	}
}

// TestDigestLayoutMismatchStopsCollect starts a gateway of another layout
// while a pass's collector is at work (its first page of guards armed):
// the collector arms no further guard, so a manifest that gateway stores
// as a plain object cannot lose its blobs to a plan judged before it came,
// and the pass says why it stopped.
func TestDigestLayoutMismatchStopsCollect(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 4)
	d.AgeBlobs()
	wider := *d.Layout
	extra, err := cas.NewSource("elsewhere", reclaimtest.CASBucket, "elsewhere/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	wider.Sources = append(append([]cas.Source{}, wider.Sources...), extra)
	cfg := d.Config()
	published := false
	cfg.Fault = func(point string) {
		if point == digestsweep.FaultGuarded && !published {
			published = true
			d.publishLayout("gw-other", wider.Fingerprint())
		}
	}
	r := d.Start(cfg)
	if rep := d.DigestPass(r); rep.Pending != 4 {
		t.Fatalf("first pass: pending %d, want 4", rep.Pending)
	}
	rep := d.DigestPass(r)
	if !published {
		t.Fatal("the collector armed no guard")
	}
	if rep.Deleted != 2 || !strings.Contains(rep.Kept, "gw-other") {
		t.Errorf("pass whose collector met another layout after its first page: deleted %d, kept %q; want the first page's 2 deleted, then nothing, naming the gateway", rep.Deleted, rep.Kept)
	}
	present := 0
	for _, ok := range d.Present(unref...) {
		if ok {
			present++
		}
	}
	if present != 2 {
		t.Errorf("%d of the 4 unreferenced blobs stored, want the 2 of the pages after the layouts differed", present)
	}
}
