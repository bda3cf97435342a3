package reclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrNotLeader says this process does not lead the reclaimer election, so it
// may not act (or its term ended while it was acting).
var ErrNotLeader = errors.New("reclaim: this process is not the reclaimer leader")

// DefaultElectionTTL is the lease TTL of an election session: how long a
// leader that stopped answering (crashed, partitioned, paused) keeps the
// lead before another process can take it.
const DefaultElectionTTL = 15 * time.Second

// ElectorConfig is what an Elector needs.
type ElectorConfig struct {
	Client *clientv3.Client
	// Prefix is the election's key prefix (etcdstore.Keys.Election()).
	Prefix string
	// ID is the value this candidate campaigns with, shown as the leader's
	// identity (host name, admin address).
	ID string
	// TTL is the session lease's TTL, rounded down to whole seconds (at
	// least one); zero means DefaultElectionTTL.
	TTL    time.Duration
	Logger *slog.Logger
}

// Elector takes part in the reclaimer election. Only the leader acts, and
// what proves it leads is not this object's opinion but the fence each of
// its writes carries: etcd refuses a write from a term that has ended.
type Elector struct {
	cli    *clientv3.Client
	prefix string
	id     string
	ttl    int
	log    *slog.Logger

	mu      sync.Mutex
	current *Leadership
	// changed is closed and replaced whenever leadership is won or lost,
	// so that waiters need no polling.
	changed chan struct{}
}

// NewElector returns an Elector for cfg.
func NewElector(cfg ElectorConfig) (*Elector, error) {
	if cfg.Client == nil || cfg.Prefix == "" {
		return nil, errors.New("reclaim: elector needs an etcd client and a key prefix")
	}
	ttl := int(cfg.TTL / time.Second)
	if cfg.TTL == 0 {
		ttl = int(DefaultElectionTTL / time.Second)
	}
	if ttl < 1 {
		ttl = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{
		cli: cfg.Client, prefix: strings.TrimSuffix(cfg.Prefix, "/"), id: cfg.ID, ttl: ttl,
		log: cfg.Logger, changed: make(chan struct{}),
	}, nil
}

// Leadership is one won term. Its Context ends the moment the etcd session
// behind it ends (lease expired, revoked, or unreachable past its TTL) or it
// is resigned, so that work running under it stops at once; the fence
// keeps a write that was already under way from landing.
type Leadership struct {
	// Term is the leader key's create revision. Terms only grow, so a
	// larger term is a later leader.
	Term int64
	// Key is the leader key, whose create revision the fence compares.
	Key string

	ctx     context.Context
	cancel  context.CancelFunc
	session *concurrency.Session
	// stopSession ends the session's own context, after its lease is
	// revoked (revoking needs a live context).
	stopSession context.CancelFunc
	el          *concurrency.Election
	once        sync.Once
}

// Fence is the comparison every write of this term carries. Once the term
// ends its leader key is gone (or belongs to nobody), so etcd itself refuses
// the write: no check in our code has to be right about timing.
func (l *Leadership) Fence() clientv3.Cmp { return termOf(l).Fence() }

// Context is cancelled when the term ends.
func (l *Leadership) Context() context.Context { return l.ctx }

// Done is closed when the term ends.
func (l *Leadership) Done() <-chan struct{} { return l.ctx.Done() }

// Lease is the lease of the term's etcd session.
func (l *Leadership) Lease() clientv3.LeaseID { return l.session.Lease() }

// end stops the term: work under it is cancelled, the leader key is
// deleted and the lease revoked so that another candidate takes over now
// rather than after the TTL.
func (l *Leadership) end() {
	l.once.Do(func() {
		l.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.el.Resign(ctx)
		_ = l.session.Close()
		l.stopSession()
	})
}

// Campaign blocks until this candidate leads or ctx ends. Each call uses a
// new etcd session: a session that ended once never comes back, and a key
// under a dead lease would win a term nobody holds.
func (e *Elector) Campaign(ctx context.Context) (*Leadership, error) {
	// The session outlives ctx on purpose: when ctx ends, the lease must
	// still be revocable so that the next candidate takes over at once
	// instead of after the TTL.
	sctx, stopSession := context.WithCancel(context.WithoutCancel(ctx))
	sess, err := concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl), concurrency.WithContext(sctx))
	if err != nil {
		stopSession()
		return nil, fmt.Errorf("reclaim: election session: %w", err)
	}
	// The campaign must end with the session: a candidate whose lease
	// expired while it waited would otherwise "win" with a deleted key.
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-sess.Done():
			ccancel()
		case <-cctx.Done():
		}
	}()
	el := concurrency.NewElection(sess, e.prefix)
	err = el.Campaign(cctx, e.id)
	ccancel()
	if err == nil {
		select {
		case <-sess.Done():
			err = errors.New("election session ended while campaigning")
		default:
		}
	}
	if err != nil {
		_ = sess.Close()
		stopSession()
		return nil, fmt.Errorf("reclaim: campaign: %w", err)
	}
	lctx, lcancel := context.WithCancel(ctx)
	l := &Leadership{Term: el.Rev(), Key: el.Key(), ctx: lctx, cancel: lcancel, session: sess, stopSession: stopSession, el: el}
	e.mu.Lock()
	e.current = l
	e.notifyLocked()
	e.mu.Unlock()
	e.log.Info("reclaimer leadership won", "term", l.Term, "id", e.id)
	go func() {
		select {
		case <-sess.Done():
			e.log.Warn("reclaimer election session ended; leadership lost", "term", l.Term)
		case <-lctx.Done():
		}
		e.lost(l)
	}()
	return l, nil
}

