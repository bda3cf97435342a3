package reclaim

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/sweep"
)

// ErrFenced says etcd refused a write because the term that made it has
// ended: another reclaimer may lead now, so this one must stop acting.
var ErrFenced = sweep.ErrFenced

// errChanged says a record the write compared changed since it was read:
// the decision it carried no longer holds and is dropped, not retried.
var errChanged = sweep.ErrChanged

// term is what a write needs to be fenced: the leader key and the create
// revision it had when the term was won.
type term = sweep.Term

func termOf(l *Leadership) term { return term{N: l.Term, Key: l.Key} }

// fencedTxn commits ops if the term still holds and cmps hold (see
// sweep.FencedTxn).
func fencedTxn(ctx context.Context, c *clientv3.Client, t term, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	return sweep.FencedTxn(ctx, c, t, cmps, ops...)
}
