package etcdstore

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// storeClient is the etcd client a Store talks through. Its KV shadows the
// client's own, so that WithMetrics can time every KV call the store makes
// (s.cli.Get, s.cli.Txn, ...) in one place instead of at each call; leases,
// watches and everything else are the client's.
type storeClient struct {
	*clientv3.Client
	clientv3.KV
}

// The op label values of sweepgate_etcd_request_duration_seconds. They are
// the only ones: the label never carries keys, buckets or upload ids.
const (
	opGet    = "get"
	opPut    = "put"
	opDelete = "delete"
	opTxn    = "txn"
)

// requestBuckets spread from a fast local read (well under a millisecond)
// to a commit stuck behind a slow disk or a leader election (seconds).
var requestBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// WithMetrics returns a Store like s whose etcd requests are timed in the
// histogram sweepgate_etcd_request_duration_seconds{op="get|put|delete|txn"}
// registered on reg. Stores given the same reg share the histogram, so the
// gateway's store and any other built over the same registry add up. The
// time is what the caller waits, client retries included, and failed
// requests count too: a timeout shows as a slow request, not a missing one.
// Lease grants and watches are not timed. A nil reg returns s.
func (s *Store) WithMetrics(reg prometheus.Registerer) *Store {
	if reg == nil {
		return s
	}
	seconds := requestDuration(reg)
	c := *s
	c.cli.KV = &timedKV{
		kv:  s.cli.Client.KV, // the client's own, so timing never nests
		get: seconds.WithLabelValues(opGet),
		put: seconds.WithLabelValues(opPut),
		del: seconds.WithLabelValues(opDelete),
		txn: seconds.WithLabelValues(opTxn),
	}
	return &c
}

// requestDuration registers the histogram on reg, or returns the one a
// store registered there before.
func requestDuration(reg prometheus.Registerer) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sweepgate", Subsystem: "etcd", Name: "request_duration_seconds",
		Help:    "Time the store waited for etcd requests, by operation (get, put, delete, txn), failures included.",
		Buckets: requestBuckets,
	}, []string{"op"})
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.HistogramVec); ok {
				return existing
			}
		}
		// Another collector under this name is a programming error, as
		// MustRegister treats it.
		panic(err)
	}
	return h
}

// timedKV times each request of kv.
type timedKV struct {
	kv                 clientv3.KV
	get, put, del, txn prometheus.Observer
}

func observeSince(o prometheus.Observer, start time.Time) {
	o.Observe(time.Since(start).Seconds())
}

func (k *timedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	defer observeSince(k.get, time.Now())
	return k.kv.Get(ctx, key, opts...)
}

func (k *timedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	defer observeSince(k.put, time.Now())
	return k.kv.Put(ctx, key, val, opts...)
}

func (k *timedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	defer observeSince(k.del, time.Now())
	return k.kv.Delete(ctx, key, opts...)
}

// Compact is an operator's maintenance call, not a store request: untimed.
func (k *timedKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	return k.kv.Compact(ctx, rev, opts...)
}

func (k *timedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	var o prometheus.Observer
	switch {
	case op.IsGet():
		o = k.get
	case op.IsPut():
		o = k.put
	case op.IsDelete():
		o = k.del
	case op.IsTxn():
		o = k.txn
	default:
		return k.kv.Do(ctx, op)
	}
	defer observeSince(o, time.Now())
	return k.kv.Do(ctx, op)
}

func (k *timedKV) Txn(ctx context.Context) clientv3.Txn {
	return &timedTxn{Txn: k.kv.Txn(ctx), obs: k.txn}
}

// timedTxn times a transaction's Commit, the one call that reaches etcd.
type timedTxn struct {
	clientv3.Txn
	obs prometheus.Observer
}

func (t *timedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *timedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *timedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *timedTxn) Commit() (*clientv3.TxnResponse, error) {
	defer observeSince(t.obs, time.Now())
	return t.Txn.Commit()
}
