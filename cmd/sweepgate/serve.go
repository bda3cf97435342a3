package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

const (
	// shutdownTimeout bounds how long in-flight requests may finish after a
	// signal. It matches Kubernetes' default termination grace period;
	// requests still running then are cut off.
	shutdownTimeout = 30 * time.Second
	// readHeaderTimeout bounds a client that opens a connection and sends
	// headers slowly. There is deliberately no ReadTimeout or WriteTimeout:
	// they would cut off a multi-gigabyte part upload or download that is
	// making progress.
	readHeaderTimeout = 30 * time.Second
	// idleTimeout closes keep-alive connections no client is using.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes leaves room for S3's 8 KiB of user metadata, long
	// presigned query strings and the usual headers, and no more.
	maxHeaderBytes = 64 << 10
	// reclaimerStopTimeout bounds the wait for the reclaimer to stop its
	// pass and resign at shutdown. Its pass stops at once (its context
	// ends; the fence keeps a write under way from landing), and resigning
	// takes milliseconds when etcd answers; when etcd does not, there is
	// nobody to hand over to and the lease expires on its own.
	reclaimerStopTimeout = 10 * time.Second
)

// serving describes the listeners of a running serve.
type serving struct {
	S3, S3TLS, Admin string // bound addresses; empty when off
	EtcdEndpoints    []string
	EmbeddedEtcd     bool
}

func (c *cli) serveHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: sweepgate serve [flags]

Runs the S3 gateway: S3 clients connect to listen (and tls_listen), and
operators to admin.listen for the status page, /metrics, /healthz, /readyz
and the admin API that 'sweepgate sessions', 'reclaim', 'frontier', 'trash'
and 'explain' use. Upload sessions and digest references are kept in etcd:
an embedded single-node etcd unless etcd.endpoints names a cluster. Unless
reclaim.enabled is off, it also campaigns for the reclaimer's lead and,
while leading, reclaims abandoned uploads and, with digests.namespaces set,
unreferenced blobs. SIGINT or SIGTERM stops it gracefully (a leading
reclaimer hands over at once).

