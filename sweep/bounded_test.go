package sweep

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

type testPos struct{ N int }

func (p testPos) String() string {
	if p.N == 0 {
		return ""
	}
	return string(rune('a' + p.N))
}

// A pass that finds no cycle in progress begins one at the start, at its
// own clock; one that finds a cycle goes on with it.
func TestStartBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	fresh := StartBounded(10, etcdstore.Coverage{}, testPos{}, now, 7)
	if fresh.From != (testPos{}) || !fresh.CycleStarted.Equal(now) || fresh.CyclePass != 7 {
		t.Errorf("no record: %+v, want a cycle begun by pass 7 at %s", fresh, now)
	}
	cov := etcdstore.Coverage{CycleStarted: t0, CyclePass: 3}
	on := StartBounded(10, cov, testPos{N: 2}, now, 7)
	if on.From != (testPos{N: 2}) || !on.CycleStarted.Equal(t0) || on.CyclePass != 3 {
		t.Errorf("cycle in progress: %+v, want it to go on from position 2 in pass 3's cycle", on)
	}
	// A position without a cycle's start (a damaged record) starts over.
	lost := StartBounded(10, etcdstore.Coverage{}, testPos{N: 2}, now, 7)
	if lost.From != (testPos{}) || lost.CyclePass != 7 {
		t.Errorf("position without a cycle: %+v, want the start", lost)
	}
}

// A pass that wraps completes the cycle it found and begins the next at
// its own clock, counting there only what it listed after the wrap.
func TestBoundedCoverageWrapped(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	prev := etcdstore.Coverage{CycleStarted: t0, CyclePass: 3, CycleListed: 8, Cycles: 1}
	b := StartBounded(10, prev, testPos{N: 4}, now, 5)
	b.Wrap(6)
	next, _ := json.Marshal(testPos{N: 1})
	c := b.Coverage(etcdstore.CoverageStep{Next: next, Listed: 10, Pass: 5, Term: 2, At: now}, now)
	if !c.Covered.Equal(t0) || c.CoveredPass != 5 || c.Cycles != 2 {
		t.Errorf("covered %s by pass %d, %d cycles; want pass 3's cycle (%s) completed by pass 5, 2 cycles", c.Covered, c.CoveredPass, c.Cycles, t0)
	}
	if !c.CycleStarted.Equal(now) || c.CyclePass != 5 || c.CycleListed != 4 || string(c.Next) != string(next) {
		t.Errorf("cycle in progress %s pass %d listed %d next %s; want pass 5's at %s with the 4 listed after the wrap", c.CycleStarted, c.CyclePass, c.CycleListed, c.Next, now)
	}
	r := b.Report(10, testPos{N: 1}.String(), false, now, true, &c)
	if !r.CompletedCycle || !r.CycleStarted.Equal(now) || !r.Covered.Equal(t0) || r.Cycles != 2 || r.From != "e" || r.To != "b" {
		t.Errorf("report %+v; want a completed cycle, the next begun at %s, covered at %s", r, now, t0)
	}
}

// A pass that does not wrap leaves Covered alone until it reaches the end.
func TestBoundedCoverageNotWrapped(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	prev := etcdstore.Coverage{CycleStarted: t0, CyclePass: 3, CycleListed: 8}
	b := StartBounded(10, prev, testPos{N: 4}, now, 5)
	c := b.Coverage(etcdstore.CoverageStep{Listed: 10, Pass: 5}, now)
	if !c.Covered.IsZero() || c.CycleListed != 18 || !c.CycleStarted.Equal(t0) {
		t.Errorf("mid-cycle: %+v; want pass 3's cycle going on with 18 listed", c)
	}
	end := b.Coverage(etcdstore.CoverageStep{Completed: true, Listed: 10, Pass: 5}, now)
	if !end.Covered.Equal(t0) || end.Cycles != 1 || len(end.Next) != 0 {
		t.Errorf("at the end: %+v; want the cycle begun at %s completed", end, t0)
	}
	r := b.Report(10, "x", true, now, false, nil)
	if r.To != "" || !r.CompletedCycle || !r.Covered.IsZero() || r.Advanced {
		t.Errorf("report of a plan at the end: %+v", r)
	}
}
