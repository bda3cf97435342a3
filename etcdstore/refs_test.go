//go:build integration

package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func digest(i int) string { return fmt.Sprintf("sha256:%064x", i) }

// refsOf lists the digests that bucket/key holds references to, from the
// reference keys themselves.
func refsOf(t *testing.T, s *etcdstore.Store, bucket, key string) []string {
	t.Helper()
	resp, err := s.Client().Get(context.Background(), s.Keys().AllRefs(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		d, ok := s.Keys().ParseRef(k)
		if ok && k == s.Keys().Ref(d, bucket, key) {
			out = append(out, d)
		}
	}
	return out
}

func shardRev(t *testing.T, s *etcdstore.Store, d string) int64 {
	t.Helper()
	resp, err := s.Client().Get(context.Background(), s.Keys().RefRev(etcdstore.RefShard(d)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].ModRevision
}

func write(t *testing.T, s *etcdstore.Store, key, id string, outcome etcdstore.WriteOutcome, ds ...string) {
	t.Helper()
	ctx := context.Background()
	if err := s.BeginRefWrite(ctx, "reg", key, etcdstore.RefWrite{ID: id, Digests: ds, At: t0}); err != nil {
		t.Fatalf("begin %s: %v", id, err)
	}
	if err := s.EndRefWrite(ctx, "reg", key, id, outcome, "etag-"+id, t0); err != nil {
		t.Fatalf("end %s: %v", id, err)
	}
}

func TestRefWriteLifecycle(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/refs/")
	ctx := context.Background()
	a, b, c := digest(1), digest(2), digest(3)

	before := shardRev(t, s, a)
	if err := s.BeginRefWrite(ctx, "reg", "m1", etcdstore.RefWrite{ID: "w1", Digests: []string{b, a, a}, At: t0}); err != nil {
		t.Fatal(err)
	}
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("references while the write is pending = %v, want [a b]", got)
	}
	if shardRev(t, s, a) <= before {
		t.Fatal("a reference write did not advance its shard's reference revision")
	}
	if err := s.BeginRefWrite(ctx, "reg", "m1", etcdstore.RefWrite{ID: "w2", Digests: []string{c}, At: t0}); !errors.Is(err, etcdstore.ErrWriteInFlight) {
		t.Fatalf("second concurrent write: %v, want ErrWriteInFlight", err)
	}
	if err := s.EndRefWrite(ctx, "reg", "m1", "w1", etcdstore.WriteCommitted, "e1", t0); err != nil {
		t.Fatal(err)
	}

	// An overwrite retains both bodies' digests while in flight, then only
	// the new body's once committed.
	if err := s.BeginRefWrite(ctx, "reg", "m1", etcdstore.RefWrite{ID: "w3", Digests: []string{b, c}, At: t0}); err != nil {
		t.Fatal(err)
	}
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{a, b, c}) {
		t.Fatalf("references during an overwrite = %v, want all three", got)
	}
	if err := s.EndRefWrite(ctx, "reg", "m1", "w3", etcdstore.WriteCommitted, "e3", t0); err != nil {
		t.Fatal(err)
	}
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{b, c}) {
		t.Fatalf("references after the overwrite = %v, want [b c]", got)
	}
	rec, err := s.GetRefSource(ctx, "reg", "m1")
	if err != nil || rec.Value.ETag != "e3" || rec.Value.Pending != nil {
		t.Fatalf("record = %+v, %v", rec.Value, err)
	}

	// A failed write takes back only its own digests.
	write(t, s, "m1", "w4", etcdstore.WriteFailed, a)
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{b, c}) {
		t.Fatalf("references after a failed write = %v, want [b c]", got)
	}
	// An unknown outcome keeps both and marks the record dirty.
	write(t, s, "m1", "w5", etcdstore.WriteUnknown, a)
	rec, _ = s.GetRefSource(ctx, "reg", "m1")
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{a, b, c}) || !rec.Value.Dirty {
		t.Fatalf("after an unknown outcome: refs %v, dirty %v", got, rec.Value.Dirty)
	}
	// The rebuild settles a dirty record to what the body names.
	rec, _ = s.GetRefSource(ctx, "reg", "m1")
	if _, err := s.RecordFoundRefs(ctx, "reg", "m1", []string{a}, "e5", rec.ModRev-1, t0); !errors.Is(err, etcdstore.ErrConflict) {
		t.Fatalf("settling from an older read of the record: %v, want ErrConflict", err)
	}
	if _, err := s.RecordFoundRefs(ctx, "reg", "m1", []string{a}, "e5", rec.ModRev, t0); err != nil {
		t.Fatal(err)
	}
	rec, _ = s.GetRefSource(ctx, "reg", "m1")
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{a}) || rec.Value.Dirty || rec.Value.Unknown {
		t.Fatalf("after settling: refs %v, record %+v", got, rec.Value)
	}
}

