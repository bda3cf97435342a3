//go:build integration

package digestsweep_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// otherShard returns the first of digests whose reference revision shard
// differs from d's.
func otherShard(t *testing.T, d string, digests []string) string {
	t.Helper()
	for _, o := range digests {
		if etcdstore.RefShard(o) != etcdstore.RefShard(d) {
			return o
		}
	}
	t.Fatal("every digest is in one shard")
	return ""
}

// TestDigestReferenceBeforeTombstone commits a reference between the
// inventories and the tombstone writes: no tombstone advances for that
// digest, and its blob stays; a digest in another shard goes on.
func TestDigestReferenceBeforeTombstone(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"new", "pending"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.PutBlobs("r", 6)
			d.PutManifest("m", refd...)
			unref := d.PutBlobs("u", 4)
			target := unref[0]
			other := otherShard(t, target, unref[1:])
			d.AgeBlobs()
			var armed atomic.Bool
			errs := make(chan error, 1)
			cfg := d.Config()
			cfg.BatchSize = 1000 // one page, so that the hook runs before every write
			cfg.Fault = func(point string) {
				if point == digestsweep.FaultBeforeTombstone && armed.CompareAndSwap(true, false) {
					errs <- d.WriteManifest("late", target)
				}
			}
			r := d.Start(cfg)
			if at == "pending" {
				d.DigestPass(r)
			}
			before, beforeRev, _ := d.Tombstone(target)

			armed.Store(true)
			rep := d.DigestPass(r)
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if rep.Changed != 1 {
				t.Errorf("changed = %d, want the one digest referenced late", rep.Changed)
			}
			after, afterRev, _ := d.Tombstone(target)
			if afterRev != beforeRev || after != before {
				t.Errorf("tombstone of the late-referenced digest moved: %+v -> %+v", before, after)
			}
			if at == "new" {
				d.WantStates("new", etcdstore.TombstonePending, other)
			} else {
				d.WantStates("pending", etcdstore.TombstoneDeleted, other)
				d.WantPresent("pending", false, other)
			}

			next := d.DigestPass(r)
			if at == "pending" && next.Skipped != 1 {
				t.Errorf("next pass skipped %d, want the late-referenced digest", next.Skipped)
			}
			d.WantPresent("at the end", true, append(refd, target)...)
		})
	}
}

// TestDigestResumeAfterInterruption ends the leader's term at each step of
// the digest sweep. The former leader gets no write or delete through; the
// next leader resumes the pass from its cursor, counts every blob exactly
// once, and no blob referenced at any moment is missing at the end.
func TestDigestResumeAfterInterruption(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		point string
		pass  int // the pass the term ends in
	}{
		{digestsweep.FaultPage, 1},
		{digestsweep.FaultBeforeTombstone, 2},
		{digestsweep.FaultGuarded, 2},
		{digestsweep.FaultCollected, 2},
	} {
		t.Run(tt.point, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.PutBlobs("r", 6)
			d.PutManifest("m", refd...)
			unref := d.PutBlobs("u", 4)
			d.AgeBlobs()
			var (
				armed    atomic.Bool
				guardErr = make(chan error, 1)
				late     string
			)
			cfgA := d.Config()
			cfgA.ID = "a"
			cfgA.Fault = func(point string) {
				if point != tt.point || !armed.CompareAndSwap(true, false) {
					return
				}
				if point == digestsweep.FaultGuarded {
					// A producer naming a guarded digest is turned away
					// and records nothing.
					guarded := d.guarded()
					if len(guarded) == 0 {
						guardErr <- errors.New("no guard armed at digest.guarded")
					} else {
						guardErr <- d.WriteManifest("guarded", guarded[0])
					}
				}
				d.RevokeLeader()
				if err := d.WriteManifest("late", late); err != nil {
					t.Error(err)
				}
			}
			a := d.Start(cfgA)
			cfgB := d.Config()
			cfgB.ID = "b"
			cfgB.Metrics = nil
			b := d.Run(cfgB)

			if tt.pass == 2 {
				d.DigestPass(a)
			}
			// Unreferenced (and old at the pass clock) until a manifest
			// names it while the leader is away: it must survive.
			late = d.PutBlob("late")
			deletesBefore := d.Be.Deletes.Load()
			armed.Store(true)
			rep, err := d.Trigger(a)
			if !errors.Is(err, reclaim.ErrFenced) {
				t.Fatalf("interrupted pass error = %v, want ErrFenced (report %+v)", err, rep.Digests)
			}
			if tt.point == digestsweep.FaultGuarded {
				d.wantGuardedTurnedAway(t, guardErr, deletesBefore)
			}
			d.WantPresent("after the interruption", true, append(refd, late)...)

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if _, err := b.Elector().AwaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			d.wantResumedOnce(t, b, tt.pass, refd, unref, late)
		})
	}
}

