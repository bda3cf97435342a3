package reclaim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Clock checks: a pass compares every live gateway's published clock and
// the backend's Date with its own clock before it decides anything, and
// measures the durations it deletes by (delete_after, the trash window) on
// an elapsed clock that only monotonic time advances, so that no wall clock
// jump shortens them (docs/architecture.md, "Clocks").

// gatewayAgeSlack is the age a freshly written gateway record may have
// when it is judged: the time its write and its delivery to the reclaimer
// take.
const gatewayAgeSlack = 2 * time.Second

// gatewayLeaseRefreshes is a published clock's lease TTL in refreshes: a
// record outlives a gateway that stopped by at most that long.
const gatewayLeaseRefreshes = 3

// gatewayRefreshWait is how many refreshes the reclaimer waits for a
// fresh record of a gateway whose stored record looks behind.
const gatewayRefreshWait = 2

// backendDateResolution is the resolution of an HTTP Date: a backend clock
// reading t sends t rounded down to the second.
const backendDateResolution = time.Second

// ErrClockSkew says a clock differs from the reclaimer's by more than the
// clock skew allowance, so the pass stops and decides nothing.
var ErrClockSkew = errors.New("reclaim: clock skew")

// ClockSkewError names the clock that differs and by how much.
type ClockSkewError struct {
	// Clock is "backend" or "gateway <id>".
	Clock string
	// Off is how far the clock is ahead of the reclaimer's (negative:
	// behind), beyond what the record's age and resolution allow.
	Off  time.Duration
	Skew time.Duration
}

func (e *ClockSkewError) Error() string {
	dir := "ahead of"
	off := e.Off
	if off < 0 {
		dir, off = "behind", -off
	}
	return fmt.Sprintf("reclaim: clock skew: the %s clock is %s %s the reclaimer's, more than the clock skew allowance %s; nothing marked or deleted",
		e.Clock, off.Round(time.Millisecond), dir, e.Skew)
}

// Is makes errors.Is(err, ErrClockSkew) hold.
func (e *ClockSkewError) Is(target error) bool { return target == ErrClockSkew }

// checkClocks compares every live gateway's published clock and the
// backend's Date with the reclaimer's clock. A difference over the clock
// skew allowance is a *ClockSkewError, counted and logged at error; a
// clock that cannot be read is an error too: the pass stops either way.
func (r *Reclaimer) checkClocks(ctx context.Context) error {
	err := r.checkGatewayClocks(ctx)
	if err == nil {
		err = r.checkBackendClock(ctx)
	}
	var cs *ClockSkewError
	if errors.As(err, &cs) {
		label := "gateway"
		if cs.Clock == "backend" {
			label = "backend"
		}
		r.clockStops.WithLabelValues(label).Inc()
		r.log.Error("reclaim pass stopped: a clock differs from the reclaimer's", "clock", cs.Clock, "off", cs.Off.String(), "clock_skew", cs.Skew.String())
	}
	return err
}

