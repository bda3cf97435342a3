package reclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// Defaults for Config.
const (
	DefaultGrace              = 24 * time.Hour
	DefaultDeleteAfter        = 24 * time.Hour
	DefaultStuckLimit         = 24 * time.Hour
	DefaultClockSkew          = 5 * time.Minute
	DefaultInterval           = time.Hour
	DefaultGuardCheck         = 2 * time.Second
	DefaultBatchSize          = 1000
	DefaultParallel           = 8
	DefaultBackendTimeout     = 30 * time.Second
	DefaultReconcileAfter     = multipart.DefaultReconcileAfter
	DefaultMissingCheckBudget = 1000
	// DefaultPassUploads lists every upload in every pass.
	DefaultPassUploads = 0
)

// Config is what a Reclaimer needs. Zero durations and counts take the
// defaults above.
type Config struct {
	Store *etcdstore.Store
	// Sessions is the session service whose reconciler runs first in
	// every pass.
	Sessions *multipart.Service
	// Backend is the signed connection to the backend that the reclaimer
	// lists, reads, aborts and deletes through (s3client, no retries).
	Backend s3client.Backend
	// Elector, when set, is the election candidate to campaign with;
	// otherwise one is made on Store's client with ID and ElectionTTL.
	Elector     *Elector
	ID          string
	ElectionTTL time.Duration

	Grace       time.Duration
	DeleteAfter time.Duration
	StuckLimit  time.Duration
	ClockSkew   time.Duration
	// MaxDelete is the most parts one pass deletes; negative means no
	// absolute limit (the fraction still applies).
	MaxDelete int64
	// MaxDeleteFraction is the largest share of all stored parts one pass
	// deletes, in (0, 1].
	MaxDeleteFraction float64
	// MaxDeleteUploads and MaxDeleteUploadsFraction are the same ceilings
	// in uploads deleted, an upload with no parts counting as one;
	// MaxMark and MaxMarkFraction in uploads marked expired.
	MaxDeleteUploads         int64
	MaxDeleteUploadsFraction float64
	MaxMark                  int64
	MaxMarkFraction          float64
	// DryRun makes every pass a plan: it decides and reports, and writes
	// nothing anywhere.
	DryRun bool
	// Interval is the time between passes while leading.
	Interval time.Duration
	// GuardCheck is how often the leader, between passes, settles the
	// blob guards whose unclear delete can no longer be executed
	// (digestsweep.Sweep.SettleDue), so that they stop blocking writes
	// within seconds of their settle time; 2s when 0.
	GuardCheck time.Duration
	// BatchSize is how many uploads one inventory page asks for and one
	// batch examines (S3 lists at most 1000 at a time).
	BatchSize int
	// Parallel is how many uploads are examined at once.
	Parallel int
	// BackendTimeout bounds each backend request.
	BackendTimeout time.Duration
	// ReconcileAfter is passed to the reconciler: how long a session must
	// stand in an unsettled state before it acts on it.
	ReconcileAfter time.Duration
	// SessionRetention is passed to the reconciler: how long terminal
	// sessions are kept before pruning; zero keeps them.
	SessionRetention time.Duration
	// MissingCheckBudget bounds the backend checks per pass for sessions
	// whose upload was not listed.
	MissingCheckBudget int64
	// PassUploads, when above 0, bounds each pass to that many listed
	// uploads, resuming on the next pass where the last one stopped (see
	// slice.go); 0 lists the whole keyspace every pass.
	PassUploads int64
	// Buckets, when set, are the only buckets the upload sweep lists, the
	// backend's clock read from a HEAD of the first (no ListBuckets); empty
	// lists every bucket the backend lists but ExcludeBuckets (other shards').
	Buckets, ExcludeBuckets []string
	// WitnessBucket and WitnessKey locate the backend's copy of the
	// restore witness (witness.go). An empty bucket is the first digest
	// namespace's, else the first of Buckets, else none: the witness is
	// off and a restore of etcd goes unseen. An empty key is
	// DefaultWitnessKey of the store's prefix.
	WitnessBucket string
	WitnessKey    string

	Now func() time.Time
	// Monotonic returns the time elapsed since some fixed moment of this
	// process, on a clock no wall clock change moves; it advances the
	// elapsed clock (see advanceElapsed). A test fakes it.
	Monotonic func() time.Duration
	Logger    *slog.Logger
	// Metrics registers the reclaimer's series; nil registers nothing.
	Metrics prometheus.Registerer
	// Fault, when set, is called at the Fault* points.
	Fault func(point string)
	// Progress, when set, is called after every recorded inventory page
	// and every action, so a long pass or plan can show how far it got.
	Progress func(Progress)
	// Digests turns on the digest sweep; nil leaves it off.
	Digests *digestsweep.SweepConfig
}