// Resign ends l's term, if it is still running, and hands the lead over.
func (e *Elector) Resign(l *Leadership) {
	if l == nil {
		return
	}
	l.end()
	e.lost(l)
}

// lost records that l's term ended.
func (e *Elector) lost(l *Leadership) {
	l.end()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.current == l {
		e.current = nil
		e.notifyLocked()
		e.log.Info("reclaimer leadership ended", "term", l.Term)
	}
}

func (e *Elector) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Leader reports this candidate's current term and whether it leads. A
// true answer is an opinion for status and metrics; writes rely on the fence.
func (e *Elector) Leader() (term int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.current == nil {
		return 0, false
	}
	return e.current.Term, true
}

// Current returns the running term, or nil.
func (e *Elector) Current() *Leadership {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current
}

// Fence returns the fence of the current term. Without one it returns a
// comparison that can never hold (no key has create revision -1), so a
// write made outside a term always fails.
func (e *Elector) Fence() clientv3.Cmp {
	if l := e.Current(); l != nil {
		return l.Fence()
	}
	return clientv3.Compare(clientv3.CreateRevision(e.prefix+"/"), "=", -1)
}

// AwaitLeader waits until this candidate leads and returns its term.
func (e *Elector) AwaitLeader(ctx context.Context) (int64, error) {
	for {
		e.mu.Lock()
		cur, ch := e.current, e.changed
		e.mu.Unlock()
		if cur != nil {
			return cur.Term, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// LeaderInfo describes whoever leads the election.
type LeaderInfo struct {
	ID   string `json:"id"`
	Term int64  `json:"term"`
}

// CurrentLeader reads who leads the election under prefix, from any
// process (the CLI, a follower's admin endpoint). ok is false when nobody
// does.
func CurrentLeader(ctx context.Context, c *clientv3.Client, prefix string) (info LeaderInfo, ok bool, err error) {
	p := strings.TrimSuffix(prefix, "/") + "/"
	resp, err := c.Get(ctx, p, clientv3.WithFirstCreate()...)
	if err != nil {
		return LeaderInfo{}, false, fmt.Errorf("reclaim: read election leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return LeaderInfo{}, false, nil
	}
	return LeaderInfo{ID: string(resp.Kvs[0].Value), Term: resp.Kvs[0].CreateRevision}, true, nil
}
