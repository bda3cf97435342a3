package etcdstore

import (
	"testing"
	"time"
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
