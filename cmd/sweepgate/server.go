package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reload"
	"github.com/sweepgate/sweepgate/shards"
)

// server is one sweepgate serve: the store, the gateway, the reclaimer and
// the bound listeners, built by newServer and run by run. Building binds
// every listener before any serves, so that a taken port fails the start
// instead of leaving a half-running process.
type server struct {
	cfg    *config.Config
	logger *slog.Logger
	// requestLog takes the gateway's one line per request (serveLogs).
	requestLog *slog.Logger
	build      cli.BuildInfo
	reg        *prometheus.Registry
	// clock is the one wall clock every part of the process uses
	// (serveClock).
	clock func() time.Time

	embedded *etcdstore.Embedded // nil with external etcd
	etcdDied <-chan error        // the embedded etcd's failure; nil with external etcd
	// shards are the stores of state, the default first (the only one
	// without etcd.shards); none when sessions are off. endpoints, etcd,
	// store, requestStore, avail and schema are the default shard's.
	shards       []*shardState
	endpoints    []string
	etcd         *clientv3.Client
	store        *etcdstore.Store
	requestStore *etcdstore.Store
	avail        *etcdstore.Availability
	schema       *etcdstore.SchemaCheck
	// dir and router place buckets on shards; nil without etcd.shards.
	dir    *shards.Directory
	router *shards.Router
	layout *cas.Layout
	// backend is the one signed connection to the backend; sessions and
	// digests are the services over it (nil when off); the gateway and the
	// reclaimer are handed all three.
	backend  *backend.Client
	sessions *multipart.Service
	digests  *digests.Service
	gw       *gateway.Gateway
	// rec is the default shard's reclaimer, which the admin API serves;
	// recs are every shard's, rec first.
	rec  serveReclaimer
	recs []serveReclaimer

	// listeners are served in order, each by its server, under its name.
	listeners []net.Listener
	servers   []*http.Server
	names     []string
	addrs     serving
	tokenFrom string
	// reloader applies a reload (SIGHUP, POST /admin/v1/reload); cert is
	// the S3 TLS listener's certificate, nil without one.
	reloader *reload.Reloader
	cert     *reload.Certificate
	// draining is set once shutdown starts (admin.Config.Draining).
	draining atomic.Bool
	// closers undo the start, newest first (close).
	closers []func()
	tracing *serveTracing
}

// newServer builds the server of cfg, or returns why it cannot start,
// having closed what it opened. The embedded etcd (when configured) runs
// until ctx ends or close.
func newServer(ctx context.Context, cfg *config.Config, load func() (*config.Config, error), logs serveLogs, build cli.BuildInfo) (_ *server, err error) {
	logger := logs.main
	s := &server{cfg: cfg, logger: logger, requestLog: logs.requests, build: build, reg: prometheus.NewRegistry()}
	s.reloader = reload.New(cfg, load, logger, s.reg)
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.clock, err = serveClock(logger); err != nil {
		return nil, err
	}
	s.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge(build),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "sweepgate", Name: "log_lines_dropped_total",
			Help: "Request log lines dropped because the log output fell behind (audit and other lines are never dropped).",
		}, func() float64 { return float64(logs.sink.Dropped()) }),
	)
	// Tracing before anything that makes spans; its queued spans are
	// exported after everything else has stopped.
	if s.tracing, err = newServeTracing(cfg, build, logger); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { s.tracing.shutdown(logger) })
	// The store first: without it the gateway cannot record sessions.
	if err := s.openStore(ctx); err != nil {
		return nil, err
	}
	fault := testFault(logger)
	if err := s.startGateway(ctx, fault); err != nil {
		return nil, err
	}
	if err := s.listen(fault); err != nil {
		return nil, err
	}
	return s, nil
}

