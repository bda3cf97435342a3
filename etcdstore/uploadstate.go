package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
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
	// LastPart is the newest part record by its time (zero when there is
	// none). From keyspace schema 2 a part's end is recorded by its part
	// record alone, so its time is activity (RecordedActivity).
	LastPart Part
}

// RecordedActivity is the newest activity recorded for the upload: the
// activity key's, or the end of its newest recorded part when that is
// later; nil when neither exists.
func (st UploadState) RecordedActivity() *Activity {
	var act *Activity
	if st.Activity != nil {
		a := st.Activity.Value
		act = &a
	}
	return NewestActivity(act, st.LastPart)
}

// NewestActivity is act, or the end of part p when it is later (a part
// with no time is none).
func NewestActivity(act *Activity, p Part) *Activity {
	if p.At.IsZero() || (act != nil && !p.At.After(act.At)) {
		return act
	}
	return &Activity{At: p.At, What: "part recorded", Part: p.Number}
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
	return s.statesAt(ctx, rev, uploads, nil)
}

// UploadStatesInOrderAt is UploadStatesAt for uploads of one bucket given
// in session key order (SessionOrder): it reads their sessions with one
// range scan from the first upload's session to the last one's, in pages
// of at most len(uploads) keys, instead of one read each, and passes over
// the other sessions of that stretch without decoding them. A caller that
// hands it the consecutive stretches of one sorted listing of a bucket
// reads each session of the bucket at most once in all. Uploads of
// several buckets, or out of order, are read as UploadStatesAt reads
// them; either way the states are UploadStatesAt's.
func (s *Store) UploadStatesInOrderAt(ctx context.Context, rev int64, uploads []UploadRef) ([]UploadState, error) {
	sorted := len(uploads) > 0
	for i := 1; i < len(uploads) && sorted; i++ {
		sorted = uploads[i].Bucket == uploads[0].Bucket && SessionOrder(uploads[i-1].UploadID, uploads[i].UploadID) <= 0
	}
	if !sorted {
		return s.statesAt(ctx, rev, uploads, nil)
	}
	return s.statesAt(ctx, rev, uploads, &SessionStretch{})
}

// SessionStretch widens the range scan of UploadStatesInStretchAt from its
// uploads' sessions to a stretch of their bucket's session keys, so that
// the in-order reads of the consecutive batches of a bucket's whole sorted
// listing read each session of the bucket once, listed or not.
type SessionStretch struct {
	// FromStart starts the stretch at the bucket's first session key;
	// otherwise it starts just past the session key of upload After (the
	// last of the batch before), or at the first upload's when that is not
	// past it.
	FromStart bool
	After     string
	// ToEnd ends the stretch at the bucket's last session key rather than
	// at the last upload's.
	ToEnd bool
	// Other is called, in key order, with each session of the stretch
	// whose key is none of the uploads'; an error from it ends the read
	// and is returned.
	Other func(Versioned[Session]) error
}

// UploadStatesInStretchAt is UploadStatesInOrderAt for uploads of one
// bucket in session key order (anything else is an error), whose range
// scan covers stretch: each session in it that is not one of the uploads'
// is decoded and handed to stretch.Other. The states are UploadStatesAt's.
func (s *Store) UploadStatesInStretchAt(ctx context.Context, rev int64, uploads []UploadRef, stretch SessionStretch) ([]UploadState, error) {
	if len(uploads) == 0 {
		return nil, errors.New("read uploads in a stretch: no uploads")
	}
	for i := 1; i < len(uploads); i++ {
		if uploads[i].Bucket != uploads[0].Bucket || SessionOrder(uploads[i-1].UploadID, uploads[i].UploadID) > 0 {
			return nil, errors.New("read uploads in a stretch: uploads not of one bucket in session key order")
		}
	}
	return s.statesAt(ctx, rev, uploads, &stretch)
}

// SessionOrder compares two upload ids of one bucket in the order of
// their session keys.
func SessionOrder(a, b string) int {
	return strings.Compare(url.PathEscape(a), url.PathEscape(b))
}

// InSessionOrder returns the indexes of uploadIDs (of one bucket) in the
// order of their session keys, each id escaped once.
func InSessionOrder(uploadIDs []string) []int {
	esc := make([]string, len(uploadIDs))
	order := make([]int, len(uploadIDs))
	for i, id := range uploadIDs {
		esc[i], order[i] = url.PathEscape(id), i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(esc[a], esc[b]) })
	return order
}

