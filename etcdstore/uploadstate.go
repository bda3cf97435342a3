package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// UploadRef names one upload whose records UploadStatesAt reads.
type UploadRef struct {
	Bucket, UploadID string
}

// UploadState is what etcd held about one upload at a revision: its
// session, its recorded activity, its parts in flight and the parts the
// gateway recorded. Session and Activity are nil when there was none.
type UploadState struct {
	Session  *Versioned[Session]
	Activity *Versioned[Activity]
	// InFlight counts the parts in flight; InFlightSince is the latest
	// start among them.
	InFlight      int
	InFlightSince time.Time
	// Parts and Bytes add up the part records (one per part number).
	Parts int
	Bytes int64
}

// uploadStateOps is how many reads UploadStatesAt makes per upload, and
// uploadStateTxns how many of its transactions are in flight at once.
const (
	uploadStateOps  = 4
	uploadStateTxns = 4
)

// UploadStatesAt reads the records of each upload as they were at
// revision rev, in read-only transactions of up to maxTxnOps reads
// (uploadStateOps per upload), uploadStateTxns at once, rather than
// several requests per upload: the state a pass classifies uploads by.
// States come in the order of uploads. A record that does not decode fails
// the read.
func (s *Store) UploadStatesAt(ctx context.Context, rev int64, uploads []UploadRef) ([]UploadState, error) {
	out := make([]UploadState, len(uploads))
	per := maxTxnOps / uploadStateOps
	errs := make([]error, (len(uploads)+per-1)/per)
	sem := make(chan struct{}, uploadStateTxns)
	var wg sync.WaitGroup
	for i := range errs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			first := i * per
			batch := uploads[first:min(first+per, len(uploads))]
			errs[i] = s.uploadStates(ctx, rev, batch, out[first:first+len(batch)])
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// uploadStates reads batch's records at rev in one transaction into out.
func (s *Store) uploadStates(ctx context.Context, rev int64, batch []UploadRef, out []UploadState) error {
	ops := make([]clientv3.Op, 0, uploadStateOps*len(batch))
	for _, u := range batch {
		ops = append(ops,
			clientv3.OpGet(s.keys.Session(u.Bucket, u.UploadID), clientv3.WithRev(rev)),
			clientv3.OpGet(s.keys.Activity(u.UploadID), clientv3.WithRev(rev)),
			clientv3.OpGet(s.keys.InFlight(u.UploadID), clientv3.WithPrefix(), clientv3.WithLimit(100), clientv3.WithRev(rev)),
			clientv3.OpGet(s.keys.Parts(u.UploadID), clientv3.WithPrefix(), clientv3.WithRev(rev)))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("read uploads at revision %d: %w", rev, err)
	}
	for i := range batch {
		if out[i], err = uploadState(resp.Responses[uploadStateOps*i : uploadStateOps*(i+1)]); err != nil {
			return err
		}
	}
	return nil
}

// uploadState decodes one upload's reads, in the order UploadStatesAt
// makes them.
func uploadState(rs []*etcdserverpb.ResponseOp) (UploadState, error) {
	var st UploadState
	if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		var sess Session
		if err := json.Unmarshal(kvs[0].Value, &sess); err != nil {
			return st, fmt.Errorf("decode session %s: %w", kvs[0].Key, err)
		}
		st.Session = &Versioned[Session]{Value: sess, ModRev: kvs[0].ModRevision}
	}
	if kvs := rs[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		var a Activity
		if err := json.Unmarshal(kvs[0].Value, &a); err != nil {
			return st, fmt.Errorf("decode activity %s: %w", kvs[0].Key, err)
		}
		st.Activity = &Versioned[Activity]{Value: a, ModRev: kvs[0].ModRevision}
	}
	inflight := rs[2].GetResponseRange()
	st.InFlight = int(inflight.GetCount())
	for _, kv := range inflight.GetKvs() {
		var a Activity
		if json.Unmarshal(kv.Value, &a) == nil && a.At.After(st.InFlightSince) {
			st.InFlightSince = a.At
		}
	}
	for _, kv := range rs[3].GetResponseRange().GetKvs() {
		var p Part
		if err := json.Unmarshal(kv.Value, &p); err != nil {
			return st, fmt.Errorf("decode part %s: %w", kv.Key, err)
		}
		st.Parts++
		st.Bytes += p.Size
	}
	return st, nil
}
