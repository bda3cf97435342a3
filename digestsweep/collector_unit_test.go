package digestsweep

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// The collector's decisions, run over fakeBackend with no etcd: which
// guarded blobs are recorded deleted, what an unclear or late delete
// leaves behind, and when a guard may be released.

// testClock is a clock the test moves by hand; nothing sleeps.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

const (
	testPass = int64(7)
	testTerm = int64(3)
)

// newTestSweep returns the digest sweep of pass testPass over backend b,
// stamping records with clock. Its store has keys and no connection: a
// test that reaches etcd panics on the nil KV instead of waiting for a
// server, so these tests cannot come to depend on one unnoticed.
func newTestSweep(t *testing.T, b Backend, clock func() time.Time) *digestSweep {
	t.Helper()
	keys, err := etcdstore.NewKeys("/unit/")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &SweepConfig{GuardSettle: time.Minute, ClockSkew: 5 * time.Second, BackendTimeout: 30 * time.Second,
		MaxDelete: 100, MaxDeleteFraction: 0.5, MaxMark: 200, MaxMarkFraction: 0.5, DeleteParallel: 1}
	sw := &Sweep{cfg: cfg, store: etcdstore.NewStore(&clientv3.Client{}, keys), s3: b,
		log: slog.New(slog.DiscardHandler), metrics: noMetrics{}, batch: 10}
	term := sweep.Term{N: testTerm}
	return &digestSweep{Sweep: sw, run: &sweep.Run{Pass: testPass, Term: term, Clock: clock}, term: term, cur: digestCursor{Pass: testPass}}
}

// guardedBlob stores a blob on f and returns it as the collector holds it
// once its guard is armed.
func guardedBlob(f *fakeBackend, digest string) armed {
	key := "blobs/" + digest
	f.put("cas", key, []byte("bytes of "+digest))
	return armed{tomb: etcdstore.Tombstone{Digest: digest, State: etcdstore.TombstoneReady, Bucket: "cas", Key: key,
		Size: int64(len("bytes of " + digest)), Pass: testPass, Frontier: 10, RefRev: 9}, guardRev: 42}
}

// TestDeleteBatchFates: each guarded blob's fate is decided from the
// backend's answer and, when that answer is not a clean success, from a
// second look. Only a blob the backend is seen without is ever gone; an
// answer that was lost leaves the guard armed (settling) even when the
// bytes are gone, since the request may still be executed later.
func TestDeleteBatchFates(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// fault sets the backend's behaviour for the blob's key.
		fault       func(f *fakeBackend, key string)
		want        blobFate
		wantPresent bool
	}{
		{"clean answer", func(*fakeBackend, string) {}, blobGone, false},
		{"answer names the key failed, still there", func(f *fakeBackend, k string) { f.deleteFails[k] = "InternalError" }, blobPresent, true},
		{"answer names the key failed, gone on looking again", func(f *fakeBackend, k string) {
			f.deleteFails[k] = "InternalError"
			delete(f.objects["cas"], k)
		}, blobGone, false},
		{"answer lost after the delete ran", func(f *fakeBackend, _ string) { f.deleteLost = true }, blobGoneSettling, false},
		{"request failed, blob still there", func(f *fakeBackend, _ string) { f.deleteErr = errors.New("fake: timeout") }, blobSettling, true},
		{"request failed and looking again failed", func(f *fakeBackend, k string) {
			f.deleteErr = errors.New("fake: timeout")
			f.headErr[k] = errors.New("fake: 503")
		}, blobUnknown, true},
		{"answer names the key failed and looking again failed", func(f *fakeBackend, k string) {
			f.deleteFails[k] = "InternalError"
			f.headErr[k] = errors.New("fake: 503")
		}, blobUnknown, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBackend()
			a := guardedBlob(f, "sha256:aa")
			tt.fault(f, a.tomb.Key)
			clk := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
			s := newTestSweep(t, f, clk.now)
			fates, why := make([]blobFate, 1), make([]string, 1)
			s.deleteBatch(context.Background(), []armed{a}, clk.now().Add(30*time.Second), fates, why)
			if fates[0] != tt.want {
				t.Errorf("fate = %d (%q), want %d", fates[0], why[0], tt.want)
			}
			if got := f.has("cas", a.tomb.Key); got != tt.wantPresent {
				t.Errorf("blob stored after the delete = %v, want %v", got, tt.wantPresent)
			}
			if len(f.deleteCalls) != 1 {
				t.Errorf("%d delete requests sent, want exactly 1 (never deleted twice blindly)", len(f.deleteCalls))
			}
			if tt.want != blobGone && why[0] == "" {
				t.Error("a fate other than a clean delete carries no reason")
			}
		})
	}
}

