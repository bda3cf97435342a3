//go:build integration

package reclaim_test

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
			refd := d.putBlobs("r", 6)
			d.putManifest("m", refd...)
			unref := d.putBlobs("u", 4)
			target := unref[0]
			other := otherShard(t, target, unref[1:])
			d.ageBlobs()
			var armed atomic.Bool
			errs := make(chan error, 1)
			cfg := d.config()
			cfg.BatchSize = 1000 // one page, so that the hook runs before every write
			cfg.Fault = func(point string) {
				if point == digestsweep.FaultBeforeTombstone && armed.CompareAndSwap(true, false) {
					errs <- d.writeManifest("late", target)
				}
			}
			r := d.start(cfg)
			if at == "pending" {
				d.digestPass(r)
			}
			before, beforeRev, _ := d.tombstone(target)

			armed.Store(true)
			rep := d.digestPass(r)
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if rep.Changed != 1 {
				t.Errorf("changed = %d, want the one digest referenced late", rep.Changed)
			}
			after, afterRev, _ := d.tombstone(target)
			if afterRev != beforeRev || after != before {
				t.Errorf("tombstone of the late-referenced digest moved: %+v -> %+v", before, after)
			}
			if at == "new" {
				d.wantStates("new", etcdstore.TombstonePending, other)
			} else {
				d.wantStates("pending", etcdstore.TombstoneDeleted, other)
				d.wantPresent("pending", false, other)
			}

			next := d.digestPass(r)
			if at == "pending" && next.Skipped != 1 {
				t.Errorf("next pass skipped %d, want the late-referenced digest", next.Skipped)
			}
			d.wantPresent("at the end", true, append(refd, target)...)
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
			refd := d.putBlobs("r", 6)
			d.putManifest("m", refd...)
			unref := d.putBlobs("u", 4)
			d.ageBlobs()
			var (
				armed    atomic.Bool
				guardErr = make(chan error, 1)
				late     string
			)
			cfgA := d.config()
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
						guardErr <- d.writeManifest("guarded", guarded[0])
					}
				}
				d.revokeLeader()
				if err := d.writeManifest("late", late); err != nil {
					t.Error(err)
				}
			}
			a := d.start(cfgA)
			cfgB := d.config()
			cfgB.ID = "b"
			cfgB.Metrics = nil
			b := d.run(cfgB)

			if tt.pass == 2 {
				d.digestPass(a)
			}
			// Unreferenced (and old at the pass clock) until a manifest
			// names it while the leader is away: it must survive.
			late = d.putBlob("late")
			deletesBefore := d.be.deletes.Load()
			armed.Store(true)
			rep, err := d.trigger(a)
			if !errors.Is(err, reclaim.ErrFenced) {
				t.Fatalf("interrupted pass error = %v, want ErrFenced (report %+v)", err, rep.Digests)
			}
			if tt.point == digestsweep.FaultGuarded {
				d.wantGuardedTurnedAway(t, guardErr, deletesBefore)
			}
			d.wantPresent("after the interruption", true, append(refd, late)...)

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
	if d.be.deletes.Load() != deletesBefore {
		t.Errorf("the former leader sent %d deletes after its term ended", d.be.deletes.Load()-deletesBefore)
	}
	if resp, _ := d.cli.Get(t.Context(), d.store.Keys().RefSource(dgBucket, dgManifests+"guarded")); len(resp.Kvs) != 0 {
		t.Error("a manifest naming a guarded digest was recorded")
	}
}

// wantResumedOnce runs the new leader b's pass, which must resume pass
// number pass, and the passes after it: every blob is counted once, the
// four unreferenced ones are deleted exactly once, and the referenced ones
// (late included) stay.
func (d *digestEnv) wantResumedOnce(t *testing.T, b *reclaim.Reclaimer, pass int, refd, unref []string, late string) {
	t.Helper()
	resumed := d.mustPass(b)
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
		deleted += d.digestPass(b).Deleted
	}
	if deleted != 4 {
		t.Errorf("the passes from the resumed one on deleted %d, want the four exactly once", deleted)
	}
	d.wantPresent("at the end", false, unref...)
	d.wantPresent("at the end", true, append(refd, late)...)
	if n := d.count(d.store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left", n)
	}
}

