package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrUnavailable says etcd did not answer the last probe: a request that
// needs it is refused at once instead of waiting for it.
var ErrUnavailable = errors.New("etcdstore: etcd is unavailable")

// DefaultRequestTimeout bounds one etcd request made on a client's behalf
// (etcd.request_timeout): past it the client gets a retryable refusal
// instead of waiting for a store that does not answer.
const DefaultRequestTimeout = 3 * time.Second

// Availability tracks whether etcd can serve sweepgate, from a probe (a
// linearizable read and the alarm list, see Health) repeated every
// interval, each bounded by the request timeout. Requests that need etcd
// ask Err first and are refused at once while the last probe failed; the
// processes that only run with etcd (the reclaimer election, the session
// reconciler) wait for it with WaitUp. It starts as up: the first probe
// (Probe, or Run's first) says otherwise.
type Availability struct {
	cli      *clientv3.Client
	interval time.Duration
	timeout  time.Duration

	mu   sync.Mutex
	err  error         // nil while up
	upCh chan struct{} // closed while up; replaced when etcd goes down
	// since is when the state last changed.
	since time.Time

	gauge prometheus.Gauge
}

// NewAvailability returns the availability of the etcd behind cli, probed
// every interval with probes bounded by timeout; its gauge
// sweepgate_etcd_available is registered on reg when reg is not nil.
func NewAvailability(cli *clientv3.Client, interval, timeout time.Duration, reg prometheus.Registerer) *Availability {
	up := make(chan struct{})
	close(up)
	a := &Availability{cli: cli, interval: interval, timeout: timeout, upCh: up, since: time.Now(),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sweepgate", Subsystem: "etcd", Name: "available",
			Help: "1 when etcd answered this gateway's last probe (a linearizable read within etcd.request_timeout, no alarm raised); 0 while it does not, and multipart calls, reference writes and blob writes and deletes are refused with SlowDown.",
		})}
	a.gauge.Set(1)
	if reg != nil {
		reg.MustRegister(a.gauge)
	}
	return a
}

// Probe asks etcd once and records the answer: nil when it can serve.
func (a *Availability) Probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	err := Health(pctx, a.cli)
	if errors.Is(ctx.Err(), context.Canceled) {
		return err // the caller stopped: not etcd's answer
	}
	a.set(err)
	return err
}

// Run probes every interval until ctx ends.
func (a *Availability) Run(ctx context.Context) {
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		_ = a.Probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Availability) set(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	wasUp := a.err == nil
	a.err = err
	switch {
	case err == nil && !wasUp:
		close(a.upCh)
		a.since = time.Now()
		a.gauge.Set(1)
	case err != nil && wasUp:
		a.upCh = make(chan struct{})
		a.since = time.Now()
		a.gauge.Set(0)
	}
}

// Err returns nil while etcd answered the last probe, and otherwise
// ErrUnavailable with the probe's failure.
func (a *Availability) Err() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, a.err)
}

// State returns when the state last changed, and Err.
func (a *Availability) State() (since time.Time, err error) {
	err = a.Err()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.since, err
}

// WaitUp returns once etcd answers a probe, or with ctx's error.
func (a *Availability) WaitUp(ctx context.Context) error {
	a.mu.Lock()
	up := a.upCh
	a.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unavailable reports whether err says etcd could not be reached or did
// not answer in time (as opposed to a refusal it gave): the request may be
// retried once etcd is back.
func Unavailable(err error) bool {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	for _, e := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrLeaderChanged, rpctypes.ErrTimeoutWaitAppliedIndex} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