// TestDeleteBatchLooksOnlyAtFailedKeys: in one request, a key the answer
// names failed is settled by its own look; the others are gone.
func TestDeleteBatchLooksOnlyAtFailedKeys(t *testing.T) {
	t.Parallel()
	f := newFakeBackend()
	batch := []armed{guardedBlob(f, "sha256:a1"), guardedBlob(f, "sha256:a2"), guardedBlob(f, "sha256:a3")}
	f.deleteFails[batch[1].tomb.Key] = "SlowDown"
	clk := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newTestSweep(t, f, clk.now)
	fates, why := make([]blobFate, 3), make([]string, 3)
	s.deleteBatch(context.Background(), batch, clk.now().Add(time.Minute), fates, why)
	if want := []blobFate{blobGone, blobPresent, blobGone}; fates[0] != want[0] || fates[1] != want[1] || fates[2] != want[2] {
		t.Errorf("fates = %v, want %v", fates, want)
	}
	if len(f.deleteCalls) != 1 || len(f.deleteCalls[0]) != 3 {
		t.Errorf("requests = %v, want one carrying the three keys", f.deleteCalls)
	}
	if !strings.Contains(why[1], "SlowDown") {
		t.Errorf("reason %q does not name the backend's code", why[1])
	}
}

// TestDeleteBatchRecordedDeadline: a delete is sent only while the
// deadline recorded on its guards is ahead, and gives up at it, so that
// no request of this pass reaches the backend once a successor may settle
// the guard. Past the deadline nothing is sent and the blob stays.
func TestDeleteBatchRecordedDeadline(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	sendBy := start.Add(30 * time.Second)

	f := newFakeBackend()
	a := guardedBlob(f, "sha256:bb")
	clk := &testClock{t: start.Add(10 * time.Second)}
	s := newTestSweep(t, f, clk.now)
	fates, why := make([]blobFate, 1), make([]string, 1)
	before := time.Now()
	s.deleteBatch(context.Background(), []armed{a}, sendBy, fates, why)
	if fates[0] != blobGone || len(f.deadlines) != 1 {
		t.Fatalf("before the deadline: fate %d, %d requests; want gone, 1", fates[0], len(f.deadlines))
	}
	// 20s were left on the test clock: the request's own deadline is at
	// most that far from when it was sent.
	if dl := f.deadlines[0]; dl.IsZero() || dl.Sub(before) > 20*time.Second+time.Second {
		t.Errorf("request deadline %v, %v after sending; want at most the 20s left before the recorded deadline", dl, dl.Sub(before))
	}

	f = newFakeBackend()
	a = guardedBlob(f, "sha256:cc")
	for _, late := range []time.Duration{0, time.Nanosecond, time.Hour} {
		clk.set(sendBy.Add(late))
		s = newTestSweep(t, f, clk.now)
		s.deleteBatch(context.Background(), []armed{a}, sendBy, fates, why)
		if fates[0] != blobNotSent {
			t.Errorf("%s past the deadline: fate %d (%q), want not sent", late, fates[0], why[0])
		}
	}
	if len(f.deleteCalls) != 0 || !f.has("cas", a.tomb.Key) {
		t.Errorf("past the deadline: %d requests sent, blob stored %v; want none sent and the blob kept", len(f.deleteCalls), f.has("cas", a.tomb.Key))
	}
}

// writeShape is what a settle write does, as the tests read it.
type writeShape struct {
	delta         Report
	tombstone     *etcdstore.Tombstone // put, decoded; nil when not written
	releasesGuard bool
	comparesGuard bool
}

func shapeOf(t *testing.T, s *digestSweep, digest string, w digestWrite) writeShape {
	t.Helper()
	keys := s.keys()
	var sh writeShape
	if w.delta != nil {
		sh.delta = *w.delta
	}
	for _, op := range w.ops {
		switch k := string(op.KeyBytes()); {
		case op.IsPut() && k == keys.Tombstone(digest):
			var ts etcdstore.Tombstone
			if err := json.Unmarshal(op.ValueBytes(), &ts); err != nil {
				t.Fatal(err)
			}
			sh.tombstone = &ts
		case op.IsDelete() && k == keys.Guard(digest):
			sh.releasesGuard = true
		}
	}
	for _, c := range w.cmps {
		if string(c.Key) == keys.Guard(digest) {
			sh.comparesGuard = true
		}
	}
	return sh
}

