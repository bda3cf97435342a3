package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/s3op"
)

// metrics are the gateway's request series. Labels are the operation name (a
// closed set) and the status class, never a bucket, key or upload id.
type metrics struct {
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	backendDuration *prometheus.HistogramVec
	authFailures    *prometheus.CounterVec
	stateRefusals   prometheus.Counter
	limited         *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sweepgate", Name: "requests_total",
			Help: "S3 requests served, by operation and status class.",
		}, []string{"operation", "status_class"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sweepgate", Name: "request_duration_seconds",
			Help:    "Time from receiving an S3 request to finishing its response, by operation and status class.",
			Buckets: buckets,
		}, []string{"operation", "status_class"}),
		backendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sweepgate", Name: "backend_request_duration_seconds",
			Help:    "Time until the backend's response headers arrived, by operation.",
			Buckets: buckets,
		}, []string{"operation"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sweepgate", Name: "auth_failures_total",
			Help: "Requests refused by signature verification, by S3 error code.",
		}, []string{"code"}),
		stateRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sweepgate", Name: "state_unavailable_refusals_total",
			Help: "Requests that must be recorded in etcd refused at once with SlowDown because etcd did not answer its last probe.",
		}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sweepgate", Name: "requests_limited_total",
			Help: "Requests refused with SlowDown because an in-flight limit was reached, by limit: total (limits.max_in_flight) or credential (limits.max_in_flight_per_credential).",
		}, []string{"limit"}),
	}
	for _, l := range []string{"total", "credential"} {
		m.limited.WithLabelValues(l)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.requestDuration, m.backendDuration, m.authFailures, m.stateRefusals, m.limited)
	}
	return m
}

func (m *metrics) observe(op s3op.Operation, status int, elapsed time.Duration) {
	class := statusClass(status)
	m.requests.WithLabelValues(string(op), class).Inc()
	m.requestDuration.WithLabelValues(string(op), class).Observe(elapsed.Seconds())
}

// statusClasses are the status_class label values, by hundreds.
var statusClasses = [...]string{1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}

func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return statusClasses[status/100]
}
