package sweep

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrFenced says etcd refused a write because the term that made it has
// ended: another reclaimer may lead now, so this one must stop acting.
var ErrFenced = errors.New("sweep: write refused by the fence: this term has ended")

// ErrChanged says a record the write compared changed since it was read:
// the decision it carried no longer holds and is dropped, not retried.
var ErrChanged = errors.New("sweep: record changed since it was read")

// Term is what a write needs to be fenced: the leader key and the create
// revision it had when the term was won. The zero Term holds no term: its
// fence never holds.
type Term struct {
	N   int64
	Key string
}

// Fence is the comparison that makes etcd refuse the write once the term
// has ended.
func (t Term) Fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.N)
}

// FencedTxn commits ops if the term still holds and cmps hold. It tells a
// lost term (ErrFenced) from a changed record (ErrChanged) by reading the
// leader key when the comparison fails, so the caller stops for the one and
// merely skips the decision for the other.
func FencedTxn(ctx context.Context, c *clientv3.Client, t Term, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	all := append([]clientv3.Cmp{t.Fence()}, cmps...)
	resp, err := c.Txn(ctx).If(all...).Then(ops...).Else(clientv3.OpGet(t.Key)).Commit()
	if err != nil {
		return nil, fmt.Errorf("sweep: etcd write: %w", err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || kvs[0].CreateRevision != t.N {
		return nil, ErrFenced
	}
	return nil, ErrChanged
}

// IsCompacted reports whether err says a read asked for a compacted
// revision.
func IsCompacted(err error) bool {
	return errors.Is(err, rpctypes.ErrCompacted)
}
