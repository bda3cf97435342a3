package digestsweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// unrecorded looks at the records of completes into a reference source
// whose object's references may not be recorded (etcdstore.UnrecordedWrite)
// and returns why the pass keeps everything, or "". Such an object may name
// any blob, so while one record stands no blob is deleted:
//
//   - a record whose hold still exists is a complete in flight;
//   - a record whose hold is gone but which is not settled belongs to a
//     gateway that stopped mid-complete: it is written again, settled, so
//     that its mod revision comes after any write of the object;
//   - a settled record is deleted once a complete rebuild started after
//     its last write (Proof greater than its mod revision): that rebuild
//     read the object and recorded what it names.
//
// Every write is fenced and compares the record as read; a dry run writes
// nothing and only says why it would keep everything.
func (s *digestSweep) unrecorded(ctx context.Context) (string, error) {
	keys := s.keys()
	resp, err := s.cli().Get(ctx, keys.Unrecorded(), clientv3.WithPrefix())
	if err != nil {
		return "", fmt.Errorf("digestsweep: read unrecorded completes: %w", err)
	}
	waiting := 0
	var first etcdstore.UnrecordedWrite
	for _, kv := range resp.Kvs {
		var u etcdstore.UnrecordedWrite
		if err := json.Unmarshal(kv.Value, &u); err != nil {
			// A record that does not decode keeps everything, for a person.
			s.log.Error("record of an unrecorded complete does not decode; everything is kept", "key", string(kv.Key))
			waiting++
			continue
		}
		cmp := clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)
		hold, err := s.cli().Get(ctx, keys.RefHold(u.ID), clientv3.WithCountOnly())
		if err != nil {
			return "", fmt.Errorf("digestsweep: read reference hold: %w", err)
		}
		switch {
		case hold.Count > 0:
		case !u.Settled:
			if !s.dry {
				u.Settled, u.Reason = true, "its complete's hold ended before the references were recorded (the gateway stopped)"
				if _, err := sweep.FencedTxn(ctx, s.cli(), s.term, []clientv3.Cmp{cmp}, clientv3.OpPut(string(kv.Key), etcdstore.MarshalRecord(u))); err != nil && !errors.Is(err, sweep.ErrChanged) {
					return "", err
				}
			}
			s.log.Warn("complete into a reference source left unrecorded by a gateway that stopped; everything is kept until a rebuild reads it", "bucket", u.Bucket, "key", u.Key, "complete", u.ID)
		case s.cur.Rebuild.Proof > kv.ModRevision:
			if !s.dry {
				if _, err := sweep.FencedTxn(ctx, s.cli(), s.term, []clientv3.Cmp{cmp}, clientv3.OpDelete(string(kv.Key))); err != nil && !errors.Is(err, sweep.ErrChanged) {
					return "", err
				}
			}
			s.log.Info("unrecorded complete read by a rebuild that started after it; its record is removed", "bucket", u.Bucket, "key", u.Key, "complete", u.ID)
			continue
		}
		if waiting == 0 {
			first = u
		}
		waiting++
	}
	if waiting == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d completed reference object(s) whose references are not recorded (%s/%s among them): everything is kept until a rebuild that starts after them has read every source", waiting, first.Bucket, first.Key), nil
}
