package multipart

import "github.com/prometheus/client_golang/prometheus"

// metrics are the service's series; labels are states, never buckets or ids.
type metrics struct {
	transitions *prometheus.CounterVec
	conflicts   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sweepgate", Subsystem: "sessions", Name: "transitions_total",
			Help: "Upload session state transitions, by from and to state.",
		}, []string{"from", "to"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sweepgate", Subsystem: "etcd", Name: "txn_conflicts_total",
			Help: "Compare-and-put transactions on sessions that lost to a concurrent change and were decided again.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.transitions, m.conflicts)
	}
	return m
}
