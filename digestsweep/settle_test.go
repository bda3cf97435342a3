//go:build integration

package digestsweep_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// TestDigestLateDelete has the backend execute a DeleteObjects after its
// client gave up on it. The HEAD that follows the timeout finds the blobs
// still there; their guards must stay armed (a producer's push naming
// them is refused with the retryable SlowDown) until the delete can no
// longer be executed, so that when it lands no manifest names a blob it
// deletes. Once settled, the guards go and the producer, having uploaded
// the blob again, pushes its manifest.
func TestDigestLateDelete(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.BatchSize = 1000
	cfg.BackendTimeout = 2 * time.Second
	r := d.Start(cfg)
	client := d.gatewayClient()
	reclaimtest.WantCounts(t, "first pass", d.DigestPass(r), 2, 0, 0, 0)

	late := reclaimtest.NewLateDelete()
	d.Be.Late.Store(late)
	rep := d.DigestPass(r)
	if rep.Settling != 2 || rep.Deleted != 0 || rep.Failed != 0 {
		t.Errorf("pass whose delete timed out: settling %d deleted %d failed %d; want the two guards kept settling", rep.Settling, rep.Deleted, rep.Failed)
	}
	d.WantPresent("delete held", true, unref...)
	d.wantGuardHolds(t, client, "delete held", unref[0])

	d.Clock.Advance(reclaimtest.GuardSettle)
	if rep := d.DigestPass(r); rep.Settling != 2 || rep.Deleted != 0 {
		t.Errorf("pass inside the settle time: settling %d deleted %d; want the guards kept", rep.Settling, rep.Deleted)
	}
	close(late.Release)
	if err := <-late.Done; err != nil {
		t.Fatalf("late delete: %v", err)
	}
	d.WantPresent("late delete landed", false, unref...)
	d.wantGuardHolds(t, client, "late delete landed", unref[1])

	d.Settle()
	d.DigestPass(r)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left after the settle time", n)
	}
	d.WantStates("settled", etcdstore.TombstoneDeleted, unref...)
	d.WantPresent("settled", true, refd...)
	d.wantProducerAgain(t, r, client, unref[0])
}

// wantProducerAgain uploads blob again through the gateway and pushes a
// manifest naming it, as a registry client does after a 404, and checks
// that it stays.
func (d *digestEnv) wantProducerAgain(t *testing.T, r *reclaim.Reclaimer, client *s3.Client, blob string) {
	t.Helper()
	ctx := context.Background()
	content := reclaimtest.BlobContent("u0")
	if reclaimtest.DigestOf(content) != blob {
		t.Fatal("wantProducerAgain: blob is not u0")
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.BlobKey(blob)), Body: bytes.NewReader(content),
	}); err != nil {
		t.Fatalf("re-upload: %v", err)
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.ManifestPrefix + "again"), Body: bytes.NewReader(reclaimtest.ManifestBody([]string{blob})),
	}); err != nil {
		t.Fatalf("manifest push after the guard was settled: %v", err)
	}
	// The blob must be old, and the clock must not go back past the
	// tombstones the passes wrote (a time in the future stops a pass).
	if old := reclaimtest.Newest(d.Modified()).Add(reclaimtest.PlacementGrace + time.Hour); old.After(d.Clock.Now()) {
		d.Clock.Set(old)
	}
	for range 2 {
		d.DigestPass(r)
	}
	d.WantPresent("named again", true, blob)
}