// Reclaimer is the elected upload sweep (and, when Config.Digests is set,
// digest sweep): it campaigns, and while it leads it runs passes on an
// interval and on demand.
type Reclaimer struct {
	cfg      Config
	store    *etcdstore.Store
	sessions *multipart.Service
	s3       *s3client.Client
	elector  *Elector
	log      *slog.Logger
	metrics  *metrics
	now      func() time.Time
	// digests is the digest sweep, nil when it is off.
	digests *digestsweep.Sweep
	// process names this run of this process on the elapsed clock, and
	// elapsed is where it last left that clock.
	process    string
	elapsed    elapsedBase
	clockStops *prometheus.CounterVec
	// schemaStops counts passes stopped by checkSchema.
	schemaStops prometheus.Counter

	triggers chan chan passResult
	// fenced carries the work RunFenced hands to the leader loop.
	fenced chan fencedWork

	mu   sync.Mutex
	last *Report
}

type passResult struct {
	rep Report
	err error
}

// New returns a Reclaimer for cfg.
func New(cfg Config) (*Reclaimer, error) {
	if cfg.Store == nil || cfg.Sessions == nil || cfg.Backend == nil {
		return nil, errors.New("reclaim: store, sessions and backend are required")
	}
	setDefaults(&cfg)
	if cfg.WitnessBucket == "" {
		cfg.WitnessBucket = defaultWitnessBucket(&cfg)
	}
	if cfg.WitnessBucket == "" {
		cfg.Logger.Warn("no bucket for the restore witness (reclaim.witness_bucket, reclaim.buckets and the digest namespaces are all empty): a restore of etcd from a snapshot will not be detected")
	}
	if len(cfg.Buckets) > 0 {
		cfg.Buckets = slices.Compact(slices.Sorted(slices.Values(cfg.Buckets)))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"max_delete_fraction", cfg.MaxDeleteFraction}, {"max_delete_uploads_fraction", cfg.MaxDeleteUploadsFraction}, {"max_mark_fraction", cfg.MaxMarkFraction}} {
		if f.v <= 0 || f.v > 1 {
			return nil, fmt.Errorf("reclaim: %s %g must be in (0, 1]", f.name, f.v)
		}
	}
	if cfg.BatchSize > 1000 {
		return nil, fmt.Errorf("reclaim: batch size %d is above 1000, the most S3 lists at once", cfg.BatchSize)
	}
	s3c := s3client.New(cfg.Backend, cfg.BackendTimeout)
	// The digest sweep's configuration is checked before anything is
	// started or registered; its metrics are the reclaimer's, made below.
	var (
		sw *digestsweep.Sweep
		dm = &digestMetrics{}
	)
	if cfg.Digests != nil {
		dc := *cfg.Digests
		dc.BackendTimeout, dc.ClockSkew = cfg.BackendTimeout, cfg.ClockSkew
		dc.ElectionTTL = cfg.ElectionTTL
		if dc.ElectionTTL <= 0 {
			dc.ElectionTTL = DefaultElectionTTL
		}
		var err error
		sw, err = digestsweep.NewSweep(dc, digestsweep.SweepDeps{
			Store: cfg.Store, Backend: s3c, Logger: cfg.Logger, Metrics: dm,
			BatchSize: cfg.BatchSize, Parallel: cfg.Parallel,
		})
		if err != nil {
			return nil, err
		}
		d := sw.Config()
		cfg.Digests = &d
	}
	el := cfg.Elector
	if el == nil {
		var err error
		el, err = NewElector(ElectorConfig{Client: cfg.Store.Client(), Prefix: cfg.Store.Keys().Election(), ID: cfg.ID, TTL: cfg.ElectionTTL, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
	}
	dm.m = newMetrics(cfg.Metrics)
	return &Reclaimer{
		cfg: cfg, store: cfg.Store, sessions: cfg.Sessions, s3: s3c,
		elector: el, log: cfg.Logger, metrics: dm.m, now: cfg.Now, digests: sw,
		triggers: make(chan chan passResult),
		fenced:   make(chan fencedWork),
		process:  newProcessID(cfg.ID), clockStops: newClockStops(cfg.Metrics),
		schemaStops: newSchemaStops(cfg.Metrics),
	}, nil
}

func setDefaults(cfg *Config) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Grace, DefaultGrace)
	def(&cfg.DeleteAfter, DefaultDeleteAfter)
	def(&cfg.StuckLimit, DefaultStuckLimit)
	def(&cfg.ClockSkew, DefaultClockSkew)
	def(&cfg.Interval, DefaultInterval)
	def(&cfg.GuardCheck, DefaultGuardCheck)
	def(&cfg.BackendTimeout, DefaultBackendTimeout)
	def(&cfg.ReconcileAfter, DefaultReconcileAfter)
	if cfg.MaxDelete == 0 {
		cfg.MaxDelete = DefaultMaxDelete
	}
	if cfg.MaxDeleteFraction == 0 {
		cfg.MaxDeleteFraction = DefaultMaxDeleteFraction
	}
	if cfg.MaxDeleteUploads == 0 {
		cfg.MaxDeleteUploads = DefaultMaxDeleteUploads
	}
	if cfg.MaxDeleteUploadsFraction == 0 {
		cfg.MaxDeleteUploadsFraction = DefaultMaxDeleteUploadsFraction
	}
	if cfg.MaxMark == 0 {
		cfg.MaxMark = DefaultMaxMark
	}
	if cfg.MaxMarkFraction == 0 {
		cfg.MaxMarkFraction = DefaultMaxMarkFraction
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.MissingCheckBudget <= 0 {
		cfg.MissingCheckBudget = DefaultMissingCheckBudget
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Monotonic == nil {
		base := time.Now()
		cfg.Monotonic = func() time.Duration { return time.Since(base) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Fault == nil {
		cfg.Fault = func(string) {}
	}
}

func (r *Reclaimer) cli() *clientv3.Client { return r.store.Client() }
func (r *Reclaimer) keys() etcdstore.Keys  { return r.store.Keys() }
func (r *Reclaimer) fault(point string)    { r.cfg.Fault(point) }

// progress reports how far pass p got, if anyone asked.
func (r *Reclaimer) progress(p *pass) {
	if r.cfg.Progress == nil {
		return
	}
	c := p.cur
	r.cfg.Progress(Progress{Pass: c.Pass, Term: c.Term, Phase: c.Phase, Bucket: c.Pos.Bucket, Started: c.Started,
		DryRun: p.dry, Uploads: c.Tally.Uploads, Acted: c.Acted})
}

func (r *Reclaimer) policy() Policy {
	return Policy{Grace: r.cfg.Grace, DeleteAfter: r.cfg.DeleteAfter, StuckLimit: r.cfg.StuckLimit, ClockSkew: r.cfg.ClockSkew}
}

// Elector returns the reclaimer's election candidate.
func (r *Reclaimer) Elector() *Elector { return r.elector }

// Leader reports this process's term and whether it leads.
func (r *Reclaimer) Leader() (term int64, ok bool) { return r.elector.Leader() }

// Run campaigns and, while it leads, runs a pass every Interval and on each
// Trigger, until ctx ends. When a term ends (its etcd session ended, or a
// write was refused by the fence) the running pass is cancelled and Run
// campaigns again with a new session. When ctx ends it resigns, so another
// process takes over at once. Run returns only when ctx ends: a failed
// campaign is logged and retried with backoff.
func (r *Reclaimer) Run(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		l, err := r.elector.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			r.log.Warn("reclaimer campaign failed; trying again", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		r.metrics.leader(l.Term, true)
		r.lead(l)
		r.elector.Resign(l)
		r.metrics.leader(0, false)
	}
}

// lead runs passes while l's term lasts, and between them settles the
// blob guards that are due (settleDue).
func (r *Reclaimer) lead(l *Leadership) {
	ticker := time.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	guards := time.NewTicker(r.cfg.GuardCheck)
	defer guards.Stop()
	for {
		var waiters []chan passResult
		select {
		case <-l.Done():
			return
		case <-guards.C:
			if err := r.witnessTick(l); errors.Is(err, ErrFenced) {
				return
			}
			err := r.settleDue(l)
			r.fault(FaultGuardsChecked)
			if errors.Is(err, ErrFenced) {
				return
			}
			continue
		case <-ticker.C:
		case f := <-r.fenced:
			err := r.runFenced(l, f)
			if errors.Is(err, ErrFenced) || l.Context().Err() != nil {
				return
			}
			continue
		case w := <-r.triggers:
			waiters = append(waiters, w)
			// Triggers that arrived meanwhile share this pass.
			for more := true; more; {
				select {
				case w := <-r.triggers:
					waiters = append(waiters, w)
				default:
					more = false
				}
			}
		}
		rep, err := r.runPass(l.Context(), l, r.cfg.DryRun)
		for _, w := range waiters {
			w <- passResult{rep, err}
		}
		if errors.Is(err, ErrFenced) || l.Context().Err() != nil {
			return
		}
	}
}

// settleDue settles, under l's term, the blob guards whose unclear delete
// can no longer be executed (digestsweep.Sweep.SettleDue). It runs in the
// leader's loop, never during a pass; a dry-run reclaimer writes nothing.
func (r *Reclaimer) settleDue(l *Leadership) error {
	if r.digests == nil || r.cfg.DryRun {
		return nil
	}
	ctx, cancel := context.WithTimeout(l.Context(), r.cfg.BackendTimeout)
	defer cancel()
	n, _, err := r.digests.SettleDue(ctx, &sweep.Run{Term: termOf(l), Now: r.now(), Clock: r.now, ClockSkew: r.cfg.ClockSkew})
	if err != nil {
		r.log.Warn("settling due guards failed; trying again", "err", err)
	} else if n > 0 {
		r.log.Info("guards settled between passes", "released", n, "term", l.Term)
	}
	return err
}

// Trigger asks the running leader loop for a pass now and returns its
// report once it ends. It fails with ErrNotLeader when this process does
// not lead (ask the leader: CurrentLeader says who).
func (r *Reclaimer) Trigger(ctx context.Context) (Report, error) {
	w := make(chan passResult, 1)
	for {
		r.elector.mu.Lock()
		cur, changed := r.elector.current, r.elector.changed
		r.elector.mu.Unlock()
		if cur == nil {
			return Report{}, ErrNotLeader
		}
		select {
		case r.triggers <- w:
		case <-changed:
			continue
		case <-ctx.Done():
			return Report{}, ctx.Err()
		}
		select {
		case res := <-w:
			return res.rep, res.err
		case <-ctx.Done():
			return Report{}, ctx.Err()
		}
	}
}

// fencedWork is work run in the leader loop under its term, and where
// its error goes.
type fencedWork struct {
	ctx  context.Context
	fn   func(ctx context.Context, t sweep.Term) error
	done chan error
}

// RunFenced runs fn in the leader loop, between passes, under the term of
// this process's leadership: every write fn makes through sweep.FencedTxn
// with that term is refused once the term ends. fn's context ends when the
// term does or when ctx does. It fails with ErrNotLeader when this process
// does not lead. A migration of the keyspace (package migrate) runs so.
func (r *Reclaimer) RunFenced(ctx context.Context, fn func(ctx context.Context, t sweep.Term) error) error {
	f := fencedWork{ctx: ctx, fn: fn, done: make(chan error, 1)}
	for {
		r.elector.mu.Lock()
		cur, changed := r.elector.current, r.elector.changed
		r.elector.mu.Unlock()
		if cur == nil {
			return ErrNotLeader
		}
		select {
		case r.fenced <- f:
			return <-f.done
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runFenced runs f under l's term and reports its error to f's caller.
func (r *Reclaimer) runFenced(l *Leadership, f fencedWork) error {
	ctx, cancel := context.WithCancel(l.Context())
	defer cancel()
	stop := context.AfterFunc(f.ctx, cancel)
	defer stop()
	err := f.fn(ctx, termOf(l))
	f.done <- err
	return err
}

// Plan builds the plan a pass would make now and returns its report. It
// changes nothing: no reconcile, no etcd write, no backend write. Any
// process may plan, leader or not.
func (r *Reclaimer) Plan(ctx context.Context) (Report, error) {
	return r.runPass(ctx, nil, true)
}

// Status is what `sweepgate reclaim status` shows.
type Status struct {
	// Leading says whether this process leads, and Term its term.
	Leading bool  `json:"leading"`
	Term    int64 `json:"term,omitempty"`
	// Leader is whoever leads, as etcd says.
	Leader *LeaderInfo `json:"leader,omitempty"`
	// Last is the newest stored pass report.
	Last *Report `json:"last,omitempty"`
	// LastLocal is the last report this process made, dry runs included.
	LastLocal *Report `json:"last_local,omitempty"`
	// InProgress is the pass a cursor says is in progress, if any.
	InProgress *Progress `json:"in_progress,omitempty"`
	// Paused are the sweeps the breaker paused, until a person resumes
	// them (Resume).
	Paused []etcdstore.Pause `json:"paused,omitempty"`
	// Restored is the restore mark, standing or cleared: when etcd was
	// last found restored from a snapshot (nil: never).
	Restored *etcdstore.Restored `json:"restored,omitempty"`
}

// Progress describes a pass in progress: the uploads counted so far and
// what it did so far.
type Progress struct {
	Pass    int64     `json:"pass"`
	Term    int64     `json:"term"`
	Phase   string    `json:"phase"`
	Bucket  string    `json:"bucket,omitempty"`
	Started time.Time `json:"started"`
	DryRun  bool      `json:"dry_run,omitempty"`
	Uploads Uploads   `json:"uploads"`
	Acted   Acted     `json:"acted"`
	// Digests is how far the pass's digest sweep got, once it started.
	Digests *digestsweep.Progress `json:"digests,omitempty"`
}

// Status reads the reclaimer's status.
func (r *Reclaimer) Status(ctx context.Context) (Status, error) {
	var st Status
	st.Term, st.Leading = r.elector.Leader()
	info, ok, err := CurrentLeader(ctx, r.cli(), r.keys().Election())
	if err != nil {
		return st, err
	}
	if ok {
		st.Leader = &info
	}
	last, ok, err := LastReport(ctx, r.store)
	if err != nil {
		return st, err
	}
	if ok {
		st.Last = &last
	}
	r.mu.Lock()
	st.LastLocal = r.last
	r.mu.Unlock()
	if st.Paused, err = r.Pauses(ctx); err != nil {
		return st, err
	}
	if st.Restored, err = r.RestoreMark(ctx); err != nil {
		return st, err
	}
	cur, _, ok, err := loadCursor(ctx, r.store)
	if err != nil {
		return st, err
	}
	if ok {
		st.InProgress = &Progress{Pass: cur.Pass, Term: cur.Term, Phase: cur.Phase, Bucket: cur.Pos.Bucket, Started: cur.Started, Uploads: cur.Tally.Uploads, Acted: cur.Acted}
		if st.InProgress.Digests, err = digestsweep.ReadProgress(ctx, r.store, cur.Pass); err != nil {
			return st, err
		}
	}
	return st, nil
}

// observe records a finished pass in the metrics and as the last local
// report.
func (r *Reclaimer) observe(rep Report, err error, d time.Duration) {
	r.metrics.pass(rep, err, d)
	r.mu.Lock()
	r.last = &rep
	r.mu.Unlock()
}

// logReport writes the pass report's summary to the log.
func (r *Reclaimer) logReport(rep Report) {
	level := slog.LevelInfo
	switch {
	case rep.Refused != "" && !rep.DryRun:
		level = slog.LevelError
	case rep.Stopped != "":
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, "reclaim pass report",
		"pass", rep.Pass, "term", rep.Term, "dry_run", rep.DryRun, "refused", rep.Refused, "stopped", rep.Stopped,
		"keep_parts", rep.Uploads.Keep.Parts, "mark_parts", rep.Uploads.Mark.Parts,
		"delete_parts", rep.Uploads.Delete.Parts, "hold_parts", rep.Uploads.Hold.Parts,
		"marked_parts", rep.Acted.Marked.Parts, "deleted_parts", rep.Acted.Deleted.Parts,
		"cleanup_pending_parts", rep.Acted.CleanupPending.Parts, "changed", rep.Acted.Changed.Sessions,
		"orphans", rep.Totals.Orphans, "stuck", rep.Totals.Stuck, "missing_sessions", rep.Totals.Missing,
		"resumed", rep.Resumed, "duration", rep.Finished.Sub(rep.Started).String())
}
