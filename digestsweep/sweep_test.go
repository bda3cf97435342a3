//go:build integration

package digestsweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// TestDigestSweepCollectsUnreferenced is the digest sweep's first
// acceptance scenario: three manifests name ten blobs with overlaps; four unreferenced
// blobs older than the placement grace and one younger. Over the passes
// (pending, then ready and deleted) exactly the four go.
func TestDigestSweepCollectsUnreferenced(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("ref", 10)
	d.PutManifest("app/v1", refd[0:5]...)
	d.PutManifest("app/v2", refd[3:8]...)
	d.PutManifest("tool/v1", refd[6:10]...)
	unref := d.PutBlobs("unref", 4)
	// A key in the namespace that carries no digest is not a blob.
	if _, err := d.Direct.Client.PutObject(t.Context(), reclaimtest.CASBucket, reclaimtest.BlobPrefix+"README", nil, 0, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	// The young blob must be listed as stored later than the old ones, to
	// the millisecond the backend keeps.
	newestOld := reclaimtest.Newest(d.Modified())
	var young string
	for i := 0; young == "" || !d.Modified()[reclaimtest.BlobKey(young)].After(newestOld); i++ {
		if i == 100 {
			t.Fatal("the young blob is not listed as newer than the old ones")
		}
		young = d.PutBlob("young")
	}
	gap := d.Modified()[reclaimtest.BlobKey(young)].Sub(newestOld)
	d.Clock.Set(newestOld.Add(reclaimtest.PlacementGrace + gap/2))

	r := d.Start(d.Config())
	one := d.DigestPass(r)
	reclaimtest.WantCounts(t, "pass one", one, 4, 0, 0, 0)
	if one.Stored != 15 || one.Retained != 11 || one.NewPending != 4 || one.Ignored != 1 {
		t.Errorf("pass one: stored %d retained %d new %d ignored %d; want 15, 11, 4, 1", one.Stored, one.Retained, one.NewPending, one.Ignored)
	}
	if one.RetainedBy["references"] != 10 || one.RetainedBy["placements"] != 1 {
		t.Errorf("pass one retained by %v, want 10 references and 1 placement (the young blob)", one.RetainedBy)
	}
	if !one.Rebuild.Ran || one.Rebuild.Failed != "" || one.Rebuild.Result == nil || one.Rebuild.Result.Objects != 3 || one.Rebuild.Result.Unknown != 0 {
		t.Errorf("pass one rebuild = %+v", one.Rebuild)
	}
	d.WantStates("after pass one", etcdstore.TombstonePending, unref...)
	d.WantStates("after pass one", "", append(slices.Clone(refd), young)...)
	term, _ := r.Leader()
	for _, dg := range unref {
		tb, _, _ := d.Tombstone(dg)
		if tb.Pass != 1 || tb.Term != term || tb.Attempts != 1 || tb.Frontier < one.Revision || tb.Bucket != reclaimtest.CASBucket || tb.Key != reclaimtest.BlobKey(dg) || tb.Size == 0 {
			t.Errorf("pending tombstone %+v (pass revision %d, term %d)", tb, one.Revision, term)
		}
	}
	d.WantPresent("after pass one", true, append(append(slices.Clone(refd), unref...), young)...)

	two := d.DigestPass(r)
	reclaimtest.WantCounts(t, "pass two", two, 0, 4, 0, 4)
	if want := reclaimtest.Sizes(reclaimtest.Names("unref", 4)...); two.Bytes != want {
		t.Errorf("pass two deleted %d bytes, want %d", two.Bytes, want)
	}
	d.WantPresent("after pass two", false, unref...)
	d.WantPresent("after pass two", true, append(slices.Clone(refd), young)...)
	d.WantStates("after pass two", etcdstore.TombstoneDeleted, unref...)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left armed", n)
	}
	if two.Tombstones[etcdstore.TombstoneDeleted] != 4 {
		t.Errorf("tombstones after pass two = %v", two.Tombstones)
	}

	three := d.DigestPass(r)
	reclaimtest.WantCounts(t, "pass three", three, 0, 0, 0, 0)
	d.WantPresent("after pass three", true, append(slices.Clone(refd), young)...)
	if d.Be.Deletes.Load() != 1 {
		t.Errorf("%d DeleteObjects requests, want one: the collector gathers pages of two into requests of up to 1000 blobs", d.Be.Deletes.Load())
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_digest_deleted_total"); got != 4 {
		t.Errorf("digest_deleted_total = %v, want 4", got)
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_digest_deleted_bytes_total"); got != float64(two.Bytes) {
		t.Errorf("digest_deleted_bytes_total = %v, want %d", got, two.Bytes)
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_tombstones", "state", "deleted"); got != 4 {
		t.Errorf("tombstones{deleted} = %v, want 4", got)
	}

	d.wantDigestsReportStored(t)
}

