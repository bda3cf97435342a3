package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/reclaim"
)

// serve's reclaimer: built over serve's store, session service and backend
// from the reclaim.* settings, and started once the listeners serve.

// serveReclaimer is serve's reclaimer: r is nil when sessions are off.
type serveReclaimer struct {
	r    *reclaim.Reclaimer
	info admin.ReclaimerInfo
	// progress is the hub the reclaimer publishes its progress to, which
	// the admin API streams; set by newReclaimers.
	progress *admin.ProgressHub
}

// reclaimerID names this process in the election: its host name and admin
// address (host@127.0.0.1:9001), so that an operator told who leads knows
// which admin API to ask; without an admin listener, its pid.
func reclaimerID(adminAddr string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	if adminAddr == "" {
		return fmt.Sprintf("%s@pid-%d", host, os.Getpid())
	}
	return host + "@" + adminAddr
}

// newReclaimer builds the reclaimer over serve's store, session service
// and backend client, the ones the gateway serves through. It is built whenever sessions are on, so that
// a replica with reclaim.enabled off still answers status, plans and orphan
// lists; only start decides whether it campaigns.
func newReclaimer(cfg *config.Config, sh *shardState, be *backend.Client, layout *cas.Layout,
	logger *slog.Logger, progress func(reclaim.Progress), fault func(string), adminAddr string, clock func() time.Time) (serveReclaimer, error) {
	rc := cfg.Reclaim
	info := admin.ReclaimerInfo{ID: reclaimerID(adminAddr), Enabled: rc.Enabled, DryRun: rc.DryRun}
	if sh == nil || sh.sessions == nil {
		info.Off, info.Enabled = "sessions.enabled is false, so there are no sessions to reclaim by", false
		return serveReclaimer{info: info}, nil
	}
	scope := reclaimScope(cfg, sh)
	if scope.off != "" {
		info.Off, info.Enabled = scope.off, false
	}
	if cfg.Sharded() {
		logger = logger.With("shard", sh.name)
	}
	var sweep *digestsweep.SweepConfig
	if sh.digests != nil {
		sweep = reclaimDigests(cfg, layout)
	}
	r, err := reclaim.New(reclaim.Config{
		Store:                    sh.store,
		Sessions:                 sh.sessions,
		Backend:                  be,
		ID:                       info.ID,
		ElectionTTL:              rc.ElectionTTL,
		Grace:                    rc.Grace,
		DeleteAfter:              rc.DeleteAfter,
		StuckLimit:               rc.StuckLimit,
		ClockSkew:                rc.ClockSkew,
		MaxDelete:                rc.MaxDelete,
		MaxDeleteFraction:        rc.MaxDeleteFraction,
		MaxDeleteUploads:         rc.MaxDeleteUploads,
		MaxDeleteUploadsFraction: rc.MaxDeleteUploadsFraction,
		MaxMark:                  rc.MaxMark,
		MaxMarkFraction:          rc.MaxMarkFraction,
		DryRun:                   rc.DryRun,
		Interval:                 rc.Interval,
		BatchSize:                int(rc.BatchSize),
		Parallel:                 int(rc.Parallel),
		BackendTimeout:           rc.BackendTimeout,
		ReconcileAfter:           cfg.Sessions.ReconcileAfter,
		// Only serve's reconciler prunes terminal sessions, with
		// sessions.retention; a pass keeps them.
		SessionRetention:   0,
		MissingCheckBudget: rc.MissingCheckBudget,
		PassUploads:        rc.PassUploads,
		Buckets:            scope.buckets,
		ExcludeBuckets:     scope.exclude,
		WitnessBucket:      rc.WitnessBucket,
		WitnessKey:         scope.witnessKey,
		Now:                clock,
		Logger:             logger.With("component", "reclaimer"),
		Metrics:            sh.reg,
		Fault:              fault,
		Progress:           progress,
		Digests:            sweep,
	})
	if err != nil {
		return serveReclaimer{}, fmt.Errorf("reclaimer: %w", err)
	}
	return serveReclaimer{r: r, info: info}, nil
}

