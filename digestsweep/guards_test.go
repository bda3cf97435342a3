//go:build integration

package digestsweep_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// TestDigestDeleteAfterDeadlineNotSent stalls a leader between recording
// its delete attempt and sending it, without cancelling anything, until
// the recorded deadline has passed on its clock. No DeleteObjects may be
// sent: by then a successor may have settled the guard and released it.
// The pass counts the blobs failed and releases its guards, and the next
// pass deletes them.
func TestDigestDeleteAfterDeadlineNotSent(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.BatchSize = 1000
	stalled := false
	cfg.Fault = func(point string) {
		if point == digestsweep.FaultAttempted && !stalled {
			stalled = true
			d.Clock.Advance(reclaim.DefaultBackendTimeout + time.Second)
		}
	}
	r := d.Start(cfg)
	reclaimtest.WantCounts(t, "first pass", d.DigestPass(r), 2, 0, 0, 0)
	before := d.Be.Deletes.Load()
	rep := d.DigestPass(r)
	if !stalled {
		t.Fatal("the pass never reached the point after recording its attempt")
	}
	if n := d.Be.Deletes.Load() - before; n != 0 {
		t.Errorf("%d DeleteObjects sent after the recorded deadline had passed, want none", n)
	}
	if rep.Deleted != 0 || rep.Failed != 2 {
		t.Errorf("stalled pass: deleted %d failed %d; want 0 deleted, 2 failed", rep.Deleted, rep.Failed)
	}
	d.WantPresent("delete not sent", true, unref...)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left after a delete that was never sent", n)
	}
	if rep := d.DigestPass(r); rep.Deleted != 2 {
		t.Errorf("next pass deleted %d, want 2", rep.Deleted)
	}
	d.WantPresent("next pass", false, unref...)
	d.WantPresent("next pass", true, refd...)
}

// TestDigestGuardSettledBetweenPasses leaves two guards armed by a delete
// whose outcome was not clear (its request dropped on the way, or its
// answer lost after the backend deleted), and runs no pass afterwards.
// Inside the settle time the leader's timer keeps them; once it has
// passed, the timer releases them within a few checks, so a producer's
// manifest push gets through without waiting for the next pass.
func TestDigestGuardSettledBetweenPasses(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{false, true} {
		name := "request dropped"
		if lost {
			name = "answer lost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.PutBlobs("r", 2)
			d.PutManifest("m", refd...)
			unref := d.PutBlobs("u", 2)
			d.AgeBlobs()
			cfg := d.Config()
			cfg.BatchSize = 1000
			cfg.GuardCheck = 10 * time.Millisecond
			checked := make(chan struct{}, 1)
			cfg.Fault = func(point string) {
				if point == reclaim.FaultGuardsChecked {
					select {
					case checked <- struct{}{}:
					default:
					}
				}
			}
			r := d.Start(cfg)
			client := d.gatewayClient()
			// awaitChecks waits for n checks of the timer that began after
			// the call.
			awaitChecks := func(n int) {
				t.Helper()
				for i := 0; i <= n; i++ { // the first may have begun before
					select {
					case <-checked:
					case <-time.After(30 * time.Second):
						t.Fatal("the leader's guard check did not run")
					}
				}
			}
			reclaimtest.WantCounts(t, "first pass", d.DigestPass(r), 2, 0, 0, 0)
			flag := &d.Be.DropDelete
			if lost {
				flag = &d.Be.LoseDelete
			}
			flag.Store(true)
			rep := d.DigestPass(r)
			flag.Store(false)
			if rep.Settling != 2 {
				t.Fatalf("pass with an unclear delete: settling %d, want 2", rep.Settling)
			}
			d.Clock.Advance(reclaimtest.GuardSettle)
			awaitChecks(3)
			if n := d.Count(d.Store.Keys().Guards()); n != 2 {
				t.Fatalf("%d guards inside the settle time, want 2", n)
			}
			d.wantGuardHolds(t, client, "inside the settle time", unref[0])

			d.Settle()
			awaitChecks(3)
			if n := d.Count(d.Store.Keys().Guards()); n != 0 {
				t.Fatalf("%d guards left after the settle time with the timer running, want 0", n)
			}
			d.WantPresent("settled between passes", !lost, unref...)
			if lost {
				d.WantStates("settled between passes", etcdstore.TombstoneDeleted, unref...)
			}
			d.wantProducerAgain(t, r, client, unref[0])
		})
	}
}

