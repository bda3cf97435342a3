package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
)

const (
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

func (c *app) serveHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: sweepgate serve [flags]

Runs the S3 gateway: S3 clients connect to listen (and tls_listen), and
operators to admin.listen for the status page, /metrics, /healthz, /readyz
and the admin API that 'sweepgate sessions', 'reclaim', 'frontier', 'trash'
and 'explain' use (over HTTPS with admin.tls_cert_file). 'sweepgate config
check' takes the same flags and validates them without serving. Upload sessions and digest references are kept in etcd:
an embedded single-node etcd unless etcd.endpoints names a cluster. Unless
reclaim.enabled is off, it also campaigns for the reclaimer's lead and,
while leading, reclaims abandoned uploads and, with digests.namespaces set,
unreferenced blobs. SIGINT or SIGTERM stops it gracefully: a leading
reclaimer hands over at once, /readyz answers 503, the listeners serve on
for shutdown.drain_delay, then stop accepting and let in-flight requests
finish for up to shutdown.timeout. A second signal ends it at once. SIGHUP
(or POST /admin/v1/reload) reads the configuration again and applies the
client credentials, the backend's keys and the TLS certificates without
dropping a connection; a configuration it cannot apply changes nothing.

`)
	config.WriteHelp(w)
}

func (c *app) serve(ctx context.Context, args []string) int {
	cfg, err := config.Load(args, c.environ)
	if err != nil {
		var usage *config.UsageError
		switch {
		case errors.Is(err, flag.ErrHelp):
			c.serveHelp(c.stdout)
			return cli.ExitOK
		case errors.As(err, &usage):
			return cli.UsageError(c.stderr, "serve", err)
		}
		fmt.Fprintf(c.stderr, "sweepgate serve: invalid configuration:\n  %s\nRun 'sweepgate serve --help' for every setting.\n",
			strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return cli.ExitError
	}
	sink := newLogSink(c.stderr, logSinkLimit)
	defer sink.Close()
	logs := serveLogs{
		main:     newLogger(sink, cfg),
		requests: newRequestLogger(sink.droppable(), cfg),
		sink:     sink,
	}
	logger := logs.main
	for _, name := range config.UnknownEnv(c.environ) {
		if name == cli.AdminURLEnv || name == cli.AdminCAEnv || name == faultEnv || name == clockOffsetEnv {
			continue // the admin commands' and the tests', not settings
		}
		logger.Warn("ignoring unknown environment variable; no setting has this name", "name", name)
	}
	logger.Debug("configuration", "config", cfg)
	load := func() (*config.Config, error) { return config.Load(args, c.environ) }
	if err := runServe(ctx, cfg, load, logs, cli.ReadBuildInfo(c.version, c.revision), c.onServing); err != nil {
		logger.Error("sweepgate serve stopped", "err", err)
		return cli.ExitError
	}
	logger.Info("sweepgate stopped")
	return cli.ExitOK
}

// serveLogs are serve's loggers. Both write through one logSink, so that
// their lines keep their order: main's lines are never dropped (audit
// lines among them), requests' (the gateway's one line per request) are
// when the sink is full.
type serveLogs struct {
	main, requests *slog.Logger
	sink           *logSink
}

// newLogger returns serve's logger: cfg's format, and cfg's level for
// every line but the audit lines, which no level drops.
func newLogger(w io.Writer, cfg *config.Config) *slog.Logger {
	return slog.New(audit.KeepAudit(logHandler(w, cfg, slog.LevelDebug), cfg.LogLevel()))
}

// newRequestLogger returns the logger of the gateway's per-request line,
// which carries no audit line: a plain level filter, so that below the
// level the gateway sees it disabled and builds no line at all.
func newRequestLogger(w io.Writer, cfg *config.Config) *slog.Logger {
	return slog.New(logHandler(w, cfg, cfg.LogLevel()))
}

// logHandler returns a handler in cfg's format passing level and above.
func logHandler(w io.Writer, cfg *config.Config, level slog.Leveler) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// runServe runs the gateway until ctx is done or something it depends on
// fails. It returns nil after a clean, complete shutdown.
// load reads the configuration again for a reload.
func runServe(ctx context.Context, cfg *config.Config, load func() (*config.Config, error), logs serveLogs, build cli.BuildInfo, onServing func(serving)) error {
	s, err := newServer(ctx, cfg, load, logs, build)
	if err != nil {
		return err
	}
	defer s.close()
	return s.run(ctx, onServing)
}