// TestDigestFormerLeaderHeld holds a leader between recording its delete
// attempt on the guards and sending the delete, and ends its term. The
// next leader's pass must keep the guards armed (the held delete may
// still be sent and executed), and writes naming the digests stay
// refused. Released, the former leader's delete is sent or not; either
// way the guards stay until it is settled, and then the next leader
// settles the blobs from what the backend holds.
func TestDigestFormerLeaderHeld(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	reached, hold := make(chan struct{}), make(chan struct{})
	cfgA := d.Config()
	cfgA.ID = "a"
	cfgA.BatchSize = 1000
	held := false
	cfgA.Fault = func(point string) {
		if point == digestsweep.FaultAttempted && !held {
			held = true
			close(reached)
			<-hold
		}
	}
	a := d.Start(cfgA)
	cfgB := d.Config()
	cfgB.ID = "b"
	cfgB.Metrics = nil
	b := d.Run(cfgB)
	d.DigestPass(a)

	errc := make(chan error, 1)
	go func() {
		_, err := a.Trigger(context.Background())
		errc <- err
	}()
	<-reached
	d.RevokeLeader()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := b.Elector().AwaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	rep := d.DigestPass(b)
	if rep.Settling != 2 || rep.Deleted != 0 || d.Count(d.Store.Keys().Guards()) != 2 {
		t.Errorf("next leader while the former is held: settling %d deleted %d guards %d; want both guards kept", rep.Settling, rep.Deleted, d.Count(d.Store.Keys().Guards()))
	}
	d.WantPresent("former leader held", true, unref...)
	if err := d.WriteManifest("during", unref[0]); !errors.Is(err, etcdstore.ErrGuarded) {
		t.Errorf("manifest naming a guarded digest while the former leader is held: %v, want ErrGuarded", err)
	}

	close(hold)
	if err := <-errc; err == nil {
		t.Error("the former leader's pass ended without an error after its term ended")
	}
	if n := d.Count(d.Store.Keys().Guards()); n != 2 {
		t.Errorf("%d guards armed after the former leader went on, want 2", n)
	}
	d.Settle()
	d.DigestPass(b)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left after the settle time", n)
	}
	d.DigestPass(b)
	d.WantStates("settled", etcdstore.TombstoneDeleted, unref...)
	d.WantPresent("settled", false, unref...)
	d.WantPresent("settled", true, refd...)
}

// TestDigestRebuildOrder writes a manifest directly to MinIO, around the
// gateway, naming a blob whose tombstone is already pending, with a
// rebuild interval of an hour. The passes before the next rebuild must
// not make the tombstone ready (the picture of the references is older
// than the decision); the next rebuild finds the manifest and the blob
// stays. A blob nothing names waits for that rebuild too, and goes in its
// pass.
func TestDigestRebuildOrder(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	named := d.PutBlob("named")
	free := d.PutBlob("free")
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.RebuildInterval = time.Hour
	r := d.Start(cfg)
	if rep := d.DigestPass(r); !rep.Rebuild.Ran || rep.NewPending != 2 {
		t.Fatalf("first pass: rebuild %+v, new pending %d; want a rebuild and two pending", rep.Rebuild, rep.NewPending)
	}
	body := reclaimtest.ManifestBody([]string{named})
	if _, err := d.Direct.Client.PutObject(t.Context(), reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"around", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d.Clock.Advance(10 * time.Minute)
		rep := d.DigestPass(r)
		if rep.Rebuild.Ran || rep.Ready != 0 || rep.Deleted != 0 {
			t.Errorf("pass %d before the next rebuild: rebuild ran %v, ready %d, deleted %d; want nothing advanced", i, rep.Rebuild.Ran, rep.Ready, rep.Deleted)
		}
		d.WantStates("before the next rebuild", etcdstore.TombstonePending, named, free)
	}
	d.WantPresent("before the next rebuild", true, named, free)
	ex, err := r.ExplainDigest(t.Context(), free)
	if err != nil {
		t.Fatal(err)
	}
	if last := ex.Steps[len(ex.Steps)-1]; ex.Verdict != "pending" || last.Rule != "rebuild_wait" || !last.Matched {
		t.Errorf("explanation before the next rebuild: verdict %q, last step %+v; want pending by rebuild_wait", ex.Verdict, last)
	}

	d.Clock.Advance(time.Hour)
	rep := d.DigestPass(r)
	if !rep.Rebuild.Ran || rep.Rebuild.Result == nil || rep.Rebuild.Result.Unknown != 1 {
		t.Errorf("pass after the interval: rebuild %+v, want it to find the manifest written around the gateway", rep.Rebuild)
	}
	reclaimtest.WantCounts(t, "pass after the rebuild", rep, 0, 1, 1, 1)
	d.WantStates("after the rebuild", etcdstore.TombstoneSkipped, named)
	d.WantStates("after the rebuild", etcdstore.TombstoneDeleted, free)
	d.WantPresent("after the rebuild", true, append(refd, named)...)
	d.WantPresent("after the rebuild", false, free)
}