// statesAt reads the states of uploads, their sessions by one range scan
// over stretch when it is not nil (uploads of one bucket in session key
// order).
func (s *Store) statesAt(ctx context.Context, rev int64, uploads []UploadRef, stretch *SessionStretch) ([]UploadState, error) {
	ranged := stretch != nil
	out := make([]UploadState, len(uploads))
	ops := uploadStateOps
	if ranged {
		ops--
	}
	per := maxTxnOps / ops
	errs := make([]error, (len(uploads)+per-1)/per+2)
	sem := make(chan struct{}, uploadStateTxns)
	var wg sync.WaitGroup
	wg.Go(func() { errs[len(errs)-1] = s.inFlightStates(ctx, rev, uploads, out) })
	if ranged {
		wg.Go(func() { errs[len(errs)-2] = s.sessionStates(ctx, rev, uploads, out, stretch) })
	}
	for i := range errs[:len(errs)-2] {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			first := i * per
			batch := uploads[first:min(first+per, len(uploads))]
			errs[i] = s.uploadStates(ctx, rev, batch, out[first:first+len(batch)], !ranged)
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// sessionStates sets the Session of out (the states of uploads, of one
// bucket in session key order) from one range scan at rev over the stretch
// of session keys from the first upload to the last, widened by stretch,
// and hands the other sessions in it to stretch.Other. It writes no other
// field.
func (s *Store) sessionStates(ctx context.Context, rev int64, uploads []UploadRef, out []UploadState, stretch *SessionStretch) error {
	keys := make([]string, len(uploads))
	for i, u := range uploads {
		keys[i] = s.keys.Session(u.Bucket, u.UploadID)
	}
	from, to := keys[0], keys[len(keys)-1]+"\x00"
	prefix := s.keys.Sessions(uploads[0].Bucket)
	switch {
	case stretch.FromStart:
		from = prefix
	case stretch.After != "":
		from = min(from, s.keys.Session(uploads[0].Bucket, stretch.After)+"\x00")
	}
	if stretch.ToEnd {
		to = clientv3.GetPrefixRangeEnd(prefix)
	}
	var err error
	i := 0
	_, scanErr := s.rangeScan(ctx, from, to, rev, int64(max(len(keys), 100)), func(kv *mvccpb.KeyValue) bool {
		key := string(kv.Key)
		for i < len(keys) && keys[i] < key {
			i++
		}
		var sess *Versioned[Session]
		for ; i < len(keys) && keys[i] == key; i++ {
			if sess == nil {
				if sess, err = decodeSession(kv); err != nil {
					return false
				}
			}
			out[i].Session = sess
		}
		if stretch.Other == nil {
			return i < len(keys)
		}
		if sess == nil {
			if sess, err = decodeSession(kv); err == nil {
				err = stretch.Other(*sess)
			}
		}
		return err == nil
	})
	if scanErr != nil {
		return fmt.Errorf("read uploads at revision %d: sessions: %w", rev, scanErr)
	}
	return err
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
	var decodeErr error
	_, err := s.rangeScan(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), rev, 0, func(kv *mvccpb.KeyValue) bool {
		esc, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		for _, i := range at[esc] {
			st := &out[i]
			st.InFlight++
			if st.InFlight > inFlightSince {
				continue
			}
			var a Activity
			if decodeErr = DecodeKV(ActivityRecord, kv, &a); decodeErr != nil {
				return false
			}
			if a.At.After(st.InFlightSince) {
				st.InFlightSince = a.At
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("read parts in flight at revision %d: %w", rev, err)
	}
	return decodeErr
}

// uploadStates reads batch's records at rev in one transaction into out:
// the session (when withSession), the activity and the part records.
func (s *Store) uploadStates(ctx context.Context, rev int64, batch []UploadRef, out []UploadState, withSession bool) error {
	per := uploadStateOps
	if !withSession {
		per--
	}
	ops := make([]clientv3.Op, 0, per*len(batch))
	for _, u := range batch {
		if withSession {
			ops = append(ops, clientv3.OpGet(s.keys.Session(u.Bucket, u.UploadID), clientv3.WithRev(rev)))
		}
		ops = append(ops,
			clientv3.OpGet(s.keys.Activity(u.UploadID), clientv3.WithRev(rev)),
			clientv3.OpGet(s.keys.Parts(u.UploadID), clientv3.WithPrefix(), clientv3.WithRev(rev)))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("read uploads at revision %d: %w", rev, err)
	}
	for i := range batch {
		rs := resp.Responses[per*i : per*(i+1)]
		if withSession {
			if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				if out[i].Session, err = decodeSession(kvs[0]); err != nil {
					return err
				}
			}
			rs = rs[1:]
		}
		if err = uploadState(rs, &out[i]); err != nil {
			return err
		}
	}
	return nil
}

// decodeSession decodes a session record read with its revision.
func decodeSession(kv *mvccpb.KeyValue) (*Versioned[Session], error) {
	var sess Session
	if err := DecodeKV(SessionRecord, kv, &sess); err != nil {
		return nil, err
	}
	return &Versioned[Session]{Value: sess, ModRev: kv.ModRevision}, nil
}

// uploadState decodes one upload's activity and part reads, in the order
// uploadStates makes them, into st.
func uploadState(rs []*etcdserverpb.ResponseOp, st *UploadState) error {
	if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		var a Activity
		if err := DecodeKV(ActivityRecord, kvs[0], &a); err != nil {
			return err
		}
		st.Activity = &Versioned[Activity]{Value: a, ModRev: kvs[0].ModRevision}
	}
	for _, kv := range rs[1].GetResponseRange().GetKvs() {
		p, err := DecodePart(string(kv.Key), kv.Value)
		if err != nil {
			return err
		}
		st.Parts++
		st.Bytes += p.Size
		if p.At.After(st.LastPart.At) {
			st.LastPart = p
		}
	}
	return nil
}
