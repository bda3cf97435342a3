//go:build integration

package etcdstore

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
)

// txnCountingKV counts the calls of the KV service it wraps.
type txnCountingKV struct {
	pb.KVClient
	txns atomic.Int64
}

func (k *txnCountingKV) Txn(ctx context.Context, r *pb.TxnRequest, opts ...grpc.CallOption) (*pb.TxnResponse, error) {
	k.txns.Add(1)
	return k.KVClient.Txn(ctx, r, opts...)
}

// TestEmbeddedClientInProcess checks the in-process client of the
// embedded member against a client over its client URL: what one writes
// the other reads, a transaction, a lease and an election (what the
// gateway's store, in-flight records and reclaimer use) work through it,
// its KV calls go through the wrapper, a watch sees the other client's
// write, and closing it leaves the server serving.
func TestEmbeddedClientInProcess(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, filepath.Join(t.TempDir(), "etcd"), nil)
	t.Cleanup(e.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	net, err := Connect(ctx, e.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer net.Close()
	kv := &txnCountingKV{}
	in := e.Client(func(inner pb.KVClient) pb.KVClient { kv.KVClient = inner; return kv })

	if err := Health(ctx, in); err != nil {
		t.Fatalf("Health through the in-process client: %v", err)
	}
	watch := in.Watch(ctx, "/in-process/watched")
	if _, err := net.Put(ctx, "/in-process/watched", "from the network"); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-watch:
		if len(w.Events) != 1 || string(w.Events[0].Kv.Value) != "from the network" {
			t.Errorf("watch through the in-process client: %+v", w)
		}
	case <-ctx.Done():
		t.Fatal("the in-process client's watch saw no event")
	}

	lease, err := in.Grant(ctx, 5)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	txn, err := in.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("/in-process/k"), "=", 0)).
		Then(clientv3.OpPut("/in-process/k", "v", clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !txn.Succeeded {
		t.Fatalf("Txn through the in-process client: %v (succeeded %v)", err, err == nil && txn.Succeeded)
	}
	if kv.txns.Load() != 1 {
		t.Errorf("the KV wrapper saw %d transactions, want 1", kv.txns.Load())
	}
	got, err := net.Get(ctx, "/in-process/k")
	if err != nil || len(got.Kvs) != 1 || got.Kvs[0].Lease != int64(lease.ID) {
		t.Fatalf("the network client reads %v, %v; want the in-process write under its lease", got, err)
	}

	s, err := concurrency.NewSession(in, concurrency.WithTTL(5), concurrency.WithContext(ctx))
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	el := concurrency.NewElection(s, "/in-process/election")
	if err := el.Campaign(ctx, "in-process"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	resp, err := net.Get(ctx, "/in-process/election", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "in-process" {
		t.Fatalf("the election key as the network client reads it: %v, %v", resp, err)
	}
	s.Close()

	in.Close()
	if err := Health(ctx, net); err != nil {
		t.Fatalf("the server after the in-process client closed: %v", err)
	}
}