// TestDigestUnclearDelete loses the answer to a delete (the blob is gone)
// and drops another (the blob stays): each is looked at once, never sent
// again blindly, and its guard stays armed, with the blob reading 404 to
// producers, until the delete can no longer be executed; only then does a
// pass release it (gone) or delete the blob again (present).
func TestDigestUnclearDelete(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{true, false} {
		name := "answer lost"
		if !lost {
			name = "request dropped"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.PutBlobs("r", 6)
			d.PutManifest("m", refd...)
			unref := d.PutBlobs("u", 2)
			d.AgeBlobs()
			cfg := d.Config()
			cfg.BatchSize = 1000
			r := d.Start(cfg)
			client := d.gatewayClient()
			d.DigestPass(r)

			if lost {
				d.Be.LoseDelete.Store(true)
			} else {
				d.Be.DropDelete.Store(true)
			}
			rep := d.DigestPass(r)
			d.Be.LoseDelete.Store(false)
			d.Be.DropDelete.Store(false)
			if n := d.Be.Deletes.Load(); n != 1 {
				t.Errorf("%d deletes sent, want one", n)
			}
			d.wantUnclearKept(t, client, name, rep, lost, unref)

			// Inside the settle time no pass releases the guards or sends
			// the delete again.
			d.Clock.Advance(reclaimtest.GuardSettle)
			rep = d.DigestPass(r)
			if rep.Settling != 2 || rep.Deleted != 0 || d.Count(d.Store.Keys().Guards()) != 2 || d.Be.Deletes.Load() != 1 {
				t.Errorf("inside the settle time: settling %d deleted %d guards %d deletes sent %d; want the two guards kept and nothing sent",
					rep.Settling, rep.Deleted, d.Count(d.Store.Keys().Guards()), d.Be.Deletes.Load())
			}
			d.wantGuardHolds(t, client, "inside the settle time", unref[0])

			d.Settle()
			rep = d.DigestPass(r)
			if n := d.Count(d.Store.Keys().Guards()); n != 0 {
				t.Errorf("after the settle time: %d guards left", n)
			}
			want := int64(2) // dropped: deleted now
			if lost {
				want = 0 // counted when the blobs were found gone
			}
			if rep.Deleted != want || rep.Settling != 0 {
				t.Errorf("after the settle time: deleted %d settling %d, want %d and 0", rep.Deleted, rep.Settling, want)
			}
			d.WantPresent("after the settle time", false, unref...)
			d.WantPresent("after the settle time", true, refd...)
			d.WantStates("after the settle time", etcdstore.TombstoneDeleted, unref...)
		})
	}
}

// wantUnclearKept checks the pass whose delete of unref had no clear
// answer: the guards stay armed and are counted settling; a lost answer's
// blobs are recorded deleted (a HEAD found them gone), a dropped request's
// stay ready, with no attempt counted as failed.
func (d *digestEnv) wantUnclearKept(t *testing.T, client *s3.Client, name string, rep digestsweep.Report, lost bool, unref []string) {
	t.Helper()
	if n := d.Count(d.Store.Keys().Guards()); n != 2 || rep.Settling != 2 {
		t.Errorf("%s: %d guards armed, %d settling; want both kept while the delete may still be executed", name, n, rep.Settling)
	}
	d.wantGuardHolds(t, client, name, unref[1])
	tb, _, _ := d.Tombstone(unref[0])
	if lost {
		reclaimtest.WantCounts(t, name, rep, 0, 2, 0, 2)
		d.WantPresent(name, false, unref...)
		if tb.State != etcdstore.TombstoneDeleted || !reclaimtest.Contains(tb.Reason, "unclear", "gone") {
			t.Errorf("%s: tombstone %+v, want deleted with the doubt recorded", name, tb)
		}
		return
	}
	if rep.Failed != 0 || rep.Deleted != 0 {
		t.Errorf("%s: failed %d deleted %d, want neither: the delete may still land", name, rep.Failed, rep.Deleted)
	}
	if tb.State != etcdstore.TombstoneReady || tb.Attempts != 1 {
		t.Errorf("%s: tombstone %+v, want ready as it was", name, tb)
	}
	d.WantPresent(name, true, unref...)
}

