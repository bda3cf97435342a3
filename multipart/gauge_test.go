//go:build integration

package multipart

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// newGaugeTestStore starts an embedded etcd for one test and returns a store
// over it.
func newGaugeTestStore(t *testing.T) *etcdstore.Store {
	t.Helper()
	return etcdtest.NewStore(t, "/gauge-test/")
}

// gaugeValues reads sweepgate_sessions from reg, by state.
func gaugeValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sweepgate_sessions" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// expectGauge waits until the exported gauge shows want for every state
// (states not in want at 0).
func expectGauge(t *testing.T, reg *prometheus.Registry, want map[etcdstore.SessionState]float64) {
	t.Helper()
	full := map[string]float64{}
	for _, s := range etcdstore.AllStates {
		full[string(s)] = want[s]
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := gaugeValues(t, reg)
		if maps.Equal(got, full) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sweepgate_sessions = %v, want %v", got, full)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recounts reads sweepgate_sessions_recounts_total from reg.
func recounts(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sweepgate_sessions_recounts_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("sweepgate_sessions_recounts_total is not registered")
	return 0
}

func TestStateGaugeFollowsSessions(t *testing.T) {
	t.Parallel()
	st := newGaugeTestStore(t)
	ctx := t.Context()
	sessions := gaugeSessions{t: t, st: st}
	create, move, del := sessions.create, sessions.move, sessions.del

	// Sessions that exist before the gauge starts are counted by its first
	// scan, read in pages smaller than their number.
	for i := range 7 {
		create("b", fmt.Sprintf("pre%d", i), etcdstore.StateActive)
	}
	create("b", "pre-done", etcdstore.StateCompleted)

	reg := prometheus.NewRegistry()
	g, err := NewStateGauge(st, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.pageSize = 3
	if got := gaugeValues(t, reg); len(got) != 0 {
		t.Errorf("before the first count the gauge exports %v, want nothing", got)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); g.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	expectGauge(t, reg, map[etcdstore.SessionState]float64{etcdstore.StateActive: 7, etcdstore.StateCompleted: 1})

	// Creation, transitions and deletion move the counts.
	create("c", "new", etcdstore.StateActive)
	move("b", "pre0", etcdstore.StateExpired)
	move("b", "pre1", etcdstore.StateCompleting)
	move("b", "pre1", etcdstore.StateCompleted)
	move("b", "pre2", etcdstore.StateAborting)
	move("b", "pre2", etcdstore.StateCleanupPending)
	del("b", "pre-done")
	expectGauge(t, reg, map[etcdstore.SessionState]float64{
		etcdstore.StateActive: 5, etcdstore.StateExpired: 1, etcdstore.StateCompleted: 1, etcdstore.StateCleanupPending: 1,
	})
	// Keys outside the sessions prefix are not sessions.
	if err := st.PutPart(ctx, "pre3", etcdstore.Part{Number: 1}); err != nil {
		t.Fatal(err)
	}
	// A record that does not decode is left out, and leaving it, or
	// deleting it, changes nothing either.
	bad := st.Keys().Session("b", "broken")
	if _, err := st.Client().Put(ctx, bad, "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, bad, "{still not json"); err != nil {
		t.Fatal(err)
	}
	del("b", "broken")
	del("b", "pre3")
	expectGauge(t, reg, map[etcdstore.SessionState]float64{
		etcdstore.StateActive: 4, etcdstore.StateExpired: 1, etcdstore.StateCompleted: 1, etcdstore.StateCleanupPending: 1,
	})
	if n := recounts(t, reg); n != 0 {
		t.Errorf("%v recounts while the watch ran", n)
	}

	// The watch ends (as when etcd cancels it): the gauge counts again from
	// scratch, so counts that had drifted are repaired. The drift here is
	// made by hand; changes made around the restart must all show.
	g.mu.Lock()
	g.counts[etcdstore.StateActive] = 1000
	stopWatch := g.stopWatch
	g.mu.Unlock()
	stopWatch()
	create("c", "during", etcdstore.StateActive)
	move("b", "pre4", etcdstore.StateAborting)
	move("b", "pre4", etcdstore.StateAborted)
	expectGauge(t, reg, map[etcdstore.SessionState]float64{
		etcdstore.StateActive: 4, etcdstore.StateExpired: 1, etcdstore.StateCompleted: 1,
		etcdstore.StateCleanupPending: 1, etcdstore.StateAborted: 1,
	})
	if n := recounts(t, reg); n != 1 {
		t.Errorf("%v recounts after one cancelled watch, want 1", n)
	}
	// And it follows changes again afterwards.
	move("c", "during", etcdstore.StateExpired)
	expectGauge(t, reg, map[etcdstore.SessionState]float64{
		etcdstore.StateActive: 3, etcdstore.StateExpired: 2, etcdstore.StateCompleted: 1,
		etcdstore.StateCleanupPending: 1, etcdstore.StateAborted: 1,
	})
	stop()
	<-done
}

// gaugeSessions writes the sessions a gauge test counts.
type gaugeSessions struct {
	t  *testing.T
	st *etcdstore.Store
}

func (g gaugeSessions) create(bucket, id string, s etcdstore.SessionState) {
	g.t.Helper()
	if _, err := g.st.CreateSession(g.t.Context(), &etcdstore.Session{Bucket: bucket, UploadID: id, State: s, Created: time.Now()}); err != nil {
		g.t.Fatal(err)
	}
}

func (g gaugeSessions) move(bucket, id string, to etcdstore.SessionState) {
	g.t.Helper()
	v, err := g.st.GetSession(g.t.Context(), bucket, id)
	if err != nil {
		g.t.Fatal(err)
	}
	v.Value.Transition(to, time.Now(), "test", "")
	if _, err := g.st.UpdateSession(g.t.Context(), etcdstore.SessionUpdate{Session: &v.Value, ModRev: v.ModRev}); err != nil {
		g.t.Fatal(err)
	}
}

func (g gaugeSessions) del(bucket, id string) {
	g.t.Helper()
	if _, err := g.st.Client().Delete(g.t.Context(), g.st.Keys().Session(bucket, id)); err != nil {
		g.t.Fatal(err)
	}
}

// A watch from a revision that compaction removed ends with the compaction
// error, which is what makes Run count again.
func TestStateGaugeWatchCompacted(t *testing.T) {
	t.Parallel()
	st := newGaugeTestStore(t)
	ctx := t.Context()
	g, err := NewStateGauge(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := g.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 3 {
		if last, err = st.CreateSession(ctx, &etcdstore.Session{Bucket: "b", UploadID: fmt.Sprint(i), State: etcdstore.StateActive}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Client().Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.follow(fctx, rev); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("follow from a compacted revision = %v, want %v", err, rpctypes.ErrCompacted)
	}
	counts, synced := g.Counts()
	if !synced || counts[etcdstore.StateActive] != 0 {
		t.Errorf("counts %v (synced %v): a failed watch must not apply events", counts, synced)
	}
	if _, err := g.count(ctx); err != nil {
		t.Fatal(err)
	}
	if counts, _ := g.Counts(); counts[etcdstore.StateActive] != 3 {
		t.Errorf("after counting again: %v, want 3 active", counts)
	}
}
