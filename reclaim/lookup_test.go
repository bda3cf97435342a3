//go:build integration

package reclaim_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// failingReads is the KV of a real etcd client whose reads at a past
// revision of keys under one prefix fail as a timed-out etcd request does,
// while every other request (writes, transactions, reads of other keys and
// current reads) goes to etcd. Real etcd cannot be made to refuse only some
// reads, so this thin wrapper stands in for a lookup that fails while
// writes work. A transaction holding such a read fails whole, as a
// timed-out one does (the references are looked up in transactions of
// reads).
type failingReads struct {
	clientv3.KV
	mu     sync.Mutex
	prefix string
	failed atomic.Int64
}

// failReads makes the reads under prefix fail from now on ("" stops).
func (f *failingReads) failReads(prefix string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prefix = prefix
}

func (f *failingReads) fails(op clientv3.Op) bool {
	f.mu.Lock()
	p := f.prefix
	f.mu.Unlock()
	if p == "" || !op.IsGet() || op.Rev() <= 0 || !strings.HasPrefix(string(op.KeyBytes()), p) {
		return false
	}
	f.failed.Add(1)
	return true
}

func (f *failingReads) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if f.fails(clientv3.OpGet(key, opts...)) {
		return nil, rpctypes.ErrTimeout
	}
	return f.KV.Get(ctx, key, opts...)
}

func (f *failingReads) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if f.fails(op) {
		return clientv3.OpResponse{}, rpctypes.ErrTimeout
	}
	return f.KV.Do(ctx, op)
}

func (f *failingReads) Txn(ctx context.Context) clientv3.Txn {
	return &failingTxn{Txn: f.KV.Txn(ctx), f: f}
}

// failingTxn is a transaction that fails on Commit when one of its reads
// fails.
type failingTxn struct {
	clientv3.Txn
	f    *failingReads
	fail bool
}

func (t *failingTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *failingTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.check(ops)
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *failingTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.check(ops)
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *failingTxn) check(ops []clientv3.Op) {
	for _, op := range ops {
		if t.f.fails(op) {
			t.fail = true
		}
	}
}

func (t *failingTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.fail {
		return nil, rpctypes.ErrTimeout
	}
	return t.Txn.Commit()
}

// readFailingStore returns a store on a client of its own whose reads can
// be failed.
func (e *env) readFailingStore() (*etcdstore.Store, *failingReads) {
	cli := e.connect()
	f := &failingReads{KV: cli.KV}
	cli.KV = f
	return etcdstore.NewStore(cli, e.Store.Keys()), f
}

// TestUploadLookupFailureKeepsEverything fails the upload sweep's reads of
// sessions, or of activity, at the pass's revision while writes keep
// working, in the pass that would delete S3: the pass stops and says why,
// marks and deletes nothing, and its report and cursor are written, so
// the test tells a pass that kept everything from one that could not
// write. Once the reads work again the next pass resumes it and deletes.
func TestUploadLookupFailureKeepsEverything(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, why string
		prefix    func(etcdstore.Keys) string
	}{
		{"sessions", "read uploads at revision", func(k etcdstore.Keys) string { return k.AllSessions() }},
		{"activity", "read uploads at revision", func(k etcdstore.Keys) string { return k.Activity("") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			inv := e.scenarioInventory()
			cfg := e.Config()
			var reads *failingReads
			cfg.Store, reads = e.readFailingStore()
			r := e.Start(cfg)
			e.marked(r)

			reads.failReads(tc.prefix(e.Store.Keys()))
			rep, err := e.Trigger(r)
			reads.failReads("")
			if err == nil || reads.failed.Load() == 0 {
				t.Fatalf("pass with failing %s lookups: err %v, %d reads failed (report %+v)", tc.name, err, reads.failed.Load(), rep)
			}
			if !reclaimtest.Contains(rep.Stopped, tc.why) || rep.Acted != (reclaim.Acted{}) || rep.Pass != 2 {
				t.Errorf("report pass %d stopped %q acted %+v; want pass 2 stopped for %q, nothing acted", rep.Pass, rep.Stopped, rep.Acted, tc.why)
			}
			if got := e.parts(inv); got != [4]int{12, 7, 5, 3} || e.Backend.Aborts.Load() != 0 {
				t.Errorf("parts on MinIO = %v, %d aborts; want nothing deleted", got, e.Backend.Aborts.Load())
			}
			if st := e.getSession(inv.bucket, inv.s3).State; st != etcdstore.StateExpired {
				t.Errorf("S3 = %s, want still expired", st)
			}
			if st := e.getSession(inv.bucket, inv.s1).State; st != etcdstore.StateActive {
				t.Errorf("S1 = %s, want still active", st)
			}
			// The writes worked: the stopped pass left its report and its
			// cursor for the next pass to resume.
			last, ok, err := reclaim.LastReport(t.Context(), e.Store)
			if err != nil || !ok || last.Pass != 2 || !reclaimtest.Contains(last.Stopped, tc.why) {
				t.Errorf("stored report = pass %d stopped %q (%v, found %v); want pass 2's stop", last.Pass, last.Stopped, err, ok)
			}
			if resp, err := e.Cli.Get(t.Context(), e.Store.Keys().Cursor("uploads")); err != nil || len(resp.Kvs) != 1 {
				t.Errorf("no cursor left for the stopped pass (%v)", err)
			}

			next := e.MustPass(r)
			if next.Pass != 2 || next.Resumed != 1 || next.Acted.Deleted != count(1, 5) {
				t.Errorf("next pass = %d resumed %d acted %+v; want pass 2 resumed, deleting S3", next.Pass, next.Resumed, next.Acted)
			}
		})
	}
}

