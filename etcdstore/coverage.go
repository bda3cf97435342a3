package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Coverage returns the key of a sweep's coverage record ("uploads",
// "digests"): where its bounded passes stand in its keyspace. It outlives
// passes, unlike the sweep's cursor.
func (k Keys) Coverage(sweep string) string {
	return k.Reclaim() + "coverage/" + url.PathEscape(sweep)
}

// coverageVersion is the version of the Coverage layout.
const coverageVersion = 1

// Coverage records how far a sweep's bounded passes got through its
// keyspace (the backend's uploads in bucket and key order, the blobs of
// the configured namespaces in order) and when they last covered all of
// it. Each bounded pass starts at Next and, once it ran to its end, writes
// the record (fenced) with the report of the pass.
type Coverage struct {
	Version int    `json:"v"`
	Sweep   string `json:"sweep"`
	// Next is where the next pass starts, in the sweep's own encoding;
	// empty: the start of the keyspace.
	Next json.RawMessage `json:"next,omitempty"`
	// CycleStarted is the decision clock of the pass that began the cycle
	// in progress, and CyclePass its number; zero when Next is the start.
	CycleStarted time.Time `json:"cycle_started,omitzero"`
	CyclePass    int64     `json:"cycle_pass,omitempty"`
	// Covered is the CycleStarted of the last complete cycle (zero: none
	// yet): every object that existed then, and still existed when the
	// cycle reached its position, was listed by a pass of that cycle.
	// CoveredPass is the pass that completed it; Cycles counts them.
	Covered     time.Time `json:"covered,omitzero"`
	CoveredPass int64     `json:"covered_pass,omitempty"`
	Cycles      int64     `json:"cycles,omitempty"`
	// CycleListed counts what the passes of the cycle in progress listed.
	CycleListed int64 `json:"cycle_listed,omitempty"`
	// Pass, Term and At are those of the pass that wrote the record.
	Pass int64     `json:"pass"`
	Term int64     `json:"term"`
	At   time.Time `json:"at"`
}

// CoverageOp is the write that records c for c.Sweep.
func (k Keys) CoverageOp(c Coverage) clientv3.Op {
	c.Version = coverageVersion
	b, _ := json.Marshal(c) // plain data always marshals
	return clientv3.OpPut(k.Coverage(c.Sweep), string(b))
}

// GetCoverage reads a sweep's coverage record; ok is false when there is
// none (no bounded pass finished yet). A record that does not decode is
// an error: a sweep does not guess where it stands.
func (s *Store) GetCoverage(ctx context.Context, sweep string) (c Coverage, ok bool, err error) {
	resp, err := s.cli.Get(ctx, s.keys.Coverage(sweep))
	if err != nil {
		return c, false, fmt.Errorf("read coverage of %s: %w", sweep, err)
	}
	if len(resp.Kvs) == 0 {
		return Coverage{Sweep: sweep}, false, nil
	}
	if err := DecodeKV(CoverageRecord, resp.Kvs[0], &c); err != nil {
		return Coverage{}, false, err
	}
	c.Sweep = sweep
	return c, true, nil
}

// CoverageStep is what one bounded pass did of its sweep's keyspace.
type CoverageStep struct {
	// Next is where the next pass starts (nil: the start of the keyspace).
	Next json.RawMessage
	// CycleStarted and CyclePass are those of the cycle the pass worked
	// in (it began, or went on with); Completed says it reached the end.
	CycleStarted time.Time
	CyclePass    int64
	Completed    bool
	// Listed counts what the pass listed in the cycle it ends in.
	Listed int64
	// Pass, Term and At are the pass's.
	Pass, Term int64
	At         time.Time
}

// Advanced is the record after step.
func (c Coverage) Advanced(step CoverageStep) Coverage {
	c.Pass, c.Term, c.At = step.Pass, step.Term, step.At
	if !step.Completed {
		c.Next, c.CycleStarted, c.CyclePass = step.Next, step.CycleStarted, step.CyclePass
		c.CycleListed += step.Listed
		return c
	}
	c.Covered, c.CoveredPass = step.CycleStarted, step.Pass
	c.Cycles++
	c.Next, c.CycleStarted, c.CyclePass, c.CycleListed = nil, time.Time{}, 0, 0
	return c
}
