package digestsweep

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// contentRelease returns the comparisons and writes that remove what a
// deleted blob named (its key's references, recorded when the blob is
// content, cas.Namespace.Content), to commit with the record of its
// deletion. What it named stays retained until then, and then only by
// other references.
//
// Only a record with no write in flight is removed, compared at the
// revision read: the blob's guard is armed, so no write of its key can
// begin (a write places the blob first, which a guard refuses), and the
// record read is the one the deleted bytes made.
func (s *digestSweep) contentRelease(ctx context.Context, t etcdstore.Tombstone) ([]clientv3.Cmp, []clientv3.Op, error) {
	if ns, _, _ := s.cfg.Layout.Namespace(t.Bucket, t.Key); ns == nil || ns.Content == "" {
		return nil, nil, nil
	}
	rec, err := s.store.GetRefSource(ctx, t.Bucket, t.Key)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("digestsweep: read what blob %s named: %w", t.Digest, err)
	}
	if rec.Value.Pending != nil {
		// Cannot happen under the guard; keeping the record only retains
		// more.
		s.log.Warn("a deleted blob's key has a write in flight; what the blob named stays retained", "digest", t.Digest, "key", t.Key)
		return nil, nil, nil
	}
	keys := s.keys()
	source := keys.RefSource(t.Bucket, t.Key)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(source), "=", rec.ModRev)}
	ops := []clientv3.Op{clientv3.OpDelete(source)}
	for _, d := range rec.Value.All() {
		ops = append(ops, clientv3.OpDelete(keys.Ref(d, t.Bucket, t.Key)))
	}
	return cmps, ops, nil
}
