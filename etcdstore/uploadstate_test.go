//go:build integration

package etcdstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestUploadStatesAt: one upload's session, activity, part in flight and
// part records, and another's absence, read as they were at a revision
// that later writes do not change; more uploads than one transaction
// holds come back in order.
func TestUploadStatesAt(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if _, err := st.CreateSession(ctx, &Session{Bucket: "b", UploadID: "u", State: StateActive}); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if err := st.PutPart(ctx, "u", Part{Number: n, ETag: "e", Size: int64(10 * n), At: at}); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := st.cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := st.cli.Txn(ctx).Then(st.ActivityOp("u", Activity{At: at}), st.InFlightOp("u", "p1", Activity{At: at.Add(time.Minute)}, lease.ID)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	// After the revision: none of this may show.
	if err := st.PutPart(ctx, "u", Part{Number: 4, Size: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSession(ctx, &Session{Bucket: "b", UploadID: "later", State: StateActive}); err != nil {
		t.Fatal(err)
	}
	refs := []UploadRef{{"b", "u"}}
	for range 40 {
		refs = append(refs, UploadRef{"b", "later"})
	}
	states, err := st.UploadStatesAt(ctx, rev, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != len(refs) {
		t.Fatalf("%d states for %d uploads", len(states), len(refs))
	}
	u := states[0]
	if u.Session == nil || u.Session.Value.UploadID != "u" || u.Activity == nil || !u.Activity.Value.At.Equal(at) ||
		u.InFlight != 1 || !u.InFlightSince.Equal(at.Add(time.Minute)) || u.Parts != 3 || u.Bytes != 60 {
		t.Errorf("upload u at revision %d = %+v; want its session, activity, one part in flight and 3 parts of 60 bytes", rev, u)
	}
	for i, s := range states[1:] {
		if s.Session != nil || s.Activity != nil || s.InFlight != 0 || s.Parts != 0 {
			t.Fatalf("upload %d, made after the revision: %+v", i+1, s)
		}
	}
}

// TestUploadStatesAtOracle: for generated uploads (sessions in random
// states and ages or none, activity or none, parts in flight from none to
// past the 100 whose latest start counts, part records from none to
// several, ids that need escaping, orphans with no record at all, uploads
// listed twice), UploadStatesAt returns what the per-upload reads return
// at the same revision (GetSessionAt, GetActivityAt, InFlightAt and a
// range of the upload's part records), also after the records change.
func TestUploadStatesAtOracle(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 8))
	lease, err := st.cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	var refs []UploadRef
	write := func(n int) { refs = append(refs, writeUploads(t, st, rng, lease.ID, len(refs), n)...) }
	check := func(rev int64, refs []UploadRef) {
		t.Helper()
		got, err := st.UploadStatesAt(ctx, rev, refs)
		if err != nil {
			t.Fatal(err)
		}
		for i, u := range refs {
			var want UploadState
			if s, err := st.GetSessionAt(ctx, u.Bucket, u.UploadID, rev); err == nil {
				want.Session = &s
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if a, err := st.GetActivityAt(ctx, u.UploadID, rev); err == nil {
				want.Activity = &a
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if want.InFlight, want.InFlightSince, err = st.InFlightAt(ctx, u.UploadID, rev); err != nil {
				t.Fatal(err)
			}
			resp, err := st.cli.Get(ctx, st.keys.Parts(u.UploadID), clientv3.WithPrefix(), clientv3.WithRev(rev))
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range resp.Kvs {
				p, err := DecodePart(string(kv.Key), kv.Value)
				if err != nil {
					t.Fatal(err)
				}
				want.Parts++
				want.Bytes += p.Size
				// The newest by time; of several as new, the first in key
				// order.
				if p.At.After(want.LastPart.At) {
					want.LastPart = p
				}
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Fatalf("upload %d %+v at revision %d:\n got %+v\nwant %+v", i, u, rev, got[i], want)
			}
		}
	}
	write(300)
	// A session no listed upload has, that does not decode: a range scan
	// passing over it must not decode it.
	if _, err := st.cli.Put(ctx, st.keys.Session("b1", "u-junk"), "{"); err != nil {
		t.Fatal(err)
	}
	rev := reclaimTestRevision(t, ctx, st)
	// Orphans (no record), and uploads listed twice.
	listed := append(slices.Clone(refs), UploadRef{"b0", "none"}, UploadRef{"b1", "none/x"}, refs[3], refs[7])
	rng.Shuffle(len(listed), func(i, j int) { listed[i], listed[j] = listed[j], listed[i] })
	check(rev, listed)
	// Later writes, and the removal of every part in flight, change
	// nothing at rev.
	write(100)
	if _, err := st.cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	check(rev, listed)
	check(reclaimTestRevision(t, ctx, st), refs)
}

// TestUploadStatesInOrderAtOracle: UploadStatesInOrderAt returns what
// UploadStatesAt returns for the same uploads at the same revision: for
// each bucket's generated uploads (with uploads of no record, listed
// twice, ids that need escaping, unlisted sessions in between) sorted in
// session key order and read in consecutive stretches of several sizes,
// and for uploads out of order or of several buckets.
func TestUploadStatesInOrderAtOracle(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(9, 10))
	lease, err := st.cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	refs := writeUploads(t, st, rng, lease.ID, 0, 300)
	if _, err := st.cli.Put(ctx, st.keys.Session("b1", "u-junk"), "{"); err != nil {
		t.Fatal(err)
	}
	// Sessions before and after every listed upload's.
	for _, b := range []string{"b0", "b1", "b2"} {
		for _, id := range []string{"a-first", "zz-last"} {
			val, err := MarshalSession(&Session{Bucket: b, Key: "k", UploadID: id, State: StateActive})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.cli.Put(ctx, st.keys.Session(b, id), val); err != nil {
				t.Fatal(err)
			}
		}
	}
	rev := reclaimTestRevision(t, ctx, st)
	writeUploads(t, st, rng, lease.ID, 300, 60) // after rev: none may show
	check := func(refs []UploadRef) {
		t.Helper()
		want, err := st.UploadStatesAt(ctx, rev, refs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.UploadStatesInOrderAt(ctx, rev, refs)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("upload %d %+v at revision %d:\n got %+v\nwant %+v", i, refs[i], rev, got[i], want[i])
				}
			}
		}
	}
	sessions := 0
	for _, b := range []string{"b0", "b1", "b2"} {
		var listed []UploadRef
		for i, u := range refs {
			// Every third upload is not listed: its session lies between
			// listed ones.
			if u.Bucket == b && i%3 > 0 {
				listed = append(listed, u)
			}
		}
		listed = append(listed, UploadRef{b, "none"}, UploadRef{b, "none/x"}, listed[3], listed[7])
		ids := make([]string, len(listed))
		for i, u := range listed {
			ids[i] = u.UploadID
		}
		sorted := make([]UploadRef, 0, len(listed))
		for _, i := range InSessionOrder(ids) {
			sorted = append(sorted, listed[i])
		}
		if !slices.IsSortedFunc(sorted, func(x, y UploadRef) int {
			return strings.Compare(st.keys.Session(b, x.UploadID), st.keys.Session(b, y.UploadID))
		}) {
			t.Fatal("InSessionOrder does not sort in session key order")
		}
		listed = sorted
		for _, size := range []int{1, 7, 64, len(listed)} {
			for first := 0; first < len(listed); first += size {
				check(listed[first:min(first+size, len(listed))])
			}
			checkStretches(t, st, rev, listed, size)
		}
		for _, u := range listed {
			if resp, err := st.GetSessionAt(ctx, u.Bucket, u.UploadID, rev); err == nil && resp.Value.UploadID == u.UploadID {
				sessions++
			}
		}
	}
	if sessions < 100 {
		t.Fatalf("only %d listed uploads have a session: the oracle compares too little", sessions)
	}
	mixed := slices.Clone(refs)
	rng.Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
	check(mixed)
	check(nil)
}

// checkStretches reads listed (uploads of one bucket in session key order)
// in consecutive batches of size with UploadStatesInStretchAt, the
// stretches covering the bucket, and checks that the states are
// UploadStatesAt's and that the sessions handed to Other are the ones
// ScanSessionsExceptAt finds without the listed uploads', in the same
// order; both fail alike on an undecodable session.
func checkStretches(t *testing.T, st *Store, rev int64, listed []UploadRef, size int) {
	t.Helper()
	ctx := t.Context()
	bucket := listed[0].Bucket
	isListed := map[string]bool{}
	for _, u := range listed {
		isListed[u.UploadID] = true
	}
	var want []Versioned[Session]
	wantErr := st.ScanSessionsExceptAt(ctx, bucket, rev, 100, func(id string) bool { return isListed[id] }, func(v Versioned[Session]) error {
		want = append(want, v)
		return nil
	})
	var got []Versioned[Session]
	var gotErr error
	for first := 0; first < len(listed) && gotErr == nil; first += size {
		batch := listed[first:min(first+size, len(listed))]
		stretch := SessionStretch{FromStart: first == 0, ToEnd: first+size >= len(listed), Other: func(v Versioned[Session]) error {
			got = append(got, v)
			return nil
		}}
		if first > 0 {
			stretch.After = listed[first-1].UploadID
		}
		var states []UploadState
		if states, gotErr = st.UploadStatesInStretchAt(ctx, rev, batch, stretch); gotErr != nil {
			break
		}
		wantStates, err := st.UploadStatesAt(ctx, rev, batch)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(states, wantStates) {
			t.Fatalf("bucket %s, batch at %d of %d: the states are not UploadStatesAt's", bucket, first, size)
		}
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("bucket %s, batches of %d: stretches failed with %v, the scan with %v", bucket, size, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("bucket %s, batches of %d: the stretches found %d other sessions, the scan %d (or in another order)", bucket, size, len(got), len(want))
	}
	if wantErr == nil && len(want) == 0 {
		t.Fatalf("bucket %s: no session without a listed upload: the oracle compares too little", bucket)
	}
}

// writeUploads writes the records of n generated uploads, numbered from
// first, for TestUploadStatesAtOracle; parts in flight live under lease.
func writeUploads(t *testing.T, st *Store, rng *rand.Rand, lease clientv3.LeaseID, first, n int) []UploadRef {
	t.Helper()
	ctx := t.Context()
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ago := func() time.Time { return base.Add(-time.Duration(rng.Int64N(int64(72 * time.Hour)))) }
	var refs []UploadRef
	for i := range n {
		u := UploadRef{Bucket: fmt.Sprintf("b%d", rng.IntN(3)), UploadID: fmt.Sprintf("u%d-%x", (first + i), rng.Uint32())}
		if i%17 == 0 {
			u.UploadID += "/+ %é" // escaped in every key
		}
		refs = append(refs, u)
		var ops []clientv3.Op
		if rng.IntN(5) > 0 {
			sess := &Session{Bucket: u.Bucket, Key: "k", UploadID: u.UploadID, State: AllStates[rng.IntN(len(AllStates))], Created: ago(), LastActivity: ago()}
			val, err := MarshalSession(sess)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, clientv3.OpPut(st.keys.Session(u.Bucket, u.UploadID), val))
		}
		if rng.IntN(2) == 0 {
			ops = append(ops, st.ActivityOp(u.UploadID, Activity{At: ago()}))
		}
		inflight := []int{0, 0, 0, 1, 2, 5}[rng.IntN(6)]
		if i == 3 {
			inflight = 105 // past the 100 whose latest start counts
		}
		for p := range inflight {
			at := ago()
			if p >= 100 {
				at = base // later than any other: it must not count
			}
			ops = append(ops, st.InFlightOp(u.UploadID, fmt.Sprintf("p%03d", p), Activity{At: at}, lease))
		}
		for p := range rng.IntN(6) {
			val, _ := json.Marshal(Part{Number: p + 1, ETag: "e", Size: rng.Int64N(1 << 20), At: ago()})
			ops = append(ops, clientv3.OpPut(st.keys.Part(u.UploadID, p+1), string(val)))
		}
		for len(ops) > 0 {
			batch := ops[:min(len(ops), maxTxnOps)]
			ops = ops[len(batch):]
			if _, err := st.cli.Txn(ctx).Then(batch...).Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return refs
}