func TestRefWriteRefusedByGuard(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/refs/")
	ctx := context.Background()
	a, b := digest(1), digest(2)
	if _, err := s.Client().Put(ctx, s.Keys().Guard(b), "armed"); err != nil {
		t.Fatal(err)
	}
	err := s.BeginRefWrite(ctx, "reg", "m1", etcdstore.RefWrite{ID: "w1", Digests: []string{a, b}, At: t0})
	if !errors.Is(err, etcdstore.ErrGuarded) {
		t.Fatalf("write naming a guarded digest: %v, want ErrGuarded", err)
	}
	if got := refsOf(t, s, "reg", "m1"); len(got) != 0 {
		t.Fatalf("a refused write recorded %v", got)
	}
	if _, err := s.GetRefSource(ctx, "reg", "m1"); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Fatalf("a refused write left a record: %v", err)
	}
	if err := s.PlaceBlob(ctx, b, "p1", "reg", "blobs/b", t0); !errors.Is(err, etcdstore.ErrGuarded) {
		t.Fatalf("placing a guarded blob: %v, want ErrGuarded", err)
	}
	if err := s.HoldRefs(ctx, "h1", "b", "k", clientv3.NoLease, t0); !errors.Is(err, etcdstore.ErrGuarded) {
		t.Fatalf("a hold while a guard is armed: %v, want ErrGuarded", err)
	}
	if _, err := s.Client().Delete(ctx, s.Keys().Guard(b)); err != nil {
		t.Fatal(err)
	}
	write(t, s, "m1", "w2", etcdstore.WriteCommitted, a, b)
	if err := s.PlaceBlob(ctx, b, "p1", "reg", "blobs/b", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.HoldRefs(ctx, "h1", "b", "k", clientv3.NoLease, t0); err != nil {
		t.Fatal(err)
	}
}

