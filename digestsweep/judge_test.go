package digestsweep

import (
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestJudge covers every verdict about one stored blob.
func TestJudge(t *testing.T) {
	t.Parallel()
	const pass = 5
	b := Blob{Digest: "sha256:aa", Bucket: "cas", Key: "blobs/aa", Size: 3}
	tomb := func(st etcdstore.TombstoneState, p int64, frontier int64) *etcdstore.Tombstone {
		return &etcdstore.Tombstone{Digest: b.Digest, State: st, Bucket: b.Bucket, Key: b.Key, Pass: p, Frontier: frontier}
	}
	elsewhere := func(st etcdstore.TombstoneState) *etcdstore.Tombstone {
		t := tomb(st, pass-1, 10)
		t.Bucket = "other"
		return t
	}
	applied := func(rev int64) bool { return rev <= 100 }
	for _, tt := range []struct {
		name     string
		retained bool
		tomb     *etcdstore.Tombstone
		noReady  bool
		shardRev int64
		want     judgement
	}{
		{"retained, no tombstone", true, nil, false, 0, judgement{out: outRetained}},
		{"retained, pending", true, tomb(etcdstore.TombstonePending, pass-1, 10), false, 0, judgement{to: etcdstore.TombstoneSkipped, out: outSkipped}},
		{"retained, ready", true, tomb(etcdstore.TombstoneReady, pass-1, 10), false, 0, judgement{to: etcdstore.TombstoneSkipped, out: outSkipped}},
		{"retained, skipped", true, tomb(etcdstore.TombstoneSkipped, pass-1, 10), false, 0, judgement{out: outRetained}},
		{"retained, deleted", true, tomb(etcdstore.TombstoneDeleted, pass-1, 10), false, 0, judgement{out: outRetained}},
		{"retained, pending elsewhere", true, elsewhere(etcdstore.TombstonePending), false, 0, judgement{out: outRetained}},
		{"new", false, nil, false, 0, judgement{to: etcdstore.TombstonePending, fresh: true, out: outNew}},
		{"new, rebuild failed", false, nil, true, 0, judgement{to: etcdstore.TombstonePending, fresh: true, out: outNew}},
		{"skipped again", false, tomb(etcdstore.TombstoneSkipped, pass-1, 10), false, 0, judgement{to: etcdstore.TombstonePending, fresh: true, out: outNew}},
		{"stored again after delete", false, tomb(etcdstore.TombstoneDeleted, pass-1, 10), false, 0, judgement{to: etcdstore.TombstonePending, fresh: true, out: outNew}},
		{"pending elsewhere", false, elsewhere(etcdstore.TombstonePending), false, 0, judgement{out: outDuplicate}},
		{"deleted elsewhere", false, elsewhere(etcdstore.TombstoneDeleted), false, 0, judgement{to: etcdstore.TombstonePending, fresh: true, out: outNew}},
		{"pending, frontier applied", false, tomb(etcdstore.TombstonePending, pass-1, 100), false, 0, judgement{to: etcdstore.TombstoneReady, out: outReady}},
		{"pending, frontier not applied", false, tomb(etcdstore.TombstonePending, pass-1, 101), false, 0, judgement{out: outPending}},
		{"pending, written this pass", false, tomb(etcdstore.TombstonePending, pass, 10), false, 0, judgement{out: outPending}},
		{"pending, rebuild failed", false, tomb(etcdstore.TombstonePending, pass-1, 10), true, 0, judgement{out: outPending}},
		{"ready, confirmed again", false, tomb(etcdstore.TombstoneReady, pass-1, 10), false, 0, judgement{to: etcdstore.TombstoneReady, out: outReady}},
		{"ready, confirmed this pass", false, tomb(etcdstore.TombstoneReady, pass, 10), false, 0, judgement{out: outReady}},
		{"ready, a plane added since", false, tomb(etcdstore.TombstoneReady, pass-1, 101), false, 0, judgement{to: etcdstore.TombstonePending, out: outPending}},
		{"ready, rebuild failed", false, tomb(etcdstore.TombstoneReady, pass-1, 10), true, 0, judgement{out: outPending}},
		{"pending, shard moved, applied", false, tomb(etcdstore.TombstonePending, pass-1, 10), false, 50, judgement{to: etcdstore.TombstoneReady, frontier: 50, out: outReady}},
		{"pending, shard moved, not applied", false, tomb(etcdstore.TombstonePending, pass-1, 10), false, 150, judgement{to: etcdstore.TombstonePending, frontier: 150, out: outPending}},
		{"pending, shard before the frontier", false, tomb(etcdstore.TombstonePending, pass-1, 10), false, 5, judgement{to: etcdstore.TombstoneReady, out: outReady}},
		{"ready, shard moved, not applied", false, tomb(etcdstore.TombstoneReady, pass-1, 10), false, 150, judgement{to: etcdstore.TombstonePending, frontier: 150, out: outPending}},
	} {
		if got := judge(tt.retained, tt.tomb, b, pass, tt.shardRev, rebuildOrder{decided: 1, rebuilt: 2}, applied, tt.noReady); got != tt.want {
			t.Errorf("%s: judge = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestJudgeRebuildOrder holds a live tombstone where it is until a rebuild
// of every reference source started after its latest decision: a pending
// one does not go ready and a ready one is not confirmed again, whatever
// the planes applied.
func TestJudgeRebuildOrder(t *testing.T) {
	t.Parallel()
	const pass = 5
	b := Blob{Digest: "sha256:aa", Bucket: "cas", Key: "blobs/aa", Size: 3}
	applied := func(int64) bool { return true }
	for _, st := range []etcdstore.TombstoneState{etcdstore.TombstonePending, etcdstore.TombstoneReady} {
		tomb := &etcdstore.Tombstone{Digest: b.Digest, State: st, Bucket: b.Bucket, Key: b.Key, Pass: pass - 1, Frontier: 10}
		for _, ord := range []rebuildOrder{{decided: 40, rebuilt: 30}, {decided: 40, rebuilt: 40}, {decided: 40}} {
			if got, want := judge(false, tomb, b, pass, 0, ord, applied, false), (judgement{out: outPending}); got != want {
				t.Errorf("%s decided at %d, rebuilt at %d: judge = %+v, want %+v (waits as it is)", st, ord.decided, ord.rebuilt, got, want)
			}
		}
		if got, want := judge(false, tomb, b, pass, 0, rebuildOrder{decided: 40, rebuilt: 41}, applied, false), (judgement{to: etcdstore.TombstoneReady, out: outReady}); got != want {
			t.Errorf("%s with a rebuild after it: judge = %+v, want %+v", st, got, want)
		}
	}
}

// TestDigestOfKey finds the digest of a per-digest key.
func TestDigestOfKey(t *testing.T) {
	t.Parallel()
	keys, err := etcdstore.NewKeys("/p/")
	if err != nil {
		t.Fatal(err)
	}
	d := "sha256:0123"
	for _, prefixOf := range []func(string) string{keys.Refs, keys.TrashRefs, keys.Placements} {
		got, ok := digestOfKey(prefixOf(d)+"bucket/key", prefixOf)
		if !ok || got != d {
			t.Errorf("digestOfKey(%q) = %q, %v", prefixOf(d)+"bucket/key", got, ok)
		}
	}
	if _, ok := digestOfKey("/p/other/x/y", keys.Refs); ok {
		t.Error("a key outside the prefix has a digest")
	}
}