// openStore starts the embedded etcd when there is one, connects to etcd
// (each shard's, with etcd.shards) and opens the stores of the session
// records. With sessions off nothing needs etcd, and none is started or
// dialled. An external etcd that does not answer does not stop the start:
// the gateway serves what needs no session, refuses the rest with
// SlowDown, and starts what needs etcd once it answers (avail). A refusal
// etcd gives (the prefix not granted) still does, and so does a default
// shard whose shard directory cannot be read.
func (s *server) openStore(ctx context.Context) error {
	cfg := s.cfg
	if !cfg.Sessions.Enabled {
		return nil
	}
	var embedded []string
	if cfg.UsesEmbeddedEtcd() {
		ecfg := cfg.Etcd.Embedded.StoreConfig()
		ecfg.Logger = s.logger
		e, err := etcdstore.StartEmbedded(ctx, ecfg)
		if err != nil {
			return err
		}
		s.embedded = e
		s.closers = append(s.closers, func() { e.Close() })
		embedded = e.Endpoints()
		s.etcdDied = e.Err()
	}
	for _, spec := range cfg.Shards() {
		endpoints := spec.Endpoints
		if embedded != nil {
			endpoints = embedded
		}
		sh, err := s.openShard(ctx, spec, endpoints)
		if err != nil {
			return err
		}
		s.shards = append(s.shards, sh)
	}
	def := s.shards[0]
	s.endpoints, s.etcd, s.store, s.requestStore, s.avail, s.schema = def.endpoints, def.etcd, def.store, def.requestStore, def.avail, def.schema
	if cfg.Sharded() {
		return s.openDirectory(ctx)
	}
	return nil
}

// availabilityProbeInterval is how often serve asks etcd whether it
// answers (etcdstore.Availability).
const availabilityProbeInterval = time.Second

// checkEtcd asks a shard's etcd once, within etcd.dial_timeout, whether it
// answers and lets this process read and write under the shard's keys. An
// etcd that does not answer is logged and the start goes on; a refusal is
// returned.
func (s *server) checkEtcd(ctx context.Context, sh *shardState) error {
	actx, cancel := context.WithTimeout(ctx, s.cfg.Etcd.DialTimeout)
	defer cancel()
	err := sh.avail.Probe(actx)
	if err == nil {
		err = etcdstore.CheckAccess(actx, sh.etcd, sh.keys)
	}
	switch {
	case err == nil:
		return nil
	case etcdstore.Unavailable(err) || sh.avail.Err() != nil:
		s.logger.Warn("etcd does not answer; serving what needs no session, refusing multipart and reference writes with SlowDown until it does",
			"shard", sh.name, "etcd_endpoints", sh.endpoints, "err", err)
		return nil
	case s.cfg.Sharded():
		return fmt.Errorf("etcd shard %s: %w", sh.name, err)
	default:
		return err
	}
}

// startGateway builds the gateway and starts the session reconciler and
// state gauge, which run until ctx ends.
func (s *server) startGateway(ctx context.Context, fault func(string)) error {
	cfg := s.cfg
	var err error
	if s.layout, err = cfg.Layout(); err != nil {
		return err
	}
	if s.backend, err = newBackendClient(cfg, s.clock, s.tracing.tracer()); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	for _, sh := range s.shards {
		if sh.sessions, err = newSessions(cfg, sh.requestStore, s.backend, fault, s.clock, s.logger, sh.reg); err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		if sh.name == cfg.LayoutShard() {
			if sh.digests, err = newDigestService(cfg, sh.requestStore, s.layout, s.backend, sh.sessions, s.clock, s.logger, sh.reg); err != nil {
				return fmt.Errorf("digests: %w", err)
			}
			s.digests = sh.digests
		}
	}
	if len(s.shards) > 0 {
		s.sessions = s.shards[0].sessions
	}
	trusted, err := cfg.Trusted()
	if err != nil {
		return err
	}
	gcfg := gateway.Config{
		Backend:      s.backend,
		Region:       cfg.ClientRegion(),
		Domains:      cfg.Domains,
		Credentials:  gatewayCredentials(cfg.ClientCredentials()),
		CheckBuckets: cfg.Reclaim.Buckets,
		ReservedKeys: reservedKeys(cfg),
		MaxClockSkew: cfg.MaxClockSkew,
		Now:          s.clock,
		Logger:       s.logger,
		RequestLog:   s.requestLog,
		Metrics:      s.reg,
		Sessions:     s.sessions,
		Digests:      s.digests,
		Tracer:       s.tracing.tracer(),
		Trusted:      trusted,
		Limits:       gatewayLimits(cfg),
	}
	if len(s.shards) > 0 {
		gcfg.StateHealth = s.shards[0].stateHealth
	}
	if s.router != nil {
		gcfg.Shards, gcfg.Router = s.gatewayShards(), s.router
	}
	if s.gw, err = gateway.New(gcfg); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	s.reloader.Add(s.reloadGateway)
	if s.dir != nil {
		go s.dir.Run(ctx)
	}
	for _, sh := range s.shards {
		if err := s.runShard(ctx, sh); err != nil {
			return err
		}
	}
	return nil
}

