package multipart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Delays between attempts to count the sessions again after a failure. The
// first recount after a watch that ran a long time is immediate.
const (
	gaugeMinDelay = 100 * time.Millisecond
	gaugeMaxDelay = 10 * time.Second
)

// errMissingPrev says a watch event lacked the previous value it needs: etcd
// leaves it out when that revision was compacted away, and then the counts
// can only be repaired by counting again.
var errMissingPrev = errors.New("watch event without its previous value")

// StateGauge exports how many upload sessions are in each state, as the
// gauge sweepgate_sessions{state="..."}, without reading etcd on each scrape.
// It counts every session once (paged, at one revision), then follows an
// etcd watch on the sessions prefix from the next revision, moving a session
// between counts by each event's previous and new value. When the watch ends
// (compaction left it behind, etcd cancelled it, a member lost its leader)
// it counts again from scratch, so the counts never drift for long.
//
// Every known state is exported, 0 included, once the first count is done;
// before that the gauge has no series, so that a missing count is not read
// as "no sessions".
type StateGauge struct {
	store    *etcdstore.Store
	log      *slog.Logger
	desc     *prometheus.Desc
	recounts prometheus.Counter
	pageSize int64

	mu     sync.Mutex
	counts map[etcdstore.SessionState]int64
	synced bool
	// stopWatch ends the watch being followed; tests call it to stand in
	// for etcd cancelling the watch.
	stopWatch context.CancelFunc
}

// NewStateGauge returns a gauge over store's sessions and registers it (and
// sweepgate_sessions_recounts_total) on reg. Run makes it count.
func NewStateGauge(store *etcdstore.Store, reg prometheus.Registerer, logger *slog.Logger) (*StateGauge, error) {
	if store == nil {
		return nil, errors.New("multipart: state gauge needs a store")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &StateGauge{
		store: store,
		log:   logger.With("component", "session-gauge"),
		desc: prometheus.NewDesc("sweepgate_sessions",
			"Upload sessions by state, as recorded in etcd (kept current by a watch, not by scanning per scrape).",
			[]string{"state"}, nil),
		recounts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sweepgate", Subsystem: "sessions", Name: "recounts_total",
			Help: "Times the session gauge counted every session again because its etcd watch ended (compaction, cancellation, lost leader).",
		}),
		pageSize: 1000,
	}
	if reg != nil {
		if err := reg.Register(g); err != nil {
			return nil, fmt.Errorf("multipart: register session gauge: %w", err)
		}
		if err := reg.Register(g.recounts); err != nil {
			return nil, fmt.Errorf("multipart: register session gauge: %w", err)
		}
	}
	return g, nil
}

// Describe implements prometheus.Collector.
func (g *StateGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector: one series per state, from one
// consistent snapshot of the counts.
func (g *StateGauge) Collect(ch chan<- prometheus.Metric) {
	counts, ok := g.Counts()
	if !ok {
		return
	}
	for _, st := range etcdstore.AllStates {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(counts[st]), string(st))
		delete(counts, st)
	}
	// A state this build does not know (written by a newer one) is still
	// shown: the label set stays as small as the set of states.
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), string(st))
	}
}

// Counts returns a copy of the current counts, and whether they have been
// counted at all yet.
func (g *StateGauge) Counts() (map[etcdstore.SessionState]int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[etcdstore.SessionState]int64, len(g.counts))
	for st, n := range g.counts {
		out[st] = n
	}
	return out, g.synced
}

// Run counts the sessions and keeps the counts current until ctx ends.
// Failures are logged and retried with a growing delay; meanwhile the gauge
// keeps showing the last counts it had.
func (g *StateGauge) Run(ctx context.Context) {
	var delay time.Duration
	for {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		rev, err := g.count(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			delay = nextDelay(delay)
			g.log.Warn("counting sessions by state failed; the gauge keeps its last counts", "err", err, "retry_in", delay.String())
			continue
		}
		started := time.Now()
		err = g.follow(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		g.recounts.Inc()
		// A watch that keeps failing at once would otherwise turn into a
		// full scan in a tight loop.
		if time.Since(started) > gaugeMaxDelay {
			delay = 0
		} else {
			delay = nextDelay(delay)
		}
		g.log.Info("session watch ended; counting sessions again", "reason", err, "from_revision", rev)
	}
}

func nextDelay(d time.Duration) time.Duration {
	if d <= 0 {
		return gaugeMinDelay
	}
	return min(2*d, gaugeMaxDelay)
}

// count counts every session at one revision and makes that the gauge's
// state, returning the revision.
func (g *StateGauge) count(ctx context.Context) (int64, error) {
	counts, undecodable, rev, err := g.store.SessionStates(ctx, g.pageSize)
	if err != nil {
		return 0, err
	}
	if undecodable > 0 {
		// They are left out of every count, on the watch as here, so the
		// counts stay consistent; the records need a person.
		g.log.Warn("session records that do not decode are not counted", "records", undecodable)
	}
	g.mu.Lock()
	g.counts, g.synced = counts, true
	g.mu.Unlock()
	return rev, nil
}

// follow applies the changes to session keys after rev until the watch
// ends, and says why it ended.
func (g *StateGauge) follow(ctx context.Context, rev int64) error {
	// Without WithRequireLeader a watch on a member cut off from its leader
	// stays open and silent, and the counts would go stale unnoticed.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	g.mu.Lock()
	g.stopWatch = cancel
	g.mu.Unlock()

	wch := g.store.Client().Watch(wctx, g.store.Keys().AllSessions(),
		clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("watch sessions: %w", err)
		}
		if err := g.apply(resp.Events); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch sessions: the watch was cancelled")
}

// apply moves sessions between counts by the events of one watch response,
// all under one lock so that a scrape never sees half a response.
func (g *StateGauge) apply(events []*clientv3.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE || ev.IsModify() {
			if ev.PrevKv == nil {
				return fmt.Errorf("%w: %s at revision %d", errMissingPrev, ev.Kv.Key, ev.Kv.ModRevision)
			}
			if st, err := etcdstore.SessionStateOf(ev.PrevKv.Value); err == nil {
				g.counts[st]--
				if g.counts[st] < 0 {
					return fmt.Errorf("count of %s sessions went below zero at revision %d", st, ev.Kv.ModRevision)
				}
			}
		}
		if ev.Type == mvccpb.PUT {
			if st, err := etcdstore.SessionStateOf(ev.Kv.Value); err == nil {
				g.counts[st]++
			} else {
				g.log.Warn("a session record that does not decode is not counted", "key", string(ev.Kv.Key), "err", err)
			}
		}
	}
	return nil
}
