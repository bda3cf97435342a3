package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// Bounded passes (Config.PassUploads > 0). A pass does not hold one
// revision and one decision clock for a cycle of the whole keyspace:
// each pass is a pass like any other (its own revision, clock, rules,
// breaker and cursor), whose inventory starts where the last one that ran
// to its end stopped (the coverage record, etcdstore.Coverage) and lists at
// most Budget uploads in bucket and key order. The pass decides only about
// what it listed. Its report, its removal of the cursor and the new
// coverage record are one fenced transaction, so a former leader cannot
// move the coverage, and a pass that was refused, paused, stopped for
// good or only planned leaves it where it was: the next pass lists the
// same slice again.
//
// The pass that reaches the end of the keyspace (the last bucket, and the
// sessions of buckets the backend does not list) completes the cycle: the
// record's Covered becomes the decision clock of the pass that began it,
// and the next pass starts at the first bucket.

// slice is a bounded pass's part of the keyspace, kept in its cursor.
type slice = sweep.Bounded[position]

// errSliceFull stops the inventory of a bounded pass: it listed its
// budget. The cursor's position is where the next pass starts.
var errSliceFull = errors.New("reclaim: the pass listed its budget of uploads")

// startSlice makes a new pass bounded when Config.PassUploads is set: it
// starts at the coverage record's position.
func (p *pass) startSlice(ctx context.Context) error {
	budget := p.r.cfg.PassUploads
	if budget <= 0 {
		return nil
	}
	cov, _, err := p.r.store.GetCoverage(ctx, uploadSweep)
	if err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	var from position
	if err := sweep.DecodePosition(cov.Next, &from); err != nil {
		return fmt.Errorf("reclaim: decode the coverage position %s: %w", cov.Next, err)
	}
	s := sweep.StartBounded(budget, cov, from, p.cur.Now, p.cur.Pass)
	p.cur.Pos, p.cur.Slice = s.From, s
	return nil
}

// sliceWalked ends a bounded pass's inventory: a full slice is not an
// error, the pass stops where its cursor stands.
func (p *pass) sliceWalked(err error) error {
	if p.cur.Slice != nil && errors.Is(err, errSliceFull) {
		return nil
	}
	return err
}

// advances reports whether a pass that ends with refused and stopped
// moves the coverage record: only a real pass that ran to its end does.
func (p *pass) advances(refused, stopped string) bool {
	return p.cur.Slice != nil && !p.dry && refused == "" && stopped == ""
}

// coverage is the coverage record after pass p.
func (p *pass) coverage() etcdstore.Coverage {
	next, _ := json.Marshal(p.cur.Pos) // plain data always marshals
	step := etcdstore.CoverageStep{Next: next, Completed: p.cur.Pos.Finished,
		Listed: p.cur.Tally.Listed, Pass: p.cur.Pass, Term: p.term.N, At: p.r.now().UTC()}
	return p.cur.Slice.Coverage(step, p.cur.Now)
}

// wrap goes on from the start of the keyspace when a bounded pass
// reached its end with budget left, so that every pass but the first of
// all judges a full slice (the breaker judges a slice on its own): the
// cycle is complete, and the rest of the budget begins the next one. It
// does not wrap when the rest could reach back to where the pass started
// (the cycle's earlier passes listed no more than the rest of the budget),
// which would list the same uploads twice in one pass.
func (p *pass) wrap(ctx context.Context) (bool, error) {
	s := p.cur.Slice
	if s == nil || s.Wrapped || !p.cur.Pos.Finished || s.From == (position{}) {
		return false, nil
	}
	if left := s.Budget - p.cur.Tally.Listed; left <= 0 || s.Prev.CycleListed <= left {
		return false, nil
	}
	s.Wrap(p.cur.Tally.Listed)
	p.cur.Pos = position{}
	if p.dry {
		return true, nil
	}
	_, err := fencedTxn(ctx, p.r.cli(), p.term, nil, cursorOp(p.r.keys(), &p.cur))
	return err == nil, err
}

// walkSlice runs the inventory from the cursor and, when the pass wraps,
// once more from the start.
func (p *pass) walkSlice(ctx context.Context) error {
	err := p.sliceWalked(p.inv.walk(ctx, p.cur.Pos, p))
	if err != nil {
		return err
	}
	wrapped, err := p.wrap(ctx)
	if err != nil || !wrapped {
		return err
	}
	return p.sliceWalked(p.inv.walk(ctx, p.cur.Pos, p))
}

// coverageOps is the write of the coverage record that goes with the
// report of a pass ending with refused and stopped, if it moves it.
func (p *pass) coverageOps(refused, stopped string) []clientv3.Op {
	if !p.advances(refused, stopped) {
		return nil
	}
	return []clientv3.Op{p.r.keys().CoverageOp(p.coverage())}
}

// sliceReport is the report's account of a bounded pass's slice; nil for
// an unbounded pass.
func (p *pass) sliceReport(refused, stopped string) *sweep.Slice {
	s := p.cur.Slice
	if s == nil {
		return nil
	}
	adv := p.advances(refused, stopped)
	var after *etcdstore.Coverage
	if adv || p.dry {
		c := p.coverage()
		after = &c
	}
	return s.Report(p.cur.Tally.Listed, p.cur.Pos.String(), p.cur.Pos.Finished, p.cur.Now, adv, after)
}

// String says where an inventory position stands, for a report: "" is
// the start of the keyspace.
func (pos position) String() string {
	switch {
	case pos.Finished:
		return "(end)"
	case pos.Bucket == "":
		return ""
	case pos.BucketDone:
		return pos.Bucket + " (done)"
	case pos.Listed:
		return pos.Bucket + " (listed; its sessions without an upload next)"
	case pos.KeyMarker != "":
		return fmt.Sprintf("%s/%s (after upload %s)", pos.Bucket, pos.KeyMarker, pos.UploadIDMarker)
	case pos.AfterKey != "":
		return fmt.Sprintf("%s/%s (after upload %s)", pos.Bucket, pos.AfterKey, pos.AfterID)
	}
	return pos.Bucket + "/"
}