// TestSettleWriteCountsOnlyGone: a blob is counted deleted, and its
// tombstone recorded deleted, only when the backend is seen without it. A
// delete whose outcome is unclear is never counted done and never
// releases its guard; a blob still there after a finished request stays
// ready, one attempt more, and its guard goes. Every write that moves a
// record compares the guard as this pass armed it.
func TestSettleWriteCountsOnlyGone(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newTestSweep(t, newFakeBackend(), clk.now)
	a := armed{tomb: etcdstore.Tombstone{Digest: "sha256:dd", State: etcdstore.TombstoneReady, Bucket: "cas", Key: "blobs/dd", Size: 11, Pass: testPass, Attempts: 1}, guardRev: 42}
	for _, tt := range []struct {
		name      string
		fate      blobFate
		deleted   int64
		settling  int64
		tombstone etcdstore.TombstoneState // "" when not written
		release   bool
	}{
		{"gone", blobGone, 1, 0, etcdstore.TombstoneDeleted, false}, // released after the record lands (releaseGone)
		{"gone, answer unclear", blobGoneSettling, 1, 1, etcdstore.TombstoneDeleted, false},
		{"present after a finished request", blobPresent, 0, 0, etcdstore.TombstoneReady, true},
		{"not sent", blobNotSent, 0, 0, etcdstore.TombstoneReady, true},
		{"unclear, still there", blobSettling, 0, 1, "", false},
		{"unknown", blobUnknown, 0, 1, "", false},
	} {
		sh := shapeOf(t, s, a.tomb.Digest, s.settleWrite(a, tt.fate, "why", nil, nil))
		if sh.delta.Deleted != tt.deleted || sh.delta.Settling != tt.settling {
			t.Errorf("%s: counts deleted %d, settling %d; want %d, %d", tt.name, sh.delta.Deleted, sh.delta.Settling, tt.deleted, tt.settling)
		}
		if tt.deleted == 0 && sh.delta.Bytes != 0 {
			t.Errorf("%s: %d bytes counted deleted", tt.name, sh.delta.Bytes)
		}
		if tt.deleted == 1 && sh.delta.Bytes != a.tomb.Size {
			t.Errorf("%s: %d bytes counted, want %d", tt.name, sh.delta.Bytes, a.tomb.Size)
		}
		switch {
		case tt.tombstone == "" && sh.tombstone != nil:
			t.Errorf("%s: tombstone written (%s), want left as it is", tt.name, sh.tombstone.State)
		case tt.tombstone != "" && (sh.tombstone == nil || sh.tombstone.State != tt.tombstone):
			t.Errorf("%s: tombstone written %+v, want state %s", tt.name, sh.tombstone, tt.tombstone)
		case tt.tombstone == etcdstore.TombstoneReady && sh.tombstone.Attempts != a.tomb.Attempts+1:
			t.Errorf("%s: attempts %d, want %d", tt.name, sh.tombstone.Attempts, a.tomb.Attempts+1)
		}
		if sh.releasesGuard != tt.release {
			t.Errorf("%s: releases the guard %v, want %v", tt.name, sh.releasesGuard, tt.release)
		}
		if tt.tombstone != "" && !sh.comparesGuard {
			t.Errorf("%s: writes without comparing the guard as armed", tt.name)
		}
	}
}

// TestGuardAction: only a tombstone made or confirmed ready by this very
// pass gets a guard, so only its blob can reach a delete; a guard over a
// tombstone that is not ready for this pass is released, and a guard that
// records a delete attempt is left armed whatever the tombstone says.
func TestGuardAction(t *testing.T) {
	t.Parallel()
	tomb := func(st etcdstore.TombstoneState, pass int64) etcdstore.Tombstone {
		return etcdstore.Tombstone{Digest: "sha256:ee", State: st, Pass: pass}
	}
	plain := &sweepGuard{Value: etcdstore.Guard{Digest: "sha256:ee", Pass: testPass}, ModRev: 5}
	attempted := &sweepGuard{Value: etcdstore.Guard{Digest: "sha256:ee", Attempt: &etcdstore.DeleteAttempt{Pass: testPass - 1}}, ModRev: 6}
	states := []etcdstore.TombstoneState{etcdstore.TombstonePending, etcdstore.TombstoneReady, etcdstore.TombstoneSkipped, etcdstore.TombstoneDeleted}
	for _, st := range states {
		for _, pass := range []int64{testPass - 1, testPass, testPass + 1} {
			thisPassReady := st == etcdstore.TombstoneReady && pass == testPass
			for _, g := range []*sweepGuard{nil, plain, attempted} {
				got := guardAction(tomb(st, pass), g, testPass)
				var want string
				switch {
				case g == attempted:
					want = guardLeave
				case thisPassReady && g == nil:
					want = guardArm
				case thisPassReady:
					want = guardConfirm
				case g != nil:
					want = guardRelease
				}
				if got != want {
					t.Errorf("%s tombstone of pass %d, guard %v: action %q, want %q", st, pass, g != nil, got, want)
				}
			}
		}
	}
}