// wantGuardedTurnedAway checks an interruption at digest.guarded: the
// producer naming the guarded digest was turned away and recorded nothing,
// and the former leader sent no delete after its term ended.
func (d *digestEnv) wantGuardedTurnedAway(t *testing.T, guardErr <-chan error, deletesBefore int64) {
	t.Helper()
	if err := <-guardErr; !errors.Is(err, etcdstore.ErrGuarded) {
		t.Errorf("manifest naming a guarded digest: %v, want ErrGuarded", err)
	}
	if d.Be.Deletes.Load() != deletesBefore {
		t.Errorf("the former leader sent %d deletes after its term ended", d.Be.Deletes.Load()-deletesBefore)
	}
	if resp, _ := d.Cli.Get(t.Context(), d.Store.Keys().RefSource(reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"guarded")); len(resp.Kvs) != 0 {
		t.Error("a manifest naming a guarded digest was recorded")
	}
}

// wantResumedOnce runs the new leader b's pass, which must resume pass
// number pass, and the passes after it: every blob is counted once, the
// four unreferenced ones are deleted exactly once, and the referenced ones
// (late included) stay.
func (d *digestEnv) wantResumedOnce(t *testing.T, b *reclaim.Reclaimer, pass int, refd, unref []string, late string) {
	t.Helper()
	resumed := d.MustPass(b)
	if resumed.Pass != int64(pass) || resumed.Digests == nil || resumed.Digests.Resumed != 1 {
		t.Fatalf("pass %d resumed %+v; want pass %d resumed once", resumed.Pass, resumed.Digests, pass)
	}
	got := *resumed.Digests
	if got.Stored != 11 {
		t.Errorf("resumed pass counted %d stored blobs, want 11 exactly once", got.Stored)
	}
	if n := got.Retained + got.Pending + got.Ready + got.Duplicates + got.Changed; n != got.Stored {
		t.Errorf("resumed pass judged %d blobs of %d stored (report %+v)", n, got.Stored, got)
	}
	// Every deletion is counted once, those of the former leader's
	// attempt included (it recorded them in the cursor).
	deleted := got.Deleted
	for range 2 {
		deleted += d.DigestPass(b).Deleted
	}
	if deleted != 4 {
		t.Errorf("the passes from the resumed one on deleted %d, want the four exactly once", deleted)
	}
	d.WantPresent("at the end", false, unref...)
	d.WantPresent("at the end", true, append(refd, late)...)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left", n)
	}
}

// guarded returns the digests whose guards are armed.
func (d *digestEnv) guarded() []string {
	resp, err := d.Cli.Get(context.Background(), d.Store.Keys().Guards(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil
	}
	var out []string
	for _, kv := range resp.Kvs {
		if dg, ok := etcdstore.LastSegment(string(kv.Key)); ok {
			out = append(out, dg)
		}
	}
	return out
}

// TestDigestStaleTermDeletesNothing ends the term after the backend deleted
// but before the outcome was recorded: the next leader finds the guards
// recording the former leader's delete attempt and keeps them armed while
// that delete may still be executed; once it is settled, it looks at the
// blobs and records them deleted.
func TestDigestStaleTermDeletesNothing(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	cfgA := d.Config()
	cfgA.ID = "a"
	cfgA.BatchSize = 1000
	a := d.Start(cfgA)
	cfgB := d.Config()
	cfgB.ID = "b"
	cfgB.Metrics = nil
	b := d.Run(cfgB)
	d.DigestPass(a)

	var once atomic.Bool
	d.Be.SetAfterDelete(func() {
		if once.CompareAndSwap(false, true) {
			d.RevokeLeader()
		}
	})
	if _, err := d.Trigger(a); !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("pass error = %v, want ErrFenced", err)
	}
	d.Be.SetAfterDelete(nil)
	d.WantPresent("deleted by the former leader", false, unref...)
	if n := d.Count(d.Store.Keys().Guards()); n != 2 {
		t.Fatalf("%d guards armed, want the former leader's two", n)
	}
	d.WantStates("former leader", etcdstore.TombstoneReady, unref...)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := b.Elector().AwaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	rep := d.MustPass(b)
	if rep.Digests.Guards != 2 || rep.Digests.Settling != 2 || rep.Digests.Deleted != 0 || rep.Digests.Resumed != 1 {
		t.Errorf("next leader: guards %d settling %d deleted %d resumed %d; want the two kept settling", rep.Digests.Guards, rep.Digests.Settling, rep.Digests.Deleted, rep.Digests.Resumed)
	}
	if n := d.Count(d.Store.Keys().Guards()); n != 2 {
		t.Fatalf("%d guards armed while the former leader's delete may still be executed, want 2", n)
	}
	d.Settle()
	rep = d.MustPass(b)
	if rep.Digests.Guards != 2 || rep.Digests.Deleted != 2 || rep.Digests.Settling != 0 {
		t.Errorf("after the settle time: guards %d deleted %d settling %d; want the two settled", rep.Digests.Guards, rep.Digests.Deleted, rep.Digests.Settling)
	}
	d.WantStates("settled", etcdstore.TombstoneDeleted, unref...)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left", n)
	}
	d.WantPresent("settled", true, refd...)
}

