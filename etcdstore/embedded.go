package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
)

// Defaults for EmbeddedConfig. The client and peer URLs are etcd's own
// well-known ports on loopback, so a single-node gateway never exposes its
// store to the network unless told to.
const (
	DefaultClientURL               = "http://127.0.0.1:2379"
	DefaultPeerURL                 = "http://127.0.0.1:2380"
	DefaultAutoCompactionMode      = "periodic"
	DefaultAutoCompactionRetention = "1h"
	// DefaultQuotaBackendBytes is etcd's own default (2 GiB), spelled out so
	// that the limit an operator runs into is visible in our code. sweepgate
	// keeps small records and compacts hourly, so this is plenty for millions
	// of sessions.
	DefaultQuotaBackendBytes int64 = 2 << 30
	DefaultStartTimeout            = time.Minute
	defaultMemberName              = "sweepgate"
)

// EmbeddedConfig describes an etcd server that runs inside the sweepgate
// process, for single-node deployments and tests that want the real server.
// The zero value of every field but DataDir selects the default.
type EmbeddedConfig struct {
	// DataDir holds etcd's WAL and database; it survives restarts.
	DataDir string
	// ClientURL is where clients connect, e.g. http://127.0.0.1:2379. Port 0
	// picks a free port, which Endpoints then reports; tests use that to
	// run many servers side by side.
	ClientURL string
	// PeerURL is etcd's raft peer address. A single node never dials it, but
	// etcd still binds it. Port 0 picks a free port.
	PeerURL string
	// AutoCompactionMode is "periodic" (retention is a duration such as "1h")
	// or "revision" (retention is a count of revisions). Compaction keeps
	// etcd's history, and so its database, from growing without bound.
	AutoCompactionMode string
	// AutoCompactionRetention is how much history to keep; "0" disables
	// compaction.
	AutoCompactionRetention string
	// QuotaBackendBytes caps the database size. Past it etcd raises a NOSPACE
	// alarm and refuses writes, which Health reports.
	QuotaBackendBytes int64
	// StartTimeout bounds how long StartEmbedded waits for the server to
	// become ready (for example while it replays a long WAL).
	StartTimeout time.Duration
	// Logger receives etcd's log records (its info records at debug level).
	// Nil discards them.
	Logger *slog.Logger
}

// Embedded is a running in-process etcd server.
type Embedded struct {
	etcd      *embed.Etcd
	endpoints []string
	closing   *atomic.Bool
	closeOnce sync.Once
}

// StartEmbedded starts an etcd server with cfg and waits until it serves
// clients, ctx is done, or cfg.StartTimeout passes. A data directory that
// already holds etcd data is reopened with its data intact.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	closing := new(atomic.Bool)
	ecfg, err := embedConfig(cfg, closing)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ecfg)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: start embedded etcd in %s: %w", cfg.DataDir, err)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	abandon := func() {
		closing.Store(true)
		e.Close()
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		abandon()
		return nil, fmt.Errorf("etcdstore: embedded etcd failed while starting: %w", err)
	case <-timer.C:
		abandon()
		return nil, fmt.Errorf("etcdstore: embedded etcd not ready after %s", timeout)
	case <-ctx.Done():
		abandon()
		return nil, fmt.Errorf("etcdstore: waiting for embedded etcd: %w", ctx.Err())
	}

	// Report the addresses actually bound, not the configured ones, so that a
	// configured port 0 yields a usable endpoint.
	endpoints := make([]string, 0, len(e.Clients))
	scheme := "http"
	if len(ecfg.ListenClientUrls) > 0 {
		scheme = ecfg.ListenClientUrls[0].Scheme
	}
	for _, l := range e.Clients {
		endpoints = append(endpoints, scheme+"://"+l.Addr().String())
	}
	return &Embedded{etcd: e, endpoints: endpoints, closing: closing}, nil
}