// TestDigestUnrecordedCompleteKeepsEverything completes a multipart upload
// of a manifest through the gateway while another write of the same key
// is pending, so the complete cannot record what the manifest names, with
// a rebuild only every hour. The complete lands after the pass's rebuild
// has read the sources and before its tombstones are judged, so the blob
// it names is ready by every other rule. Nothing may be deleted until a
// rebuild that started after the complete has read the manifest; then the
// named blob stays and the free one goes.
func TestDigestUnrecordedCompleteKeepsEverything(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	named := d.PutBlob("named")
	free := d.PutBlob("free")
	d.AgeBlobs()
	client := d.gatewayClient()
	key := reclaimtest.ManifestPrefix + "completed"
	complete := func() {
		ctx := context.Background()
		// Another write of the key is in flight: the complete's record
		// of its references is refused, after its retries.
		if err := d.Store.BeginRefWrite(ctx, reclaimtest.CASBucket, key, etcdstore.RefWrite{ID: "other", Digests: nil, At: d.Clock.Now()}); err != nil {
			t.Error(err)
			return
		}
		up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(key)})
		if err != nil {
			t.Error(err)
			return
		}
		part, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(reclaimtest.ManifestBody([]string{named}))})
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(key), UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}); err != nil {
			t.Error(err)
			return
		}
		if err := d.Store.EndRefWrite(ctx, reclaimtest.CASBucket, key, "other", etcdstore.WriteFailed, "", d.Clock.Now()); err != nil {
			t.Error(err)
		}
	}
	cfg := d.Config()
	cfg.Digests.RebuildInterval = time.Hour
	var armed atomic.Bool
	cfg.Fault = func(point string) {
		if point == digestsweep.FaultBeforeTombstone && armed.CompareAndSwap(true, false) {
			complete()
		}
	}
	r := d.Start(cfg)
	reclaimtest.WantCounts(t, "first pass", d.DigestPass(r), 2, 0, 0, 0)

	d.Clock.Advance(time.Hour + time.Minute)
	armed.Store(true)
	rep := d.DigestPass(r)
	if armed.Load() {
		t.Fatal("the complete was not made during the pass")
	}
	if !rep.Rebuild.Ran || rep.Deleted != 0 {
		t.Errorf("pass during which the complete landed: rebuild ran %v, deleted %d; want a rebuild and nothing deleted", rep.Rebuild.Ran, rep.Deleted)
	}
	d.WantPresent("complete unrecorded", true, named, free)
	for i := range 2 {
		d.Clock.Advance(10 * time.Minute)
		rep := d.DigestPass(r)
		if rep.Deleted != 0 || !reclaimtest.Contains(rep.Kept, "not recorded") {
			t.Errorf("pass %d before the next rebuild: deleted %d, kept %q; want everything kept for the unrecorded complete", i, rep.Deleted, rep.Kept)
		}
	}
	d.WantPresent("before the next rebuild", true, named, free)

	d.Clock.Advance(time.Hour)
	for range 3 {
		d.DigestPass(r)
	}
	if n := d.Count(d.Store.Keys().Unrecorded()); n != 0 {
		t.Errorf("%d unrecorded completes left after a rebuild read them", n)
	}
	d.WantPresent("after the rebuild", true, append(refd, named)...)
	d.WantPresent("after the rebuild", false, free)
}