// guarded returns the digests whose guards are armed.
func (d *digestEnv) guarded() []string {
	resp, err := d.cli.Get(context.Background(), d.store.Keys().Guards(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
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
	refd := d.putBlobs("r", 6)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 2)
	d.ageBlobs()
	cfgA := d.config()
	cfgA.ID = "a"
	cfgA.BatchSize = 1000
	a := d.start(cfgA)
	cfgB := d.config()
	cfgB.ID = "b"
	cfgB.Metrics = nil
	b := d.run(cfgB)
	d.digestPass(a)

	var once atomic.Bool
	d.be.setAfterDelete(func() {
		if once.CompareAndSwap(false, true) {
			d.revokeLeader()
		}
	})
	if _, err := d.trigger(a); !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("pass error = %v, want ErrFenced", err)
	}
	d.be.setAfterDelete(nil)
	d.wantPresent("deleted by the former leader", false, unref...)
	if n := d.count(d.store.Keys().Guards()); n != 2 {
		t.Fatalf("%d guards armed, want the former leader's two", n)
	}
	d.wantStates("former leader", etcdstore.TombstoneReady, unref...)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := b.Elector().AwaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	rep := d.mustPass(b)
	if rep.Digests.Guards != 2 || rep.Digests.Settling != 2 || rep.Digests.Deleted != 0 || rep.Digests.Resumed != 1 {
		t.Errorf("next leader: guards %d settling %d deleted %d resumed %d; want the two kept settling", rep.Digests.Guards, rep.Digests.Settling, rep.Digests.Deleted, rep.Digests.Resumed)
	}
	if n := d.count(d.store.Keys().Guards()); n != 2 {
		t.Fatalf("%d guards armed while the former leader's delete may still be executed, want 2", n)
	}
	d.settle()
	rep = d.mustPass(b)
	if rep.Digests.Guards != 2 || rep.Digests.Deleted != 2 || rep.Digests.Settling != 0 {
		t.Errorf("after the settle time: guards %d deleted %d settling %d; want the two settled", rep.Digests.Guards, rep.Digests.Deleted, rep.Digests.Settling)
	}
	d.wantStates("settled", etcdstore.TombstoneDeleted, unref...)
	if n := d.count(d.store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left", n)
	}
	d.wantPresent("settled", true, refd...)
}

// TestDigestHoldsKeepEverything keeps every blob while a reference hold
// exists.
func TestDigestHoldsKeepEverything(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	unref := d.putBlobs("u", 2)
	d.putBlobs("r", 6)
	d.ageBlobs()
	r := d.start(d.config())
	lease, err := d.cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.store.HoldRefs(t.Context(), "complete-1", dgBucket, dgManifests+"held", lease.ID, d.clock.Now()); err != nil {
		t.Fatal(err)
	}
	rep := d.digestPass(r)
	if !contains(rep.Kept, "hold") || rep.Pending != 0 {
		t.Errorf("kept %q pending %d; want everything kept for the hold", rep.Kept, rep.Pending)
	}
	d.wantStates("held", "", unref...)
	// The complete recorded its references: its hold and record end.
	if err := d.store.EndUnrecorded(t.Context(), "complete-1"); err != nil {
		t.Fatal(err)
	}
	if err := d.store.ReleaseRefHold(t.Context(), "complete-1"); err != nil {
		t.Fatal(err)
	}
	rep = d.digestPass(r)
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
	refd := d.putBlobs("r", 4)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 3)
	d.upload(dgBucket, blobKey(unref[0]), 1)
	d.ageBlobs()
	r := d.start(d.config())
	rep := d.digestPass(r)
	if rep.Pending != 3 || rep.RetainedBy["uploads"] != 0 || d.be.blobUploads.Load() != 0 {
		t.Errorf("pending %d, retained by %v, %d listings of uploads into blobs; want every unreferenced blob pending and no listing",
			rep.Pending, rep.RetainedBy, d.be.blobUploads.Load())
	}
	d.wantStates("marked", etcdstore.TombstonePending, unref...)

	// References move during every listing.
	d.be.setOnUploads(func() {
		for _, sh := range etcdstore.AllRefShards() {
			if _, err := d.cli.Put(context.Background(), d.store.Keys().RefRev(sh), ""); err != nil {
				t.Error(err)
			}
		}
	})
	rep = d.digestPass(r)
	if !contains(rep.Kept, "uploads", "retired") || rep.Ready != 0 || rep.Deleted != 0 {
		t.Errorf("kept %q ready %d deleted %d; want the inventory retired and everything kept", rep.Kept, rep.Ready, rep.Deleted)
	}
	d.wantPresent("retired", true, unref...)
	d.wantStates("retired", etcdstore.TombstonePending, unref...)

	// The pass that makes the tombstones ready asks about each blob once:
	// the one being uploaded is kept, the others are collected.
	d.be.setOnUploads(nil)
	d.be.blobUploads.Store(0)
	rep = d.digestPass(r)
	if rep.RetainedBy["uploads"] != 1 || rep.Skipped != 1 || rep.Deleted != 2 || d.be.blobUploads.Load() != 3 {
		t.Errorf("retained by %v, skipped %d, deleted %d, %d listings of uploads into blobs; want the blob being uploaded kept, the others deleted, 3 listings",
			rep.RetainedBy, rep.Skipped, rep.Deleted, d.be.blobUploads.Load())
	}
	d.wantStates("uploading", etcdstore.TombstoneSkipped, unref[0])
	d.wantPresent("uploading", true, unref[0])
	d.wantPresent("collected", false, unref[1:]...)
}