func TestTrashAndRestore(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/refs/")
	ctx := context.Background()
	a, b := digest(1), digest(2)
	write(t, s, "m1", "w1", etcdstore.WriteCommitted, a, b)

	deleted, expires := t0.Add(time.Hour), t0.Add(49*time.Hour)
	tr, ok, err := s.TrashRefSource(ctx, "reg", "m1", "alice", deleted, expires)
	if err != nil || !ok || !slices.Equal(tr.Digests, []string{a, b}) {
		t.Fatalf("trash = %+v, %v, %v", tr, ok, err)
	}
	if got := refsOf(t, s, "reg", "m1"); len(got) != 0 {
		t.Fatalf("references left after the delete: %v", got)
	}
	for _, d := range []string{a, b} {
		ref, err := s.Referenced(ctx, d, deleted)
		if err != nil || !ref {
			t.Fatalf("%s in unexpired trash: referenced = %v, %v", d, ref, err)
		}
		ref, _ = s.Referenced(ctx, d, expires.Add(time.Second))
		if ref {
			t.Fatalf("%s still referenced after its trash expired", d)
		}
	}
	list, err := s.ListTrash(ctx, "reg", "", 0)
	if err != nil || len(list) != 1 || list[0].Principal != "alice" {
		t.Fatalf("trash list = %+v, %v", list, err)
	}
	if _, ok, err := s.TrashRefSource(ctx, "reg", "never-written", "alice", deleted, expires); ok || err != nil {
		t.Fatalf("trashing an object without references: %v, %v", ok, err)
	}

	if _, err := s.RestoreTrash(ctx, "reg", "m1", deleted, deleted); err != nil {
		t.Fatal(err)
	}
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("references after restore = %v", got)
	}
	rec, _ := s.GetRefSource(ctx, "reg", "m1")
	if !rec.Value.Restored {
		t.Fatal("a restored record is not marked restored")
	}
	if list, _ := s.ListTrash(ctx, "reg", "", 0); len(list) != 0 {
		t.Fatalf("trash after restore = %+v", list)
	}
	if _, err := s.RestoreTrash(ctx, "reg", "m1", deleted, deleted); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Fatalf("restoring twice: %v, want ErrNotFound", err)
	}
}