// TestDigestLookupFailureKeepsEverything fails one of the digest sweep's
// etcd inventories (references, trash, placements) at the pass's revision
// while writes keep working, in the pass that would delete two
// unreferenced blobs: the sweep keeps everything and says why, writes no
// tombstone, deletes nothing, and the pass's report is written. Once the
// reads work again the two go and nothing else.
func TestDigestLookupFailureKeepsEverything(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		prefix func(etcdstore.Keys) string
	}{
		{"references", func(k etcdstore.Keys) string { return k.AllRefs() }},
		{"trash", func(k etcdstore.Keys) string { return k.AllTrashRefs() }},
		{"placements", func(k etcdstore.Keys) string { return k.AllPlacements() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDigestEnv(t)
			refd := d.PutBlobs("ref", 3)
			d.PutManifest("kept", refd...)
			trashed := d.PutBlobs("trashed", 2)
			d.PutManifest("gone", trashed...)
			placed := d.PutBlob("placed")
			unref := d.PutBlobs("unref", 2)
			d.AgeBlobs()
			d.DeleteManifest("gone", d.Clock.Now().Add(30*24*time.Hour))
			if err := d.Store.PlaceBlob(t.Context(), placed, "in-flight", reclaimtest.CASBucket, reclaimtest.BlobKey(placed), d.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			kept := slices.Concat(refd, trashed, []string{placed})

			cfg := d.Config()
			var reads *failingReads
			cfg.Store, reads = d.env().readFailingStore()
			r := d.Start(cfg)
			one := d.DigestPass(r)
			reclaimtest.WantCounts(t, "pass one", one, 2, 0, 0, 0)
			_, before, _ := d.Tombstone(unref[0])

			reads.failReads(tc.prefix(d.Store.Keys()))
			two := d.DigestPass(r)
			reads.failReads("")
			if reads.failed.Load() == 0 {
				t.Fatalf("no %s read failed; the test did not reach the lookup", tc.name)
			}
			if !reclaimtest.Contains(two.Kept, tc.name) || two.Deleted != 0 || two.Ready != 0 || two.NewPending != 0 {
				t.Errorf("pass two kept %q, ready %d deleted %d new pending %d; want everything kept because %s failed",
					two.Kept, two.Ready, two.Deleted, two.NewPending, tc.name)
			}
			if n := d.Be.Deletes.Load(); n != 0 {
				t.Errorf("%d DeleteObjects sent while an inventory failed", n)
			}
			d.WantPresent("inventory failing", true, slices.Concat(kept, unref)...)
			d.WantStates("inventory failing", etcdstore.TombstonePending, unref...)
			d.WantStates("inventory failing", "", kept...)
			if _, after, _ := d.Tombstone(unref[0]); after != before {
				t.Errorf("a tombstone was rewritten (mod revision %d, was %d) while an inventory failed", after, before)
			}
			// The writes worked: the pass's report says why it kept
			// everything.
			last, ok, err := reclaim.LastReport(t.Context(), d.Store)
			if err != nil || !ok || last.Pass != 2 || last.Digests == nil || !reclaimtest.Contains(last.Digests.Kept, tc.name) {
				t.Errorf("stored report = pass %d digests %+v (%v, found %v); want pass 2 keeping everything", last.Pass, last.Digests, err, ok)
			}

			three := d.DigestPass(r)
			reclaimtest.WantCounts(t, "reads work again", three, 0, 2, 0, 2)
			d.WantPresent("reads work again", false, unref...)
			d.WantPresent("reads work again", true, kept...)
		})
	}
}