// wantDigestsReportStored checks that the stored report of pass two has the
// documented "digests" section, and that no digest cursor is left.
func (d *digestEnv) wantDigestsReportStored(t *testing.T) {
	t.Helper()
	resp, err := d.Cli.Get(t.Context(), d.Store.Keys().Pass(2))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("report of pass 2: %v", err)
	}
	var shape struct {
		Digests map[string]any `json:"digests"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &shape); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"pending", "ready", "skipped", "deleted", "bytes", "stored", "retained", "rebuild", "breaker"} {
		if _, ok := shape.Digests[field]; !ok {
			t.Errorf("stored report's digests lack %q: %v", field, shape.Digests)
		}
	}
	if shape.Digests["deleted"] != 4.0 {
		t.Errorf("stored report says %v deleted, want 4", shape.Digests["deleted"])
	}
	if resp, err := d.Cli.Get(t.Context(), d.Store.Keys().Cursor("digests")); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the digest cursor survived the pass (%v)", err)
	}
}

// TestDigestSweepTrash deletes a manifest: only its unshared blobs become
// collectable, and only once its trash expires; a restore before then
// keeps them.
func TestDigestSweepTrash(t *testing.T) {
	t.Parallel()
	for _, restore := range []bool{false, true} {
		name := "expires"
		if restore {
			name = "restored"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			b := d.PutBlobs("b", 4)
			d.PutManifest("one", b[0], b[1], b[2])
			d.PutManifest("two", b[2], b[3])
			d.AgeBlobs()
			r := d.Start(d.Config())

			tr := d.DeleteManifest("one", d.Clock.Now().Add(2*time.Hour))
			rep := d.DigestPass(r)
			reclaimtest.WantCounts(t, "with the manifest in the trash", rep, 0, 0, 0, 0)
			if rep.RetainedBy["trash"] != 2 || rep.RetainedBy["references"] != 2 {
				t.Errorf("retained by %v, want 2 by trash and 2 by references", rep.RetainedBy)
			}
			d.WantStates("trash unexpired", "", b...)

			if restore {
				if _, err := d.Store.RestoreTrash(t.Context(), reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"one", tr.DeletedAt, d.Clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
			d.Clock.Advance(3 * time.Hour)
			one := d.DigestPass(r)
			two := d.DigestPass(r)
			if restore {
				reclaimtest.WantCounts(t, "restored, pass one", one, 0, 0, 0, 0)
				reclaimtest.WantCounts(t, "restored, pass two", two, 0, 0, 0, 0)
				d.WantPresent("restored", true, b...)
				d.WantStates("restored", "", b...)
				return
			}
			reclaimtest.WantCounts(t, "trash expired, pass one", one, 2, 0, 0, 0)
			reclaimtest.WantCounts(t, "trash expired, pass two", two, 0, 2, 0, 2)
			d.WantPresent("trash expired", false, b[0], b[1])
			d.WantPresent("trash expired", true, b[2], b[3])
			if two.Pruned.Trash != 0 || one.Pruned.Trash != 1 {
				t.Errorf("pruned trash %d then %d, want the expired record once", one.Pruned.Trash, two.Pruned.Trash)
			}
			if n := d.Count(d.Store.Keys().AllTrash()) + d.Count(d.Store.Keys().AllTrashRefs()); n != 0 {
				t.Errorf("%d trash keys left after the prune", n)
			}
		})
	}
}

// TestDigestPlanes holds tombstones pending until every configured plane
// has applied their frontier.
func TestDigestPlanes(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("kept", 3)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.Planes = []string{"backup", "replica"}
	r := d.Start(cfg)

	d.DigestPass(r)
	// Each page's tombstones require the revision they were written at.
	var lowest, highest int64
	for _, dg := range unref {
		tb, _, _ := d.Tombstone(dg)
		if tb.Frontier == 0 {
			t.Fatalf("pending tombstone without a frontier: %+v", tb)
		}
		highest = max(highest, tb.Frontier)
		if lowest == 0 || tb.Frontier < lowest {
			lowest = tb.Frontier
		}
	}
	rep := d.DigestPass(r)
	reclaimtest.WantCounts(t, "no plane reported", rep, 2, 0, 0, 0)

	report := func(plane string, rev int64) {
		if err := d.Store.ReportFrontier(t.Context(), plane, rev, "test", d.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	report("backup", highest+1000)
	rep = d.DigestPass(r)
	reclaimtest.WantCounts(t, "one plane unreported", rep, 2, 0, 0, 0)

	report("replica", lowest-1)
	rep = d.DigestPass(r)
	reclaimtest.WantCounts(t, "a plane below the frontier", rep, 2, 0, 0, 0)
	d.WantStates("a plane below the frontier", etcdstore.TombstonePending, unref...)
	d.WantPresent("a plane below the frontier", true, unref...)

	report("replica", highest)
	rep = d.DigestPass(r)
	reclaimtest.WantCounts(t, "every plane at the frontier", rep, 0, 2, 0, 2)
	d.WantPresent("every plane at the frontier", false, unref...)
	d.WantPresent("every plane at the frontier", true, refd...)
}

// TestDigestDryRun plans with the tombstones ready: the plan says what a
// pass would delete, and neither etcd nor MinIO changes.
func TestDigestDryRun(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 3)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 2)
	d.AgeBlobs()
	r := d.Start(d.Config())
	d.DigestPass(r)
	fresh := d.PutBlobs("fresh", 1) // old enough at the pass clock, no tombstone yet

	dryCfg := d.Config()
	dryCfg.DryRun, dryCfg.ID = true, "dry"
	dryCfg.Metrics = nil
	dryCfg.Elector, _ = reclaim.NewElector(reclaim.ElectorConfig{Client: d.Cli, Prefix: "/elsewhere/election/"})
	dry := d.Start(dryCfg)

	before := d.Revision()
	plan, err := r.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	passed := d.MustPass(dry)
	for _, rep := range []reclaim.Report{plan, passed} {
		if !rep.DryRun || rep.Digests == nil {
			t.Fatalf("dry report %+v", rep)
		}
		reclaimtest.WantCounts(t, "plan", *rep.Digests, 1, 2, 0, 2)
		if rep.Digests.NewPending != 1 || rep.Digests.Bytes != reclaimtest.Sizes("u0", "u1") || rep.Digests.Rebuild.Ran {
			t.Errorf("plan: new pending %d, bytes %d, rebuild %+v", rep.Digests.NewPending, rep.Digests.Bytes, rep.Digests.Rebuild)
		}
	}
	if after := d.Revision(); after != before {
		t.Errorf("etcd revision moved from %d to %d during dry runs", before, after)
	}
	if d.Be.Deletes.Load() != 0 {
		t.Errorf("dry runs sent %d deletes", d.Be.Deletes.Load())
	}
	d.WantPresent("dry runs", true, append(append(refd, unref...), fresh...)...)
	d.WantStates("dry runs", etcdstore.TombstonePending, unref...)
	d.WantStates("dry runs", "", fresh...)
}

// TestDigestRebuild retains what manifests written around the gateway
// name, counting them; and a rebuild that fails makes the pass delete
// nothing and make nothing ready.
func TestDigestRebuild(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	around := d.PutBlobs("around", 3)
	unref := d.PutBlobs("u", 2)
	for i, dg := range around {
		body := reclaimtest.ManifestBody([]string{dg})
		key := reclaimtest.ManifestPrefix + "around/" + reclaimtest.Names("m", 3)[i]
		if _, err := d.Direct.Client.PutObject(t.Context(), reclaimtest.CASBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d.AgeBlobs()
	r := d.Start(d.Config())
	one := d.DigestPass(r)
	reclaimtest.WantCounts(t, "pass one", one, 2, 0, 0, 0)
	if one.Rebuild.Result == nil || one.Rebuild.Result.Unknown != 3 || one.Rebuild.Result.UnknownRefs != 3 || one.RetainedBy["references"] != 3 {
		t.Errorf("rebuild %+v, retained by %v; want the three manifests found and their blobs retained", one.Rebuild.Result, one.RetainedBy)
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_unknown_producer_refs_total"); got != 3 {
		t.Errorf("unknown_producer_refs_total = %v, want 3", got)
	}

	// A manifest over the parse limit cannot be accounted for.
	big := make([]byte, 5<<20)
	if _, err := d.Direct.Client.PutObject(t.Context(), reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"huge", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	two := d.DigestPass(r)
	reclaimtest.WantCounts(t, "rebuild failed", two, 2, 0, 0, 0)
	if two.Rebuild.Failed == "" || !reclaimtest.Contains(two.Kept+two.Rebuild.Failed, "parse limit") {
		t.Errorf("rebuild %+v kept %q; want the failure said", two.Rebuild, two.Kept)
	}
	d.WantStates("rebuild failed", etcdstore.TombstonePending, unref...)
	d.WantPresent("rebuild failed", true, append(around, unref...)...)
	if d.Be.Deletes.Load() != 0 {
		t.Errorf("%d deletes with a failed rebuild", d.Be.Deletes.Load())
	}

	if err := d.Direct.Client.RemoveObject(t.Context(), reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"huge", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	three := d.DigestPass(r)
	reclaimtest.WantCounts(t, "rebuild fixed", three, 0, 2, 0, 2)
	d.WantPresent("rebuild fixed", true, around...)
	d.WantPresent("rebuild fixed", false, unref...)
}

// TestDigestRebuildInterval rebuilds only when the interval has passed.
func TestDigestRebuildInterval(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	d.PutBlobs("u", 1)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.RebuildInterval = 6 * time.Hour
	r := d.Start(cfg)
	if rep := d.DigestPass(r); !rep.Rebuild.Ran {
		t.Errorf("first pass did not rebuild: %+v", rep.Rebuild)
	}
	d.Clock.Advance(time.Hour)
	if rep := d.DigestPass(r); rep.Rebuild.Ran || !reclaimtest.Contains(rep.Rebuild.NotRun, "not due") {
		t.Errorf("second pass rebuild = %+v, want not due", rep.Rebuild)
	}
	d.Clock.Advance(6 * time.Hour)
	if rep := d.DigestPass(r); !rep.Rebuild.Ran {
		t.Errorf("pass after the interval did not rebuild: %+v", rep.Rebuild)
	}
}

// TestDigestFrontierRaised lets a reference to a pending digest come and
// go between passes (an overwrite drops it without a trash): a plane that
// applied only the tombstone's first frontier may hold that reference, so
// the frontier rises and the blob waits for the planes to catch up.
func TestDigestFrontierRaised(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("kept", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 6)
	target := unref[0]
	moved := map[string]bool{etcdstore.RefShard(target): true, etcdstore.RefShard(refd[0]): true}
	var bystander string
	for _, dg := range unref[1:] {
		if !moved[etcdstore.RefShard(dg)] {
			bystander = dg
			break
		}
	}
	if bystander == "" {
		t.Fatal("fixture: no unreferenced blob falls in a shard the test leaves alone; change the blob names")
	}
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.Planes = []string{"backup"}
	r := d.Start(cfg)
	d.DigestPass(r)
	var first int64
	for _, dg := range unref {
		tb, _, _ := d.Tombstone(dg)
		first = max(first, tb.Frontier)
	}

	d.PutManifest("tag", target)
	d.PutManifest("tag", refd[0]) // the tag moves on: target's reference is gone
	report := func(rev int64) {
		if err := d.Store.ReportFrontier(t.Context(), "backup", rev, "test", d.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	report(first)
	d.DigestPass(r)
	tb, _, _ := d.Tombstone(target)
	if tb.State != etcdstore.TombstonePending || tb.Frontier <= first {
		t.Errorf("target tombstone %+v; want pending with its frontier raised above %d", tb, first)
	}
	d.WantPresent("frontier raised", true, target)
	d.WantPresent("untouched shard", false, bystander)

	report(tb.Frontier)
	d.DigestPass(r)
	d.WantPresent("planes caught up", false, target)
	d.WantPresent("planes caught up", true, refd...)
}

// TestDigestRebuildAtScale is the rebuild at scale for producers writing
// around the gateway: five hundred manifests written directly to MinIO,
// naming blobs that exist and that the gateway never saw referenced. The
// rebuild retains every one of them, counts each reference it had to add,
// and the passes delete nothing.
func TestDigestRebuildAtScale(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	blobs := d.PutBlobs("b", 40)
	const manifests = 500
	var wantRefs atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, manifests)
	sem := make(chan struct{}, 16)
	for i := range manifests {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			named := []string{blobs[i%len(blobs)], blobs[(i*7+3)%len(blobs)]}
			if named[0] == named[1] {
				named = named[:1]
			}
			wantRefs.Add(int64(len(named)))
			body := reclaimtest.ManifestBody(named)
			key := fmt.Sprintf("%saround/m%03d", reclaimtest.ManifestPrefix, i)
			if _, err := d.Direct.Client.PutObject(context.Background(), reclaimtest.CASBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.MaxDeleteFraction = 1 // the breaker is not what keeps them
	r := d.Start(cfg)
	one := d.DigestPass(r)
	if one.Rebuild.Result == nil || one.Rebuild.Result.Unknown != manifests || one.Rebuild.Result.UnknownRefs != wantRefs.Load() {
		t.Fatalf("rebuild %+v; want %d manifests and %d references found", one.Rebuild.Result, manifests, wantRefs.Load())
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_unknown_producer_refs_total"); got != float64(wantRefs.Load()) {
		t.Errorf("unknown_producer_refs_total = %v, want %d", got, wantRefs.Load())
	}
	for range 2 {
		rep := d.DigestPass(r)
		reclaimtest.WantCounts(t, "later pass", rep, 0, 0, 0, 0)
	}
	if n := d.Be.Deletes.Load(); n != 0 {
		t.Errorf("%d delete requests sent", n)
	}
	d.WantPresent("every blob named around the gateway", true, blobs...)
}