// TestDigestLeftoverGuardWaitsForRebuild finds a guard left by a leader
// cut short before it sent any delete, on a ready tombstone decided after
// the last rebuild, with an hour between rebuilds. Taking the guard over
// does not make the tombstone ready for this pass: the pass releases the
// guard and the blob waits for the next rebuild, in whose pass it goes.
func TestDigestLeftoverGuardWaitsForRebuild(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.RebuildInterval = time.Hour
	r := d.Start(cfg)
	d.DigestPass(r) // the rebuild runs

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
	d.Clock.Advance(10 * time.Minute)
	rep := d.DigestPass(r)
	if rep.Rebuild.Ran || rep.Deleted != 0 || rep.Released != 1 {
		t.Errorf("pass before the next rebuild: rebuild ran %v, deleted %d, released %d; want the guard released and nothing deleted", rep.Rebuild.Ran, rep.Deleted, rep.Released)
	}
	d.WantPresent("before the next rebuild", true, dg)
	d.WantStates("before the next rebuild", etcdstore.TombstoneReady, dg)

	d.Clock.Advance(time.Hour)
	if rep := d.DigestPass(r); !rep.Rebuild.Ran || rep.Deleted != 1 {
		t.Errorf("pass after the rebuild: rebuild ran %v, deleted %d; want the blob deleted", rep.Rebuild.Ran, rep.Deleted)
	}
	d.WantPresent("after the rebuild", false, dg)
	d.WantPresent("after the rebuild", true, refd...)
}

// TestDigestStopBeforeGoneGuardsReleased ends the term after the
// collector recorded the deleted blobs' tombstones deleted but before it
// released their guards (a transaction of its own): the next leader keeps
// the guards, which record the delete attempt, armed until that attempt
// is settled, then releases them without counting the blobs again.
func TestDigestStopBeforeGoneGuardsReleased(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	var armed atomic.Bool
	cfgA := d.Config()
	cfgA.ID = "a"
	cfgA.Fault = func(point string) {
		if point == digestsweep.FaultGoneRecorded && armed.CompareAndSwap(true, false) {
			d.RevokeLeader()
		}
	}
	a := d.Start(cfgA)
	cfgB := d.Config()
	cfgB.ID = "b"
	cfgB.Metrics = nil
	b := d.Run(cfgB)
	d.DigestPass(a)

	armed.Store(true)
	if _, err := d.Trigger(a); !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("pass error = %v, want ErrFenced", err)
	}
	d.WantPresent("deleted by the former leader", false, unref...)
	d.WantStates("former leader", etcdstore.TombstoneDeleted, unref...)
	if n := d.Count(d.Store.Keys().Guards()); n != 2 {
		t.Fatalf("%d guards armed, want the former leader's two", n)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := b.Elector().AwaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	rep := d.MustPass(b)
	if rep.Digests.Guards != 2 || rep.Digests.Settling != 2 || rep.Digests.Deleted != 2 || rep.Digests.Resumed != 1 {
		t.Errorf("next leader: guards %d settling %d deleted %d resumed %d; want the two kept settling, the two deletions counted once",
			rep.Digests.Guards, rep.Digests.Settling, rep.Digests.Deleted, rep.Digests.Resumed)
	}
	if n := d.Count(d.Store.Keys().Guards()); n != 2 {
		t.Fatalf("%d guards armed while the former leader's delete may still be executed, want 2", n)
	}
	d.Settle()
	rep = d.MustPass(b)
	if rep.Digests.Guards != 2 || rep.Digests.Deleted != 0 || rep.Digests.Settling != 0 {
		t.Errorf("after the settle time: guards %d deleted %d settling %d; want the two released, counted deleted no more", rep.Digests.Guards, rep.Digests.Deleted, rep.Digests.Settling)
	}
	d.WantStates("settled", etcdstore.TombstoneDeleted, unref...)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left", n)
	}
	d.WantPresent("settled", true, refd...)
}
