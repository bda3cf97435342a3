//go:build integration

package digestsweep_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// explainDigest explains a digest and checks that doing so wrote nothing.
func (d *digestEnv) explainDigest(r *reclaim.Reclaimer, digest string) digestsweep.DigestExplanation {
	d.T.Helper()
	before := d.Revision()
	ex, err := r.ExplainDigest(d.T.Context(), digest)
	if err != nil {
		d.T.Fatalf("explain %s: %v", digest, err)
	}
	if after := d.Revision(); after != before {
		d.T.Errorf("explaining %s moved etcd from revision %d to %d", digest, before, after)
	}
	return ex
}

// blobRules are the rules of a stored blob up to the inventories.
var blobRules = []string{"not_stored", "reference_holds", "references", "trash", "placements", "uploads"}

// judged is blobRules followed by the judgement's rules up to rule.
func judged(rule string) []string {
	all := []string{"retained_live_tombstone", "retained", "tombstone_elsewhere", "no_live_tombstone", "waiting_this_pass",
		"confirmed_this_pass", "rebuild_wait", "frontier_applied", "frontier_wait"}
	for i, r := range all {
		if r == rule {
			return append(append([]string{}, blobRules...), all[:i+1]...)
		}
	}
	panic(rule)
}

func TestExplainDigests(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlob("referenced")
	unref := d.PutBlob("unreferenced")
	trashed := d.PutBlob("trashed")
	d.PutManifest("app/v1", refd)
	d.PutManifest("app/v2", trashed)
	d.AgeBlobs()
	now := d.Clock.Now()
	tr := d.DeleteManifest("app/v2", now.Add(2*time.Hour))
	r := d.Start(d.Config())

	// Referenced: kept, naming the manifest.
	ex := d.explainDigest(r, refd)
	reclaimtest.WantSteps(t, "referenced", ex.Steps, judged("retained"), "references")
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "retained by references", "cas/manifests/app/v1 (manifests)") ||
		ex.Blob == nil || ex.Blob.Key != reclaimtest.BlobKey(refd) || ex.Blob.Namespace != "blobs" || ex.Blob.Size != int64(len(reclaimtest.BlobContent("referenced"))) ||
		len(ex.References) != 1 || ex.References[0].Key != reclaimtest.ManifestPrefix+"app/v1" || ex.References[0].Source != "manifests" ||
		ex.Tombstone != nil || ex.Guard != nil || ex.NextPass != 1 || ex.Shard != refd[7:8] || ex.ShardRefRevision == 0 {
		t.Errorf("referenced = %+v", ex)
	}
	if v := reclaimtest.Step(t, ex.Steps, "placements").Values; v["young_blob"] != false || v["placement_grace"] != "24h0m0s" {
		t.Errorf("referenced placements values = %v", v)
	}

	// In the trash until it expires: kept, with the expiry.
	ex = d.explainDigest(r, trashed)
	reclaimtest.WantSteps(t, "trashed", ex.Steps, judged("retained"), "trash")
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "retained by trash", tr.Expires.Format(time.RFC3339)) ||
		len(ex.Trash) != 1 || !ex.Trash[0].Expires.Equal(tr.Expires) || ex.Trash[0].Expired || ex.Trash[0].Principal != "alice" ||
		!ex.Trash[0].DeletedAt.Equal(tr.DeletedAt) || len(ex.References) != 0 {
		t.Errorf("trashed = %+v", ex)
	}

	// Unreferenced and old: the next pass tombstones it.
	ex = d.explainDigest(r, unref)
	reclaimtest.WantSteps(t, "unreferenced", ex.Steps, judged("no_live_tombstone"))
	if ex.Verdict != "tombstone" || !reclaimtest.Contains(ex.Reason, "nothing retains it", "pending") {
		t.Errorf("unreferenced = %+v", ex)
	}
	if v := reclaimtest.Step(t, ex.Steps, "placements").Values; v["young_blob"] != false || v["placements"] != int64(0) {
		t.Errorf("unreferenced placements values = %v", v)
	}

	// One pass later it is pending; with no plane to wait for, the next
	// pass deletes it.
	one := d.DigestPass(r)
	reclaimtest.WantCounts(t, "pass one", one, 1, 0, 0, 0)
	ex = d.explainDigest(r, unref)
	reclaimtest.WantSteps(t, "pending", ex.Steps, judged("frontier_applied"))
	term, _ := r.Leader()
	if ex.Verdict != "delete" || ex.NextPass != 2 || ex.Tombstone == nil || ex.Tombstone.State != "pending" || ex.Tombstone.Pass != 1 ||
		ex.Tombstone.Term != term || ex.Tombstone.Attempts != 1 || ex.RequiredFrontier != ex.Tombstone.Frontier || len(ex.Planes) != 0 {
		t.Errorf("pending = %+v (tombstone %+v)", ex, ex.Tombstone)
	}

	// Its trash expired, the trashed blob is no longer retained.
	d.Clock.Advance(3 * time.Hour)
	ex = d.explainDigest(r, trashed)
	if ex.Verdict != "tombstone" || !ex.Trash[0].Expired ||
		reclaimtest.Step(t, ex.Steps, "trash").Matched || !reclaimtest.Contains(reclaimtest.Step(t, ex.Steps, "trash").Detail, "expired") {
		t.Errorf("trash expired = %+v", ex)
	}

	// Deleted by the second pass: why it went.
	two := d.DigestPass(r)
	if two.Deleted != 1 {
		t.Fatalf("pass two deleted %d", two.Deleted)
	}
	ex = d.explainDigest(r, unref)
	reclaimtest.WantSteps(t, "deleted", ex.Steps, []string{"not_stored"})
	if ex.Verdict != "deleted" || ex.Blob != nil || ex.Tombstone == nil || ex.Tombstone.State != "deleted" ||
		!reclaimtest.Contains(ex.Reason, "deleted by pass 2") {
		t.Errorf("deleted = %+v", ex)
	}

	// Nothing known, a malformed digest.
	if _, err := r.ExplainDigest(t.Context(), reclaimtest.DigestOf([]byte("never stored"))); !errors.Is(err, reclaim.ErrNotKnown) {
		t.Errorf("unknown digest: %v", err)
	}
	if _, err := r.ExplainDigest(t.Context(), "sha256:abc"); !errors.Is(err, digestsweep.ErrBadDigest) {
		t.Errorf("bad digest: %v", err)
	}
	// Without the digest sweep there is nothing to judge blobs by.
	if _, err := d.Explainer(d.Env.Config()).ExplainDigest(t.Context(), refd); !errors.Is(err, reclaim.ErrDigestSweepOff) {
		t.Errorf("digest sweep off: %v", err)
	}
}

