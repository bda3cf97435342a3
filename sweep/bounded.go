package sweep

import (
	"encoding/json"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Position is a place in a sweep's keyspace, in the sweep's own terms; its
// zero value is the start and its String is how a report shows it.
type Position interface {
	comparable
	String() string
}

// Bounded is a bounded pass's part of its sweep's keyspace, kept in the
// pass's cursor so that a resumed pass keeps its budget and its start.
type Bounded[P Position] struct {
	Budget int64 `json:"budget"`
	From   P     `json:"from"`
	// Listed counts what the pass listed, for a sweep that counts it here
	// rather than in its tally.
	Listed int64 `json:"listed,omitempty"`
	// CycleStarted and CyclePass are those of the pass that began the
	// cycle (this one, when From is the start).
	CycleStarted time.Time `json:"cycle_started"`
	CyclePass    int64     `json:"cycle_pass"`
	// Prev is the coverage record as the pass found it.
	Prev etcdstore.Coverage `json:"prev"`
	// Wrapped: the pass completed the cycle with budget left and went on
	// from the start, beginning the next cycle at its own clock; Before is
	// what it listed before.
	Wrapped bool  `json:"wrapped,omitempty"`
	Before  int64 `json:"before,omitempty"`
}

// StartBounded is the slice of a new pass with budget, numbered pass and
// deciding at now, given the coverage record cov as it found it and the
// position from decoded from cov.Next (the zero position where the sweep
// cannot start at it): a pass that finds no cycle in progress begins one
// at the start.
func StartBounded[P Position](budget int64, cov etcdstore.Coverage, from P, now time.Time, pass int64) *Bounded[P] {
	b := &Bounded[P]{Budget: budget, From: from, CycleStarted: cov.CycleStarted, CyclePass: cov.CyclePass, Prev: cov}
	var start P
	if b.From == start || b.CycleStarted.IsZero() {
		b.From, b.CycleStarted, b.CyclePass = start, now, pass
	}
	return b
}

// DecodePosition decodes a coverage record's Next into a position; an
// empty Next is the start.
func DecodePosition[P any](next json.RawMessage, pos *P) error {
	if len(next) == 0 {
		return nil
	}
	return json.Unmarshal(next, pos)
}

// Wrap records that the pass completed the cycle after listing listed
// and goes on from the start of the keyspace.
func (b *Bounded[P]) Wrap(listed int64) {
	b.Wrapped, b.Before = true, listed
}

// Coverage is the coverage record after a pass over this slice, given
// what it did: step.Next is where it stands, step.Completed whether it
// stands at the end of the keyspace, step.Listed what it listed in all;
// step's CycleStarted and CyclePass are taken from the slice. now and pass
// are the pass's decision clock and number, which begin the next cycle
// when the pass wrapped.
func (b *Bounded[P]) Coverage(step etcdstore.CoverageStep, now time.Time) etcdstore.Coverage {
	step.CycleStarted, step.CyclePass = b.CycleStarted, b.CyclePass
	if !b.Wrapped {
		return b.Prev.Advanced(step)
	}
	// The cycle it found was completed before the wrap; the one it began
	// is completed too only if the rest of the budget reached the end.
	first := step
	first.Completed = true
	c := b.Prev.Advanced(first)
	step.CycleStarted, step.CyclePass, step.Listed = now, step.Pass, step.Listed-b.Before
	return c.Advanced(step)
}

// Report is the report's account of a pass over this slice that listed
// listed and stopped at to ("" at the end of the keyspace, end true).
// after is the coverage record the pass leaves when it advances it, or
// would leave (a plan); nil when it does neither.
func (b *Bounded[P]) Report(listed int64, to string, end bool, now time.Time, advanced bool, after *etcdstore.Coverage) *Slice {
	out := &Slice{
		Budget: b.Budget, Listed: listed, From: b.From.String(), To: to,
		CompletedCycle: end || b.Wrapped, CycleStarted: b.CycleStarted,
		Covered: b.Prev.Covered, Cycles: b.Prev.Cycles, Advanced: advanced,
	}
	if end {
		out.To = ""
	}
	if b.Wrapped {
		out.CycleStarted = now
	}
	if after != nil {
		out.Covered, out.Cycles = after.Covered, after.Cycles
	}
	return out
}
