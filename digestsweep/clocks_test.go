//go:build integration

package digestsweep_test

import (
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

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
