package etcdstore

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// storeClient is the etcd client a Store talks through. Its KV shadows the
// client's own, so that WithMetrics and WithRequestTimeout can time and
// bound every KV call the store makes (s.cli.Get, s.cli.Txn, ...) in one
// place (storeKV) instead of at each call; leases, watches and everything
// else are the client's.
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
	return s.withKV(func(k *storeKV) {
		k.timed = &kvObservers{
			get: seconds.WithLabelValues(opGet),
			put: seconds.WithLabelValues(opPut),
			del: seconds.WithLabelValues(opDelete),
			txn: seconds.WithLabelValues(opTxn),
		}
	})
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
