// Package etcdtest gives a test a real etcd: an embedded server on free
// loopback ports with its data in the test's temporary directory, stopped
// when the test ends.
package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Start starts an embedded etcd for t and returns the server and a client of
// it; both are closed when t ends.
func Start(t testing.TB) (*etcdstore.Embedded, *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := etcdstore.StartEmbedded(ctx, etcdstore.EmbeddedConfig{
		DataDir:   t.TempDir(),
		ClientURL: "http://127.0.0.1:0",
		PeerURL:   "http://127.0.0.1:0",
	})
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
