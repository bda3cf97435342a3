package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
	uploadStateOps  = 3
	uploadStateTxns = 4
	// inFlightSince is how many of an upload's parts in flight, in key
	// order, its InFlightSince is the latest of.
	inFlightSince = 100
)

// UploadStatesAt reads the records of each upload as they were at
// revision rev: its session, activity and part records in read-only
// transactions of up to maxTxnOps reads (uploadStateOps per upload),
// uploadStateTxns at once, rather than several requests per upload, and
// the parts in flight of all of them in one scan of the records of parts
// in flight (few: each lives while a part streams through a gateway). It
// is the state a pass classifies uploads by. States come in the order of
// uploads. A record that does not decode fails the read.
func (s *Store) UploadStatesAt(ctx context.Context, rev int64, uploads []UploadRef) ([]UploadState, error) {
	out := make([]UploadState, len(uploads))
	per := maxTxnOps / uploadStateOps
	errs := make([]error, (len(uploads)+per-1)/per+1)
	sem := make(chan struct{}, uploadStateTxns)
	var wg sync.WaitGroup
	wg.Go(func() { errs[len(errs)-1] = s.inFlightStates(ctx, rev, uploads, out) })
	for i := range errs[:len(errs)-1] {
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

// inFlightStates sets InFlight and InFlightSince of out (the states of
// uploads) from one scan of every part in flight at rev: the count of an
// upload's records, and the latest start among its first inFlightSince
// in key order. It writes no other field.
func (s *Store) inFlightStates(ctx context.Context, rev int64, uploads []UploadRef, out []UploadState) error {
	if len(uploads) == 0 {
		return nil
	}
	at := make(map[string][]int, len(uploads)) // escaped upload id -> indexes
	for i, u := range uploads {
		esc := url.PathEscape(u.UploadID)
		at[esc] = append(at[esc], i)
	}
	prefix := s.keys.Root() + "inflight/"
	_, err := s.rangeScan(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), rev, 0, func(kv *mvccpb.KeyValue) bool {
		esc, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		for _, i := range at[esc] {
			st := &out[i]
			st.InFlight++
			var a Activity
			if st.InFlight <= inFlightSince && json.Unmarshal(kv.Value, &a) == nil && a.At.After(st.InFlightSince) {
				st.InFlightSince = a.At
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("read parts in flight at revision %d: %w", rev, err)
	}
	return nil
}

// uploadStates reads batch's records at rev in one transaction into out,
// all but the parts in flight.
func (s *Store) uploadStates(ctx context.Context, rev int64, batch []UploadRef, out []UploadState) error {
	ops := make([]clientv3.Op, 0, uploadStateOps*len(batch))
	for _, u := range batch {
		ops = append(ops,
			clientv3.OpGet(s.keys.Session(u.Bucket, u.UploadID), clientv3.WithRev(rev)),
			clientv3.OpGet(s.keys.Activity(u.UploadID), clientv3.WithRev(rev)),
			clientv3.OpGet(s.keys.Parts(u.UploadID), clientv3.WithPrefix(), clientv3.WithRev(rev)))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("read uploads at revision %d: %w", rev, err)
	}
	for i := range batch {
		if err = uploadState(resp.Responses[uploadStateOps*i:uploadStateOps*(i+1)], &out[i]); err != nil {
			return err
		}
	}
	return nil
}

// uploadState decodes one upload's reads, in the order uploadStates makes
// them, into st.
func uploadState(rs []*etcdserverpb.ResponseOp, st *UploadState) error {
	if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		var sess Session
		if err := json.Unmarshal(kvs[0].Value, &sess); err != nil {
			return fmt.Errorf("decode session %s: %w", kvs[0].Key, err)
		}
		st.Session = &Versioned[Session]{Value: sess, ModRev: kvs[0].ModRevision}
	}
	if kvs := rs[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		var a Activity
		if err := json.Unmarshal(kvs[0].Value, &a); err != nil {
			return fmt.Errorf("decode activity %s: %w", kvs[0].Key, err)
		}
		st.Activity = &Versioned[Activity]{Value: a, ModRev: kvs[0].ModRevision}
	}
	for _, kv := range rs[2].GetResponseRange().GetKvs() {
		var p Part
		if err := json.Unmarshal(kv.Value, &p); err != nil {
			return fmt.Errorf("decode part %s: %w", kv.Key, err)
		}
		st.Parts++
		st.Bytes += p.Size
	}
	return nil
}
