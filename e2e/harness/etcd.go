package harness

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdClient returns a client of the gateway's embedded etcd, to read and
// write sweepgate's records behind its back. It survives restarts of the
// gateway (it reconnects to the same URL); t.Cleanup closes it.
func (g *Gateway) EtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	if g.EtcdClientURL == "" {
		t.Fatalf("harness: the gateway runs no embedded etcd; connect to Options.EtcdEndpoints instead")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{g.EtcdClientURL},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("harness: etcd client for %s: %v", g.EtcdClientURL, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
