//go:build integration

package etcdstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGuardWatchFollowsGuards: the local copy sees a guard armed and
// released in etcd, and says as of which revision it is.
func TestGuardWatchFollowsGuards(t *testing.T) {
	t.Parallel()
	s := etcdtest.NewStore(t, "/gw/")
	ctx := t.Context()
	before := digest(1)
	if _, err := s.Client().Put(ctx, s.Keys().Guard(before), "armed"); err != nil {
		t.Fatal(err)
	}
	w := s.WatchGuards(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if w.Synced() || w.Armed(before) {
		t.Fatal("the copy knows guards before it listed them")
	}
	go w.Run(ctx)
	waitFor(t, "first list", w.Synced)
	if !w.Armed(before) {
		t.Error("a guard armed before the watch started is not in the copy")
	}
	later := digest(2)
	put, err := s.Client().Put(ctx, s.Keys().Guard(later), "armed")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "armed guard", func() bool { return w.Caught(put.Header.Revision) })
	if !w.Armed(later) {
		t.Error("a guard armed while watching is not in the copy")
	}
	del, err := s.Client().Delete(ctx, s.Keys().Guard(before))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "released guard", func() bool { return w.Caught(del.Header.Revision) })
	if w.Armed(before) || !w.Armed(later) {
		t.Errorf("after a release: armed(%s)=%v armed(%s)=%v, want false, true", before, w.Armed(before), later, w.Armed(later))
	}
}

// TestUnavailableEtcdFailsFast: with etcd gone, the availability probe
// says so, and a bounded store's request ends within its bound with an
// error Unavailable recognises, instead of waiting for etcd.
func TestUnavailableEtcdFailsFast(t *testing.T) {
	t.Parallel()
	e, cli := etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/fast/")
	if err != nil {
		t.Fatal(err)
	}
	a := etcdstore.NewAvailability(cli, time.Hour, 300*time.Millisecond, nil)
	if err := a.Probe(t.Context()); err != nil || a.Err() != nil {
		t.Fatalf("probe of a running etcd: %v, %v", err, a.Err())
	}
	if err := a.WaitUp(t.Context()); err != nil {
		t.Fatalf("WaitUp while up: %v", err)
	}
	e.Close()

	if err := a.Probe(t.Context()); err == nil {
		t.Fatal("probe of a stopped etcd succeeded")
	}
	if err := a.Err(); !errors.Is(err, etcdstore.ErrUnavailable) || !etcdstore.Unavailable(err) {
		t.Errorf("Err = %v, want ErrUnavailable", err)
	}
	if since, err := a.State(); err == nil || time.Since(since) > time.Minute {
		t.Errorf("State = %v, %v", err, since)
	}
	wctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := a.WaitUp(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitUp while down = %v, want the context's deadline", err)
	}

	bounded := etcdstore.NewStore(cli, keys).WithRequestTimeout(300 * time.Millisecond)
	if got := bounded.RequestTimeout(); got != 300*time.Millisecond {
		t.Errorf("RequestTimeout = %v", got)
	}
	start := time.Now()
	_, err = bounded.GetRefSource(t.Context(), "bucket", "key")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a bounded request waited %v for a stopped etcd", took)
	}
	if !etcdstore.Unavailable(err) {
		t.Errorf("bounded request to a stopped etcd: %v, want an error Unavailable recognises", err)
	}
}

// TestUnavailableClassifies: refusals etcd gives are not "unavailable";
// timeouts and ErrUnavailable are.
func TestUnavailableClassifies(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{etcdstore.ErrNotFound, false},
		{etcdstore.ErrGuarded, false},
		{context.DeadlineExceeded, true},
		{etcdstore.ErrUnavailable, true},
	} {
		if got := etcdstore.Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
