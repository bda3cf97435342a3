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

// TestDigestSweepOnAFutureTime records a trash entry, and in a second world
// a tombstone, with a time beyond the clock skew allowance: the pass goes
// on and counts the record, and the named blob stays. (The unnamed blob
// goes by the usual rules: pending after the first pass, or at once when
// the tombstone written here was already pending.)
func TestDigestSweepOnAFutureTime(t *testing.T) {
	t.Parallel()
	for _, record := range []string{"trash", "tombstone"} {
		t.Run(record, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			b := d.PutBlobs("b", 2)
			d.PutManifest("one", b[0])
			d.AgeBlobs()
			r := d.Start(d.Config())
			future := d.Clock.Now().Add(time.Hour)
			switch record {
			case "trash":
				if _, _, err := d.Store.TrashRefSource(t.Context(), reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"one", "alice", future, future.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			case "tombstone":
				ts := etcdstore.Tombstone{Digest: b[1], State: etcdstore.TombstonePending, Bucket: reclaimtest.CASBucket, Key: reclaimtest.BlobKey(b[1]), Since: future}
				if _, err := d.Cli.Put(t.Context(), d.Store.Keys().Tombstone(b[1]), etcdstore.MarshalRecord(ts)); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := d.Trigger(r)
			if err != nil || rep.Stopped != "" || rep.Digests == nil || rep.Digests.FutureTimes != 1 {
				t.Fatalf("pass = %v (stopped %q, digests %+v), want it to go on counting one future time", err, rep.Stopped, rep.Digests)
			}
			d.WantPresent("after the pass", true, b[0])
		})
	}
}
