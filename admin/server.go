// Package admin serves sweepgate's admin listener: the admin API
// (docs/admin-api.md) over the session records, the reclaimer and the
// digest records, the status page and its sign-in, /metrics and the
// probes, all behind a Host check and, but for /metrics and the probes,
// the admin token. Its documents are those of package adminapi.
package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/migrate"
	"github.com/sweepgate/sweepgate/reclaim"
)

// readyCheckTimeout bounds each dependency check behind /readyz, below the
// usual probe timeouts.
const readyCheckTimeout = 3 * time.Second

// ReadyCheck is one dependency that must answer before the gateway is
// ready for traffic.
type ReadyCheck struct {
	Name  string
	Check func(context.Context) error
}

// EtcdState is etcd's availability as this process last saw it
// (etcdstore.Availability): State returns since when its state has been
// what it is, and nil while etcd answers.
type EtcdState interface {
	State() (since time.Time, err error)
}

// Config is what the admin listener serves from.
type Config struct {
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// Draining is set once shutdown starts, so that /readyz tells load
	// balancers to stop sending new requests while in-flight ones finish.
	Draining *atomic.Bool
	// Checks are the dependencies /readyz asks, in parallel: those without
	// which the gateway cannot serve S3 traffic at all.
	Checks []ReadyCheck
	// Etcd is what /etcdz reports: whether etcd answers, on which
	// multipart calls, reference writes and the reclaimer depend. Nil
	// (sessions off, no etcd) answers 200 "not used".
	Etcd EtcdState
	// Store holds the session, reclaimer and digest records; nil when
	// sessions are off, which the API then answers. With etcd.shards it is
	// the default shard's, and DigestStore, when set, the store of the
	// digest layout's shard, which the frontiers and the trash are read
	// from and written to.
	Store, DigestStore *etcdstore.Store
	// Reclaimer is nil when there is none (sessions are off);
	// ReclaimerInfo describes it either way.
	Reclaimer     *reclaim.Reclaimer
	ReclaimerInfo ReclaimerInfo
	// Progress passes the reclaimer's progress to streamed passes; it is
	// the reclaimer's Progress callback (ProgressHub.Publish).
	Progress *ProgressHub
	// Migrator plans and runs keyspace migrations (/admin/v1/migrate);
	// nil when sessions are off.
	Migrator *migrate.Migrator
	// Shards are every etcd shard's state, the default shard first, with
	// etcd.shards; the sessions, reclaim, explain and migrate endpoints
	// then serve the shard a request names (docs/admin-api.md). Without
	// shards it is empty, and Store, Reclaimer, Progress and Migrator are
	// the only shard's.
	Shards []Shard
	// Route names the shard that holds a bucket's state; nil without
	// shards. DigestShard names the digest layout's shard, whose
	// reclaimer explains digests.
	Route       func(bucket string) string
	DigestShard string
	// Planes are the configured planes (digests.planes).
	Planes []string
	// Reload reads the configuration again (POST /admin/v1/reload); nil
	// when the process reloads nothing.
	Reload Reloader
	// Config returns the configuration the process runs on, which GET
	// /admin/v1/config shows with its secrets redacted; nil answers 404.
	Config func() *config.Config
	// Token is the bearer token every /admin/v1 request and the status
	// page must carry; without one those requests are all refused.
	Token config.Secret
	// Listen is admin.listen as configured, Addr the address it is bound
	// to and Hosts the extra names of admin.hosts: together the Host
	// names the listener answers.
	Listen string
	Addr   net.Addr
	Hosts  []string
	Logger *slog.Logger
	// Pprof serves Go's profiles under /debug/pprof/, behind the token
	// (admin.pprof).
	Pprof bool
	// Now stamps frontier reports and judges trash expiry; nil is
	// time.Now.
	Now func() time.Time
}

// New returns the admin listener's handler.
func New(cfg Config) http.Handler {
	return newHandler(cfg).mux()
}

// newHandler builds the handler of cfg, whose mux serves it.
func newHandler(cfg Config) *handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	draining := cfg.Draining
	if draining == nil {
		draining = new(atomic.Bool)
	}
	digestStore := cfg.DigestStore
	if digestStore == nil {
		digestStore = cfg.Store
	}
	progress := cfg.Progress
	if progress == nil {
		progress = NewProgressHub()
	}
	h := &handler{
		registry:    cfg.Registry,
		draining:    draining,
		checks:      cfg.Checks,
		etcd:        cfg.Etcd,
		sessions:    sessionsAPI{store: cfg.Store, log: log},
		reclaim:     reclaimAPI{r: cfg.Reclaimer, store: cfg.Store, info: cfg.ReclaimerInfo, progress: progress, log: log},
		digests:     digestAPI{store: digestStore, planes: cfg.Planes, now: cfg.Now, log: log},
		reload:      reloadAPI{reload: cfg.Reload},
		config:      configAPI{inEffect: cfg.Config},
		migrator:    cfg.Migrator,
		route:       cfg.Route,
		sharded:     len(cfg.Shards) > 0,
		digestShard: cfg.DigestShard,
		token:       cfg.Token,
		hosts:       newHostPolicy(cfg.Listen, cfg.Addr, cfg.Hosts),
		pprof:       cfg.Pprof,
		log:         log,
	}
	for _, s := range cfg.Shards {
		hub := s.Progress
		if hub == nil {
			hub = NewProgressHub()
		}
		h.shards = append(h.shards, &shardAPI{name: s.Name, migrator: s.Migrator,
			sessions: sessionsAPI{store: s.Store, log: log},
			reclaim:  reclaimAPI{r: s.Reclaimer, store: s.Store, info: s.ReclaimerInfo, progress: hub, log: log}})
	}
	if len(h.shards) > 0 {
		h.sessions, h.reclaim, h.migrator = h.shards[0].sessions, h.shards[0].reclaim, h.shards[0].migrator
	}
	if h.registry == nil {
		h.registry = prometheus.NewRegistry()
	}
	return h
}