// checkGatewayClocks compares the clock of every gateway whose record
// stands (its lease is alive) with now. A stored record was written up to
// one refresh ago, so one that looks behind may only be old: the reclaimer
// then waits for that gateway's next write and judges the fresh record, as
// it arrives, with only gatewayAgeSlack of age. A gateway that writes no
// fresh record within gatewayRefreshWait refreshes is judged by its stored
// record as if it were fresh: it stops the pass, the safe side. A record
// ahead of now cannot be explained by age and stops the pass at once.
func (r *Reclaimer) checkGatewayClocks(ctx context.Context) error {
	resp, err := r.cli().Get(ctx, r.keys().Gateways(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("reclaim: read the gateways' clocks: %w", err)
	}
	now := r.now()
	var worst *ClockSkewError
	behind := map[string]*ClockSkewError{}
	var wait time.Duration
	for _, kv := range resp.Kvs {
		var g etcdstore.GatewayClock
		if err := etcdstore.DecodeKV(etcdstore.GatewayRecord, kv, &g); err != nil {
			return fmt.Errorf("reclaim: a gateway's clock: %w", err)
		}
		cs := r.judgeGatewayClock(g, now, 0)
		switch {
		case cs == nil:
		case cs.Off > 0:
			worst = worse(worst, cs)
		default:
			behind[string(kv.Key)] = cs
			wait = max(wait, gatewayRefreshWait*g.Refresh+gatewayAgeSlack)
		}
	}
	if worst != nil || len(behind) == 0 {
		return errorOrNil(worst)
	}
	fresh, err := r.awaitGatewayRecords(ctx, resp.Header.Revision, behind, wait)
	if err != nil {
		return err
	}
	for key, stale := range behind {
		switch g, ok := fresh[key]; {
		case ok && g.gone:
			// The gateway stopped: its clock stamps nothing any more.
			stale = nil
		case ok:
			stale = r.judgeGatewayClock(g.clock, g.received, gatewayAgeSlack)
		}
		worst = worse(worst, stale)
	}
	return errorOrNil(worst)
}

// judgeGatewayClock compares a gateway's record with now, allowing the
// record age. It returns nil when the record is within the skew allowance.
func (r *Reclaimer) judgeGatewayClock(g etcdstore.GatewayClock, now time.Time, age time.Duration) *ClockSkewError {
	skew := r.cfg.ClockSkew
	var off time.Duration
	switch {
	case g.At.After(now.Add(skew)):
		off = g.At.Sub(now)
	case g.At.Before(now.Add(-skew - age)):
		off = g.At.Sub(now) + age
	default:
		return nil
	}
	return &ClockSkewError{Clock: "gateway " + g.ID, Off: off, Skew: skew}
}

// freshRecord is a gateway record as a watch delivered it.
type freshRecord struct {
	clock    etcdstore.GatewayClock
	received time.Time
	gone     bool
}

// awaitGatewayRecords watches the gateways' records written after rev
// until every key in want has been written (or deleted) again, or wait has
// passed, and returns what it saw, each record with the reclaimer's clock
// at its arrival.
func (r *Reclaimer) awaitGatewayRecords(ctx context.Context, rev int64, want map[string]*ClockSkewError, wait time.Duration) (map[string]freshRecord, error) {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), wait)
	defer cancel()
	seen := map[string]freshRecord{}
	for wr := range r.cli().Watch(wctx, r.keys().Gateways(), clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			break
		}
		received := r.now()
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			if _, ok := want[key]; !ok {
				continue
			}
			if ev.Type == clientv3.EventTypeDelete {
				seen[key] = freshRecord{gone: true}
				continue
			}
			var g etcdstore.GatewayClock
			if err := etcdstore.DecodeKV(etcdstore.GatewayRecord, ev.Kv, &g); err != nil {
				return nil, fmt.Errorf("reclaim: a gateway's clock: %w", err)
			}
			seen[key] = freshRecord{clock: g, received: received}
		}
		if len(seen) == len(want) {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return seen, nil
}

func worse(a, b *ClockSkewError) *ClockSkewError {
	if a == nil || (b != nil && abs(b.Off) > abs(a.Off)) {
		return b
	}
	return a
}

func errorOrNil(cs *ClockSkewError) error {
	if cs == nil {
		return nil
	}
	return cs
}

// checkBackendClock compares the backend's Date with now: the backend read
// its clock between the request's sending and its answer's arrival, and
// rounded it down to the second.
func (r *Reclaimer) checkBackendClock(ctx context.Context) error {
	var bucket string
	if len(r.cfg.Buckets) > 0 {
		bucket = r.cfg.Buckets[0]
	}
	d, err := r.s3.Date(ctx, bucket, r.now)
	if err != nil {
		return fmt.Errorf("reclaim: read the backend's clock: %w", err)
	}
	skew := r.cfg.ClockSkew
	var off time.Duration
	switch {
	case d.Date.After(d.Received.Add(skew)):
		off = d.Date.Sub(d.Received)
	case d.Date.Add(backendDateResolution).Before(d.Sent.Add(-skew)):
		off = d.Date.Add(backendDateResolution).Sub(d.Sent)
	default:
		return nil
	}
	return &ClockSkewError{Clock: "backend", Off: off, Skew: skew}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func newClockStops(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sweepgate", Subsystem: "reclaim", Name: "clock_skew_stops_total",
		Help: "Passes stopped because a clock (gateway or backend) differed from the reclaimer's by more than the clock skew allowance."}, []string{"clock"})
	if reg != nil {
		reg.MustRegister(c)
	}
	c.WithLabelValues("gateway")
	c.WithLabelValues("backend")
	return c
}