// TestDigestPlacements retains a blob with a placement younger than the
// grace, in flight or finished (a blob written again through a gateway
// keeps its stored copy's older modification time, so only its finished
// placement retains it); an older placement retains nothing and is pruned,
// and only one of a write in flight (a gateway that died) counts as stale.
func TestDigestPlacements(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("r", 6)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 4)
	d.ageBlobs()
	now := d.clock.Now()
	if err := d.store.PlaceBlob(t.Context(), unref[0], "young", dgBucket, blobKey(unref[0]), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := d.store.PlaceBlob(t.Context(), unref[1], "stale", dgBucket, blobKey(unref[1]), now.Add(-2*dgGrace)); err != nil {
		t.Fatal(err)
	}
	// Blobs written again through a gateway: one within the grace, one
	// before it.
	for i, at := range []time.Time{now.Add(-time.Hour), now.Add(-2 * dgGrace)} {
		dg := unref[2+i]
		if err := d.store.PlaceBlob(t.Context(), dg, "again", dgBucket, blobKey(dg), at); err != nil {
			t.Fatal(err)
		}
		if err := d.store.EndPlacement(t.Context(), dg, "again", dgBucket, blobKey(dg), at); err != nil {
			t.Fatal(err)
		}
	}
	r := d.start(d.config())
	rep := d.digestPass(r)
	if rep.RetainedBy["placements"] != 2 || rep.Pending != 2 || rep.StalePlacements != 1 || rep.Pruned.Placements != 2 {
		t.Errorf("retained by %v, pending %d, stale %d, pruned %d; want 2 retained, 2 pending, 1 stale, 2 pruned", rep.RetainedBy, rep.Pending, rep.StalePlacements, rep.Pruned.Placements)
	}
	rep = d.digestPass(r)
	wantCounts(t, "after the prune", rep, 0, 2, 0, 2)
	d.wantPresent("placed", true, unref[0], unref[2])
	d.wantPresent("placement older than the grace", false, unref[1], unref[3])
	if n := d.count(d.store.Keys().AllPlacements()); n != 2 {
		t.Errorf("%d placements left, want the two young ones", n)
	}
}

