package multipart

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// completeAttempt is one request's hold on the single CompleteMultipartUpload
// of an upload that may be in flight on the backend at a time. Two completes
// in flight could both be answered, one with an error that returns the
// session to active while the other succeeds: then an abort would win too.
//
// The hold is a key under the lease of an etcd session that this gateway
// keeps alive while the backend call runs, so it vanishes on its own when
// the gateway dies and a client's retry can take over. Losing the lease
// otherwise (etcd unreachable past the hold) ends nothing by itself: the
// key is gone, so the guards that need it (owned, done) no longer hold.
type completeAttempt struct {
	session *concurrency.Session
	key     string
	id      string
}

// newCompleteAttempt grants the attempt's lease, which the request's
// context and etcd.request_timeout bound, and keeps it alive until release, whatever the request's
// context does after that: a complete finishes whatever its client does.
func (s *Service) newCompleteAttempt(ctx context.Context, c *Call) (*completeAttempt, error) {
	gctx, gcancel := s.bounded(ctx)
	grant, err := s.store.Client().Grant(gctx, int64(max(int(s.hold/time.Second), 1)))
	gcancel()
	if err != nil {
		return nil, fmt.Errorf("grant complete attempt lease: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopTie := context.AfterFunc(ctx, cancel)
	session, err := concurrency.NewSession(s.store.Client(), concurrency.WithLease(grant.ID),
		concurrency.WithTTL(max(int(s.hold/time.Second), 1)), concurrency.WithContext(sctx))
	ended := !stopTie() // the request ended meanwhile, which cancelled sctx
	switch {
	case err != nil:
		cancel()
		rctx, rcancel := detached(ctx)
		defer rcancel()
		_, _ = s.store.Client().Revoke(rctx, grant.ID)
		return nil, fmt.Errorf("keep complete attempt lease alive: %w", err)
	case ended:
		// The request ended as the lease was granted, which stopped its
		// renewals: the grant counts as cut short.
		rctx, rcancel := detached(ctx)
		defer rcancel()
		(&completeAttempt{session: session}).release(rctx)
		return nil, fmt.Errorf("grant complete attempt lease: %w", context.Cause(ctx))
	}
	return &completeAttempt{
		session: session,
		key:     s.store.Keys().CompleteAttempt(c.UploadID),
		id:      c.RequestID,
	}, nil
}

// claim is the guard of a transition to completing: no other attempt is
// live, and this one becomes it.
func (a *completeAttempt) claim() guard {
	return guard{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0)},
		ops:  []clientv3.Op{clientv3.OpPut(a.key, a.id, clientv3.WithLease(a.session.Lease()))},
	}
}

// owned is the guard of a transition only the live attempt may make
// (returning the session to active after the backend refused the complete).
func (a *completeAttempt) owned() guard {
	return guard{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.Value(a.key), "=", a.id)},
		ops:  []clientv3.Op{clientv3.OpDelete(a.key)},
	}
}

// done is the guard of recording an outcome the backend confirmed (a
// success is recorded even if another attempt took over meanwhile): it ends
// this attempt if it is still the live one, in the same transaction.
func (a *completeAttempt) done() guard {
	mine := []clientv3.Cmp{clientv3.Compare(clientv3.Value(a.key), "=", a.id)}
	return guard{ops: []clientv3.Op{clientv3.OpTxn(mine, []clientv3.Op{clientv3.OpDelete(a.key)}, nil)}}
}

// live reports whether some attempt holds the upload's complete.
func (a *completeAttempt) live(ctx context.Context) (bool, error) {
	resp, err := a.session.Client().Get(ctx, a.key, clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read complete attempt: %w", err)
	}
	return resp.Count > 0, nil
}

// release ends the attempt: its session stops renewing the lease, which is
// revoked, deleting its key if it still holds it.
func (a *completeAttempt) release(ctx context.Context) {
	a.session.Orphan()
	_, _ = a.session.Client().Revoke(ctx, a.session.Lease())
}