// handler serves the operators' endpoints.
type handler struct {
	registry *prometheus.Registry
	// draining is set once shutdown starts, so that load balancers stop
	// sending new requests while in-flight ones finish.
	draining *atomic.Bool
	checks   []ReadyCheck
	etcd     EtcdState
	// sessions serves /admin/v1/sessions (docs/admin-api.md).
	sessions sessionsAPI
	// reclaim serves /admin/v1/reclaim (docs/admin-api.md).
	reclaim reclaimAPI
	// digests serves /admin/v1/frontiers and /admin/v1/trash
	// (docs/admin-api.md).
	digests digestAPI
	// migrator serves /admin/v1/migrate (docs/admin-api.md).
	migrator *migrate.Migrator
	// shards serve the sessions, reclaim, explain and migrate endpoints,
	// one per etcd shard, the default first (shardRoutes); sharded says
	// there are etcd.shards, so answers name their shard. route names a
	// bucket's shard (nil: the default), digestShard the digest layout's.
	shards      []*shardAPI
	sharded     bool
	route       func(bucket string) string
	digestShard string
	// reload serves /admin/v1/reload (docs/admin-api.md).
	reload reloadAPI
	// config serves /admin/v1/config (docs/admin-api.md).
	config configAPI
	// token is the bearer token every /admin/v1 request and the status
	// page must carry (requireAdmin); serve always sets one, configured or
	// generated. Without one those requests are all refused.
	token config.Secret
	// hosts are the Host names the listener answers (checkHost); the zero
	// policy answers none.
	hosts hostPolicy
	// log receives the refusals of requests without the token.
	log *slog.Logger
	// pprof serves /debug/pprof/ (admin.pprof).
	pprof bool
}

// mux returns the admin listener's handler: every request passes the Host
// check first; then the probes and /metrics are open, and everything else
// wants the admin token.
func (a *handler) mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(a.registry,
		promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry})))
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /etcdz", a.etcdz)
	protect := requireAdmin(a.token, a.log)
	a.shardRoutes(mux, protect)
	a.digests.routes(mux, protect)
	a.reload.routes(mux, protect)
	a.config.routes(mux, protect)
	a.statusRoutes(mux, protect)
	a.loginRoutes(mux)
	if a.pprof {
		pprofRoutes(mux, protect)
	}
	return a.checkHost(mux)
}

// healthz answers whenever the process can serve HTTP at all: it is the
// liveness probe, and must not fail because a dependency is down, or the
// orchestrator would restart a process that is only waiting for etcd.
func (a *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

// readyz answers 200 only when every dependency answers, checked in
// parallel so that one slow dependency does not hide another's failure.
func (a *handler) readyz(w http.ResponseWriter, r *http.Request) {
	if a.draining.Load() {
		writeText(w, http.StatusServiceUnavailable, "not ready: shutting down")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyCheckTimeout)
	defer cancel()
	failures := make([]string, len(a.checks))
	var wg sync.WaitGroup
	for i, c := range a.checks {
		wg.Go(func() {
			if err := c.Check(ctx); err != nil {
				failures[i] = fmt.Sprintf("%s: %v", c.Name, err)
			}
		})
	}
	wg.Wait()
	var reasons []string
	for _, f := range failures {
		if f != "" {
			reasons = append(reasons, f)
		}
	}
	if len(reasons) > 0 {
		writeText(w, http.StatusServiceUnavailable, "not ready: "+strings.Join(reasons, "; "))
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// etcdz answers 200 while etcd answers this process's probes and 503,
// with the failure and since when, while it does not. It is not a
// readiness probe: without etcd the gateway still serves every request that
// needs no session, and refuses the others with SlowDown.
func (a *handler) etcdz(w http.ResponseWriter, _ *http.Request) {
	if a.etcd == nil {
		writeText(w, http.StatusOK, "ok: not used (sessions are off)")
		return
	}
	since, err := a.etcd.State()
	if err != nil {
		writeText(w, http.StatusServiceUnavailable, fmt.Sprintf("etcd unavailable since %s: %v", since.UTC().Format(time.RFC3339), err))
		return
	}
	writeText(w, http.StatusOK, "ok")
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintln(w, body)
}
