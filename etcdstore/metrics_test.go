//go:build integration

package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newMetricsTestStore starts an embedded etcd for one test and returns a
// store over it under a test prefix.
func newMetricsTestStore(t *testing.T) *Store {
	t.Helper()
	e := startEmbedded(t, t.TempDir(), nil)
	t.Cleanup(e.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cli, err := Connect(ctx, e.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	keys, err := NewKeys("/test/")
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(cli, keys)
}

// requestCounts reads how many requests the histogram saw, by op.
func requestCounts(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "sweepgate_etcd_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					out[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

func TestWithMetricsTimesEachOp(t *testing.T) {
	t.Parallel()
	plain := newMetricsTestStore(t)
	reg := prometheus.NewRegistry()
	st := plain.WithMetrics(reg)
	ctx := t.Context()

	// Every op is exported from the start, so a dashboard sees 0, not gaps.
	if got, want := requestCounts(t, reg), (map[string]uint64{"get": 0, "put": 0, "delete": 0, "txn": 0}); !mapsEqual(got, want) {
		t.Fatalf("before any request: %v, want %v", got, want)
	}

	sess := &Session{Bucket: "b", Key: "k", UploadID: "u1", Owner: "alice", State: StateActive, Created: time.Now()}
	if _, err := st.CreateSession(ctx, sess); err != nil { // txn
		t.Fatal(err)
	}
	if _, err := st.GetSession(ctx, "b", "u1"); err != nil { // get
		t.Fatal(err)
	}
	if err := st.PutPart(ctx, "u1", Part{Number: 1, ETag: "e", Size: 5}); err != nil { // put
		t.Fatal(err)
	}
	if _, err := st.cli.Delete(ctx, st.keys.Part("u1", 1)); err != nil { // delete
		t.Fatal(err)
	}
	if _, err := st.cli.Do(ctx, clientv3.OpGet(st.keys.Session("b", "u1"))); err != nil { // get, through Do
		t.Fatal(err)
	}
	// A failed request is timed too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.GetSession(cctx, "b", "u1"); err == nil {
		t.Fatal("GetSession with a cancelled context succeeded")
	}
	want := map[string]uint64{"get": 3, "put": 1, "delete": 1, "txn": 1}
	if got := requestCounts(t, reg); !mapsEqual(got, want) {
		t.Errorf("after the requests: %v, want %v", got, want)
	}

	// The store it came from is untouched, and a second store on the same
	// registry shares the histogram instead of failing to register.
	if _, err := plain.GetSession(ctx, "b", "u1"); err != nil {
		t.Fatal(err)
	}
	again := plain.WithMetrics(reg)
	if _, err := again.GetSession(ctx, "b", "u1"); err != nil {
		t.Fatal(err)
	}
	want["get"]++
	if got := requestCounts(t, reg); !mapsEqual(got, want) {
		t.Errorf("after a second store's read: %v, want %v", got, want)
	}
	if plain.WithMetrics(nil) != plain {
		t.Error("WithMetrics(nil) made a new store")
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestScanSessionsAfter(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	ctx := t.Context()
	// Sessions in two buckets; "a/b" checks that an escaped '/' keeps its
	// place in the order.
	var all []string
	for _, b := range []string{"one", "two"} {
		for i := range 5 {
			id := fmt.Sprintf("u%d", i)
			if i == 4 {
				id = "u4/x"
			}
			if _, err := st.CreateSession(ctx, &Session{Bucket: b, UploadID: id, State: StateActive}); err != nil {
				t.Fatal(err)
			}
			all = append(all, b+" "+id)
		}
	}
	collect := func(scan SessionScan, stopAfter int) ([]string, int64) {
		t.Helper()
		var got []string
		rev, bad, err := st.ScanSessionsAfter(ctx, scan, func(v Versioned[Session]) bool {
			got = append(got, v.Value.Bucket+" "+v.Value.UploadID)
			if v.ModRev == 0 {
				t.Errorf("%s: no mod revision", v.Value.UploadID)
			}
			return stopAfter == 0 || len(got) < stopAfter
		})
		if err != nil || len(bad) > 0 {
			t.Fatalf("ScanSessionsAfter(%+v): %v, undecodable %v", scan, err, bad)
		}
		if rev == 0 {
			t.Errorf("ScanSessionsAfter(%+v): no revision", scan)
		}
		return got, rev
	}

	tests := []struct {
		name string
		scan SessionScan
		stop int
		want []string
	}{
		{"all, small pages", SessionScan{PageSize: 2}, 0, all},
		{"one bucket", SessionScan{Bucket: "two"}, 0, all[5:]},
		{"after", SessionScan{AfterBucket: "one", AfterUploadID: "u2", PageSize: 3}, 0, all[3:]},
		{"after a session that is gone", SessionScan{AfterBucket: "one", AfterUploadID: "u25"}, 0, all[3:]},
		{"after, in a bucket", SessionScan{Bucket: "two", AfterBucket: "two", AfterUploadID: "u0"}, 0, all[6:]},
		{"after an earlier bucket", SessionScan{Bucket: "two", AfterBucket: "one", AfterUploadID: "u3"}, 0, all[5:]},
		{"after a later bucket", SessionScan{Bucket: "one", AfterBucket: "two", AfterUploadID: "u0"}, 0, nil},
		{"after the last", SessionScan{AfterBucket: "two", AfterUploadID: "u4/x"}, 0, nil},
		{"stop early", SessionScan{PageSize: 2}, 3, all[:3]},
	}
	for _, tt := range tests {
		got, _ := collect(tt.scan, tt.stop)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}

	// A damaged record is passed over and named; the others still come.
	bad := st.keys.Session("one", "u1")
	if _, err := st.cli.Put(ctx, bad, "{not json"); err != nil {
		t.Fatal(err)
	}
	var n int
	_, undecodable, err := st.ScanSessionsAfter(ctx, SessionScan{}, func(Versioned[Session]) bool { n++; return true })
	if err != nil || n != len(all)-1 || !slices.Equal(undecodable, []string{bad}) {
		t.Errorf("with a damaged record: %d sessions, undecodable %q, err %v", n, undecodable, err)
	}
}

func TestSessionStatesAndActivities(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	ctx := t.Context()
	states := []SessionState{StateActive, StateActive, StateExpired, StateCompleted}
	var ids []string
	for i, s := range states {
		id := fmt.Sprintf("u%d", i)
		if _, err := st.CreateSession(ctx, &Session{Bucket: "b", UploadID: id, State: s}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := st.cli.Put(ctx, st.keys.Session("b", "broken"), `{"v":1}`); err != nil {
		t.Fatal(err)
	}
	counts, undecodable, rev, err := st.SessionStates(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := map[SessionState]int64{StateActive: 2, StateExpired: 1, StateCompleted: 1}
	if len(counts) != len(want) || counts[StateActive] != 2 || counts[StateExpired] != 1 || counts[StateCompleted] != 1 || undecodable != 1 || rev == 0 {
		t.Errorf("SessionStates = %v, %d undecodable, rev %d; want %v, 1", counts, undecodable, rev, want)
	}

	// More uploads than one transaction may read, so GetActivities batches.
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("x%03d", i))
	}
	for i, id := range ids {
		if i%2 == 1 {
			continue // every other upload has no activity
		}
		if _, err := st.cli.Put(ctx, st.keys.Activity(id), fmt.Sprintf(`{"at":%q,"what":"UploadPart","part":%d}`, at.Format(time.RFC3339), i)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.GetActivities(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != (len(ids)+1)/2 {
		t.Errorf("GetActivities returned %d records, want %d", len(got), (len(ids)+1)/2)
	}
	for i, id := range ids {
		a, ok := got[id]
		if ok != (i%2 == 0) || (ok && (a.Part != i || !a.At.Equal(at) || a.What != "UploadPart")) {
			t.Errorf("activity of %s = %+v, %v", id, a, ok)
		}
	}
	if got, err := st.GetActivities(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("GetActivities(nil) = %v, %v", got, err)
	}
}

// deadlineKV is a KV whose Get records the deadline it was called with.
type deadlineKV struct {
	clientv3.KV
	deadline time.Duration // 0: none
}

func (k *deadlineKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.deadline = 0
	if d, ok := ctx.Deadline(); ok {
		k.deadline = time.Until(d)
	}
	return &clientv3.GetResponse{}, nil
}

// TestRequestBoundAndMetricsCompose: a request bound and metrics applied
// in either order both hold on every request, and leave the store they
// came from as it was.
func TestRequestBoundAndMetricsCompose(t *testing.T) {
	kv := &deadlineKV{}
	base := &Store{cli: storeClient{Client: &clientv3.Client{KV: kv}, KV: kv}}
	for _, order := range []string{"bound, then timed", "timed, then bound"} {
		reg := prometheus.NewRegistry()
		st := base.WithRequestTimeout(time.Minute).WithMetrics(reg)
		if order == "timed, then bound" {
			st = base.WithMetrics(reg).WithRequestTimeout(time.Minute)
		}
		if _, err := st.cli.Get(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
		if kv.deadline <= 0 || kv.deadline > time.Minute {
			t.Errorf("%s: the request's deadline was %v away, want within the minute's bound", order, kv.deadline)
		}
		if got := requestCounts(t, reg)["get"]; got != 1 {
			t.Errorf("%s: %d gets timed, want 1", order, got)
		}
		if st.RequestTimeout() != time.Minute {
			t.Errorf("%s: RequestTimeout = %v", order, st.RequestTimeout())
		}
	}
	if _, err := base.cli.Get(t.Context(), "k"); err != nil || kv.deadline != 0 {
		t.Errorf("the base store's request: deadline %v, %v; want none", kv.deadline, err)
	}
	if base.RequestTimeout() != 0 {
		t.Errorf("the base store's RequestTimeout = %v, want 0", base.RequestTimeout())
	}
}