// TestDigestHoldsKeepEverything keeps every blob while a reference hold
// exists.
func TestDigestHoldsKeepEverything(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	unref := d.PutBlobs("u", 2)
	d.PutBlobs("r", 6)
	d.AgeBlobs()
	r := d.Start(d.Config())
	lease, err := d.Cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Store.HoldRefs(t.Context(), "complete-1", reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"held", lease.ID, d.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	rep := d.DigestPass(r)
	if !reclaimtest.Contains(rep.Kept, "hold") || rep.Pending != 0 {
		t.Errorf("kept %q pending %d; want everything kept for the hold", rep.Kept, rep.Pending)
	}
	d.WantStates("held", "", unref...)
	// The complete recorded its references: its hold and record end.
	if err := d.Store.EndUnrecorded(t.Context(), "complete-1"); err != nil {
		t.Fatal(err)
	}
	if err := d.Store.ReleaseRefHold(t.Context(), "complete-1"); err != nil {
		t.Fatal(err)
	}
	rep = d.DigestPass(r)
	if rep.Kept != "" || rep.Pending != 8 {
		t.Errorf("after the hold: kept %q pending %d", rep.Kept, rep.Pending)
	}
}

// TestDigestUploadsInventory keeps a blob that a multipart upload is
// writing again from being made ready, and keeps everything when the
// uploads' listing cannot be proven against the reference revisions. The
// backend is asked about uploads only in the pass that could make a blob
// ready: a pass that only makes tombstones pending asks it nothing.
func TestDigestUploadsInventory(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 4)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 3)
	d.Upload(reclaimtest.CASBucket, reclaimtest.BlobKey(unref[0]), 1)
	d.AgeBlobs()
	r := d.Start(d.Config())
	rep := d.DigestPass(r)
	if rep.Pending != 3 || rep.RetainedBy["uploads"] != 0 || d.Be.BlobUploads.Load() != 0 {
		t.Errorf("pending %d, retained by %v, %d listings of uploads into blobs; want every unreferenced blob pending and no listing",
			rep.Pending, rep.RetainedBy, d.Be.BlobUploads.Load())
	}
	d.WantStates("marked", etcdstore.TombstonePending, unref...)

	// References move during every listing.
	d.Be.SetOnUploads(func() {
		for _, sh := range etcdstore.AllRefShards() {
			if _, err := d.Cli.Put(context.Background(), d.Store.Keys().RefRev(sh), ""); err != nil {
				t.Error(err)
			}
		}
	})
	rep = d.DigestPass(r)
	if !reclaimtest.Contains(rep.Kept, "uploads", "retired") || rep.Ready != 0 || rep.Deleted != 0 {
		t.Errorf("kept %q ready %d deleted %d; want the inventory retired and everything kept", rep.Kept, rep.Ready, rep.Deleted)
	}
	d.WantPresent("retired", true, unref...)
	d.WantStates("retired", etcdstore.TombstonePending, unref...)

	// The pass that makes the tombstones ready asks about each blob once:
	// the one being uploaded is kept, the others are collected.
	d.Be.SetOnUploads(nil)
	d.Be.BlobUploads.Store(0)
	rep = d.DigestPass(r)
	if rep.RetainedBy["uploads"] != 1 || rep.Skipped != 1 || rep.Deleted != 2 || d.Be.BlobUploads.Load() != 3 {
		t.Errorf("retained by %v, skipped %d, deleted %d, %d listings of uploads into blobs; want the blob being uploaded kept, the others deleted, 3 listings",
			rep.RetainedBy, rep.Skipped, rep.Deleted, d.Be.BlobUploads.Load())
	}
	d.WantStates("uploading", etcdstore.TombstoneSkipped, unref[0])
	d.WantPresent("uploading", true, unref[0])
	d.WantPresent("collected", false, unref[1:]...)
}

