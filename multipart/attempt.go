package multipart

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// completeAttempt is one request's hold on the single CompleteMultipartUpload
// of an upload that may be in flight on the backend at a time. Two completes
// in flight could both be answered, one with an error that returns the
// session to active while the other succeeds: then an abort would win too.
//
// The hold is a key under a lease that this gateway renews while the
// backend call runs, so it vanishes on its own when the gateway dies and a
// client's retry can take over.
type completeAttempt struct {
	cli   *clientv3.Client
	key   string
	id    string
	lease clientv3.LeaseID
	stop  context.CancelFunc
}

func (s *Service) newCompleteAttempt(ctx context.Context, c *Call) (*completeAttempt, error) {
	cli := s.store.Client()
	lease, err := cli.Grant(ctx, int64(s.hold/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant complete attempt lease: %w", err)
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	renewals, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		stop()
		return nil, fmt.Errorf("keep complete attempt lease alive: %w", err)
	}
	go func() {
		for range renewals { // drained so the client keeps renewing
		}
	}()
	return &completeAttempt{
		cli:   cli,
		key:   s.store.Keys().CompleteAttempt(c.UploadID),
		id:    c.RequestID,
		lease: lease.ID,
		stop:  stop,
	}, nil
}

// claim is the guard of a transition to completing: no other attempt is
// live, and this one becomes it.
func (a *completeAttempt) claim() guard {
	return guard{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0)},
		ops:  []clientv3.Op{clientv3.OpPut(a.key, a.id, clientv3.WithLease(a.lease))},
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
	resp, err := a.cli.Get(ctx, a.key, clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read complete attempt: %w", err)
	}
	return resp.Count > 0, nil
}

// release ends the attempt: its lease is revoked, which deletes its key if
// it still holds it.
func (a *completeAttempt) release(ctx context.Context) {
	a.stop()
	_, _ = a.cli.Revoke(ctx, a.lease)
}