func embedConfig(cfg EmbeddedConfig, closing *atomic.Bool) (*embed.Config, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("etcdstore: embedded etcd needs a data directory")
	}
	clientURL, err := bindURL("client", cfg.ClientURL, DefaultClientURL)
	if err != nil {
		return nil, err
	}
	peerURL, err := bindURL("peer", cfg.PeerURL, DefaultPeerURL)
	if err != nil {
		return nil, err
	}
	mode := cfg.AutoCompactionMode
	if mode == "" {
		mode = DefaultAutoCompactionMode
	}
	retention := cfg.AutoCompactionRetention
	if retention == "" {
		retention = DefaultAutoCompactionRetention
	}
	if err := CheckAutoCompaction(mode, retention); err != nil {
		return nil, err
	}
	quota := cfg.QuotaBackendBytes
	if quota <= 0 {
		quota = DefaultQuotaBackendBytes
	}

	ec := embed.NewConfig()
	ec.Name = defaultMemberName
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.AutoCompactionMode = mode
	ec.AutoCompactionRetention = retention
	ec.QuotaBackendBytes = quota
	// embed.NewConfig leaves this at zero, which makes etcd log every request
	// as slow; etcd's own command line defaults it to 300ms.
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(cfg.Logger, "etcd", closing))
	return ec, nil
}

// CheckBindURL reports whether raw is a URL the embedded server can listen
// on, so that configuration can be refused before anything starts.
func CheckBindURL(raw string) error {
	if raw == "" {
		return errors.New("etcdstore: empty URL")
	}
	_, err := bindURL("listen", raw, "")
	return err
}

// bindURL parses an etcd listen URL. etcd binds only IP literals (and
// "localhost"), so a host name is refused here with a clearer message than
// etcd's own.
func bindURL(what, raw, def string) (*url.URL, error) {
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: embedded etcd %s URL %q: %w", what, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("etcdstore: embedded etcd %s URL %q: scheme must be http or https", what, raw)
	}
	if u.Scheme == "https" {
		// Serving TLS needs certificates that this package does not take yet.
		return nil, fmt.Errorf("etcdstore: embedded etcd %s URL %q: https is not supported for the embedded server", what, raw)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: embedded etcd %s URL %q: need host:port: %w", what, raw, err)
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return nil, fmt.Errorf("etcdstore: embedded etcd %s URL %q: host must be an IP address or localhost", what, raw)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("etcdstore: embedded etcd %s URL %q: bad port: %w", what, raw, err)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("etcdstore: embedded etcd %s URL %q: must not have a path", what, raw)
	}
	return u, nil
}

// CheckAutoCompaction reports whether mode and retention are values etcd
// accepts, so that configuration can be refused before anything starts.
func CheckAutoCompaction(mode, retention string) error {
	switch mode {
	case "periodic":
		// etcd reads a bare number as hours.
		if _, err := strconv.ParseUint(retention, 10, 63); err == nil {
			return nil
		}
		d, err := time.ParseDuration(retention)
		if err != nil || d < 0 {
			return fmt.Errorf("etcdstore: auto-compaction retention %q: periodic mode needs a duration such as \"1h\" or \"30m\"", retention)
		}
		return nil
	case "revision":
		if _, err := strconv.ParseUint(retention, 10, 63); err != nil {
			return fmt.Errorf("etcdstore: auto-compaction retention %q: revision mode needs a whole number of revisions", retention)
		}
		return nil
	default:
		return fmt.Errorf("etcdstore: auto-compaction mode %q: must be periodic or revision", mode)
	}
}

// Endpoints returns the client URLs the server listens on, with the ports
// actually bound.
func (e *Embedded) Endpoints() []string {
	return append([]string(nil), e.endpoints...)
}

// Err reports a fatal error of the running server, such as a failed listener.
// The process should stop serving when it receives one: the store is gone.
// The channel is closed by Close.
func (e *Embedded) Err() <-chan error {
	return e.etcd.Err()
}

// Close stops the server gracefully and releases its data directory. It is
// safe to call more than once.
func (e *Embedded) Close() {
	// embed.Etcd.Close panics when called twice.
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
	})
}

// Client returns a client of the server that calls it in process, through
// etcd's own adapters (v3client): no gRPC, no socket, no encoding, so an
// etcd request costs the gateway a function call where a client over the
// loopback connection costs two gRPC ends. Requests behave as over the
// network (the server's quota, contexts and errors), the server's client
// URL still serves other clients, and Close leaves the server running.
// wrapKV, when not nil, wraps the KV service the client calls (tracing
// spans of its calls, which no gRPC instrumentation sees in process).
func (e *Embedded) Client(wrapKV func(pb.KVClient) pb.KVClient) *clientv3.Client {
	cli := v3client.New(e.etcd.Server)
	if wrapKV != nil {
		kv := adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(e.etcd.Server))
		cli.KV = clientv3.NewKVFromKVClient(wrapKV(kv), cli)
	}
	return cli
}