// TestDigestPlacements retains a blob with a placement younger than the
// grace, in flight or finished (a blob written again through a gateway
// keeps its stored copy's older modification time, so only its finished
// placement retains it); an older placement retains nothing and is pruned,
// and only one of a write in flight (a gateway that died) counts as stale.
func TestDigestPlacements(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 4)
	d.AgeBlobs()
	now := d.Clock.Now()
	if err := d.Store.PlaceBlob(t.Context(), unref[0], "young", reclaimtest.CASBucket, reclaimtest.BlobKey(unref[0]), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := d.Store.PlaceBlob(t.Context(), unref[1], "stale", reclaimtest.CASBucket, reclaimtest.BlobKey(unref[1]), now.Add(-2*reclaimtest.PlacementGrace)); err != nil {
		t.Fatal(err)
	}
	// Blobs written again through a gateway: one within the grace, one
	// before it.
	for i, at := range []time.Time{now.Add(-time.Hour), now.Add(-2 * reclaimtest.PlacementGrace)} {
		dg := unref[2+i]
		if err := d.Store.PlaceBlob(t.Context(), dg, "again", reclaimtest.CASBucket, reclaimtest.BlobKey(dg), at); err != nil {
			t.Fatal(err)
		}
		if err := d.Store.EndPlacement(t.Context(), dg, "again", reclaimtest.CASBucket, reclaimtest.BlobKey(dg), at); err != nil {
			t.Fatal(err)
		}
	}
	r := d.Start(d.Config())
	rep := d.DigestPass(r)
	if rep.RetainedBy["placements"] != 2 || rep.Pending != 2 || rep.StalePlacements != 1 || rep.Pruned.Placements != 2 {
		t.Errorf("retained by %v, pending %d, stale %d, pruned %d; want 2 retained, 2 pending, 1 stale, 2 pruned", rep.RetainedBy, rep.Pending, rep.StalePlacements, rep.Pruned.Placements)
	}
	rep = d.DigestPass(r)
	reclaimtest.WantCounts(t, "after the prune", rep, 0, 2, 0, 2)
	d.WantPresent("placed", true, unref[0], unref[2])
	d.WantPresent("placement older than the grace", false, unref[1], unref[3])
	if n := d.Count(d.Store.Keys().AllPlacements()); n != 2 {
		t.Errorf("%d placements left, want the two young ones", n)
	}
}

// TestDigestTombstoneRetention prunes terminal tombstones once they are
// older than the retention.
func TestDigestTombstoneRetention(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	r := d.Start(d.Config())
	d.DigestPass(r)
	d.DigestPass(r)
	d.WantStates("deleted", etcdstore.TombstoneDeleted, unref...)
	d.Clock.Advance(digestsweep.DefaultTombstoneRetention - time.Hour)
	if rep := d.DigestPass(r); rep.Pruned.Tombstones != 0 {
		t.Errorf("pruned %d tombstones inside the retention", rep.Pruned.Tombstones)
	}
	d.Clock.Advance(2 * time.Hour)
	rep := d.DigestPass(r)
	if rep.Pruned.Tombstones != 2 || len(rep.Tombstones) != 0 {
		t.Errorf("pruned %d, left %v; want both deleted tombstones gone", rep.Pruned.Tombstones, rep.Tombstones)
	}
	d.WantStates("pruned", "", unref...)
	d.WantPresent("pruned", true, slices.Clone(refd)...)
}

