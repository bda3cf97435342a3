package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// Sweep is the digest sweep, built once and run once in every pass
// (sweep.Sweep). It holds no state of a pass: several runs (a pass and a
// plan) may go on at once.
type Sweep struct {
	cfg      *SweepConfig
	store    *etcdstore.Store
	s3       Backend
	log      *slog.Logger
	metrics  SweepMetrics
	batch    int
	parallel int
}

var _ sweep.Sweep[*Report] = (*Sweep)(nil)

// SweepDeps is what the sweep works with besides its configuration.
type SweepDeps struct {
	Store   *etcdstore.Store
	Backend Backend
	// Logger receives the sweep's log and audit lines; nil discards them.
	Logger *slog.Logger
	// Metrics receives the sweep's counts; nil counts nothing.
	Metrics SweepMetrics
	// BatchSize is how many keys one listing page and one tombstone page
	// hold (at most 1000); Parallel how many blobs the uploads inventory
	// asks about at once.
	BatchSize int
	Parallel  int
}

// NewSweep returns the digest sweep of cfg, with cfg's zero durations and
// limits set to their defaults, or why cfg cannot work.
func NewSweep(cfg SweepConfig, deps SweepDeps) (*Sweep, error) {
	if deps.Store == nil || deps.Backend == nil {
		return nil, errors.New("digestsweep: the digest sweep needs a store and a backend")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.PassBlobs > 0 && c.PassBlobs < int64(deps.BatchSize) {
		return nil, fmt.Errorf("digestsweep: digest pass_blobs %d is below the batch size %d: a pass lists whole pages", c.PassBlobs, deps.BatchSize)
	}
	s := &Sweep{cfg: c, store: deps.Store, s3: deps.Backend, log: deps.Logger, metrics: deps.Metrics,
		batch: deps.BatchSize, parallel: deps.Parallel}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	return s, nil
}

// Config returns the sweep's configuration, defaults filled in.
func (sw *Sweep) Config() SweepConfig { return *sw.cfg }

func (sw *Sweep) cli() *clientv3.Client { return sw.store.Client() }
func (sw *Sweep) keys() etcdstore.Keys  { return sw.store.Keys() }

// Run runs the digest sweep of run's pass: it resumes the pass's sweep
// from its cursor, or starts it, and takes it through its phases. The
// report it returns is the pass's "digests" section, also when it stops
// with an error.
func (sw *Sweep) Run(ctx context.Context, run *sweep.Run) (*Report, error) {
	s := &digestSweep{Sweep: sw, run: run, dry: run.DryRun, term: run.Term, now: run.Now}
	err := s.phases(ctx)
	return &s.cur.Report, err
}

// digestSweep is the digest sweep of one pass.
type digestSweep struct {
	*Sweep
	run *sweep.Run
	// dry: decide and count, write nothing anywhere.
	dry  bool
	term sweep.Term
	// now is the pass's decision clock, fixed for its whole life.
	now time.Time
	// mu guards cur while the collector's requests are in flight.
	mu  sync.Mutex
	cur digestCursor
	// planes holds the configured planes' frontiers (0: not reported).
	planes map[string]int64
}

// clock is the time the records written are stamped with.
func (s *digestSweep) clock() time.Time { return s.run.Clock() }

// phases resumes or starts the sweep and takes it through its phases.
func (s *digestSweep) phases(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := s.checkTimes(ctx); err != nil {
		return err
	}
	if err := s.settleGuards(ctx); err != nil {
		return err
	}
	if s.cur.Phase == digestPhaseRebuild {
		if err := s.rebuild(ctx); err != nil {
			return err
		}
	}
	if s.cur.Phase == digestPhaseTombstones {
		if err := s.tombstones(ctx); err != nil {
			return err
		}
	}
	if s.cur.Phase == digestPhaseCollect {
		if err := s.collect(ctx); err != nil {
			return err
		}
	}
	if err := s.prune(ctx); err != nil {
		return err
	}
	if err := s.endSlice(ctx); err != nil {
		return err
	}
	s.logReport()
	return nil
}

// begin resumes the pass's digest sweep from its cursor, or starts it.
func (s *digestSweep) begin(ctx context.Context) error {
	if !s.dry {
		c, ok, err := loadSweepCursor(ctx, s.store)
		if err != nil {
			return err
		}
		if ok && c.Pass == s.run.Pass {
			c.Report.Resumed++
			c.Term = s.term.N
			s.cur = c
			s.log.Info("resuming digest sweep", "pass", c.Pass, "phase", c.Phase, "term", s.term.N)
			if c.Phase == digestPhaseCollect {
				// The pause and the breaker, with the settings of now,
				// are checked again before the collector goes on.
				return s.judgePlan(ctx)
			}
			return s.save(ctx)
		}
	}
	s.cur = digestCursor{Pass: s.run.Pass, Term: s.term.N, Phase: digestPhaseRebuild}
	s.cur.Report.Breaker = Breaker{MaxDelete: s.cfg.MaxDelete, MaxDeleteFraction: s.cfg.MaxDeleteFraction, MaxMark: s.cfg.MaxMark, MaxMarkFraction: s.cfg.MaxMarkFraction}
	due, last, err := s.rebuildDue(ctx)
	if err != nil {
		return err
	}
	if s.run.Restored != "" && last.Started <= s.run.RestoredRev {
		// Etcd was restored: a rebuild started after the restore mark
		// reads back every reference the snapshot lost, and clears the
		// mark; until one finished, no earlier rebuild proves anything.
		due, last.Started = true, 0
	}
	s.cur.Rebuild.Due, s.cur.Rebuild.Proof = due, last.Started
	if len(s.cfg.Layout.RebuildSources()) == 0 || s.dry && due {
		// No source holds a reference: there is nothing a rebuild could
		// find, so every decision is as good as rebuilt. A plan does not
		// rebuild, but says what a pass would do, which rebuilds first.
		s.cur.Rebuild.Proof = math.MaxInt64
	}
	s.cur.Report.Rebuild.Last = last.Finished
	if err := s.startSlice(ctx); err != nil {
		return err
	}
	return s.save(ctx)
}

// logReport writes the sweep's summary to the log.
func (s *digestSweep) logReport() {
	rep := &s.cur.Report
	s.log.Info("digest sweep report", "pass", s.cur.Pass, "term", s.term.N, "dry_run", s.dry,
		"stored", rep.Stored, "retained", rep.Retained, "pending", rep.Pending, "ready", rep.Ready,
		"skipped", rep.Skipped, "deleted", rep.Deleted, "bytes", rep.Bytes, "failed", rep.Failed,
		"unknown", rep.Unknown, "changed", rep.Changed, "refused", rep.Refused, "kept", rep.Kept,
		"rebuild_failed", rep.Rebuild.Failed)
}
