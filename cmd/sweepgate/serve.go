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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
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
	// readyCheckTimeout bounds each dependency check behind /readyz, below
	// the usual probe timeouts.
	readyCheckTimeout = 3 * time.Second
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
operators to admin.listen for /metrics, /healthz, /readyz and the admin API
that 'sweepgate sessions' reads. Upload sessions are kept in etcd: an
embedded single-node etcd unless etcd.endpoints names a cluster. SIGINT or
SIGTERM stops it gracefully.

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
		if name == adminURLEnv {
			continue // the sessions command's, not a setting
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
		Sessions:         sessionsConfig(cfg, store, logger),
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
	// the start instead of leaving a half-running process.
	var (
		servers   []*http.Server
		listeners []net.Listener
		names     []string
		addrs     serving
	)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
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
	if cfg.Admin.Listen != "" {
		l, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin.listen: %w", err)
		}
		admin := &adminHandler{
			registry: reg,
			draining: &draining,
			checks: []readyCheck{
				{"etcd", func(ctx context.Context) error { return etcdstore.Health(ctx, etcdClient) }},
				{"backend", gw.CheckBackend},
			},
			sessions: sessionsAPI{store: store, log: logger},
		}
		listeners = append(listeners, l)
		servers = append(servers, &http.Server{
			Handler:           admin.mux(),
			ReadHeaderTimeout: 10 * time.Second,
			// Admin responses are small; a client that reads a metrics page
			// for longer than this is stuck.
			WriteTimeout:   time.Minute,
			IdleTimeout:    idleTimeout,
			MaxHeaderBytes: maxHeaderBytes,
			ErrorLog:       errorLog,
		})
		names = append(names, "admin")
		addrs.Admin = l.Addr().String()
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

	etcdMode := "external"
	if embedded != nil {
		etcdMode = "embedded"
	}
	logger.Info("sweepgate serving",
		"version", build.Version,
		"listen", addrs.S3,
		"tls_listen", addrs.S3TLS,
		"admin_listen", addrs.Admin,
		"etcd", etcdMode,
		"etcd_endpoints", endpoints,
		"etcd_prefix", cfg.Etcd.Prefix,
		"backend", cfg.Backend.Endpoint,
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
	if err := shutdown(servers, names, logger); err != nil && cause == nil {
		cause = err
	}
	// The deferred closes now stop the etcd client, then the embedded
	// server: after the listeners, so that no request loses its store.
	return cause
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

// sessionsConfig returns the gateway's multipart session settings over
// store, or nil when sessions are off.
func sessionsConfig(cfg *config.Config, store *etcdstore.Store, logger *slog.Logger) *gateway.SessionsConfig {
	if !cfg.Sessions.Enabled {
		return nil
	}
	sc := &gateway.SessionsConfig{
		Store:                store,
		EnforceOwnership:     cfg.Sessions.EnforceOwnership,
		AdminPrincipals:      cfg.Sessions.AdminPrincipals,
		IdempotencyRetention: cfg.Sessions.IdempotencyRetention,
		CompleteHold:         cfg.Sessions.CompleteHold,
	}
	if point := os.Getenv(faultEnv); point != "" {
		logger.Warn("test fault hook armed: the process kills itself at this point", "point", point)
		sc.Fault = func(at string) {
			if at == point {
				logger.Warn("test fault hook: killing the process", "point", at)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
	}
	return sc
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
