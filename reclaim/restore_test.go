//go:build integration

package reclaim_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// etcdCopy is every record under the test's prefix but the election's and
// the gateways' (which live under leases of running processes): what a
// snapshot of etcd brings back, for the purpose of these tests.
type etcdCopy map[string]string

// saveEtcd copies the records a restore brings back.
func (e *env) saveEtcd() etcdCopy {
	e.T.Helper()
	resp, err := e.Cli.Get(e.T.Context(), e.Store.Keys().Root(), clientv3.WithPrefix())
	if err != nil {
		e.T.Fatal(err)
	}
	out := etcdCopy{}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); e.restorable(k) {
			out[k] = string(kv.Value)
		}
	}
	return out
}

func (e *env) restorable(key string) bool {
	keys := e.Store.Keys()
	return !strings.HasPrefix(key, keys.Election()) && !strings.HasPrefix(key, keys.Gateways())
}

// rewind puts etcd back to c, as a restore from a snapshot does to every
// record the election and the gateways do not hold: records written
// since are gone, records changed since are as they were.
func (e *env) rewind(c etcdCopy) {
	e.T.Helper()
	ctx := e.T.Context()
	resp, err := e.Cli.Get(ctx, e.Store.Keys().Root(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		e.T.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); e.restorable(k) {
			if _, err := e.Cli.Delete(ctx, k); err != nil {
				e.T.Fatal(err)
			}
		}
	}
	for k, v := range c {
		if _, err := e.Cli.Put(ctx, k, v); err != nil {
			e.T.Fatal(err)
		}
	}
}

// putGateway writes gateway id's clock record at the world's clock, once,
// as a gateway's publication does.
func (e *env) putGateway(id string) {
	e.T.Helper()
	host, _ := os.Hostname()
	b, _ := json.Marshal(etcdstore.GatewayClock{Version: 1, ID: id, Host: host, At: e.Clock.Now(), Refresh: time.Second, Layouts: true})
	if _, err := e.Cli.Put(e.T.Context(), e.Store.Keys().Gateway(id), string(b)); err != nil {
		e.T.Fatal(err)
	}
}