// TestDigestLeftoverGuard finds a guard armed by a leader that died
// mid-collect, its blob still stored. The pass takes it over and deletes
// the blob, unless the rebuild finds a reference to it written around the
// gateway meanwhile: then the guard is released and the blob kept.
func TestDigestLeftoverGuard(t *testing.T) {
	t.Parallel()
	for _, referenced := range []bool{false, true} {
		name := "unreferenced"
		if referenced {
			name = "referenced around the gateway"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.PutBlobs("r", 6)
			d.PutManifest("m", refd...)
			dg := d.PutBlob("guarded")
			d.AgeBlobs()
			keys := d.Store.Keys()
			tomb := etcdstore.Tombstone{Digest: dg, State: etcdstore.TombstoneReady, Bucket: reclaimtest.CASBucket, Key: reclaimtest.BlobKey(dg),
				Size: int64(len(reclaimtest.BlobContent("guarded"))), Frontier: 1, Term: 1, Pass: 1, Attempts: 1, Since: d.Clock.Now()}
			guard := etcdstore.Guard{Digest: dg, Bucket: reclaimtest.CASBucket, Key: reclaimtest.BlobKey(dg), Term: 1, Pass: 1, At: d.Clock.Now()}
			for k, v := range map[string]string{keys.Tombstone(dg): etcdstore.MarshalRecord(tomb), keys.Guard(dg): etcdstore.MarshalRecord(guard)} {
				if _, err := d.Cli.Put(t.Context(), k, v); err != nil {
					t.Fatal(err)
				}
			}
			if referenced {
				body := reclaimtest.ManifestBody([]string{dg})
				if _, err := d.Direct.Client.PutObject(t.Context(), reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"around", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			r := d.Start(d.Config())
			rep := d.DigestPass(r)
			if rep.Guards != 1 {
				t.Errorf("guards found = %d, want 1", rep.Guards)
			}
			if n := d.Count(keys.Guards()); n != 0 {
				t.Errorf("%d guards left", n)
			}
			if referenced {
				if rep.Deleted != 0 || rep.Released != 1 || rep.Skipped != 1 {
					t.Errorf("deleted %d released %d skipped %d; want the guard released and the blob kept", rep.Deleted, rep.Released, rep.Skipped)
				}
				d.WantPresent(name, true, dg)
				d.WantStates(name, etcdstore.TombstoneSkipped, dg)
				return
			}
			if rep.Deleted != 1 {
				t.Errorf("deleted %d, want the guarded blob", rep.Deleted)
			}
			d.WantPresent(name, false, dg)
			d.WantStates(name, etcdstore.TombstoneDeleted, dg)
			d.WantPresent(name, true, refd...)
		})
	}
}

// TestDigestStatusInProgress: while a pass's digest sweep runs, the
// reclaimer's status shows its phase and counts so far.
func TestDigestStatusInProgress(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	d.PutBlobs("u", 3)
	d.AgeBlobs()
	var seen *digestsweep.Progress
	var r *reclaim.Reclaimer
	cfg := d.Config()
	cfg.Fault = func(point string) {
		if point != digestsweep.FaultPage || seen != nil {
			return
		}
		st, err := r.Status(context.Background())
		if err != nil {
			t.Errorf("status during the pass: %v", err)
			return
		}
		if st.InProgress != nil {
			seen = st.InProgress.Digests
		}
	}
	r = d.Start(cfg)
	d.DigestPass(r)
	if seen == nil || seen.Phase == "" || seen.Report.Stored == 0 {
		t.Fatalf("status during the digest sweep = %+v, want its phase and the blobs listed so far", seen)
	}
}

// TestDigestLapsedHoldKeepsEverything lets a complete's hold lapse with
// its lease, as when its gateway stops mid-complete, without its record
// being ended. The next pass keeps everything and settles the record; the
// pass after it, whose rebuild started after that, goes on.
func TestDigestLapsedHoldKeepsEverything(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	d.PutBlobs("u", 2)
	d.AgeBlobs()
	r := d.Start(d.Config())
	lease, err := d.Cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Store.HoldRefs(t.Context(), "complete-2", reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"lapsed", lease.ID, d.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Cli.Revoke(t.Context(), lease.ID); err != nil {
		t.Fatal(err)
	}
	rep := d.DigestPass(r)
	if !reclaimtest.Contains(rep.Kept, "not recorded") || rep.Pending != 0 {
		t.Errorf("pass after the hold lapsed: kept %q pending %d; want everything kept", rep.Kept, rep.Pending)
	}
	rep = d.DigestPass(r)
	if rep.Kept != "" || rep.Pending != 2 {
		t.Errorf("pass after a rebuild that started after the record was settled: kept %q pending %d", rep.Kept, rep.Pending)
	}
	if n := d.Count(d.Store.Keys().Unrecorded()); n != 0 {
		t.Errorf("%d unrecorded completes left", n)
	}
}