`)
	config.WriteHelp(w)
}

func (c *cli) serve(ctx context.Context, args []string) int {
	cfg, err := config.Load(args, c.environ)
	if err != nil {
		var usage *config.UsageError
		switch {
		case errors.Is(err, flag.ErrHelp):
			c.serveHelp(c.stdout)
			return exitOK
		case errors.As(err, &usage):
			return c.usageError("serve", err)
		}
		fmt.Fprintf(c.stderr, "sweepgate serve: invalid configuration:\n  %s\nRun 'sweepgate serve --help' for every setting.\n",
			strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return exitError
	}
	logger := newLogger(c.stderr, cfg)
	for _, name := range config.UnknownEnv(c.environ) {
		if name == adminURLEnv || name == faultEnv {
			continue // the admin commands' and the tests', not settings
		}
		logger.Warn("ignoring unknown environment variable; no setting has this name", "name", name)
	}
	logger.Debug("configuration", "config", cfg)
	if err := runServe(ctx, cfg, logger, readBuildInfo(c.version), c.onServing); err != nil {
		logger.Error("sweepgate serve stopped", "err", err)
		return exitError
	}
	logger.Info("sweepgate stopped")
	return exitOK
}

func newLogger(w io.Writer, cfg *config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel()}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// runServe runs the gateway until ctx is done or something it depends on
// fails. It returns nil after a clean, complete shutdown.
func runServe(ctx context.Context, cfg *config.Config, logger *slog.Logger, build buildInfo, onServing func(serving)) (err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge(build),
	)

	// The store first: without it the gateway cannot record sessions.
	var (
		embedded  *etcdstore.Embedded
		endpoints = cfg.Etcd.Endpoints
		etcdDied  <-chan error
	)
	if cfg.UsesEmbeddedEtcd() {
		ecfg := cfg.Etcd.Embedded.StoreConfig()
		ecfg.Logger = logger
		embedded, err = etcdstore.StartEmbedded(ctx, ecfg)
		if err != nil {
			return err
		}
		defer embedded.Close()
		endpoints = embedded.Endpoints()
		etcdDied = embedded.Err()
	}
	etcdClient, err := etcdstore.ConnectLogged(ctx, endpoints, cfg.Etcd.DialTimeout, logger)
	if err != nil {
		return err
	}
	defer etcdClient.Close()

	// One store for everything that reads or writes the session records,
	// so that its etcd requests are timed in one histogram.
	var store *etcdstore.Store
	if cfg.Sessions.Enabled {
		keys, _ := etcdstore.NewKeys(cfg.Etcd.Prefix) // config validated the prefix
		store = etcdstore.NewStore(etcdClient, keys).WithMetrics(reg)
	}

	fault := testFault(logger)
	layout, err := cfg.Layout()
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Config{
		BackendEndpoint:  cfg.Backend.Endpoint,
		BackendRegion:    cfg.Backend.Region,
		BackendAccessKey: cfg.Backend.AccessKey,
		BackendSecretKey: string(cfg.Backend.SecretKey),
		Region:           cfg.ClientRegion(),
		Domains:          cfg.Domains,
		Credentials:      gatewayCredentials(cfg.ClientCredentials()),
		MaxClockSkew:     cfg.MaxClockSkew,
		Logger:           logger,
		Metrics:          reg,
		Sessions:         sessionsConfig(cfg, store, fault),
		Digests:          digestsConfig(cfg, store, layout),
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if sessions := gw.Sessions(); sessions != nil {
		go runReconciler(ctx, sessions, cfg.Sessions, logger)
		gauge, err := multipart.NewStateGauge(store, reg, logger)
		if err != nil {
			return err
		}
		go gauge.Run(ctx)
	}

	// Bind every listener before serving on any, so that a taken port fails
	// the start instead of leaving a half-running process. The admin
	// listener comes first: its address names this process in the
	// reclaimer election.
	var (
		servers   []*http.Server
		listeners []net.Listener
		names     []string
		addrs     serving
		adminL    net.Listener
	)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
		if adminL != nil {
			adminL.Close()
		}
	}()
	if cfg.Admin.Listen != "" {
		adminL, err = net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin.listen: %w", err)
		}
		addrs.Admin = adminL.Addr().String()
	}
	adminToken, tokenFrom, err := serveAdminToken(cfg, adminL != nil, logger)
	if err != nil {
		return err
	}
	progress := admin.NewProgressHub()
	rec, err := newReclaimer(cfg, store, gw, layout, reg, logger, progress.Publish, fault, addrs.Admin)
	if err != nil {
		return err
	}
	errorLog := httpErrorLog(logger)
	s3Server := func() *http.Server {
		return &http.Server{
			Handler:           gw,
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          errorLog,
		}
	}
	if cfg.Listen != "" {
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen (S3, HTTP): %w", err)
		}
		listeners, servers, names = append(listeners, l), append(servers, s3Server()), append(names, "s3")
		addrs.S3 = l.Addr().String()
	}
	if cfg.TLSListen != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("tls_cert_file/tls_key_file: %w", err)
		}
		l, err := net.Listen("tcp", cfg.TLSListen)
		if err != nil {
			return fmt.Errorf("tls_listen (S3, HTTPS): %w", err)
		}
		srv := s3Server()
		srv.TLSConfig = &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
			NextProtos:   []string{"h2", "http/1.1"},
		}
		listeners = append(listeners, tls.NewListener(l, srv.TLSConfig))
		servers, names = append(servers, srv), append(names, "s3-tls")
		addrs.S3TLS = l.Addr().String()
	}
	var draining atomic.Bool
	if adminL != nil {
		adminHandler := admin.New(admin.Config{
			Registry: reg,
			Draining: &draining,
			Checks: []admin.ReadyCheck{
				{Name: "etcd", Check: func(ctx context.Context) error { return etcdstore.Health(ctx, etcdClient) }},
				{Name: "backend", Check: gw.CheckBackend},
			},
			Store:         store,
			Reclaimer:     rec.r,
			ReclaimerInfo: rec.info,
			Progress:      progress,
			Planes:        cfg.Digests.Planes,
			Token:         adminToken,
			Listen:        cfg.Admin.Listen,
			Addr:          adminL.Addr(),
			Hosts:         cfg.Admin.Hosts,
			Logger:        logger,
		})
		listeners = append(listeners, adminL)
		adminL = nil // the server owns it now
		servers = append(servers, &http.Server{
			Handler:           adminHandler,
			ReadHeaderTimeout: 10 * time.Second,
			// Admin responses are small; a client that reads a metrics page
			// for longer than this is stuck.
			WriteTimeout:   time.Minute,
			IdleTimeout:    idleTimeout,
			MaxHeaderBytes: maxHeaderBytes,
			ErrorLog:       errorLog,
		})
		names = append(names, "admin")
	}
	addrs.EtcdEndpoints, addrs.EmbeddedEtcd = endpoints, embedded != nil

	serveErr := make(chan error, len(servers))
	for i, srv := range servers {
		l, name := listeners[i], names[i]
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("%s listener: %w", name, err)
			}
		}()
	}
	listeners = nil // the servers own them now

	// The reclaimer campaigns only once the gateway serves: a leader must
	// be reachable on its admin address, which its election value names.
	stopReclaimer := rec.start(ctx, logger)
	defer stopReclaimer()

	etcdMode := "external"
	if embedded != nil {
		etcdMode = "embedded"
	}
	logger.Info("sweepgate serving",
		"version", build.Version,
		"listen", addrs.S3,
		"tls_listen", addrs.S3TLS,
		"admin_listen", addrs.Admin,
		"admin_token", tokenFrom,
		"etcd", etcdMode,
		"etcd_endpoints", endpoints,
		"etcd_prefix", cfg.Etcd.Prefix,
		"backend", cfg.Backend.Endpoint,
		"reclaimer", rec.info.Mode(),
		"reclaimer_id", rec.info.ID,
	)
	if onServing != nil {
		onServing(addrs)
	}

	var cause error
	select {
	case <-ctx.Done():
		logger.Info("shutting down: signal received; finishing in-flight requests", "timeout", shutdownTimeout.String())
	case cause = <-serveErr:
		logger.Error("shutting down: a listener failed", "err", cause)
	case cause = <-etcdDied:
		cause = fmt.Errorf("embedded etcd failed: %w", cause)
		logger.Error("shutting down: embedded etcd failed", "err", cause)
	}
	draining.Store(true)
	// The reclaimer stops alongside the listeners: its pass ends and it
	// resigns, so that another process leads at once instead of after the
	// election TTL, and an admin request waiting for a pass gets its
	// answer instead of holding up the shutdown.
	reclaimerStopped := make(chan struct{})
	go func() {
		defer close(reclaimerStopped)
		stopReclaimer()
	}()
	if err := shutdown(servers, names, logger); err != nil && cause == nil {
		cause = err
	}
	<-reclaimerStopped
	// The deferred closes now stop the etcd client, then the embedded
	// server: after the listeners, so that no request loses its store.
	return cause
}

// serveAdminToken returns the admin token of an admin listener, and where
// it comes from for the start-up line: admin.token or admin.token_file
// when one is set, else the token generated at the first start and kept
// in the data directory (config.GeneratedAdminTokenPath), so that the
// admin API never runs without one. Without an admin listener there is
// nothing to protect and nothing is generated. The token is never logged,
// only where it is kept.
func serveAdminToken(cfg *config.Config, listening bool, logger *slog.Logger) (tok config.Secret, from string, err error) {
	tok, err = cfg.AdminToken()
	switch {
	case err != nil:
		return "", "", fmt.Errorf("admin.token_file: %w", err)
	case !listening:
		return tok, "none (admin.listen is off)", nil
	case cfg.Admin.Token != "":
		return tok, "admin.token", nil
	case tok != "":
		return tok, "admin.token_file", nil
	}
	path := cfg.GeneratedAdminTokenPath()
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	tok, created, err := config.LoadOrCreateAdminToken(path)
	if err != nil {
		return "", "", fmt.Errorf("admin token (neither admin.token nor admin.token_file is set, so serve keeps one in etcd.embedded.data_dir): %w", err)
	}
	if created {
		logger.Info("admin API: generated an admin token, since neither admin.token nor admin.token_file is set; "+
			"the sweepgate commands read it through the same configuration, other clients send it as Authorization: Bearer",
			"token_file", path)
	} else {
		logger.Info("admin API: using the admin token generated at an earlier start", "token_file", path)
	}
	return tok, "generated: " + path, nil
}

// shutdown stops all servers at once, letting in-flight requests finish for
// up to shutdownTimeout, then closes what is left.
func shutdown(servers []*http.Server, names []string, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, srv := range servers {
		wg.Go(func() {
			if err := srv.Shutdown(ctx); err != nil {
				logger.Warn("requests still running at the shutdown deadline were cut off", "listener", names[i], "err", err)
				srv.Close()
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s listener: %w", names[i], err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func gatewayCredentials(creds []config.Credential) []sigv4.Credential {
	out := make([]sigv4.Credential, len(creds))
	for i, c := range creds {
		out[i] = sigv4.Credential{AccessKey: c.AccessKey, SecretKey: string(c.SecretKey), Principal: c.Principal}
	}
	return out
}

// buildInfoGauge exports the running version as a constant 1 with labels,
// the Prometheus convention for joining other series with build details.
func buildInfoGauge(b buildInfo) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sweepgate",
		Name:      "build_info",
		Help:      "Always 1; its labels say which build is running.",
		ConstLabels: prometheus.Labels{
			"version":   b.Version,
			"revision":  b.Revision,
			"goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// httpErrorLog routes net/http's own error messages to logger. TLS
// handshake failures, which port scanners and TCP health probes cause all
// day, go to debug; everything else (accept errors, handler panics) is a
// warning.
func httpErrorLog(logger *slog.Logger) *log.Logger {
	return log.New(httpLogWriter{logger}, "", 0)
}

type httpLogWriter struct{ logger *slog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		level = slog.LevelDebug
	}
	w.logger.Log(context.Background(), level, msg, "component", "http")
	return len(p), nil
}

// faultEnv names the test hook that stops the process at a chosen point of a
// destructive path (multipart.Fault* names), to test crash recovery. It is
// an environment variable, not a setting: nobody should set it by accident.
const faultEnv = "SWEEPGATE_TEST_FAULT"

// testFault returns the hook armed by faultEnv, or nil. The point names of
// multipart (multipart.Fault*) and of the reclaimer (reclaim.Fault*) are
// distinct, so one variable serves both.
func testFault(logger *slog.Logger) func(string) {
	point := os.Getenv(faultEnv)
	if point == "" {
		return nil
	}
	logger.Warn("test fault hook armed: the process kills itself at this point", "point", point)
	return func(at string) {
		if at == point {
			logger.Warn("test fault hook: killing the process", "point", at)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// sessionsConfig returns the gateway's multipart session settings over
// store, or nil when sessions are off.
func sessionsConfig(cfg *config.Config, store *etcdstore.Store, fault func(string)) *gateway.SessionsConfig {
	if !cfg.Sessions.Enabled {
		return nil
	}
	sc := &gateway.SessionsConfig{
		Store:                store,
		EnforceOwnership:     cfg.Sessions.EnforceOwnership,
		AdminPrincipals:      cfg.Sessions.AdminPrincipals,
		IdempotencyRetention: cfg.Sessions.IdempotencyRetention,
		CompleteHold:         cfg.Sessions.CompleteHold,
		Fault:                fault,
	}
	return sc
}

// digestsConfig returns the gateway's reference recording settings, or nil
// when no content-addressed layout is configured (config refuses one
// without sessions, whose store it shares).
func digestsConfig(cfg *config.Config, store *etcdstore.Store, layout *cas.Layout) *gateway.DigestsConfig {
	if layout.Empty() || store == nil {
		return nil
	}
	return &gateway.DigestsConfig{
		Store:           store,
		Layout:          layout,
		TrashWindow:     cfg.Digests.TrashWindow,
		AdminPrincipals: cfg.Sessions.AdminPrincipals,
	}
}

// reclaimDigests returns the digest sweep's settings, or nil when no
// content-addressed layout is configured.
func reclaimDigests(cfg *config.Config, layout *cas.Layout) *reclaim.DigestsConfig {
	if layout.Empty() || len(layout.Namespaces) == 0 {
		return nil
	}
	d := cfg.Digests
	return &reclaim.DigestsConfig{
		Layout:             layout,
		PlacementGrace:     d.PlacementGrace,
		Planes:             d.Planes,
		MaxDelete:          d.MaxDelete,
		MaxDeleteFraction:  d.MaxDeleteFraction,
		RebuildInterval:    d.RebuildInterval,
		TombstoneRetention: d.TombstoneRetention,
	}
}

// serveReclaimer is serve's reclaimer: r is nil when sessions are off.
type serveReclaimer struct {
	r    *reclaim.Reclaimer
	info admin.ReclaimerInfo
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

// newReclaimer builds the reclaimer over the gateway's store, session
// service and backend client. It is built whenever sessions are on, so that
// a replica with reclaim.enabled off still answers status, plans and orphan
// lists; only start decides whether it campaigns.
func newReclaimer(cfg *config.Config, store *etcdstore.Store, gw *gateway.Gateway, layout *cas.Layout, reg prometheus.Registerer,
	logger *slog.Logger, progress func(reclaim.Progress), fault func(string), adminAddr string) (serveReclaimer, error) {
	rc := cfg.Reclaim
	info := admin.ReclaimerInfo{ID: reclaimerID(adminAddr), Enabled: rc.Enabled, DryRun: rc.DryRun}
	sessions := gw.Sessions()
	if sessions == nil {
		info.Off, info.Enabled = "sessions.enabled is false, so there are no sessions to reclaim by", false
		return serveReclaimer{info: info}, nil
	}
	r, err := reclaim.New(reclaim.Config{
		Store:             store,
		Sessions:          sessions,
		Backend:           gw.Backend(),
		ID:                info.ID,
		ElectionTTL:       rc.ElectionTTL,
		Grace:             rc.Grace,
		DeleteAfter:       rc.DeleteAfter,
		StuckLimit:        rc.StuckLimit,
		ClockSkew:         rc.ClockSkew,
		MaxDelete:         rc.MaxDelete,
		MaxDeleteFraction: rc.MaxDeleteFraction,
		DryRun:            rc.DryRun,
		Interval:          rc.Interval,
		BatchSize:         int(rc.BatchSize),
		Parallel:          int(rc.Parallel),
		BackendTimeout:    rc.BackendTimeout,
		ReconcileAfter:    cfg.Sessions.ReconcileAfter,
		// Only serve's reconciler prunes terminal sessions, with
		// sessions.retention; a pass keeps them.
		SessionRetention:   0,
		MissingCheckBudget: rc.MissingCheckBudget,
		Logger:             logger.With("component", "reclaimer"),
		Metrics:            reg,
		Fault:              fault,
		Progress:           progress,
		Digests:            reclaimDigests(cfg, layout),
	})
	if err != nil {
		return serveReclaimer{}, fmt.Errorf("reclaimer: %w", err)
	}
	return serveReclaimer{r: r, info: info}, nil
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
		_ = s.r.Run(rctx) // it only returns when rctx ends
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

// runReconciler settles sessions left unclear at start-up and then every
// reconcile interval, until ctx ends.
func runReconciler(ctx context.Context, sessions *multipart.Service, cfg config.Sessions, logger *slog.Logger) {
	opts := multipart.ReconcileOptions{
		After:      cfg.ReconcileAfter,
		StuckLimit: cfg.StuckLimit,
		Retention:  cfg.Retention,
		Actor:      "reconciler",
	}
	run := func() {
		report, err := sessions.Reconcile(ctx, opts)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, multipart.ErrUnsettled):
			// The run finished; some sessions wait for the next one.
			logger.Warn("reconciler left sessions unsettled", "err", err, "report", report)
		case err != nil:
			logger.Error("reconciler run failed", "err", err, "report", report)
		case report.Aborted+report.Completed+report.Flagged+report.Pruned > 0:
			logger.Info("reconciler run", "report", report)
		default:
			logger.Debug("reconciler run", "report", report)
		}
	}
	run()
	if cfg.ReconcileInterval <= 0 {
		return
	}
	t := time.NewTicker(cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			run()
		}
	}
}