// scope is the part of the backend one shard's reclaimer sweeps.
type scope struct {
	buckets, exclude []string
	witnessKey       string
	off              string // why the shard has nothing to sweep, if so
}

// reclaimScope is the part of the backend sh's reclaimer sweeps: without
// shards, reclaim.buckets (empty: every bucket). With them, a listed
// shard's buckets (within reclaim.buckets when it is set), and for the
// default shard every other bucket: reclaim.buckets less the other
// shards', or, without reclaim.buckets, every bucket the backend lists
// but the other shards'. A shard's reclaimer never judges an upload of
// another shard's bucket, whose session it cannot see. Each shard but the
// default keeps its own restore witness key, since each leader advances
// its own shard's record.
func reclaimScope(cfg *config.Config, sh *shardState) scope {
	rc := cfg.Reclaim
	sc := scope{buckets: rc.Buckets, witnessKey: rc.WitnessKey}
	if !cfg.Sharded() {
		return sc
	}
	within := func(bs []string) []string {
		if len(rc.Buckets) == 0 {
			return bs
		}
		return slices.DeleteFunc(slices.Clone(bs), func(b string) bool { return !slices.Contains(rc.Buckets, b) })
	}
	specs := cfg.Shards()
	if sh.name != specs[0].Name {
		if sc.witnessKey == "" {
			sc.witnessKey = reclaim.DefaultWitnessKey(sh.keys.Root())
		}
		sc.witnessKey += "-shard-" + sh.name
		for _, spec := range specs {
			if spec.Name == sh.name {
				sc.buckets = within(spec.Buckets)
			}
		}
		if len(sc.buckets) == 0 {
			sc.off = "none of this shard's buckets is in reclaim.buckets"
		}
		return sc
	}
	for _, spec := range specs[1:] {
		sc.exclude = append(sc.exclude, spec.Buckets...)
	}
	if len(rc.Buckets) > 0 {
		sc.buckets = slices.DeleteFunc(slices.Clone(rc.Buckets), func(b string) bool { return slices.Contains(sc.exclude, b) })
		if len(sc.buckets) == 0 {
			sc.off = "every bucket of reclaim.buckets is on another shard"
		}
	}
	return sc
}

// start runs the reclaimer's campaign and passes until ctx ends, if it is
// enabled, and returns the function that stops it: the running pass is
// cancelled and the lead resigned, so another process takes over at once.
// The stop function may be called more than once.
func (s serveReclaimer) start(ctx context.Context, logger *slog.Logger) (stop func()) {
	if s.r == nil || !s.info.Enabled {
		return func() {}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.r.Run(rctx) // it only returns when rctx ends
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
				logger.Info("reclaimer stopped", "id", s.info.ID)
			case <-time.After(reclaimerStopTimeout):
				logger.Warn("reclaimer did not stop in time; its lease expires after reclaim.election_ttl", "timeout", reclaimerStopTimeout.String())
			}
		})
	}
}

// reclaimDigests returns the digest sweep's settings, or nil when no
// content-addressed layout is configured.
func reclaimDigests(cfg *config.Config, layout *cas.Layout) *digestsweep.SweepConfig {
	if layout.Empty() || len(layout.Namespaces) == 0 {
		return nil
	}
	d := cfg.Digests
	return &digestsweep.SweepConfig{
		Layout:             layout,
		PlacementGrace:     d.PlacementGrace,
		Planes:             d.Planes,
		MaxDelete:          d.MaxDelete,
		MaxDeleteFraction:  d.MaxDeleteFraction,
		MaxMark:            d.MaxMark,
		MaxMarkFraction:    d.MaxMarkFraction,
		RebuildInterval:    d.RebuildInterval,
		TombstoneRetention: d.TombstoneRetention,
		GuardSettle:        d.GuardSettle,
		DeleteParallel:     int(d.DeleteParallel),
		PassBlobs:          d.PassBlobs,
	}
}