// TestRestoreHoldsDeletions: etcd goes back to a copy taken after an idle
// upload was marked, while the backend's witness went on. The next pass
// finds the restore and, while a gateway has not published its clock
// since, no pass aborts the upload though its mark is past delete_after
// on both clocks, nor runs the reconciler; once the gateway published,
// the mark is cleared, and the upload's mark (recorded before the
// restore) is made again rather than acted on; it goes only after
// delete_after from that new mark.
func TestRestoreHoldsDeletions(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	cfg := e.deletable()
	// Within the clock skew allowance, so that a gateway record written
	// once stays good across the test.
	cfg.DeleteAfter, cfg.Metrics, cfg.WitnessBucket = time.Minute, reg, "idle"
	r := e.Start(cfg)
	e.putGateway("g1")
	id := e.idleMarked(r)
	snap := e.saveEtcd()
	// After the copy: a pass advances the witness on both sides.
	if rep := e.MustPass(r); rep.Restored != "" || rep.Acted.Deleted.Sessions != 0 {
		t.Fatalf("pass after the copy: restored %q, acted %+v", rep.Restored, rep.Acted)
	}
	e.rewind(snap)

	rep := e.MustPass(r)
	if !reclaimtest.Contains(rep.Restored, "restored from a snapshot", "g1") || rep.Reconcile != nil {
		t.Fatalf("pass after the restore: restored %q, reconcile %+v", rep.Restored, rep.Reconcile)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_etcd_restored"); got != 1 {
		t.Errorf("sweepgate_reclaim_etcd_restored = %v, want 1", got)
	}
	st, err := r.Status(t.Context())
	if err != nil || st.Restored == nil || !st.Restored.Standing() {
		t.Fatalf("status: %v, restored %+v, want a standing mark", err, st.Restored)
	}

	// The mark is past delete_after on both clocks: without the restore
	// mark this pass would abort the upload.
	e.Clock.Advance(2 * time.Minute)
	rep = e.MustPass(r)
	e.wantStanding("while the restore mark stands", id)
	if n := e.Backend.Aborts.Load(); n != 0 {
		t.Fatalf("%d aborts sent while the restore mark stands", n)
	}
	if rep.Restored == "" || rep.Refused != rep.Restored || rep.Acted != (reclaim.Acted{}) {
		t.Fatalf("pass while the mark stands: restored %q, refused %q, acted %+v", rep.Restored, rep.Refused, rep.Acted)
	}
	// The explanation says what a pass does: mark afresh, and nothing
	// while the mark stands.
	ex, err := r.ExplainUpload(t.Context(), "idle", id, "idle/object")
	if err != nil || ex.Verdict != string(reclaim.Mark) || !strings.Contains(ex.Reason, "before etcd was restored") ||
		!slices.ContainsFunc(ex.Notes, func(n string) bool { return strings.Contains(n, "restored from a snapshot") }) {
		t.Fatalf("explanation while the mark stands: %v, verdict %s (%s), notes %q", err, ex.Verdict, ex.Reason, ex.Notes)
	}

	// The gateway publishes its clock after the mark: cleared, and the
	// upload's pre-restore mark is made again, not acted on.
	e.putGateway("g1")
	rep = e.MustPass(r)
	e.wantStanding("after the mark cleared", id)
	if n := e.Backend.Aborts.Load(); n != 0 {
		t.Fatalf("%d aborts sent on a mark recorded before the restore", n)
	}
	if rep.Restored != "" || rep.Acted.Marked.Sessions != 1 || rep.Acted.Deleted.Sessions != 0 {
		t.Fatalf("pass after the mark cleared: restored %q, acted %+v", rep.Restored, rep.Acted)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_etcd_restored"); got != 0 {
		t.Errorf("sweepgate_reclaim_etcd_restored = %v after clearing, want 0", got)
	}
	st, err = r.Status(t.Context())
	if err != nil || st.Restored == nil || st.Restored.Standing() {
		t.Fatalf("status: %v, restored %+v, want a cleared mark", err, st.Restored)
	}

	// Deleted once the new mark stood delete_after.
	e.Clock.Advance(2 * time.Minute)
	e.putGateway("g1")
	if rep = e.MustPass(r); rep.Acted.Deleted.Sessions != 1 {
		t.Fatalf("pass delete_after past the new mark: acted %+v", rep.Acted)
	}
}

