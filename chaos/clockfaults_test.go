//go:build chaos

package chaos

// The faults of deletes that outlive their client and of clocks that lie:
// a backend delete delivered to MinIO after the gateway or reclaimer that
// sent it timed out, and a gateway restarted with its wall clock offset.

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// clockOffsetEnv is the variable a test sets to shift a sweepgate
// process's wall clock (a Go duration).
const clockOffsetEnv = "SWEEPGATE_TEST_CLOCK_OFFSET"

// faultClockOffset restarts one gateway with its clock offset, and
// restarts it again with its own clock after a few seconds.
const faultClockOffset = "clock-offset"

// offsetWindow is a gateway process that ran with its wall clock offset:
// restarted with it from start on, ready (serving, its clock published)
// from live on, stopped from end on.
type offsetWindow struct {
	gw     int
	offset time.Duration
	// led says the offset gateway was made the reclaimer leader (the
	// other one was restarted once it served).
	led              bool
	start, live, end time.Time
}

// large says the offset is beyond reclaim.clock_skew: no pass may delete
// anything while such a gateway lives.
func (o offsetWindow) large() bool { return o.offset > clockSkew || o.offset < -clockSkew }

// clockOffset restarts a gateway (the leader when pick says so) with its
// clock offset by offset, keeps it for d, and restarts it with its own
// clock. With lead, the other gateway is restarted once the offset one
// serves, so that the offset one takes the lead.
func (f *faults) clockOffset(t *testing.T, ctx context.Context, pick int, offset, d time.Duration, lead bool) {
	victim := pick % len(f.sys.gateways)
	if pick < 50 {
		if i, _ := f.sys.leader(ctx); i >= 0 {
			victim = i
		}
	}
	g := f.sys.gateways[victim]
	w := offsetWindow{gw: victim, offset: offset, led: lead, start: time.Now()}
	kind := "within"
	if w.large() {
		kind = "beyond"
	}
	f.log.printf("FAULT", "restart %s with its clock offset %s (%s reclaim.clock_skew %s) for %s", f.sys.names[victim], offset, kind, clockSkew, d)
	g.RestartWith(fmt.Sprintf("%s=%s", clockOffsetEnv, offset))
	w.live = time.Now()
	f.restarted(victim, w.start, faultClockOffset)
	f.log.printf("FAULT", "%s serves with its clock offset %s (pid %d)", f.sys.names[victim], offset, g.PID())
	f.count(faultClockOffset + " " + kind + " clock_skew")
	if lead {
		other := (victim + 1) % len(f.sys.gateways)
		f.log.printf("FAULT", "restart %s so that %s, offset, takes the lead", f.sys.names[other], f.sys.names[victim])
		from := time.Now()
		f.sys.gateways[other].Restart()
		f.restarted(other, from, faultClockOffset)
	}
	time.Sleep(d)
	w.end = time.Now()
	g.RestartWith()
	f.restarted(victim, w.end, faultClockOffset)
	f.log.printf("FAULT", "%s restarted with its own clock (pid %d)", f.sys.names[victim], g.PID())
	f.mu.Lock()
	f.offsets = append(f.offsets, w)
	f.mu.Unlock()
}

// drawOffset draws a clock offset: half of them within clockSkew (with a
// margin for the second-resolution clocks it may be compared with), half
// beyond it, from seconds to ten minutes, ahead or behind. Further off, the
// gateway could not serve at all: SigV4 (MinIO's and its own) refuses a
// request signed more than fifteen minutes away, so it never gets ready;
// the reclaimer's tests cover offsets of days with injected clocks.
func drawOffset(r interface {
	IntN(int) int
	Int64N(int64) int64
}) time.Duration {
	sign := time.Duration(1)
	if r.IntN(2) == 0 {
		sign = -1
	}
	switch r.IntN(4) {
	case 0, 1:
		return sign * time.Duration(100+r.IntN(700)) * time.Millisecond
	case 2:
		return sign * (3*clockSkew + time.Duration(r.Int64N(int64(time.Minute))))
	}
	return sign * (time.Minute + time.Duration(r.Int64N(int64(9*time.Minute))))
}

// offsetsOf returns the clock offsets applied so far.
func (f *faults) offsetsOf() []offsetWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]offsetWindow(nil), f.offsets...)
}

// isBackendDelete selects the deletes the reclaimer sends to MinIO: a
// DeleteObjects (the digest sweep's blobs) and an AbortMultipartUpload
// (the upload sweep's, or a client's abort the gateway forwards). A
// manifest's DELETE is not one: held past the trash window it would
// outlast the trash that keeps its blobs, which no clock bounds.
func isBackendDelete(r harness.ProxiedRequest) bool {
	switch r.Method {
	case http.MethodPost:
		return r.Query.Has("delete")
	case http.MethodDelete:
		return r.Query.Has("uploadId")
	}
	return false
}

// lateQuiet is how long before the workload's end no delete is made late
// any more: a guard held over a late delete keeps producers retrying
// SlowDown, which would keep the clients from settling when told to stop.
const lateQuiet = 15 * time.Second

// runLateDeletes arms, from its own random stream, a delete delivered
// late at the backend proxy every few seconds: the next backend delete is
// held past reclaim.backend_timeout, so its sender gives up, and then
// delivered to MinIO anyway. A fault not used up within 6s is removed, so
// that the last late delete is settled before the workload ends.
func (f *faults) runLateDeletes(ctx context.Context, end time.Time) {
	rng := f.cfg.rng(3)
	for {
		wait := time.Duration(2000+rng.IntN(5000)) * time.Millisecond
		hold := backendTimeout + time.Duration(500+rng.IntN(3000))*time.Millisecond
		blobs := rng.IntN(3) > 0 // mostly the digest sweep's DeleteObjects
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if time.Now().After(end.Add(-lateQuiet)) {
			return
		}
		match, what := isBackendDelete, "the next DeleteObjects or AbortMultipartUpload"
		if blobs {
			match = func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPost && r.Query.Has("delete") }
			what = "the next DeleteObjects"
		}
		until := make(chan struct{})
		armed := make(chan struct{})
		rule := harness.Rule{Fault: harness.DeliverLate, Times: 1, Until: until, Match: func(r harness.ProxiedRequest) bool {
			if !match(r) {
				return false
			}
			// Runs under the proxy's lock, once per matching request
			// until the rule is spent: the hold starts when the request
			// arrives.
			select {
			case <-armed:
			default:
				close(armed)
				time.AfterFunc(hold, func() { close(until) })
			}
			return true
		}}
		in := f.sys.back.Inject(rule)
		f.mu.Lock()
		f.injections = append(f.injections, in)
		f.mu.Unlock()
		f.count("proxy backend deliver-late")
		f.log.printf("FAULT", "backend: deliver %s %s late, after its sender's timeout %s", what, hold, backendTimeout)
		time.AfterFunc(6*time.Second, func() {
			in.Remove()
			select {
			case <-armed:
			default:
				close(until)
			}
		})
	}
}