// runShard starts what runs over one shard until ctx ends: its etcd
// probes, the digest service's watch (on the layout's shard), and the
// session reconciler and state gauge, which start once its etcd answers.
func (s *server) runShard(ctx context.Context, sh *shardState) error {
	go sh.avail.Run(ctx)
	go sh.schema.Run(ctx, availabilityProbeInterval)
	// Blob reads ask the digest service's local copy of the armed guards,
	// which its watch keeps (nothing to do without a layout).
	go sh.digests.Run(ctx)
	if sh.sessions == nil {
		return nil
	}
	gauge, err := multipart.NewStateGauge(sh.store, sh.reg, s.logger)
	if err != nil {
		return err
	}
	go func() {
		if sh.avail.WaitUp(ctx) != nil {
			return
		}
		go gauge.Run(ctx)
		runReconciler(ctx, sh.sessions, s.cfg.Sessions, s.logger)
	}()
	return nil
}

// addListener adds l, served by srv under name; the server owns it from
// now on.
func (s *server) addListener(name string, l net.Listener, srv *http.Server) {
	s.listeners, s.servers, s.names = append(s.listeners, l), append(s.servers, srv), append(s.names, name)
}

// listen binds every listener and builds the reclaimer. The admin listener
// comes first: its address names this process in the reclaimer election.
func (s *server) listen(fault func(string)) error {
	cfg := s.cfg
	var adminL net.Listener
	if cfg.Admin.Listen != "" {
		l, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin.listen: %w", err)
		}
		s.closers = append(s.closers, func() { l.Close() })
		s.addrs.Admin = l.Addr().String()
		if adminL, err = s.adminTLS(l); err != nil {
			return err
		}
	}
	adminToken, tokenFrom, err := serveAdminToken(cfg, adminL != nil, s.logger)
	if err != nil {
		return err
	}
	s.tokenFrom = tokenFrom
	progress := admin.NewProgressHub()
	if err := s.newReclaimers(progress, fault); err != nil {
		return err
	}
	if err := s.listenS3(); err != nil {
		return err
	}
	if adminL != nil {
		s.addListener("admin", adminL, s.adminServer(adminL.Addr(), adminToken, progress))
	}
	s.addrs.EtcdEndpoints, s.addrs.EmbeddedEtcd = s.endpoints, s.embedded != nil
	return nil
}

// listenS3 binds the S3 listeners, plain and TLS, that are configured.
func (s *server) listenS3() error {
	cfg := s.cfg
	if cfg.Listen != "" {
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen (S3, HTTP): %w", err)
		}
		s.closers = append(s.closers, func() { l.Close() })
		s.addListener("s3", s.proxyListener(l), s.s3Server())
		s.addrs.S3 = l.Addr().String()
	}
	if cfg.TLSListen != "" {
		cert, err := reload.LoadCertificate(cfg, reload.S3Files)
		if err != nil {
			return err
		}
		s.cert = cert
		s.reloader.Add(cert.Reload)
		l, err := net.Listen("tcp", cfg.TLSListen)
		if err != nil {
			return fmt.Errorf("tls_listen (S3, HTTPS): %w", err)
		}
		s.closers = append(s.closers, func() { l.Close() })
		srv := s.s3Server()
		srv.TLSConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: s.cert.Get,
			NextProtos:     []string{"h2", "http/1.1"},
		}
		s.addListener("s3-tls", tls.NewListener(s.proxyListener(l), srv.TLSConfig), srv)
		s.addrs.S3TLS = l.Addr().String()
	}
	return nil
}

func (s *server) s3Server() *http.Server {
	return &http.Server{
		Handler:           s.gw,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          httpErrorLog(s.logger),
	}
}

// adminServer serves the admin listener bound to addr (package admin).
func (s *server) adminServer(addr net.Addr, token config.Secret, progress *admin.ProgressHub) *http.Server {
	cfg := s.cfg
	h := admin.New(admin.Config{
		Registry: s.reg,
		Draining: &s.draining,
		// Ready means this process can serve S3 traffic: the backend
		// answers. etcd's state is /etcdz's, so that an etcd outage
		// degrades multipart and reclamation without taking every gateway
		// out of its load balancer.
		Checks: []admin.ReadyCheck{
			{Name: "backend", Check: s.gw.CheckBackend},
		},
		Etcd:          s.etcdState(),
		Store:         s.store,
		DigestStore:   s.layoutStore(),
		Reclaimer:     s.rec.r,
		ReclaimerInfo: s.rec.info,
		Migrator:      s.migrator(s.store),
		Shards:        s.adminShards(),
		Route:         s.routeBucket,
		DigestShard:   cfg.LayoutShard(),
		Progress:      progress,
		Planes:        cfg.Digests.Planes,
		Reload:        s.reloadForAdmin,
		Config:        s.reloader.InEffect,
		Token:         token,
		Listen:        cfg.Admin.Listen,
		Addr:          addr,
		Hosts:         cfg.Admin.Hosts,
		Pprof:         cfg.Admin.Pprof,
		Logger:        s.logger,
		Now:           s.clock,
	})
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// Admin responses are small; a client that reads a metrics page
		// for longer than this is stuck.
		WriteTimeout:   time.Minute,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       httpErrorLog(s.logger),
	}
}

