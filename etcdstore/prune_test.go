//go:build integration

package etcdstore

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// newTestStore starts an embedded etcd and returns a Store over it.
func newTestStore(t *testing.T) *Store {
	t.Helper()
	e := startEmbedded(t, filepath.Join(t.TempDir(), "etcd"), nil)
	t.Cleanup(e.Close)
	cli, err := Connect(t.Context(), e.Endpoints(), 10*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	keys, err := NewKeys("/prune-test/")
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(cli, keys)
}

// putUpload records a session with two parts and an activity key, and
// returns the session's mod revision.
func putUpload(t *testing.T, s *Store, bucket, uploadID string, state SessionState) int64 {
	t.Helper()
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sess := &Session{Bucket: bucket, Key: "k/" + uploadID, UploadID: uploadID, Owner: "p", Created: at, LastActivity: at}
	sess.Transition(state, at, "test", "setup")
	rev, err := s.CreateSession(ctx, sess)
	if err != nil {
		t.Fatalf("CreateSession %s: %v", uploadID, err)
	}
	for n := 1; n <= 2; n++ {
		if err := s.PutPart(ctx, uploadID, Part{Number: n, ETag: `"e"`, Size: 5, At: at}); err != nil {
			t.Fatalf("PutPart: %v", err)
		}
	}
	if err := s.RecordActivity(ctx, bucket, uploadID, rev, Activity{At: at, What: "UploadPart", Part: 2}); err != nil {
		t.Fatalf("RecordActivity: %v", err)
	}
	return rev
}

// count counts the keys at key, or under it when prefix is set.
func count(t *testing.T, s *Store, key string, prefix bool) int64 {
	t.Helper()
	opts := []clientv3.OpOption{clientv3.WithCountOnly()}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	resp, err := s.Client().Get(t.Context(), key, opts...)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return resp.Count
}

// uploadKeys counts an upload's session, part and activity keys.
func uploadKeys(t *testing.T, s *Store, bucket, uploadID string) [3]int64 {
	t.Helper()
	k := s.Keys()
	return [3]int64{
		count(t, s, k.Session(bucket, uploadID), false),
		count(t, s, k.Parts(uploadID), true),
		count(t, s, k.Activity(uploadID), false),
	}
}

func TestDeleteSession(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	all := [3]int64{1, 2, 1}
	none := [3]int64{0, 0, 0}

	// "up" is a prefix of "up2": deleting one must leave the other whole.
	rev := putUpload(t, s, "b", "up", StateCompleted)
	putUpload(t, s, "b", "up2", StateAborted)
	putUpload(t, s, "b2", "other", StateCompleted)

	t.Run("stale revision", func(t *testing.T) {
		if err := s.DeleteSession(ctx, "b", "up", rev-1); !errors.Is(err, ErrConflict) {
			t.Fatalf("DeleteSession with a stale revision = %v, want ErrConflict", err)
		}
		if got := uploadKeys(t, s, "b", "up"); got != all {
			t.Fatalf("after a refused delete the upload has %v keys, want %v", got, all)
		}
	})
	t.Run("fence fails", func(t *testing.T) {
		fence := clientv3.Compare(clientv3.CreateRevision("/prune-test/no-leader"), "=", 7)
		if held, err := s.Holds(ctx, fence); err != nil || held {
			t.Fatalf("Holds(absent leader key = 7) = %v, %v; want false", held, err)
		}
		if err := s.DeleteSession(ctx, "b", "up", rev, fence); !errors.Is(err, ErrConflict) {
			t.Fatalf("DeleteSession with a failing fence = %v, want ErrConflict", err)
		}
		if got := uploadKeys(t, s, "b", "up"); got != all {
			t.Fatalf("after a fenced-off delete the upload has %v keys, want %v", got, all)
		}
	})
	t.Run("no revision", func(t *testing.T) {
		if err := s.DeleteSession(ctx, "b", "missing", 0); err == nil || errors.Is(err, ErrConflict) {
			t.Fatalf("DeleteSession with revision 0 = %v, want a usage error", err)
		}
	})
	t.Run("deletes session parts and activity", func(t *testing.T) {
		fence := clientv3.Compare(clientv3.CreateRevision(s.Keys().Session("b2", "other")), ">", 0)
		if held, err := s.Holds(ctx, fence); err != nil || !held {
			t.Fatalf("Holds = %v, %v; want true", held, err)
		}
		if err := s.DeleteSession(ctx, "b", "up", rev, fence); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
		if got := uploadKeys(t, s, "b", "up"); got != none {
			t.Fatalf("deleted upload still has %v keys", got)
		}
		if got := uploadKeys(t, s, "b", "up2"); got != all {
			t.Fatalf("upload up2 has %v keys after deleting up, want %v", got, all)
		}
		if got := uploadKeys(t, s, "b2", "other"); got != all {
			t.Fatalf("upload in another bucket has %v keys, want %v", got, all)
		}
	})
	t.Run("already deleted", func(t *testing.T) {
		if err := s.DeleteSession(ctx, "b", "up", rev); !errors.Is(err, ErrConflict) {
			t.Fatalf("second DeleteSession = %v, want ErrConflict", err)
		}
	})
}

func TestScanSessions(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	ids := []string{"u1", "u2", "u3", "u4", "u5"}
	for _, id := range ids {
		putUpload(t, s, "b", id, StateActive)
	}
	putUpload(t, s, "c", "u6", StateAborted)

	t.Run("one revision across pages", func(t *testing.T) {
		before, err := s.Client().Get(ctx, "/prune-test/none")
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		rev, err := s.ScanSessions(ctx, "b", 2, func(v Versioned[Session]) error {
			seen = append(seen, v.Value.UploadID+":"+string(v.Value.State))
			if len(seen) == 1 {
				// Changes made after the first page was read are
				// not part of the scan: a new session and a
				// changed one, both on later pages.
				now := time.Now()
				late := &Session{Bucket: "b", UploadID: "u9", Created: now}
				late.Transition(StateActive, now, "test", "late")
				if _, err := s.CreateSession(ctx, late); err != nil {
					return err
				}
				cur, err := s.GetSession(ctx, "b", "u5")
				if err != nil {
					return err
				}
				cur.Value.Transition(StateExpired, now, "test", "late")
				if _, err := s.UpdateSession(ctx, SessionUpdate{Session: &cur.Value, ModRev: cur.ModRev}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("ScanSessions: %v", err)
		}
		want := []string{"u1:active", "u2:active", "u3:active", "u4:active", "u5:active"}
		if !slices.Equal(seen, want) {
			t.Fatalf("scan saw %v, want %v", seen, want)
		}
		if rev != before.Header.Revision {
			t.Fatalf("scan revision %d, want %d (the revision before the changes)", rev, before.Header.Revision)
		}
	})

	t.Run("all buckets, undecodable passed over", func(t *testing.T) {
		badKey := s.Keys().Session("b", "u3")
		if _, err := s.Client().Put(ctx, badKey, "{not json"); err != nil {
			t.Fatal(err)
		}
		var seen []string
		_, err := s.ScanSessions(ctx, "", 0, func(v Versioned[Session]) error {
			seen = append(seen, v.Value.Bucket+"/"+v.Value.UploadID)
			return nil
		})
		var bad *UndecodableError
		if !errors.As(err, &bad) || !errors.Is(err, ErrUndecodable) || !slices.Equal(bad.Keys, []string{badKey}) {
			t.Fatalf("ScanSessions = %v, want an UndecodableError naming %s", err, badKey)
		}
		want := []string{"b/u1", "b/u2", "b/u4", "b/u5", "b/u9", "c/u6"}
		if !slices.Equal(seen, want) {
			t.Fatalf("scan saw %v, want %v", seen, want)
		}
	})

	t.Run("fn error stops the scan", func(t *testing.T) {
		stop := errors.New("stop")
		calls := 0
		_, err := s.ScanSessions(ctx, "", 1, func(Versioned[Session]) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Fatalf("ScanSessions = %v after %d calls, want the fn's error after 1", err, calls)
		}
	})

	t.Run("read fails", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.ScanSessions(cctx, "", 0, func(Versioned[Session]) error { return nil }); err == nil {
			t.Fatal("ScanSessions with a cancelled context succeeded")
		}
	})
}
