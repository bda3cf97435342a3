// Package etcdtest gives a test a real etcd: an embedded server on free
// loopback ports with its data in the test's temporary directory, stopped
// when the test ends.
package etcdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Config is what a test may choose of its etcd; the zero value is a fresh
// server with etcd's defaults.
type Config struct {
	// DataDir holds the server's data: a test that restarts etcd on the same
	// data passes the same directory each time. Empty, Start uses a new
	// directory of the test's.
	DataDir string
	// QuotaBackendBytes caps the database size (etcd's default if 0).
	QuotaBackendBytes int64
}

// Start starts an embedded etcd for t and returns the server and a client of
// it; both are closed when t ends.
func Start(t testing.TB) (*etcdstore.Embedded, *clientv3.Client) {
	t.Helper()
	return StartWith(t, Config{})
}

// StartWith is Start with the choices of cfg.
func StartWith(t testing.TB, cfg Config) (*etcdstore.Embedded, *clientv3.Client) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := Serve(ctx, cfg)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(e.Close)
	cli, err := etcdstore.Connect(ctx, e.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatalf("connect to embedded etcd: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return e, cli
}

// Serve starts the same embedded etcd outside a test, for a process that
// serves it to a test in another (a benchmark keeping etcd's memory out of
// its own); the caller closes it. cfg.DataDir is required.
func Serve(ctx context.Context, cfg Config) (*etcdstore.Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("etcdtest: no data directory")
	}
	return etcdstore.StartEmbedded(ctx, etcdstore.EmbeddedConfig{
		DataDir:           cfg.DataDir,
		ClientURL:         "http://127.0.0.1:0",
		PeerURL:           "http://127.0.0.1:0",
		QuotaBackendBytes: cfg.QuotaBackendBytes,
	})
}

// NewStore starts an embedded etcd for t and returns a store over it with
// its keys under prefix.
func NewStore(t testing.TB, prefix string) *etcdstore.Store {
	t.Helper()
	_, cli := Start(t)
	keys, err := etcdstore.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return etcdstore.NewStore(cli, keys)
}
