//go:build integration

package reclaim_test

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

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestDigestSweepCollectsUnreferenced is the digest sweep's first
// acceptance scenario: three manifests name ten blobs with overlaps; four unreferenced
// blobs older than the placement grace and one younger. Over the passes
// (pending, then ready and deleted) exactly the four go.
func TestDigestSweepCollectsUnreferenced(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("ref", 10)
	d.putManifest("app/v1", refd[0:5]...)
	d.putManifest("app/v2", refd[3:8]...)
	d.putManifest("tool/v1", refd[6:10]...)
	unref := d.putBlobs("unref", 4)
	// A key in the namespace that carries no digest is not a blob.
	if _, err := d.direct.Client.PutObject(t.Context(), dgBucket, dgBlobs+"README", nil, 0, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	// The young blob must be listed as stored later than the old ones, to
	// the millisecond the backend keeps.
	newestOld := newest(d.modified())
	var young string
	for i := 0; young == "" || !d.modified()[blobKey(young)].After(newestOld); i++ {
		if i == 100 {
			t.Fatal("the young blob is not listed as newer than the old ones")
		}
		young = d.putBlob("young")
	}
	gap := d.modified()[blobKey(young)].Sub(newestOld)
	d.setClock(newestOld.Add(dgGrace + gap/2))

	r := d.start(d.config())
	one := d.digestPass(r)
	wantCounts(t, "pass one", one, 4, 0, 0, 0)
	if one.Stored != 15 || one.Retained != 11 || one.NewPending != 4 || one.Ignored != 1 {
		t.Errorf("pass one: stored %d retained %d new %d ignored %d; want 15, 11, 4, 1", one.Stored, one.Retained, one.NewPending, one.Ignored)
	}
	if one.RetainedBy["references"] != 10 || one.RetainedBy["placements"] != 1 {
		t.Errorf("pass one retained by %v, want 10 references and 1 placement (the young blob)", one.RetainedBy)
	}
	if !one.Rebuild.Ran || one.Rebuild.Failed != "" || one.Rebuild.Result == nil || one.Rebuild.Result.Objects != 3 || one.Rebuild.Result.Unknown != 0 {
		t.Errorf("pass one rebuild = %+v", one.Rebuild)
	}
	d.wantStates("after pass one", etcdstore.TombstonePending, unref...)
	d.wantStates("after pass one", "", append(slices.Clone(refd), young)...)
	term, _ := r.Leader()
	for _, dg := range unref {
		tb, _, _ := d.tombstone(dg)
		if tb.Pass != 1 || tb.Term != term || tb.Attempts != 1 || tb.Frontier < one.Revision || tb.Bucket != dgBucket || tb.Key != blobKey(dg) || tb.Size == 0 {
			t.Errorf("pending tombstone %+v (pass revision %d, term %d)", tb, one.Revision, term)
		}
	}
	d.wantPresent("after pass one", true, append(append(slices.Clone(refd), unref...), young)...)

	two := d.digestPass(r)
	wantCounts(t, "pass two", two, 0, 4, 0, 4)
	if want := sizes(names("unref", 4)...); two.Bytes != want {
		t.Errorf("pass two deleted %d bytes, want %d", two.Bytes, want)
	}
	d.wantPresent("after pass two", false, unref...)
	d.wantPresent("after pass two", true, append(slices.Clone(refd), young)...)
	d.wantStates("after pass two", etcdstore.TombstoneDeleted, unref...)
	if n := d.count(d.store.Keys().Guards()); n != 0 {
		t.Errorf("%d guards left armed", n)
	}
	if two.Tombstones[etcdstore.TombstoneDeleted] != 4 {
		t.Errorf("tombstones after pass two = %v", two.Tombstones)
	}

	three := d.digestPass(r)
	wantCounts(t, "pass three", three, 0, 0, 0, 0)
	d.wantPresent("after pass three", true, append(slices.Clone(refd), young)...)
	if d.be.deletes.Load() != 1 {
		t.Errorf("%d DeleteObjects requests, want one: the collector gathers pages of two into requests of up to 1000 blobs", d.be.deletes.Load())
	}
	if got := metric(t, d.reg, "sweepgate_reclaim_digest_deleted_total"); got != 4 {
		t.Errorf("digest_deleted_total = %v, want 4", got)
	}
	if got := metric(t, d.reg, "sweepgate_reclaim_digest_deleted_bytes_total"); got != float64(two.Bytes) {
		t.Errorf("digest_deleted_bytes_total = %v, want %d", got, two.Bytes)
	}
	if got := metric(t, d.reg, "sweepgate_reclaim_tombstones", "state", "deleted"); got != 4 {
		t.Errorf("tombstones{deleted} = %v, want 4", got)
	}

	d.wantDigestsReportStored(t)
}

// wantDigestsReportStored checks that the stored report of pass two has the
// documented "digests" section, and that no digest cursor is left.
func (d *digestEnv) wantDigestsReportStored(t *testing.T) {
	t.Helper()
	resp, err := d.cli.Get(t.Context(), d.store.Keys().Pass(2))
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
	if resp, err := d.cli.Get(t.Context(), d.store.Keys().Cursor("digests")); err != nil || len(resp.Kvs) != 0 {
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
			b := d.putBlobs("b", 4)
			d.putManifest("one", b[0], b[1], b[2])
			d.putManifest("two", b[2], b[3])
			d.ageBlobs()
			r := d.start(d.config())

			tr := d.deleteManifest("one", d.clock.Now().Add(2*time.Hour))
			rep := d.digestPass(r)
			wantCounts(t, "with the manifest in the trash", rep, 0, 0, 0, 0)
			if rep.RetainedBy["trash"] != 2 || rep.RetainedBy["references"] != 2 {
				t.Errorf("retained by %v, want 2 by trash and 2 by references", rep.RetainedBy)
			}
			d.wantStates("trash unexpired", "", b...)

			if restore {
				if _, err := d.store.RestoreTrash(t.Context(), dgBucket, dgManifests+"one", tr.DeletedAt, d.clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
			d.clock.Advance(3 * time.Hour)
			one := d.digestPass(r)
			two := d.digestPass(r)
			if restore {
				wantCounts(t, "restored, pass one", one, 0, 0, 0, 0)
				wantCounts(t, "restored, pass two", two, 0, 0, 0, 0)
				d.wantPresent("restored", true, b...)
				d.wantStates("restored", "", b...)
				return
			}
			wantCounts(t, "trash expired, pass one", one, 2, 0, 0, 0)
			wantCounts(t, "trash expired, pass two", two, 0, 2, 0, 2)
			d.wantPresent("trash expired", false, b[0], b[1])
			d.wantPresent("trash expired", true, b[2], b[3])
			if two.Pruned.Trash != 0 || one.Pruned.Trash != 1 {
				t.Errorf("pruned trash %d then %d, want the expired record once", one.Pruned.Trash, two.Pruned.Trash)
			}
			if n := d.count(d.store.Keys().AllTrash()) + d.count(d.store.Keys().AllTrashRefs()); n != 0 {
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
	refd := d.putBlobs("kept", 3)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 2)
	d.ageBlobs()
	cfg := d.config()
	cfg.Digests.Planes = []string{"backup", "replica"}
	r := d.start(cfg)

	d.digestPass(r)
	// Each page's tombstones require the revision they were written at.
	var lowest, highest int64
	for _, dg := range unref {
		tb, _, _ := d.tombstone(dg)
		if tb.Frontier == 0 {
			t.Fatalf("pending tombstone without a frontier: %+v", tb)
		}
		highest = max(highest, tb.Frontier)
		if lowest == 0 || tb.Frontier < lowest {
			lowest = tb.Frontier
		}
	}
	rep := d.digestPass(r)
	wantCounts(t, "no plane reported", rep, 2, 0, 0, 0)

	report := func(plane string, rev int64) {
		if err := d.store.ReportFrontier(t.Context(), plane, rev, "test", d.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	report("backup", highest+1000)
	rep = d.digestPass(r)
	wantCounts(t, "one plane unreported", rep, 2, 0, 0, 0)

	report("replica", lowest-1)
	rep = d.digestPass(r)
	wantCounts(t, "a plane below the frontier", rep, 2, 0, 0, 0)
	d.wantStates("a plane below the frontier", etcdstore.TombstonePending, unref...)
	d.wantPresent("a plane below the frontier", true, unref...)

	report("replica", highest)
	rep = d.digestPass(r)
	wantCounts(t, "every plane at the frontier", rep, 0, 2, 0, 2)
	d.wantPresent("every plane at the frontier", false, unref...)
	d.wantPresent("every plane at the frontier", true, refd...)
}

// TestDigestBreaker refuses deletions above either ceiling: nothing is
// deleted, the tombstones stay ready, the refusal is reported and counted.
func TestDigestBreaker(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		max       int64
		frac      float64
		wantWhich string
	}{
		{"count", 3, 0.5, "above max_delete:"},
		{"fraction", 1000, 0.2, "above max_delete_fraction"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.putBlobs("r", 6)
			d.putManifest("m", refd...)
			unref := d.putBlobs("u", 4)
			d.ageBlobs()
			cfg := d.config()
			cfg.Digests.MaxDelete, cfg.Digests.MaxDeleteFraction = tt.max, tt.frac
			r := d.start(cfg)

			d.digestPass(r)
			rep := d.digestPass(r)
			if !contains(rep.Refused, "4 of 10 stored blobs", tt.wantWhich) || rep.Deleted != 0 {
				t.Errorf("refused = %q, deleted %d", rep.Refused, rep.Deleted)
			}
			if rep.Breaker != (digestsweep.Breaker{DeleteBlobs: 4, StoredBlobs: 10, MaxDelete: tt.max, MaxDeleteFraction: tt.frac, MaxMark: digestsweep.DefaultMaxMark, MaxMarkFraction: 1}) {
				t.Errorf("breaker = %+v", rep.Breaker)
			}
			if d.be.deletes.Load() != 0 || d.count(d.store.Keys().Guards()) != 0 {
				t.Errorf("a refused pass sent %d deletes, left %d guards", d.be.deletes.Load(), d.count(d.store.Keys().Guards()))
			}
			d.wantPresent("refused", true, append(refd, unref...)...)
			d.wantStates("refused", etcdstore.TombstoneReady, unref...)
			if got := metric(t, d.reg, "sweepgate_reclaim_digest_breaker_refusals_total"); got != 1 {
				t.Errorf("digest_breaker_refusals_total = %v, want 1", got)
			}
		})
	}
}

// TestDigestDryRun plans with the tombstones ready: the plan says what a
// pass would delete, and neither etcd nor MinIO changes.
func TestDigestDryRun(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("r", 3)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 2)
	d.ageBlobs()
	r := d.start(d.config())
	d.digestPass(r)
	fresh := d.putBlobs("fresh", 1) // old enough at the pass clock, no tombstone yet

	dryCfg := d.config()
	dryCfg.DryRun, dryCfg.ID = true, "dry"
	dryCfg.Metrics = nil
	dryCfg.Elector, _ = reclaim.NewElector(reclaim.ElectorConfig{Client: d.cli, Prefix: "/elsewhere/election/"})
	dry := d.start(dryCfg)

	before := d.revision()
	plan, err := r.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	passed := d.mustPass(dry)
	for _, rep := range []reclaim.Report{plan, passed} {
		if !rep.DryRun || rep.Digests == nil {
			t.Fatalf("dry report %+v", rep)
		}
		wantCounts(t, "plan", *rep.Digests, 1, 2, 0, 2)
		if rep.Digests.NewPending != 1 || rep.Digests.Bytes != sizes("u0", "u1") || rep.Digests.Rebuild.Ran {
			t.Errorf("plan: new pending %d, bytes %d, rebuild %+v", rep.Digests.NewPending, rep.Digests.Bytes, rep.Digests.Rebuild)
		}
	}
	if after := d.revision(); after != before {
		t.Errorf("etcd revision moved from %d to %d during dry runs", before, after)
	}
	if d.be.deletes.Load() != 0 {
		t.Errorf("dry runs sent %d deletes", d.be.deletes.Load())
	}
	d.wantPresent("dry runs", true, append(append(refd, unref...), fresh...)...)
	d.wantStates("dry runs", etcdstore.TombstonePending, unref...)
	d.wantStates("dry runs", "", fresh...)
}

// TestDigestRebuild retains what manifests written around the gateway
// name, counting them; and a rebuild that fails makes the pass delete
// nothing and make nothing ready.
func TestDigestRebuild(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	around := d.putBlobs("around", 3)
	unref := d.putBlobs("u", 2)
	for i, dg := range around {
		body := dgManifest([]string{dg})
		key := dgManifests + "around/" + names("m", 3)[i]
		if _, err := d.direct.Client.PutObject(t.Context(), dgBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d.ageBlobs()
	r := d.start(d.config())
	one := d.digestPass(r)
	wantCounts(t, "pass one", one, 2, 0, 0, 0)
	if one.Rebuild.Result == nil || one.Rebuild.Result.Unknown != 3 || one.Rebuild.Result.UnknownRefs != 3 || one.RetainedBy["references"] != 3 {
		t.Errorf("rebuild %+v, retained by %v; want the three manifests found and their blobs retained", one.Rebuild.Result, one.RetainedBy)
	}
	if got := metric(t, d.reg, "sweepgate_reclaim_unknown_producer_refs_total"); got != 3 {
		t.Errorf("unknown_producer_refs_total = %v, want 3", got)
	}

	// A manifest over the parse limit cannot be accounted for.
	big := make([]byte, 5<<20)
	if _, err := d.direct.Client.PutObject(t.Context(), dgBucket, dgManifests+"huge", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	two := d.digestPass(r)
	wantCounts(t, "rebuild failed", two, 2, 0, 0, 0)
	if two.Rebuild.Failed == "" || !contains(two.Kept+two.Rebuild.Failed, "parse limit") {
		t.Errorf("rebuild %+v kept %q; want the failure said", two.Rebuild, two.Kept)
	}
	d.wantStates("rebuild failed", etcdstore.TombstonePending, unref...)
	d.wantPresent("rebuild failed", true, append(around, unref...)...)
	if d.be.deletes.Load() != 0 {
		t.Errorf("%d deletes with a failed rebuild", d.be.deletes.Load())
	}

	if err := d.direct.Client.RemoveObject(t.Context(), dgBucket, dgManifests+"huge", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	three := d.digestPass(r)
	wantCounts(t, "rebuild fixed", three, 0, 2, 0, 2)
	d.wantPresent("rebuild fixed", true, around...)
	d.wantPresent("rebuild fixed", false, unref...)
}

// TestDigestRebuildInterval rebuilds only when the interval has passed.
func TestDigestRebuildInterval(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	d.putBlobs("u", 1)
	d.ageBlobs()
	cfg := d.config()
	cfg.Digests.RebuildInterval = 6 * time.Hour
	r := d.start(cfg)
	if rep := d.digestPass(r); !rep.Rebuild.Ran {
		t.Errorf("first pass did not rebuild: %+v", rep.Rebuild)
	}
	d.clock.Advance(time.Hour)
	if rep := d.digestPass(r); rep.Rebuild.Ran || !contains(rep.Rebuild.NotRun, "not due") {
		t.Errorf("second pass rebuild = %+v, want not due", rep.Rebuild)
	}
	d.clock.Advance(6 * time.Hour)
	if rep := d.digestPass(r); !rep.Rebuild.Ran {
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
	refd := d.putBlobs("kept", 6)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 6)
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
	d.ageBlobs()
	cfg := d.config()
	cfg.Digests.Planes = []string{"backup"}
	r := d.start(cfg)
	d.digestPass(r)
	var first int64
	for _, dg := range unref {
		tb, _, _ := d.tombstone(dg)
		first = max(first, tb.Frontier)
	}

	d.putManifest("tag", target)
	d.putManifest("tag", refd[0]) // the tag moves on: target's reference is gone
	report := func(rev int64) {
		if err := d.store.ReportFrontier(t.Context(), "backup", rev, "test", d.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	report(first)
	d.digestPass(r)
	tb, _, _ := d.tombstone(target)
	if tb.State != etcdstore.TombstonePending || tb.Frontier <= first {
		t.Errorf("target tombstone %+v; want pending with its frontier raised above %d", tb, first)
	}
	d.wantPresent("frontier raised", true, target)
	d.wantPresent("untouched shard", false, bystander)

	report(tb.Frontier)
	d.digestPass(r)
	d.wantPresent("planes caught up", false, target)
	d.wantPresent("planes caught up", true, refd...)
}

// TestDigestRebuildAtScale is the rebuild at scale for producers writing
// around the gateway: five hundred manifests written directly to MinIO,
// naming blobs that exist and that the gateway never saw referenced. The
// rebuild retains every one of them, counts each reference it had to add,
// and the passes delete nothing.
func TestDigestRebuildAtScale(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	blobs := d.putBlobs("b", 40)
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
			body := dgManifest(named)
			key := fmt.Sprintf("%saround/m%03d", dgManifests, i)
			if _, err := d.direct.Client.PutObject(context.Background(), dgBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d.ageBlobs()
	cfg := d.config()
	cfg.Digests.MaxDeleteFraction = 1 // the breaker is not what keeps them
	r := d.start(cfg)
	one := d.digestPass(r)
	if one.Rebuild.Result == nil || one.Rebuild.Result.Unknown != manifests || one.Rebuild.Result.UnknownRefs != wantRefs.Load() {
		t.Fatalf("rebuild %+v; want %d manifests and %d references found", one.Rebuild.Result, manifests, wantRefs.Load())
	}
	if got := metric(t, d.reg, "sweepgate_reclaim_unknown_producer_refs_total"); got != float64(wantRefs.Load()) {
		t.Errorf("unknown_producer_refs_total = %v, want %d", got, wantRefs.Load())
	}
	for range 2 {
		rep := d.digestPass(r)
		wantCounts(t, "later pass", rep, 0, 0, 0, 0)
	}
	if n := d.be.deletes.Load(); n != 0 {
		t.Errorf("%d delete requests sent", n)
	}
	d.wantPresent("every blob named around the gateway", true, blobs...)
}
