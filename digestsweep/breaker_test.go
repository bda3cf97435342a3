//go:build integration

package digestsweep_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// New pending tombstones (the digest sweep's marks) are limited on their
// own: too many pause the sweep, and the blobs they mark are not deleted
// by later passes while it is paused.
func TestDigestBreakerLimitsMarks(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 4)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.MaxMark = 3
	r := d.Start(cfg)
	rep := d.DigestPass(r)
	if !reclaimtest.Contains(rep.Refused, "marks (makes pending) 4 of 10 stored blobs", "above max_mark:") {
		t.Errorf("refused = %q, want the marks ceiling", rep.Refused)
	}
	if b := rep.Breaker; b.MarkBlobs != 4 || b.MaxMark != 3 || b.StoredBlobs != 10 {
		t.Errorf("breaker = %+v", b)
	}
	if _, ok := d.Pause(reclaim.PauseDigests); !ok {
		t.Fatal("the refusal did not pause the digest sweep")
	}
	rep = d.DigestPass(r)
	if !rep.Paused || rep.Deleted != 0 || d.Be.Deletes.Load() != 0 {
		t.Errorf("next pass paused %v deleted %d (%d deletes sent); want paused, nothing deleted", rep.Paused, rep.Deleted, d.Be.Deletes.Load())
	}
	d.WantPresent("paused", true, unref...)
}

// A digest sweep interrupted in its collect phase (guards armed, nothing
// deleted) is resumed by a leader with a stricter ceiling, which checks the
// breaker again before the collector goes on: nothing is deleted and the
// sweep is paused.
func TestDigestResumedCollectChecksAgain(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	refd := d.PutBlobs("r", 6)
	d.PutManifest("m", refd...)
	unref := d.PutBlobs("u", 4)
	d.AgeBlobs()
	var armed atomic.Bool
	cfgA := d.Config()
	cfgA.ID = "a"
	cfgA.Fault = func(point string) {
		if point == digestsweep.FaultGuarded && armed.CompareAndSwap(true, false) {
			d.RevokeLeader()
		}
	}
	a := d.Start(cfgA)
	cfgB := d.Config()
	cfgB.ID, cfgB.Metrics = "b", nil
	cfgB.Digests.MaxDelete = 3
	b := d.Run(cfgB)
	d.DigestPass(a)
	armed.Store(true)
	if _, err := d.Trigger(a); !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("interrupted pass error = %v, want ErrFenced", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := b.Elector().AwaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	rep := d.DigestPass(b)
	if rep.Resumed != 1 || rep.Deleted != 0 || !reclaimtest.Contains(rep.Refused, "above max_delete:") {
		t.Errorf("resumed %d, deleted %d, refused %q; want resumed once, refused by the stricter ceiling", rep.Resumed, rep.Deleted, rep.Refused)
	}
	if d.Be.Deletes.Load() != 0 {
		t.Errorf("%d deletes sent, want none", d.Be.Deletes.Load())
	}
	d.WantPresent("resumed", true, append(refd, unref...)...)
	if p, ok := d.Pause(reclaim.PauseDigests); !ok || !reclaimtest.Contains(p.Reason, "above max_delete:") {
		t.Errorf("pause = %+v (%v), want the digest sweep paused", p, ok)
	}
}
