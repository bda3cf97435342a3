package etcdstore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// guardRelistDelay is how long GuardWatch waits before listing the guards
// again after a failed list or a watch that ended.
const guardRelistDelay = time.Second

// GuardWatch is a local copy of which digests have an armed guard: it
// lists the guards once, then follows them with a watch, listing again
// whenever the watch ends (etcd lost, history compacted, a restore). Blob
// reads ask it instead of etcd, so that they cost etcd nothing and keep
// working while etcd does not answer.
//
// The copy may be stale: a guard armed a moment ago may not be in it yet,
// and while etcd is unreachable it stays as it was last seen. That is safe
// because a read is only advice to a producer ("upload it again"): every
// write that names a digest (a reference write, a hold, a guard) is checked
// against the guards in etcd itself, in its own transaction, whatever a
// read said. Before the first list succeeds no guard is known.
type GuardWatch struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	mu     sync.RWMutex
	armed  map[string]struct{}
	synced bool
	rev    int64 // the etcd revision the copy is as of
}

// WatchGuards returns a GuardWatch over s's guards; Run fills it.
func (s *Store) WatchGuards(log *slog.Logger) *GuardWatch {
	return &GuardWatch{cli: s.cli.Client, prefix: s.keys.Guards(), log: log, armed: map[string]struct{}{}}
}

// Armed reports whether digest's guard was armed when last seen.
func (w *GuardWatch) Armed(digest string) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	_, ok := w.armed[digest]
	return ok
}

// Synced reports whether the guards were listed at least once.
func (w *GuardWatch) Synced() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.synced
}

// Caught reports whether the copy is as of etcd revision rev or later.
func (w *GuardWatch) Caught(rev int64) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.synced && w.rev >= rev
}

// Run keeps the copy up to date until ctx ends.
func (w *GuardWatch) Run(ctx context.Context) {
	for ctx.Err() == nil {
		rev, err := w.list(ctx)
		if err == nil {
			err = w.follow(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Debug("guard watch ended; listing the guards again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(guardRelistDelay):
		}
	}
}

// list replaces the copy with the guards armed now and returns the
// revision it read at.
func (w *GuardWatch) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, DefaultRequestTimeout)
	defer cancel()
	resp, err := w.cli.Get(lctx, w.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	armed := make(map[string]struct{}, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if d, ok := LastSegment(string(kv.Key)); ok {
			armed[d] = struct{}{}
		}
	}
	w.mu.Lock()
	w.armed, w.synced, w.rev = armed, true, resp.Header.Revision
	w.mu.Unlock()
	return resp.Header.Revision, nil
}

// follow applies the guards' changes after rev until the watch ends.
func (w *GuardWatch) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range w.cli.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		w.mu.Lock()
		for _, ev := range resp.Events {
			d, ok := LastSegment(string(ev.Kv.Key))
			if !ok {
				continue
			}
			if ev.Type == clientv3.EventTypeDelete {
				delete(w.armed, d)
			} else {
				w.armed[d] = struct{}{}
			}
		}
		w.rev = max(w.rev, resp.Header.Revision)
		w.mu.Unlock()
	}
	return ctx.Err()
}
