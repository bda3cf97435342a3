//go:build integration

package reclaim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/reclaim"
)

// A refused digest plan pauses the digest sweep: a new leader whose
// ceilings let the plan through still deletes nothing (the tombstones are
// still judged), until a person resumes; then the next pass deletes.
func TestDigestPauseHolds(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("r", 6)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 4)
	d.ageBlobs()
	cfgA := d.config()
	cfgA.ID = "a"
	cfgA.Digests.MaxDelete = 3
	a := d.start(cfgA)
	d.digestPass(a)
	refused := d.digestPass(a)
	if !contains(refused.Refused, "4 of 10 stored blobs", "above max_delete:") || refused.Paused {
		t.Fatalf("refused = %q paused %v, want a fresh refusal", refused.Refused, refused.Paused)
	}
	if p, ok := d.pause(reclaim.PauseDigests); !ok || p.Pass != 2 || p.Reason != refused.Refused {
		t.Fatalf("pause = %+v (%v), want pass 2 with the refusal", p, ok)
	}

	cfgB := d.config()
	cfgB.ID, cfgB.Metrics = "b", nil
	b := d.run(cfgB)
	d.handOverTo(b)
	rep := d.digestPass(b)
	if !rep.Paused || rep.Deleted != 0 || !contains(rep.Refused, "digests sweep is paused since pass 2", "resume --digests") {
		t.Errorf("new leader's digest sweep paused %v deleted %d refused %q; want paused", rep.Paused, rep.Deleted, rep.Refused)
	}
	if rep.Ready != 4 || d.be.deletes.Load() != 0 {
		t.Errorf("paused sweep: %d ready, %d deletes; want the 4 judged ready and none deleted", rep.Ready, d.be.deletes.Load())
	}
	d.wantPresent("paused", true, append(refd, unref...)...)

	if _, err := b.Resume(t.Context(), "bob", reclaim.PauseDigests); err != nil {
		t.Fatal(err)
	}
	rep = d.digestPass(b)
	if rep.Refused != "" || rep.Deleted != 4 {
		t.Errorf("after the resume: refused %q, deleted %d; want the 4 deleted", rep.Refused, rep.Deleted)
	}
	d.wantPresent("resumed", false, unref...)
	d.wantPresent("resumed", true, refd...)
}

// New pending tombstones (the digest sweep's marks) are limited on their
// own: too many pause the sweep, and the blobs they mark are not deleted
// by later passes while it is paused.
func TestDigestBreakerLimitsMarks(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("r", 6)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 4)
	d.ageBlobs()
	cfg := d.config()
	cfg.Digests.MaxMark = 3
	r := d.start(cfg)
	rep := d.digestPass(r)
	if !contains(rep.Refused, "marks (makes pending) 4 of 10 stored blobs", "above max_mark:") {
		t.Errorf("refused = %q, want the marks ceiling", rep.Refused)
	}
	if b := rep.Breaker; b.MarkBlobs != 4 || b.MaxMark != 3 || b.StoredBlobs != 10 {
		t.Errorf("breaker = %+v", b)
	}
	if _, ok := d.pause(reclaim.PauseDigests); !ok {
		t.Fatal("the refusal did not pause the digest sweep")
	}
	rep = d.digestPass(r)
	if !rep.Paused || rep.Deleted != 0 || d.be.deletes.Load() != 0 {
		t.Errorf("next pass paused %v deleted %d (%d deletes sent); want paused, nothing deleted", rep.Paused, rep.Deleted, d.be.deletes.Load())
	}
	d.wantPresent("paused", true, unref...)
}

// A digest sweep interrupted in its collect phase (guards armed, nothing
// deleted) is resumed by a leader with a stricter ceiling, which checks the
// breaker again before the collector goes on: nothing is deleted and the
// sweep is paused.
func TestDigestResumedCollectChecksAgain(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.putBlobs("r", 6)
	d.putManifest("m", refd...)
	unref := d.putBlobs("u", 4)
	d.ageBlobs()
	var armed atomic.Bool
	cfgA := d.config()
	cfgA.ID = "a"
	cfgA.Fault = func(point string) {
		if point == digestsweep.FaultGuarded && armed.CompareAndSwap(true, false) {
			d.revokeLeader()
		}
	}
	a := d.start(cfgA)
	cfgB := d.config()
	cfgB.ID, cfgB.Metrics = "b", nil
	cfgB.Digests.MaxDelete = 3
	b := d.run(cfgB)
	d.digestPass(a)
	armed.Store(true)
	if _, err := d.trigger(a); !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("interrupted pass error = %v, want ErrFenced", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := b.Elector().AwaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	rep := d.digestPass(b)
	if rep.Resumed != 1 || rep.Deleted != 0 || !contains(rep.Refused, "above max_delete:") {
		t.Errorf("resumed %d, deleted %d, refused %q; want resumed once, refused by the stricter ceiling", rep.Resumed, rep.Deleted, rep.Refused)
	}
	if d.be.deletes.Load() != 0 {
		t.Errorf("%d deletes sent, want none", d.be.deletes.Load())
	}
	d.wantPresent("resumed", true, append(refd, unref...)...)
	if p, ok := d.pause(reclaim.PauseDigests); !ok || !contains(p.Reason, "above max_delete:") {
		t.Errorf("pause = %+v (%v), want the digest sweep paused", p, ok)
	}
}