// elapsedBase is where this process last left the elapsed clock: its
// monotonic reading then, the value it wrote and the revision of the write.
type elapsedBase struct {
	mu    sync.Mutex
	set   bool
	mono  time.Duration
	value time.Duration
	rev   int64
}

// newProcessID returns an id unique to this run of this process.
func newProcessID(id string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return id + "#" + hex.EncodeToString(b)
}

// readElapsed reads the elapsed clock: its record (zero when there is
// none) and the record's mod revision (0: none).
func (r *Reclaimer) readElapsed(ctx context.Context) (etcdstore.ElapsedClock, int64, error) {
	var ec etcdstore.ElapsedClock
	resp, err := r.cli().Get(ctx, r.keys().ElapsedClock())
	if err != nil {
		return ec, 0, fmt.Errorf("reclaim: read the elapsed clock: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return ec, 0, nil
	}
	if err := etcdstore.DecodeKV(etcdstore.ElapsedClockRecord, resp.Kvs[0], &ec); err != nil {
		return etcdstore.ElapsedClock{}, 0, fmt.Errorf("reclaim: %w", err)
	}
	return ec, resp.Kvs[0].ModRevision, nil
}

// advanceElapsed advances the elapsed clock at the start of a pass of term
// t and returns its new value. It adds the monotonic time since this
// process last advanced it, and only when nobody wrote it since; otherwise
// (a new leader, a restarted process, another leader in between) it adds
// nothing and only takes the clock over as its base. Time across a change
// of process is never counted: a mark or a trash entry stands longer, never
// shorter.
func (r *Reclaimer) advanceElapsed(ctx context.Context, t term) (time.Duration, error) {
	ec, rev, err := r.readElapsed(ctx)
	if err != nil {
		return 0, err
	}
	b := &r.elapsed
	b.mu.Lock()
	defer b.mu.Unlock()
	mono := r.cfg.Monotonic()
	value := ec.Elapsed
	if b.set && rev == b.rev && ec.Process == r.process && mono > b.mono {
		value = b.value + (mono - b.mono)
	}
	next := etcdstore.ElapsedClock{Version: 1, Elapsed: value, Term: t.N, Process: r.process, At: r.now().UTC()}
	val, err := json.Marshal(&next)
	if err != nil {
		return 0, err
	}
	key := r.keys().ElapsedClock()
	resp, err := fencedTxn(ctx, r.cli(), t, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, clientv3.OpPut(key, string(val)))
	if err != nil {
		b.set = false
		return 0, fmt.Errorf("reclaim: advance the elapsed clock: %w", err)
	}
	b.set, b.mono, b.value, b.rev = true, mono, value, resp.Header.Revision
	return value, nil
}

// elapsedNow is the elapsed clock now as this process measures it, at
// least floor (the pass's value): the value it last wrote plus the
// monotonic time since.
func (r *Reclaimer) elapsedNow(floor time.Duration) time.Duration {
	b := &r.elapsed
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.set {
		return floor
	}
	return max(floor, b.value+(r.cfg.Monotonic()-b.mono))
}

// plannedElapsed is the elapsed clock a dry run decides with: what this
// process's next pass would advance it to, when it holds the clock's base;
// otherwise the stored value plus the wall time since it was written, an
// estimate of what the leader's next pass reads (a plan deletes nothing;
// the pass itself never counts wall time).
func (r *Reclaimer) plannedElapsed(ec etcdstore.ElapsedClock, rev int64) time.Duration {
	b := &r.elapsed
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.set && rev == b.rev && ec.Process == r.process {
		return b.value + max(r.cfg.Monotonic()-b.mono, 0)
	}
	if ec.At.IsZero() {
		return ec.Elapsed
	}
	return ec.Elapsed + max(r.now().Sub(ec.At), 0)
}

// passClock is the schema and clock checks and the elapsed clock of a
// pass's start: a real pass advances the elapsed clock, a dry run reads
// it.
func (p *pass) passClock(ctx context.Context) error {
	if err := p.r.checkSchema(ctx); err != nil {
		return err
	}
	if err := p.r.checkClocks(ctx); err != nil {
		return err
	}
	if p.dry {
		ec, rev, err := p.r.readElapsed(ctx)
		p.elapsed = p.r.plannedElapsed(ec, rev)
		return err
	}
	var err error
	p.elapsed, err = p.r.advanceElapsed(ctx, p.term)
	return err
}
