//go:build integration

package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestReclaimKeysLayout(t *testing.T) {
	t.Parallel()
	k := Keys{Prefix: "/sg"}
	tests := []struct{ got, want string }{
		{k.Reclaim(), "/sg/reclaim/"},
		{k.Election(), "/sg/reclaim/election/"},
		{k.Cursor("uploads"), "/sg/reclaim/cursors/uploads"},
		{k.Cursor("a/b"), "/sg/reclaim/cursors/a%2Fb"},
		{k.PassesPrefix(), "/sg/reclaim/passes/"},
		{k.Pass(7), "/sg/reclaim/passes/00000000000000000007"},
		{k.PlansPrefix(7), "/sg/reclaim/plans/00000000000000000007/"},
		{k.PlanChunk(7, 3), "/sg/reclaim/plans/00000000000000000007/00000003"},
		{k.OrphanRecord("photos", "a/b"), "/sg/reclaim/orphans/photos/a%2Fb"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	// Reports sort by key in pass order, so the newest is the last key.
	passes := []string{k.Pass(10), k.Pass(9), k.Pass(100), k.Pass(1)}
	sort.Strings(passes)
	for i, want := range []int64{1, 9, 10, 100} {
		if n, ok := k.ParsePass(passes[i]); !ok || n != want {
			t.Errorf("sorted report %d = %q (%d, %v), want pass %d", i, passes[i], n, ok, want)
		}
	}
	if _, ok := k.ParsePass(k.Cursor("uploads")); ok {
		t.Error("ParsePass accepted a key outside the reports")
	}
	// A plan's chunks never fall under another pass's prefix.
	if strings.HasPrefix(k.PlanChunk(10, 0), k.PlansPrefix(1)) {
		t.Error("pass 10's chunk falls under pass 1's prefix")
	}
	for _, key := range []string{k.Election(), k.Cursor("x"), k.Pass(1), k.PlanChunk(1, 1), k.OrphanRecord("b", "u")} {
		if !strings.HasPrefix(key, k.Reclaim()) {
			t.Errorf("%q is outside the reclaimer's prefix", key)
		}
	}
}

func TestSessionsAtRevision(t *testing.T) {
	t.Parallel()
	s := newAtRevisionStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	mk := func(bucket, id string) {
		t.Helper()
		sess := &Session{Bucket: bucket, Key: "k-" + id, UploadID: id, Created: now, LastActivity: now}
		sess.Transition(StateActive, now, "test", "created")
		if _, err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	mk("alpha", "u1")
	mk("alpha", "u2")
	mk("beta/x", "u3")
	v, err := s.GetSession(ctx, "alpha", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordActivity(ctx, "alpha", "u1", v.ModRev, Activity{At: now, What: "UploadPart", Part: 1}); err != nil {
		t.Fatal(err)
	}
	rev := reclaimTestRevision(t, ctx, s)

	// Everything after rev is invisible at rev.
	mk("gamma", "u4")
	changed := v.Value
	changed.Transition(StateExpired, now.Add(time.Hour), "test", "")
	if _, err := s.UpdateSession(ctx, SessionUpdate{Session: &changed, ModRev: v.ModRev}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, s.Keys().Activity("u1"), `{"at":"2030-01-01T00:00:00Z"}`); err != nil {
		t.Fatal(err)
	}

	at, err := s.GetSessionAt(ctx, "alpha", "u1", rev)
	if err != nil || at.Value.State != StateActive || at.ModRev != v.ModRev {
		t.Errorf("GetSessionAt = %+v, %v; want the active session at mod revision %d", at, err, v.ModRev)
	}
	if _, err := s.GetSessionAt(ctx, "gamma", "u4", rev); !errors.Is(err, ErrNotFound) {
		t.Errorf("a later session at rev: %v, want ErrNotFound", err)
	}
	act, err := s.GetActivityAt(ctx, "u1", rev)
	if err != nil || !act.Value.At.Equal(now) {
		t.Errorf("GetActivityAt = %+v, %v", act, err)
	}
	if _, err := s.GetActivityAt(ctx, "u2", rev); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing activity: %v, want ErrNotFound", err)
	}

	var ids []string
	if err := s.ScanSessionsAt(ctx, "", rev, 1, func(v Versioned[Session]) error {
		ids = append(ids, v.Value.UploadID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "u1,u2,u3" {
		t.Errorf("ScanSessionsAt all = %v, want u1,u2,u3", ids)
	}
	ids = nil
	if err := s.ScanSessionsAt(ctx, "alpha", rev, 1, func(v Versioned[Session]) error {
		ids = append(ids, v.Value.UploadID)
		return nil
	}); err != nil || strings.Join(ids, ",") != "u1,u2" {
		t.Errorf("ScanSessionsAt alpha = %v, %v", ids, err)
	}
	stop := errors.New("stop")
	if err := s.ScanSessionsAt(ctx, "", rev, 1, func(Versioned[Session]) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("ScanSessionsAt did not stop at fn's error: %v", err)
	}

	buckets, err := s.SessionBucketsAt(ctx, rev)
	if err != nil || strings.Join(buckets, ",") != "alpha,beta/x" {
		t.Errorf("SessionBucketsAt(rev) = %v, %v", buckets, err)
	}
	buckets, err = s.SessionBucketsAt(ctx, reclaimTestRevision(t, ctx, s))
	if err != nil || strings.Join(buckets, ",") != "alpha,beta/x,gamma" {
		t.Errorf("SessionBucketsAt(now) = %v, %v", buckets, err)
	}

	// A compacted revision is an error, not an empty answer.
	if _, err := s.Client().Compact(ctx, reclaimTestRevision(t, ctx, s)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSessionAt(ctx, "alpha", "u1", rev); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read at a compacted revision: %v, want ErrCompacted", err)
	}
	if err := s.ScanSessionsAt(ctx, "", rev, 10, func(Versioned[Session]) error { return nil }); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("scan at a compacted revision: %v, want ErrCompacted", err)
	}
}

// newAtRevisionStore returns a store with its keys under /sg in an embedded
// etcd of t's.
func newAtRevisionStore(t *testing.T) *Store {
	t.Helper()
	e := startEmbedded(t, t.TempDir(), nil)
	t.Cleanup(e.Close)
	cli, err := Connect(t.Context(), e.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return NewStore(cli, Keys{Prefix: "/sg"})
}

func TestMarshalRecordsSetTheirVersion(t *testing.T) {
	t.Parallel()
	v, err := MarshalOrphanRecord(OrphanRecord{Action: OrphanAdopted, Bucket: "b"})
	if err != nil || !strings.Contains(v, `"v":1`) || !strings.Contains(v, `"action":"adopted"`) {
		t.Errorf("MarshalOrphanRecord = %s, %v", v, err)
	}
	sess := &Session{Bucket: "b", UploadID: "u"}
	v, err = MarshalSession(sess)
	if err != nil || sess.Version != sessionVersion || !strings.Contains(v, `"v":1`) {
		t.Errorf("MarshalSession = %s, %v", v, err)
	}
}

// reclaimTestRevision returns etcd's current revision.
func reclaimTestRevision(t *testing.T, ctx context.Context, s *Store) int64 {
	t.Helper()
	resp, err := s.cli.Get(ctx, "health", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// TestSessionBucketsAtCost: finding the buckets of B buckets' sessions
// counts each session a few times at most, where a limit-1 request to the
// end of all sessions counts every session after the bucket found (B/2 per
// session, 12 here).
func TestSessionBucketsAtCost(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var keys, want []string
	const perBucket = 300
	for i := range 24 {
		b := fmt.Sprintf("bucket-%02d.%c", i, 'a'+i)
		want = append(want, b)
		for _, id := range uploadIDs(rng, perBucket*(1+i%3)) {
			keys = append(keys, st.keys.Session(b, id))
		}
	}
	putAll(t, st, keys)
	c := countRequests(st)
	got, err := st.SessionBucketsAt(t.Context(), reclaimTestRevision(t, t.Context(), st))
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("SessionBucketsAt = %v, %v; want %v", got, err, want)
	}
	var total int64
	for _, n := range c.counts {
		total += n
	}
	t.Logf("%d buckets, %d sessions: %d requests counted %d keys", len(want), len(keys), len(c.counts), total)
	if total > 3*int64(len(keys)) {
		t.Errorf("%d requests counted %d keys for %d sessions; want at most 3 per session", len(c.counts), total, len(keys))
	}
}
