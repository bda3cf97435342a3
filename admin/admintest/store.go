// Package admintest builds what the admin API's tests and the admin
// commands' tests run against: an embedded etcd with sessions and trash in
// it, and a real MinIO and etcd with a leading reclaimer over the uploads,
// sessions, blobs and manifests the tests judge. It serves nothing itself:
// each test serves the admin handler over what it builds.
package admintest

import (
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// NewStore starts an embedded etcd for one test and returns a store over
// it.
func NewStore(t *testing.T) *etcdstore.Store {
	t.Helper()
	return etcdtest.NewStore(t, etcdstore.DefaultPrefix)
}

// The times of the sessions SeedSessions writes.
var (
	T0 = time.Date(2030, 5, 6, 7, 0, 0, 0, time.UTC)
	T1 = T0.Add(time.Minute)
	T2 = T0.Add(2 * time.Minute)
	T3 = T0.Add(3 * time.Minute)
)

// SeedSessions writes a small set of sessions, as the multipart service
// would have left them.
func SeedSessions(t *testing.T, st *etcdstore.Store) {
	t.Helper()
	ctx := t.Context()
	put := func(s etcdstore.Session) {
		t.Helper()
		if _, err := st.CreateSession(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	active := etcdstore.Session{Bucket: "photos", Key: "2030/big.iso", UploadID: "up-active", Owner: "alice", Created: T0, LastActivity: T0}
	active.Transition(etcdstore.StateActive, T0, "gateway", "created")
	put(active)

	expired := etcdstore.Session{Bucket: "photos", Key: "old\tkey", UploadID: "up-expired", Owner: "bob", Created: T0, LastActivity: T0}
	expired.Transition(etcdstore.StateActive, T0, "gateway", "created")
	exp := T2
	expired.ExpiredAt = &exp
	expired.Transition(etcdstore.StateExpired, T2, "reclaimer", "idle past the grace period")
	expired.History[1].Term = 42
	put(expired)

	done := etcdstore.Session{Bucket: "backups", Key: "db.dump", UploadID: "up/done+1", Owner: "alice", Created: T0, LastActivity: T1,
		ExpectedETag: `"abc-2"`, PartsDigest: "d1",
		Completion: &etcdstore.Completion{Location: "http://x/backups/db.dump", Bucket: "backups", Key: "db.dump", ETag: `"abc-2"`, VersionID: "v1", At: T3}}
	done.Transition(etcdstore.StateActive, T0, "gateway", "created")
	done.Transition(etcdstore.StateCompleting, T2, "gateway", "complete")
	done.Transition(etcdstore.StateCompleted, T3, "gateway", "backend completed")
	put(done)

	pending := etcdstore.Session{Bucket: "backups", Key: "x", UploadID: "up-pending", Owner: "carol", Created: T0, Uncertain: "abort response lost", AbortAttempts: 2}
	pending.Transition(etcdstore.StateActive, T0, "gateway", "created")
	pending.Transition(etcdstore.StateCleanupPending, T1, "gateway", "abort outcome unknown")
	put(pending)

	for i, size := range []int64{5 << 20, 1 << 20} {
		p := etcdstore.Part{Number: i + 1, ETag: `"e` + string(rune('1'+i)) + `"`, Size: size, SHA256: "sha", At: T1}
		if err := st.PutPart(ctx, "up/done+1", p); err != nil {
			t.Fatal(err)
		}
	}
	// The active upload's latest activity is on its activity key, later
	// than the session record says.
	if _, err := st.Client().Put(ctx, st.Keys().Activity("up-active"), `{"at":"`+T3.Format(time.RFC3339)+`","what":"UploadPart","part":7}`); err != nil {
		t.Fatal(err)
	}
}

// Digests of the trash tests.
var (
	DigestA = "sha256:" + strings.Repeat("a", 64)
	DigestB = "sha256:" + strings.Repeat("b", 64)
	DigestC = "sha256:" + strings.Repeat("c", 64)
)

// DigestNow is the digest API's clock in the tests.
var DigestNow = time.Date(2030, 5, 6, 7, 0, 0, 0, time.UTC)

// Trashed records the references of bucket/key to digests as a committed
// write, then deletes the object into the trash at deletedAt.
func Trashed(t *testing.T, st *etcdstore.Store, bucket, key, principal string, deletedAt, expires time.Time, digests ...string) {
	t.Helper()
	ctx := t.Context()
	id := "w-" + deletedAt.Format(time.RFC3339Nano)
	if err := st.BeginRefWrite(ctx, bucket, key, etcdstore.RefWrite{ID: id, Digests: digests, At: deletedAt}); err != nil {
		t.Fatal(err)
	}
	if err := st.EndRefWrite(ctx, bucket, key, id, etcdstore.WriteCommitted, `"etag"`, deletedAt); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.TrashRefSource(ctx, bucket, key, principal, deletedAt, expires); err != nil || !ok {
		t.Fatalf("trash %s/%s: %t, %v", bucket, key, ok, err)
	}
}

// Trash records of the trash tests: reg/manifests/app was deleted twice,
// once long ago (expired); lfs/p/x once.
var (
	TrashOld = DigestNow.Add(-10 * 24 * time.Hour).Add(123456789 * time.Nanosecond)
	TrashNew = DigestNow.Add(-time.Hour).Add(987654321 * time.Nanosecond)
	TrashLFS = DigestNow.Add(-2 * time.Hour)
)

// SeedTrash writes the trash records of TrashOld, TrashNew and TrashLFS.
func SeedTrash(t *testing.T, st *etcdstore.Store) {
	t.Helper()
	week := 7 * 24 * time.Hour
	Trashed(t, st, "reg", "manifests/app", "alice", TrashOld, TrashOld.Add(week), DigestA, DigestB)
	Trashed(t, st, "reg", "manifests/app", "bob", TrashNew, TrashNew.Add(week), DigestB, DigestC)
	Trashed(t, st, "lfs", "p/x", "", TrashLFS, TrashLFS.Add(week), DigestC)
}
