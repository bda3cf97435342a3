package etcdstore

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WithRequestTimeout returns a Store like s whose every KV request (get,
// put, delete, transaction) ends after at most d, however long its
// context allows: the store a request path uses, so that an etcd that
// hangs costs a client d and a retryable refusal, never a hung request.
// Passes and other background work keep an unbounded store. d <= 0
// returns s.
func (s *Store) WithRequestTimeout(d time.Duration) *Store {
	if d <= 0 {
		return s
	}
	c := *s
	c.cli.KV = &boundedKV{kv: s.cli.KV, timeout: d}
	return &c
}

// RequestTimeout returns the bound of the store's requests, 0 when none.
func (s *Store) RequestTimeout() time.Duration {
	if b, ok := s.cli.KV.(*boundedKV); ok {
		return b.timeout
	}
	return 0
}

// boundedKV ends each request of kv after timeout.
type boundedKV struct {
	kv      clientv3.KV
	timeout time.Duration
}

func (k *boundedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	return k.kv.Get(ctx, key, opts...)
}

func (k *boundedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	return k.kv.Put(ctx, key, val, opts...)
}

func (k *boundedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	return k.kv.Delete(ctx, key, opts...)
}

func (k *boundedKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	return k.kv.Compact(ctx, rev, opts...)
}

func (k *boundedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	return k.kv.Do(ctx, op)
}

// Txn's bound starts when the transaction is built, which every caller
// does just before its Commit; Commit releases it.
func (k *boundedKV) Txn(ctx context.Context) clientv3.Txn {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	return &boundedTxn{Txn: k.kv.Txn(ctx), cancel: cancel}
}

type boundedTxn struct {
	clientv3.Txn
	cancel context.CancelFunc
}

func (t *boundedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *boundedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *boundedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *boundedTxn) Commit() (*clientv3.TxnResponse, error) {
	defer t.cancel()
	return t.Txn.Commit()
}
