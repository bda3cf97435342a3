package digestsweep

import (
	"fmt"
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestJudgeNeverReadiesUnsafe runs judge over every combination of its
// inputs the rules distinguish and checks the rules a user relies on,
// whatever the combination: a retained blob is never made or kept ready
// (its collector would delete it); nothing advances in a pass whose
// rebuild failed; a blob with no live tombstone of its own is never ready
// in the pass that first sees it; a tombstone goes ready only from a
// pending or ready one of an earlier pass, after a rebuild that started
// after its decision, and once every plane applied the frontier it needs
// (raised to the shard's reference revision when that moved).
func TestJudgeNeverReadiesUnsafe(t *testing.T) {
	t.Parallel()
	const pass = 5
	b := Blob{Digest: "sha256:aa", Bucket: "cas", Key: "blobs/aa", Size: 3}
	const appliedUpTo = 100
	applied := func(rev int64) bool { return rev <= appliedUpTo }

	tombs := []*etcdstore.Tombstone{nil}
	for _, st := range []etcdstore.TombstoneState{etcdstore.TombstonePending, etcdstore.TombstoneReady, etcdstore.TombstoneSkipped, etcdstore.TombstoneDeleted} {
		for _, p := range []int64{pass - 2, pass - 1, pass} {
			for _, frontier := range []int64{10, appliedUpTo, appliedUpTo + 1} {
				for _, bucket := range []string{b.Bucket, "other", ""} {
					tombs = append(tombs, &etcdstore.Tombstone{Digest: b.Digest, State: st, Bucket: bucket, Key: b.Key, Pass: p, Frontier: frontier})
				}
			}
		}
	}
	orders := []rebuildOrder{{decided: 40, rebuilt: 30}, {decided: 40, rebuilt: 40}, {decided: 40, rebuilt: 41}, {}}
	n := 0
	for _, retained := range []bool{false, true} {
		for _, tomb := range tombs {
			for _, shardRev := range []int64{0, 5, 50, appliedUpTo, appliedUpTo + 50} {
				for _, ord := range orders {
					for _, noReady := range []bool{false, true} {
						n++
						j := judge(retained, tomb, b, pass, shardRev, ord, applied, noReady)
						where := fmt.Sprintf("retained %v, tombstone %s, shard rev %d, order %+v, rebuild failed %v: judge = %+v",
							retained, describeTomb(tomb), shardRev, ord, noReady, j)
						checkJudgement(t, where, retained, tomb, b, pass, shardRev, ord, applied, noReady, j)
					}
				}
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d combinations judged", n)
	}
}

// checkJudgement fails t when judgement j breaks a rule of judge.
func checkJudgement(t *testing.T, where string, retained bool, tomb *etcdstore.Tombstone, b Blob, pass, shardRev int64,
	ord rebuildOrder, applied func(int64) bool, noReady bool, j judgement) {
	t.Helper()
	goesReady := j.to == etcdstore.TombstoneReady
	countsReady := j.out == outReady
	ours := tomb != nil && (tomb.Bucket == "" || tomb.Bucket == b.Bucket && tomb.Key == b.Key)
	live := tomb != nil && !tomb.State.Terminal()
	switch {
	case retained && (goesReady || countsReady):
		t.Errorf("a retained blob is ready: %s", where)
	case retained && j.to != "" && j.to != etcdstore.TombstoneSkipped:
		t.Errorf("a retained blob's tombstone moves to %s, not skipped: %s", j.to, where)
	case noReady && (goesReady || countsReady):
		t.Errorf("ready although the rebuild failed: %s", where)
	case !(live && ours) && (goesReady || countsReady):
		t.Errorf("ready without a live tombstone about this copy: %s", where)
	case live && ours && tomb.State == etcdstore.TombstonePending && tomb.Pass >= pass && (goesReady || countsReady):
		t.Errorf("made ready in the pass that made it pending: %s", where)
	}
	if !goesReady {
		return
	}
	if ord.rebuilt <= ord.decided {
		t.Errorf("made ready without a rebuild started after its decision: %s", where)
	}
	if need := max(tomb.Frontier, shardRev); !applied(need) {
		t.Errorf("made ready before every plane applied revision %d: %s", need, where)
	}
	if shardRev > tomb.Frontier && j.frontier != shardRev {
		t.Errorf("made ready without raising the frontier to the shard's revision %d: %s", shardRev, where)
	}
}

func describeTomb(t *etcdstore.Tombstone) string {
	if t == nil {
		return "none"
	}
	return fmt.Sprintf("%s of pass %d, frontier %d, at %q", t.State, t.Pass, t.Frontier, t.Bucket)
}