// TestDigestTombstoneRetention prunes terminal tombstones once they are
// older than the retention.
func TestDigestTombstoneRetention(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("r", 6)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 2)
	d.ageBlobs()
	r := d.start(d.config())
	d.digestPass(r)
	d.digestPass(r)
	d.wantStates("deleted", etcdstore.TombstoneDeleted, unref...)
	d.clock.Advance(digestsweep.DefaultTombstoneRetention - time.Hour)
	if rep := d.digestPass(r); rep.Pruned.Tombstones != 0 {
		t.Errorf("pruned %d tombstones inside the retention", rep.Pruned.Tombstones)
	}
	d.clock.Advance(2 * time.Hour)
	rep := d.digestPass(r)
	if rep.Pruned.Tombstones != 2 || len(rep.Tombstones) != 0 {
		t.Errorf("pruned %d, left %v; want both deleted tombstones gone", rep.Pruned.Tombstones, rep.Tombstones)
	}
	d.wantStates("pruned", "", unref...)
	d.wantPresent("pruned", true, slices.Clone(refd)...)
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
			refd := d.putBlobs("r", 6)
			d.putManifest("m", refd...)
			dg := d.putBlob("guarded")
			d.ageBlobs()
			keys := d.store.Keys()
			tomb := etcdstore.Tombstone{Digest: dg, State: etcdstore.TombstoneReady, Bucket: dgBucket, Key: blobKey(dg),
				Size: int64(len(blobContent("guarded"))), Frontier: 1, Term: 1, Pass: 1, Attempts: 1, Since: d.clock.Now()}
			guard := etcdstore.Guard{Digest: dg, Bucket: dgBucket, Key: blobKey(dg), Term: 1, Pass: 1, At: d.clock.Now()}
			for k, v := range map[string]string{keys.Tombstone(dg): etcdstore.MarshalRecord(tomb), keys.Guard(dg): etcdstore.MarshalRecord(guard)} {
				if _, err := d.cli.Put(t.Context(), k, v); err != nil {
					t.Fatal(err)
				}
			}
			if referenced {
				body := dgManifest([]string{dg})
				if _, err := d.direct.Client.PutObject(t.Context(), dgBucket, dgManifests+"around", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			r := d.start(d.config())
			rep := d.digestPass(r)
			if rep.Guards != 1 {
				t.Errorf("guards found = %d, want 1", rep.Guards)
			}
			if n := d.count(keys.Guards()); n != 0 {
				t.Errorf("%d guards left", n)
			}
			if referenced {
				if rep.Deleted != 0 || rep.Released != 1 || rep.Skipped != 1 {
					t.Errorf("deleted %d released %d skipped %d; want the guard released and the blob kept", rep.Deleted, rep.Released, rep.Skipped)
				}
				d.wantPresent(name, true, dg)
				d.wantStates(name, etcdstore.TombstoneSkipped, dg)
				return
			}
			if rep.Deleted != 1 {
				t.Errorf("deleted %d, want the guarded blob", rep.Deleted)
			}
			d.wantPresent(name, false, dg)
			d.wantStates(name, etcdstore.TombstoneDeleted, dg)
			d.wantPresent(name, true, refd...)
		})
	}
}

// TestDigestStatusInProgress: while a pass's digest sweep runs, the
// reclaimer's status shows its phase and counts so far.
func TestDigestStatusInProgress(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	d.putBlobs("u", 3)
	d.ageBlobs()
	var seen *digestsweep.Progress
	var r *reclaim.Reclaimer
	cfg := d.config()
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
	r = d.start(cfg)
	d.digestPass(r)
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
	d.putBlobs("u", 2)
	d.ageBlobs()
	r := d.start(d.config())
	lease, err := d.cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.store.HoldRefs(t.Context(), "complete-2", dgBucket, dgManifests+"lapsed", lease.ID, d.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.Revoke(t.Context(), lease.ID); err != nil {
		t.Fatal(err)
	}
	rep := d.digestPass(r)
	if !contains(rep.Kept, "not recorded") || rep.Pending != 0 {
		t.Errorf("pass after the hold lapsed: kept %q pending %d; want everything kept", rep.Kept, rep.Pending)
	}
	rep = d.digestPass(r)
	if rep.Kept != "" || rep.Pending != 2 {
		t.Errorf("pass after a rebuild that started after the record was settled: kept %q pending %d", rep.Kept, rep.Pending)
	}
	if n := d.count(d.store.Keys().Unrecorded()); n != 0 {
		t.Errorf("%d unrecorded completes left", n)
	}
}