// TestExplainDigestPlanes explains a pending tombstone that waits for a
// plane, and the young blob the placement grace keeps.
func TestExplainDigestPlanes(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	// The young blob must be listed as stored later than the old one, to
	// the millisecond the backend keeps; the clock stands between them.
	old := d.PutBlob("old")
	oldAt := d.Modified()[reclaimtest.BlobKey(old)]
	var young string
	for i := 0; young == "" || !d.Modified()[reclaimtest.BlobKey(young)].After(oldAt); i++ {
		if i == 100 {
			t.Fatal("the young blob is not listed as newer than the old one")
		}
		young = d.PutBlob(fmt.Sprint("young", i))
	}
	d.Clock.Set(oldAt.Add(reclaimtest.PlacementGrace + d.Modified()[reclaimtest.BlobKey(young)].Sub(oldAt)/2))
	cfg := d.Config()
	cfg.Digests.Planes = []string{"backup", "replica"}
	r := d.Start(cfg)

	ex := d.explainDigest(r, young)
	reclaimtest.WantSteps(t, "young", ex.Steps, judged("retained"), "placements")
	if ex.Verdict != "keep" || !reclaimtest.Contains(ex.Reason, "retained by placements", "within the placement grace 24h0m0s") {
		t.Errorf("young = %+v", ex)
	}

	d.DigestPass(r)
	tomb, _, ok := d.Tombstone(old)
	if !ok || tomb.State != etcdstore.TombstonePending {
		t.Fatalf("tombstone after a pass: %+v", tomb)
	}
	if err := d.Store.ReportFrontier(t.Context(), "backup", tomb.Frontier, "test", d.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	ex = d.explainDigest(r, old)
	reclaimtest.WantSteps(t, "waiting", ex.Steps, judged("frontier_wait"))
	want := []digestsweep.ExplainPlane{{Plane: "backup", Revision: tomb.Frontier, Applied: true}, {Plane: "replica", Revision: 0, Applied: false}}
	if ex.Verdict != "pending" || ex.RequiredFrontier != tomb.Frontier || len(ex.Planes) != 2 || ex.Planes[0] != want[0] || ex.Planes[1] != want[1] ||
		!reclaimtest.Contains(ex.Reason, "pending until every plane has applied revision", "; not there yet: replica (at 0)") || reclaimtest.Contains(ex.Reason, "backup (") {
		t.Errorf("waiting = %+v", ex)
	}
	if v := reclaimtest.Step(t, ex.Steps, "frontier_wait").Values; v["required_frontier"] != tomb.Frontier || v["tombstone"] != etcdstore.TombstonePending {
		t.Errorf("frontier_wait values = %v", v)
	}

	// The replica catches up: the next pass deletes it.
	if err := d.Store.ReportFrontier(t.Context(), "replica", d.Revision(), "test", d.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	ex = d.explainDigest(r, old)
	if ex.Verdict != "delete" || !ex.Planes[0].Applied || !ex.Planes[1].Applied {
		t.Errorf("caught up = %+v", ex)
	}

	// A guard armed by hand (as a cut-short collector leaves it) is told.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := d.Cli.Put(ctx, d.Store.Keys().Guard(old), etcdstore.MarshalRecord(etcdstore.Guard{Digest: old, Bucket: reclaimtest.CASBucket, Key: reclaimtest.BlobKey(old), Term: 7, Pass: 3})); err != nil {
		t.Fatal(err)
	}
	ex = d.explainDigest(r, old)
	if ex.Guard == nil || ex.Guard.Term != 7 || ex.Guard.Pass != 3 || len(ex.Notes) == 0 || !reclaimtest.Contains(ex.Notes[0], "guard is armed (term 7, pass 3") {
		t.Errorf("guarded = %+v", ex)
	}
}
