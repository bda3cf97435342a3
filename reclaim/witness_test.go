package reclaim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestJudgeWitness: only a backend copy ahead of etcd's (or of an epoch
// etcd does not hold) shows a restore; a backend copy behind or missing
// is what a failed or late backend write leaves, and shows nothing.
func TestJudgeWitness(t *testing.T) {
	w := func(epoch string, seq int64) *etcdstore.Witness { return &etcdstore.Witness{Epoch: epoch, Seq: seq} }
	for _, tc := range []struct {
		name          string
		etcd, backend *etcdstore.Witness
		restored      bool
		next          etcdstore.Witness
	}{
		{"neither copy: a new epoch", nil, nil, false, etcdstore.Witness{Seq: 1}},
		{"no backend copy yet", w("e1", 4), nil, false, *w("e1", 5)},
		{"equal", w("e1", 4), w("e1", 4), false, *w("e1", 5)},
		{"backend behind (its write failed or is late)", w("e1", 9), w("e1", 4), false, *w("e1", 10)},
		{"backend one ahead: etcd lost an advance", w("e1", 4), w("e1", 5), true, *w("e1", 6)},
		{"backend far ahead", w("e1", 4), w("e1", 900), true, *w("e1", 901)},
		{"etcd lost the record", nil, w("e1", 3), true, *w("e1", 4)},
		{"etcd holds another epoch", w("e2", 50), w("e1", 3), true, *w("e1", 51)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := reclaim.JudgeWitness(tc.etcd, tc.backend)
			if (why != "") != tc.restored {
				t.Fatalf("judged %q, want restored %v", why, tc.restored)
			}
			next := reclaim.NextWitness(tc.etcd, tc.backend)
			if tc.etcd == nil && tc.backend == nil {
				if next.Epoch == "" || next.Seq != 1 {
					t.Fatalf("next %+v, want a new epoch at seq 1", next)
				}
				return
			}
			if next.Epoch != tc.next.Epoch || next.Seq != tc.next.Seq {
				t.Fatalf("next %+v, want %+v", next, tc.next)
			}
			if tc.backend != nil && next.Seq <= tc.backend.Seq {
				t.Fatalf("next seq %d is not past the backend's %d: the next round would find a restore again", next.Seq, tc.backend.Seq)
			}
		})
	}
}

// TestRestoreRemark: a delete decided on a session written at or below
// the restore mark's revision becomes a fresh mark; anything else is as
// the checklist decided.
func TestRestoreRemark(t *testing.T) {
	del := reclaim.Decision{Verdict: reclaim.Delete, Reason: "marked expired 13h ago", LastActivity: time.Unix(1, 0)}
	if d := reclaim.RestoreRemark(del, 40, 50); d.Verdict != reclaim.Mark || !strings.Contains(d.Reason, "before etcd was restored") {
		t.Fatalf("session at 40 below a mark at 50: %+v, want a fresh mark", d)
	}
	if d := reclaim.RestoreRemark(del, 50, 50); d.Verdict != reclaim.Mark {
		t.Fatalf("session at the mark's revision: %+v, want a fresh mark", d)
	}
	if d := reclaim.RestoreRemark(del, 51, 50); d.Verdict != reclaim.Delete {
		t.Fatalf("session written after the mark: %+v, want the delete", d)
	}
	if d := reclaim.RestoreRemark(del, 40, 0); d.Verdict != reclaim.Delete {
		t.Fatalf("no restore mark: %+v, want the delete", d)
	}
	keep := reclaim.Decision{Verdict: reclaim.Keep, Reason: "within grace"}
	if d := reclaim.RestoreRemark(keep, 40, 50); d != keep {
		t.Fatalf("keep changed to %+v", d)
	}
}
