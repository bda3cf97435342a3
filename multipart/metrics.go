package multipart

import "github.com/prometheus/client_golang/prometheus"

// metrics are the service's series; labels are states, never buckets or ids.
type metrics struct {
	transitions *prometheus.CounterVec
	conflicts   prometheus.Counter
	stuck       prometheus.Gauge
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
		stuck: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sweepgate", Subsystem: "sessions", Name: "stuck",
			Help: "Sessions completing for longer than the stuck limit, as of the last reconciler run: a person should look at them.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.transitions, m.conflicts, m.stuck)
	}
	return m
}
