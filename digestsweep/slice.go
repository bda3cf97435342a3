package digestsweep

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// Bounded digest passes (SweepConfig.PassBlobs > 0). The tombstone phase
// of a pass starts where the last digest sweep that ran to its end
// stopped (the coverage record, etcdstore.Coverage, kept as a namespace
// name and the last key listed) and lists whole pages until the next one
// could take it past the budget. Everything else is the sweep of any pass:
// its own revision, judgement and breaker, over the blobs it listed.
//
// Nothing outside the slice moves: a tombstone goes ready, and is
// confirmed ready again, only by a pass whose slice lists its blob, and
// the collector deletes only tombstones confirmed by its own pass, so the
// collector still visits every tombstone and collects exactly the due
// ones of the slice; a ready tombstone of another slice waits, as it is,
// for its slice to come round (its guard, if an interrupted pass left one
// without a delete attempt, is released). A blob is therefore deleted two
// cycles after it became unreferenced, not two passes. The rebuild, the
// guards' settling and the prune do not depend on the listing and run
// whole in every pass.
//
// The coverage record moves with the sweep's last save, only when the
// sweep ran to its end, judged its whole slice, met no denied bucket and
// was neither refused nor paused: otherwise the next pass lists the same
// slice again (so while a namespace is denied, a cycle that reaches it
// does not go past it). The
// pass whose slice reaches the end of the last namespace completes the
// cycle, and the next starts at the first namespace.

// digestSlice is a bounded digest sweep's part of the keyspace, kept in
// its cursor; its Listed counts the objects the tombstone phase listed.
type digestSlice = sweep.Bounded[digestPos]

// digestPos is a position in the namespaces: after key After of the
// namespace named NS; the zero value is the start.
type digestPos struct {
	NS    string `json:"ns,omitempty"`
	After string `json:"after,omitempty"`
}

func (p digestPos) String() string {
	if p.NS == "" {
		return ""
	}
	return p.NS + "/" + p.After
}

// startSlice makes a new sweep bounded when PassBlobs is set: its
// tombstone phase starts at the coverage record's position. A position
// in a namespace no longer configured begins a new cycle.
func (s *digestSweep) startSlice(ctx context.Context) error {
	if s.cfg.PassBlobs <= 0 {
		return nil
	}
	cov, _, err := s.store.GetCoverage(ctx, CursorName)
	if err != nil {
		return fmt.Errorf("digestsweep: %w", err)
	}
	var from digestPos
	if err := sweep.DecodePosition(cov.Next, &from); err != nil {
		return fmt.Errorf("digestsweep: decode the digest coverage position %s: %w", cov.Next, err)
	}
	ns := s.namespaceIndex(from.NS)
	if ns < 0 {
		from = digestPos{}
	}
	sl := sweep.StartBounded(s.cfg.PassBlobs, cov, from, s.now, s.run.Pass)
	if sl.From == (digestPos{}) {
		ns = 0
	}
	s.cur.NS, s.cur.After, s.cur.Slice = ns, sl.From.After, sl
	return nil
}

// namespaceIndex is the index of the configured namespace named name, or
// -1.
func (s *digestSweep) namespaceIndex(name string) int {
	for i := range s.cfg.Layout.Namespaces {
		if s.cfg.Layout.Namespaces[i].Name == name {
			return i
		}
	}
	return -1
}

// sliceFull reports whether a bounded sweep's next page could take it
// past its budget.
func (s *digestSweep) sliceFull() bool {
	sl := s.cur.Slice
	return sl != nil && sl.Listed+int64(s.batch) > sl.Budget
}

// sliceListed counts a listing page against the budget.
func (s *digestSweep) sliceListed(page s3client.ObjectPage) {
	if s.cur.Slice != nil {
		s.cur.Slice.Listed += int64(len(page.Objects))
	}
}

// at is where the tombstone phase stands.
func (s *digestSweep) at() (pos digestPos, end bool) {
	nss := s.cfg.Layout.Namespaces
	if s.cur.NS >= len(nss) {
		return digestPos{}, true
	}
	return digestPos{NS: nss[s.cur.NS].Name, After: s.cur.After}, false
}

// advances reports whether the sweep moves the coverage record: a real
// sweep that judged its whole slice, met no bucket the backend denies
// and was neither refused nor paused.
func (s *digestSweep) advances() bool {
	_, kept := s.keepsAll()
	return s.cur.Slice != nil && !s.dry && !kept && len(s.cur.Report.DeniedBuckets) == 0 && s.cur.Phase == digestPhasePrune
}

// wrapSlice goes on from the first namespace when the tombstone phase
// of a bounded sweep reached the end of the last one with budget left, so
// that every sweep but the first of all judges a full slice (the breaker
// judges a slice on its own): the cycle is complete, and the rest of the
// budget begins the next one. It does not wrap when the rest could reach
// back to where the sweep started (the cycle's earlier sweeps listed no
// more than the rest), which would judge the same blobs twice.
func (s *digestSweep) wrapSlice() bool {
	sl := s.cur.Slice
	if sl == nil || sl.Wrapped || sl.From == (digestPos{}) || sl.Prev.CycleListed <= sl.Budget-sl.Listed {
		return false
	}
	sl.Wrap(sl.Listed)
	s.cur.NS, s.cur.After = 0, ""
	return true
}

// coverage is the coverage record after the sweep, which stands at pos
// (end: past the last namespace).
func (s *digestSweep) coverage(pos digestPos, end bool) etcdstore.Coverage {
	next, _ := json.Marshal(pos) // plain data always marshals
	step := etcdstore.CoverageStep{Next: next, Completed: end,
		Listed: s.cur.Slice.Listed, Pass: s.cur.Pass, Term: s.term.N, At: s.clock().UTC()}
	c := s.cur.Slice.Coverage(step, s.now)
	c.Sweep = CursorName
	return c
}

// endSlice records the sweep's slice in its report and, when the sweep
// advances, moves the coverage record with the cursor.
func (s *digestSweep) endSlice(ctx context.Context) error {
	sl := s.cur.Slice
	if sl == nil {
		return nil
	}
	pos, end := s.at()
	adv := s.advances()
	cov := s.coverage(pos, end)
	var after *etcdstore.Coverage
	if adv || s.dry {
		after = &cov
	}
	rep := sl.Report(sl.Listed, pos.String(), end, s.now, adv, after)
	s.cur.Report.Slice = rep
	if !adv {
		return s.save(ctx)
	}
	return s.save(ctx, s.keys().CoverageOp(cov))
}
