package etcdstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ArmGuard arms g's digest's guard for a delete the gateway sends on a
// client's behalf, recording g (with the attempt it is about to send) only
// if no guard is armed for the digest and no reference hold exists (a
// complete into a source whose references are not recorded yet): while it
// stands, every reference write naming the digest, and every new hold, is
// refused, so a reference check made after it cannot be overtaken by a
// write. It returns the guard's mod revision, or ErrGuarded when a guard
// or a hold was there already.
func (s *Store) ArmGuard(ctx context.Context, g Guard) (int64, error) {
	key := s.keys.Guard(g.Digest)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(s.keys.RefHolds()), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(key, MarshalRecord(g))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("arm guard: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrGuarded
	}
	return resp.Header.Revision, nil
}

// ReleaseGuard releases digest's guard if it is still as armed at
// revision rev; a guard changed since (taken over by a pass) is left as
// it is.
func (s *Store) ReleaseGuard(ctx context.Context, digest string, rev int64) error {
	key := s.keys.Guard(digest)
	if _, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit(); err != nil {
		return fmt.Errorf("release guard: %w", err)
	}
	return nil
}

// UnrecordedWrite records a complete of a multipart upload into a
// reference source whose object's references may not be recorded: written
// with the complete's hold, deleted once they are. While one stands no
// guard is armed anywhere; the digest sweep deletes it only once it is
// settled (its hold gone and the record written again after that) and a
// rebuild that started after that write has read every source.
type UnrecordedWrite struct {
	Version int       `json:"v"`
	ID      string    `json:"id"`
	Bucket  string    `json:"bucket"`
	Key     string    `json:"key"`
	At      time.Time `json:"at"`
	// Settled says the record was written again after the complete's
	// hold ended (by the gateway that failed to record the references,
	// or by a pass that found the hold lapsed): its mod revision is after
	// any write of the object.
	Settled bool   `json:"settled,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// EndUnrecorded deletes the record of the complete id: its object's
// references are recorded, or it made no object.
func (s *Store) EndUnrecorded(ctx context.Context, id string) error {
	if _, err := s.cli.Delete(ctx, s.keys.UnrecordedOf(id)); err != nil {
		return fmt.Errorf("end unrecorded write: %w", err)
	}
	return nil
}

// SettleUnrecorded writes the record of the complete id again, settled,
// with why its references are not recorded: its object stays unread until
// a rebuild that starts after this write.
func (s *Store) SettleUnrecorded(ctx context.Context, u UnrecordedWrite, why string) error {
	u.Settled, u.Reason = true, why
	if _, err := s.cli.Put(ctx, s.keys.UnrecordedOf(u.ID), MarshalRecord(u)); err != nil {
		return fmt.Errorf("settle unrecorded write: %w", err)
	}
	return nil
}

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
