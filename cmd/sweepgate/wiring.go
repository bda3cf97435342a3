package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/clientip"
	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/migrate"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// What serve builds its parts from: the configuration turned into the
// gateway's settings and the admin token, the process-wide logging and
// metrics, the test fault hook, and the session reconciler.

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

func gatewayCredentials(creds []config.Credential) []sigv4.Credential {
	out := make([]sigv4.Credential, len(creds))
	for i, c := range creds {
		out[i] = sigv4.Credential{AccessKey: c.AccessKey, SecretKey: string(c.SecretKey), Principal: c.Principal, Backend: c.Backend}
	}
	return out
}

// backendIdentities are the backend identities cfg configures:
// backend.access_key as backend.DefaultIdentity, every identity of
// backend.identities, and reclaim.backend_identity as the background one.
// Signers of reuse whose key did not change are kept.
func backendIdentities(cfg *config.Config, reuse *backend.Identities) (*backend.Identities, error) {
	keys := make(map[string]backend.Key, len(cfg.Backend.Identities)+1)
	for _, id := range cfg.Backend.Identities {
		keys[id.Name] = backend.Key{AccessKey: id.AccessKey, SecretKey: string(id.SecretKey)}
	}
	keys[backend.DefaultIdentity] = backend.Key{AccessKey: cfg.Backend.AccessKey, SecretKey: string(cfg.Backend.SecretKey)}
	return backend.NewIdentities(keys, cfg.Reclaim.BackendIdentity, cfg.Backend.Region, reuse)
}

// gatewayKeys is the gateway's key set as cfg configures it: the client
// credentials and the backend identities. A reload installs the one of a
// freshly loaded configuration with Gateway.PrepareKeys, reusing the
// signers of be's identities.
func gatewayKeys(cfg *config.Config, be *backend.Client) (gateway.Keys, error) {
	ids, err := backendIdentities(cfg, be.Identities())
	if err != nil {
		return gateway.Keys{}, err
	}
	return gateway.Keys{Clients: gatewayCredentials(cfg.ClientCredentials()), Identities: ids}, nil
}

// newBackendClient builds the one signed connection to the backend that
// the gateway, the session and digest services, the reconciler and the
// reclaimer share. tracer, when set, traces its calls made under a span.
func newBackendClient(cfg *config.Config, clock func() time.Time, tracer trace.Tracer) (*backend.Client, error) {
	roots, err := cfg.BackendRootCAs()
	if err != nil {
		return nil, err
	}
	ids, err := backendIdentities(cfg, nil)
	if err != nil {
		return nil, err
	}
	return backend.New(backend.Config{Endpoint: cfg.Backend.Endpoint, RootCAs: roots, Identities: ids, Now: clock, Tracer: tracer})
}

// buildInfoGauge exports the running version as a constant 1 with labels,
// the Prometheus convention for joining other series with build details.
func buildInfoGauge(b cli.BuildInfo) prometheus.Collector {
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

// newSessions builds the multipart session service over store and be, or
// returns nil when sessions are off.
func newSessions(cfg *config.Config, store *etcdstore.Store, be *backend.Client, fault func(string),
	clock func() time.Time, logger *slog.Logger, reg prometheus.Registerer) (*multipart.Service, error) {
	if !cfg.Sessions.Enabled {
		return nil, nil
	}
	return multipart.New(multipart.Config{
		Store:                store,
		Backend:              be,
		EnforceOwnership:     cfg.Sessions.EnforceOwnership,
		AdminPrincipals:      cfg.Sessions.AdminPrincipals,
		IdempotencyRetention: cfg.Sessions.IdempotencyRetention,
		CompleteHold:         cfg.Sessions.CompleteHold,
		Fault:                fault,
		Now:                  clock,
		Logger:               logger,
		Metrics:              reg,
	})
}

// newDigestService builds the reference recording of the content-addressed
// layout over store, be and sessions, or returns nil when no layout is
// configured (config refuses one without sessions, whose store it shares).
func newDigestService(cfg *config.Config, store *etcdstore.Store, layout *cas.Layout, be *backend.Client, sessions *multipart.Service,
	clock func() time.Time, logger *slog.Logger, reg prometheus.Registerer) (*digests.Service, error) {
	if layout.Empty() || store == nil {
		return nil, nil
	}
	sc := digests.ServiceConfig{
		Store:           store,
		Layout:          layout,
		TrashWindow:     cfg.Digests.TrashWindow,
		AdminPrincipals: cfg.Sessions.AdminPrincipals,
		Sessions:        sessions,
		Backend:         be,
		Now:             clock,
		Logger:          logger,
		Metrics:         reg,
	}
	if sessions != nil {
		sc.Parts = store
	}
	return digests.NewService(sc)
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

// migrator returns the migrator of the keyspace of store (a shard's), nil
// when sessions are off. Each shard has its own schema record and
// migration, which its own reclaimer runs under its own term.
func (s *server) migrator(store *etcdstore.Store) *migrate.Migrator {
	if store == nil {
		return nil
	}
	return &migrate.Migrator{Store: store, Now: s.clock, Log: s.logger}
}

// reservedKeys are the key prefixes of sweepgate's own records on the
// backend, which no client may change through the gateway: the restore
// witness's default prefix (in every bucket) and its configured key.
func reservedKeys(cfg *config.Config) []string {
	keys := []string{reclaim.DefaultWitnessKeyPrefix + "/"}
	if k := cfg.Reclaim.WitnessKey; k != "" {
		keys = append(keys, k)
	}
	return keys
}

// proxyListener returns l reading PROXY protocol headers from trusted
// proxies when proxy_protocol is on, and l itself otherwise. The trusted
// proxies are the gateway's, which a reload replaces.
func (s *server) proxyListener(l net.Listener) net.Listener {
	if !s.cfg.ProxyProtocol {
		return l
	}
	return &clientip.Listener{
		Listener:      l,
		Trusted:       s.gw.Trusted,
		HeaderTimeout: readHeaderTimeout,
		Refused: func(peer net.Addr, err error) {
			s.logger.Warn("S3 connection refused at its PROXY protocol header", "peer", peer.String(), "err", err)
		},
	}
}

// gatewayLimits are the gateway's limits in cfg.
func gatewayLimits(cfg *config.Config) gateway.Limits {
	return gateway.Limits{
		MaxInFlight:              cfg.Limits.MaxInFlight,
		MaxInFlightPerCredential: cfg.Limits.MaxInFlightPerCredential,
		BodyReadTimeout:          cfg.Limits.BodyReadTimeout,
	}
}

// reloadGateway prepares a reload of the gateway's keys, trusted proxies
// and limits from next; the function it returns installs them.
func (s *server) reloadGateway(next *config.Config) (func(), error) {
	keys, err := gatewayKeys(next, s.backend)
	if err != nil {
		return nil, fmt.Errorf("the backend identities: %w", err)
	}
	install, err := s.gw.PrepareKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("the keys: %w", err)
	}
	trusted, err := next.Trusted()
	if err != nil {
		return nil, err
	}
	return func() {
		install()
		s.gw.SetTrusted(trusted)
		s.gw.SetLimits(gatewayLimits(next))
	}, nil
}