// A record holding more digests than one transaction can move is trashed
// and restored in steps, every step retaining them.
func TestTrashOfALargeRecord(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/refs/")
	ctx := context.Background()
	var first, second []string
	for i := range 50 {
		first = append(first, digest(i))
		second = append(second, digest(100+i))
	}
	write(t, s, "m1", "w1", etcdstore.WriteCommitted, first...)
	write(t, s, "m1", "w2", etcdstore.WriteUnknown, second...)
	if got := refsOf(t, s, "reg", "m1"); len(got) != 100 {
		t.Fatalf("dirty record holds %d references, want 100", len(got))
	}
	if _, _, err := s.TrashRefSource(ctx, "reg", "m1", "", t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, d := range slices.Concat(first, second) {
		if ref, err := s.Referenced(ctx, d, t0); err != nil || !ref {
			t.Fatalf("%s not retained by the trash: %v", d, err)
		}
	}
	if _, err := s.RestoreTrash(ctx, "reg", "m1", t0, t0); err != nil {
		t.Fatal(err)
	}
	if got := refsOf(t, s, "reg", "m1"); len(got) != 100 {
		t.Fatalf("restored %d references, want 100", len(got))
	}
}

func TestFoundRefsMarkUnknownProducer(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/refs/")
	ctx := context.Background()
	added, err := s.RecordFoundRefs(ctx, "reg", "direct", []string{digest(1)}, "e", 0, t0)
	if err != nil || len(added) != 1 {
		t.Fatalf("found refs: %v, %v", added, err)
	}
	rec, _ := s.GetRefSource(ctx, "reg", "direct")
	if !rec.Value.Unknown {
		t.Fatal("references found around the gateway are not marked unknown")
	}
	// Finding the same again adds nothing.
	if added, _ := s.RecordFoundRefs(ctx, "reg", "direct", []string{digest(1)}, "e", rec.ModRev, t0); len(added) != 0 {
		t.Fatalf("second find added %v", added)
	}
	// A pending write is left to its own end.
	if err := s.BeginRefWrite(ctx, "reg", "m", etcdstore.RefWrite{ID: "w", Digests: []string{digest(2)}, At: t0}); err != nil {
		t.Fatal(err)
	}
	pending, _ := s.GetRefSource(ctx, "reg", "m")
	if _, err := s.RecordFoundRefs(ctx, "reg", "m", []string{digest(3)}, "e", pending.ModRev, t0); !errors.Is(err, etcdstore.ErrWriteInFlight) {
		t.Fatalf("found refs over a pending write: %v", err)
	}
}

func TestFrontiers(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/refs/")
	ctx := context.Background()
	if err := s.ReportFrontier(ctx, "backup", 42, "job", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.ReportFrontier(ctx, "", 1, "", t0); err == nil {
		t.Fatal("a frontier without a plane was accepted")
	}
	fs, rev, err := s.ListFrontiers(ctx)
	if err != nil || len(fs) != 1 || fs[0].Plane != "backup" || fs[0].Revision != 42 || rev < 1 {
		t.Fatalf("frontiers = %+v at %d, %v", fs, rev, err)
	}
}

func TestDigestKeysSortByDigest(t *testing.T) {
	t.Parallel()
	k := etcdstore.Keys{Prefix: "/sg/"}
	a, b := digest(1), digest(2)
	if !(k.Ref(a, "z", "z") < k.Ref(b, "a", "a")) || !strings.HasPrefix(k.Ref(a, "b/x", "k/y"), k.Refs(a)) {
		t.Fatal("reference keys do not group and sort by digest")
	}
	if d, ok := k.ParseRef(k.Ref(a, "b", "k/1")); !ok || d != a {
		t.Fatalf("ParseRef = %q, %v", d, ok)
	}
	if etcdstore.RefShard(a) != "0" || len(etcdstore.AllRefShards()) != etcdstore.RefShards {
		t.Fatal("shards")
	}
	if d, ok := etcdstore.LastSegment(k.Tombstone(a)); !ok || d != a {
		t.Fatalf("LastSegment = %q", d)
	}
}

// A write whose gateway died before recording its end blocks later writes
// of the object only until it is stale; then the next write or delete
// takes it over, keeping its digests until the new outcome is known.
func TestStalePendingWriteIsTakenOver(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/refs/")
	ctx := context.Background()
	a, b, c := digest(1), digest(2), digest(3)
	write(t, s, "m1", "w0", etcdstore.WriteCommitted, a)
	if err := s.BeginRefWrite(ctx, "reg", "m1", etcdstore.RefWrite{ID: "dead", Digests: []string{b}, At: t0}); err != nil {
		t.Fatal(err)
	}
	soon := t0.Add(time.Minute)
	if err := s.BeginRefWrite(ctx, "reg", "m1", etcdstore.RefWrite{ID: "w1", Digests: []string{c}, At: soon}); !errors.Is(err, etcdstore.ErrWriteInFlight) {
		t.Fatalf("a write while another is fresh: %v, want ErrWriteInFlight", err)
	}
	later := t0.Add(etcdstore.StalePendingAfter + time.Second)
	if err := s.BeginRefWrite(ctx, "reg", "m1", etcdstore.RefWrite{ID: "w2", Digests: []string{c}, At: later}); err != nil {
		t.Fatalf("a write after the pending one went stale: %v", err)
	}
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{a, b, c}) {
		t.Fatalf("references while taking over = %v, want all three retained", got)
	}
	if err := s.EndRefWrite(ctx, "reg", "m1", "w2", etcdstore.WriteCommitted, "e2", later); err != nil {
		t.Fatal(err)
	}
	if got := refsOf(t, s, "reg", "m1"); !slices.Equal(got, []string{c}) {
		t.Fatalf("references after the new write committed = %v, want [c]", got)
	}

	// A delete takes a stale write over the same way, trashing its digests.
	if err := s.BeginRefWrite(ctx, "reg", "m2", etcdstore.RefWrite{ID: "dead", Digests: []string{a}, At: t0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.TrashRefSource(ctx, "reg", "m2", "", soon, soon.Add(time.Hour)); !errors.Is(err, etcdstore.ErrWriteInFlight) {
		t.Fatalf("a delete while a write is fresh: %v, want ErrWriteInFlight", err)
	}
	tr, ok, err := s.TrashRefSource(ctx, "reg", "m2", "", later, later.Add(time.Hour))
	if err != nil || !ok || !slices.Equal(tr.Digests, []string{a}) {
		t.Fatalf("a delete after the write went stale: %+v %v %v", tr, ok, err)
	}
}