// etcdState is what /etcdz reports: nil when this process uses no etcd.
func (s *server) etcdState() admin.EtcdState {
	switch {
	case len(s.shards) == 0:
		return nil
	case s.cfg.Sharded():
		return shardsState(s.shards)
	}
	return s.avail
}

// run serves until ctx is done or something the server depends on fails,
// then shuts down. It returns nil after a clean, complete shutdown.
// onServing, when set, is called once every listener serves.
func (s *server) run(ctx context.Context, onServing func(serving)) error {
	serveErr := make(chan error, len(s.servers))
	for i, srv := range s.servers {
		l, name := s.listeners[i], s.names[i]
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("%s listener: %w", name, err)
			}
		}()
	}
	reloadCtx, stopReloading := context.WithCancel(ctx)
	defer stopReloading()
	s.reloader.OnHangup(reloadCtx)
	// The reclaimer campaigns only once the gateway serves: a leader must
	// be reachable on its admin address, which its election value names.
	stopPublishing := s.publishClock()
	defer stopPublishing()
	stopReclaimer := s.startReclaimers(ctx)
	defer stopReclaimer()
	s.logServing()
	if onServing != nil {
		onServing(s.addrs)
	}

	var cause error
	select {
	case <-ctx.Done():
		s.logger.Info("shutting down: signal received; /readyz answers 503",
			"drain_delay", s.cfg.Shutdown.DrainDelay.String(), "timeout", s.cfg.Shutdown.Timeout.String())
	case cause = <-serveErr:
		s.logger.Error("shutting down: a listener failed", "err", cause)
	case cause = <-s.etcdDied:
		cause = fmt.Errorf("embedded etcd failed: %w", cause)
		s.logger.Error("shutting down: embedded etcd failed", "err", cause)
	}
	s.draining.Store(true)
	// The reclaimer stops at once, before the drain: its pass ends and it
	// resigns, so that another process leads at once instead of after the
	// election TTL, and an admin request waiting for a pass gets its
	// answer instead of holding up the shutdown.
	reclaimerStopped := make(chan struct{})
	go func() {
		defer close(reclaimerStopped)
		stopReclaimer()
	}()
	if cause == nil {
		cause = s.drain(serveErr)
	}
	if err := shutdown(s.servers, s.names, s.cfg.Shutdown.Timeout, s.logger); err != nil && cause == nil {
		cause = err
	}
	<-reclaimerStopped
	// The published clock goes last: the process is live until its
	// requests and its pass have ended.
	stopPublishing()
	return cause
}

func (s *server) logServing() {
	etcdMode := "external"
	switch {
	case s.etcd == nil:
		etcdMode = "none (sessions off)"
	case s.embedded != nil:
		etcdMode = "embedded"
	}
	s.logger.Info("sweepgate serving",
		"version", s.build.Version,
		"listen", s.addrs.S3,
		"tls_listen", s.addrs.S3TLS,
		"admin_listen", s.addrs.Admin,
		"admin_tls", s.cfg.Admin.TLSCertFile != "",
		"admin_token", s.tokenFrom,
		"etcd", etcdMode,
		"etcd_endpoints", s.endpoints,
		"etcd_prefix", s.cfg.Etcd.Prefix,
		"backend", s.cfg.Backend.Endpoint,
		"reclaimer", s.rec.info.Mode(),
		"reclaimer_id", s.rec.info.ID,
	)
}

// close undoes the start, newest first: the listeners (a no-op for those
// a shut-down server closed already), then the etcd client, then the
// embedded etcd, so that no request loses its store.
func (s *server) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// reloadForAdmin answers POST /admin/v1/reload with a reload.
func (s *server) reloadForAdmin(ctx context.Context) (adminapi.ReloadResult, error) {
	restart, err := s.reloader.Reload(ctx)
	return adminapi.ReloadResult{RestartNeeded: restart}, err
}