// witnessSeq reads the seq of etcd's copy of the restore witness (0: none).
func (e *env) witnessSeq() int64 {
	e.T.Helper()
	resp, err := e.Cli.Get(e.T.Context(), e.Store.Keys().Witness())
	if err != nil {
		e.T.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	w, err := etcdstore.UnmarshalWitness(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
	if err != nil {
		e.T.Fatal(err)
	}
	return w.Seq
}

// TestRestoreHoldsDigestDeletions: etcd goes back to a copy taken after a
// pass made two unreferenced blobs pending; since then a manifest names
// one of them, and the leader's timer advanced the witness. The pass
// after the restore rebuilds (due for the mark, not by the interval) and
// judges, and its collector deletes nothing, though the other blob's
// tombstone would be ready. The mark clears at the next pass (the
// rebuild started after it), and after the next rebuild the unreferenced
// blob goes while the one the later manifest names stays.
func TestRestoreHoldsDigestDeletions(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("ref", 2)
	d.PutManifest("app/v1", refd...)
	u, v := d.PutBlob("u"), d.PutBlob("v")
	d.Clock.Set(reclaimtest.Newest(d.Modified()).Add(reclaimtest.PlacementGrace + time.Minute))
	cfg := d.Config()
	// The leader's timer advances the witness between passes. A rebuild
	// is not due again for a day: the restore mark makes it due.
	cfg.GuardCheck, cfg.Digests.RebuildInterval = 20*time.Millisecond, 24*time.Hour
	r := d.Start(cfg)
	reclaimtest.WantCounts(t, "pass one", d.DigestPass(r), 2, 0, 0, 0)
	snap, seq := d.env().saveEtcd(), d.env().witnessSeq()
	d.PutManifest("app/v2", v)
	reclaimtest.WaitFor(t, "the timer to advance the witness past the copy", func() bool { return d.env().witnessSeq() >= seq+2 })
	d.env().rewind(snap)

	rep := d.MustPass(r)
	d.WantPresent("while the restore mark stands", true, u, v)
	if rep.Digests == nil || rep.Digests.Deleted != 0 || !strings.Contains(rep.Digests.Kept, "restored from a snapshot") || !rep.Digests.Rebuild.Ran {
		t.Fatalf("pass after the restore: restored %q, digests %+v", rep.Restored, rep.Digests)
	}
	rep = d.MustPass(r)
	if rep.Restored != "" {
		t.Fatalf("pass %d: the mark stands after a complete rebuild started after it: %s", rep.Pass, rep.Restored)
	}
	// The next rebuild (a day later) lets the unreferenced blob go; the
	// one the later manifest names stays.
	d.Clock.Advance(25 * time.Hour)
	for i := 0; d.Present(u)[0]; i++ {
		if i == 3 {
			t.Fatalf("the unreferenced blob was not deleted in 3 passes after the mark cleared")
		}
		rep = d.MustPass(r)
		if rep.Restored != "" {
			t.Fatalf("pass %d: the restore mark came back: %s", rep.Pass, rep.Restored)
		}
		d.WantPresent(fmt.Sprintf("pass %d after the restore", rep.Pass), true, append(slices.Clone(refd), v)...)
	}
}

// TestRestoreWitnessCopies: a copy of etcd's witness that does not decode
// proves nothing and is written anew, past the backend's; an etcd that
// lost the record altogether while the backend holds one was restored
// from a snapshot taken before the witness existed.
func TestRestoreWitnessCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bucket("witness")
	cfg := e.Config()
	cfg.WitnessBucket = "witness"
	r := e.Start(cfg)
	if rep := e.MustPass(r); rep.Restored != "" || rep.Stopped != "" || e.witnessSeq() != 1 {
		t.Fatalf("first pass: restored %q, stopped %q, witness seq %d; want a new witness at seq 1", rep.Restored, rep.Stopped, e.witnessSeq())
	}
	if _, err := e.Cli.Put(t.Context(), e.Store.Keys().Witness(), "not a witness"); err != nil {
		t.Fatal(err)
	}
	if rep := e.MustPass(r); rep.Restored != "" || rep.Stopped != "" || e.witnessSeq() != 2 {
		t.Fatalf("pass over an undecodable etcd copy: restored %q, stopped %q, witness seq %d; want it written anew at 2", rep.Restored, rep.Stopped, e.witnessSeq())
	}
	if st, err := r.Status(t.Context()); err != nil || st.Restored != nil {
		t.Fatalf("after an undecodable etcd copy: %v, restore mark %+v; want none", err, st.Restored)
	}
	if _, err := e.Cli.Delete(t.Context(), e.Store.Keys().Witness()); err != nil {
		t.Fatal(err)
	}
	// No gateway and no digest sweep: the same pass clears the mark it
	// recorded, which stays as the record of the restore.
	e.MustPass(r)
	st, err := r.Status(t.Context())
	if err != nil || st.Restored == nil || !reclaimtest.Contains(st.Restored.Reason, "etcd holds no restore witness") || e.witnessSeq() != 3 {
		t.Fatalf("after etcd lost the record: %v, restore mark %+v, witness seq %d; want a restore and seq 3", err, st.Restored, e.witnessSeq())
	}
}