// TestGuardWait: a guard whose attempt may still be executed stays armed
// until the attempt's deadline plus digests.guard_settle plus the clock
// skew allowance has passed on this clock; a guard without an attempt
// proves no delete was sent; one that does not decode stays armed.
func TestGuardWait(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := &testClock{}
	s := newTestSweep(t, newFakeBackend(), clk.now)
	until := deadline.Add(s.cfg.GuardSettle + s.cfg.ClockSkew)
	g := etcdstore.Guard{Digest: "sha256:ff", Attempt: &etcdstore.DeleteAttempt{Deadline: deadline}}
	for _, tt := range []struct {
		at   time.Time
		wait bool
	}{
		{deadline.Add(-time.Hour), true},
		{deadline, true},
		{deadline.Add(s.cfg.GuardSettle), true},
		{until.Add(-time.Nanosecond), true},
		{until, false},
		{until.Add(time.Hour), false},
	} {
		clk.set(tt.at)
		got, wait := s.guardWait(g, true)
		if wait != tt.wait || !got.Equal(until) {
			t.Errorf("at %s: wait %v until %s, want %v until %s", tt.at.Format(time.RFC3339Nano), wait, got, tt.wait, until)
		}
	}
	clk.set(until.Add(time.Hour))
	if _, wait := s.guardWait(etcdstore.Guard{Digest: "sha256:ff"}, true); wait {
		t.Error("a guard without an attempt waits")
	}
	if _, wait := s.guardWait(etcdstore.Guard{}, false); !wait {
		t.Error("a guard that does not decode may be released")
	}
}

// TestDigestBreaker: the sweep's deletions (ready blobs) and marks (blobs
// made pending) are refused above their ceilings, in count and in share of
// the stored blobs, and allowed at them; the numbers compared go to the
// report.
func TestDigestBreaker(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                      string
		ready, newPending, stored int64
		refused                   bool
		names                     string
	}{
		{"within", 10, 10, 1000, false, ""},
		{"at max_delete", 100, 0, 1000, false, ""},
		{"above max_delete", 101, 0, 1000, true, "max_delete"},
		{"at max_delete_fraction", 50, 0, 100, false, ""},
		{"above max_delete_fraction", 51, 0, 100, true, "max_delete_fraction"},
		{"at max_mark", 0, 200, 1000, false, ""},
		{"above max_mark", 0, 201, 1000, true, "max_mark"},
		{"above max_mark_fraction", 0, 51, 100, true, "max_mark_fraction"},
		{"everything, nothing else stored", 3, 0, 3, true, "max_delete_fraction"},
		{"nothing stored, nothing planned", 0, 0, 0, false, ""},
	} {
		clk := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
		s := newTestSweep(t, newFakeBackend(), clk.now)
		s.cur.Report = Report{Ready: tt.ready, NewPending: tt.newPending, Stored: tt.stored}
		why := s.breaker()
		if (why != "") != tt.refused || !strings.Contains(why, tt.names) {
			t.Errorf("%s: breaker = %q, want refused %v naming %q", tt.name, why, tt.refused, tt.names)
		}
		if b := s.cur.Report.Breaker; b.DeleteBlobs != tt.ready || b.MarkBlobs != tt.newPending || b.StoredBlobs != tt.stored || b.MaxDelete != s.cfg.MaxDelete {
			t.Errorf("%s: report's breaker %+v does not hold the numbers compared", tt.name, b)
		}
	}
}

// TestUploadsInventoryList: a blob whose key has a multipart upload in
// flight is retained (the upload's completion would write those bytes);
// an answer the backend failed to give fails the whole question, so no
// blob is taken as unretained on a missing answer.
func TestUploadsInventoryList(t *testing.T) {
	t.Parallel()
	f := newFakeBackend()
	var blobs []Blob
	for _, d := range []string{"sha256:01", "sha256:02", "sha256:03"} {
		blobs = append(blobs, Blob{Digest: d, Bucket: "cas", Key: "blobs/" + d})
	}
	f.uploads["cas/blobs/sha256:02"] = true
	inv := uploadsInventory{s3: f, parallel: 2}
	got, err := inv.list(context.Background(), blobs)
	if err != nil || len(got) != 1 || !got["sha256:02"] {
		t.Fatalf("list = %v, %v; want only sha256:02 retained", got, err)
	}
	f.uploadErr["blobs/sha256:03"] = errors.New("fake: 500")
	if got, err := inv.list(context.Background(), blobs); err == nil {
		t.Fatalf("list with a failed answer = %v, nil; want an error", got)
	}
}
