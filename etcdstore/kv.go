package etcdstore

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// storeKV is the KV a Store's requests go through: the client's own, each
// request bounded by timeout when it is set (WithRequestTimeout) and timed
// by the observers when they are set (WithMetrics). Either option builds a
// new storeKV over the client's own KV with the other option kept, so
// neither wraps the other and the order they are applied in does not
// matter.
type storeKV struct {
	kv      clientv3.KV
	timeout time.Duration // 0: no bound beyond the caller's context
	timed   *kvObservers  // nil: untimed
}

// kvObservers are the request histogram's series, one per op label.
type kvObservers struct {
	get, put, del, txn prometheus.Observer
}

// withKV returns a copy of s whose requests go through the storeKV that
// change makes of s's current options.
func (s *Store) withKV(change func(*storeKV)) *Store {
	k := storeKV{kv: s.cli.Client.KV}
	if cur, ok := s.cli.KV.(*storeKV); ok {
		k = *cur
	}
	change(&k)
	c := *s
	c.cli.KV = &k
	return &c
}

// options returns s's request options; the zero storeKV when none is set.
func (s *Store) options() storeKV {
	if cur, ok := s.cli.KV.(*storeKV); ok {
		return *cur
	}
	return storeKV{}
}

// observer returns the series for op, nil when requests are untimed.
func (k *storeKV) observer(op string) prometheus.Observer {
	if k.timed == nil {
		return nil
	}
	switch op {
	case opGet:
		return k.timed.get
	case opPut:
		return k.timed.put
	case opDelete:
		return k.timed.del
	default:
		return k.timed.txn
	}
}

// begin bounds ctx and starts timing one request of op; the returned func
// ends both.
func (k *storeKV) begin(ctx context.Context, op string) (context.Context, func()) {
	o, start := k.observer(op), time.Now()
	cancel := context.CancelFunc(func() {})
	if k.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, k.timeout)
	}
	return ctx, func() {
		cancel()
		if o != nil {
			o.Observe(time.Since(start).Seconds())
		}
	}
}

func (k *storeKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, done := k.begin(ctx, opGet)
	defer done()
	return k.kv.Get(ctx, key, opts...)
}

func (k *storeKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	ctx, done := k.begin(ctx, opPut)
	defer done()
	return k.kv.Put(ctx, key, val, opts...)
}

func (k *storeKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	ctx, done := k.begin(ctx, opDelete)
	defer done()
	return k.kv.Delete(ctx, key, opts...)
}

// Compact is an operator's maintenance call, not a store request: neither
// bounded nor timed.
func (k *storeKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	return k.kv.Compact(ctx, rev, opts...)
}

func (k *storeKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	var name string
	switch {
	case op.IsGet():
		name = opGet
	case op.IsPut():
		name = opPut
	case op.IsDelete():
		name = opDelete
	case op.IsTxn():
		name = opTxn
	default:
		return k.kv.Do(ctx, op)
	}
	ctx, done := k.begin(ctx, name)
	defer done()
	return k.kv.Do(ctx, op)
}

// Txn's bound starts when the transaction is built, which every caller
// does just before its Commit; the time is the Commit's, the one call that
// reaches etcd. Commit releases the bound.
func (k *storeKV) Txn(ctx context.Context) clientv3.Txn {
	cancel := context.CancelFunc(func() {})
	if k.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, k.timeout)
	}
	return &storeTxn{Txn: k.kv.Txn(ctx), cancel: cancel, obs: k.observer(opTxn)}
}

type storeTxn struct {
	clientv3.Txn
	cancel context.CancelFunc
	obs    prometheus.Observer
}

func (t *storeTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *storeTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *storeTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *storeTxn) Commit() (*clientv3.TxnResponse, error) {
	defer t.cancel()
	if t.obs != nil {
		defer func(start time.Time) { t.obs.Observe(time.Since(start).Seconds()) }(time.Now())
	}
	return t.Txn.Commit()
}

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
	return s.withKV(func(k *storeKV) { k.timeout = d })
}

// RequestTimeout returns the bound of the store's requests, 0 when none.
func (s *Store) RequestTimeout() time.Duration {
	return s.options().timeout
}
