//go:build integration

package multipart_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
)

// The reconciler's tests run against a real MinIO and a real (embedded)
// etcd. Each subtest has its own bucket, its own etcd key prefix (so its
// reconciler sees only its sessions) and its own clock.

// t0 is where every subtest's clock starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	after      = 5 * time.Minute
	stuckLimit = time.Hour
	retention  = 24 * time.Hour
)

type suite struct {
	minio   *harness.MinIO
	s3      *s3.Client
	backend multipart.Backend
	cli     *clientv3.Client
}

func TestReconcile(t *testing.T) {
	m := harness.StartMinIO(t)
	backend, err := backend.NewStatic(m.Endpoint, m.Region, m.AccessKey, m.SecretKey)
	if err != nil {
		t.Fatalf("backend.NewStatic: %v", err)
	}
	su := &suite{
		minio:   m,
		s3:      harness.NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil, true),
		backend: backend,
		cli:     startEtcd(t, filepath.Join(t.TempDir(), "etcd")).cli,
	}

	t.Run("aborting upload gone becomes aborted", su.testAbortingGone)
	t.Run("cleanup_pending upload still there is aborted", su.testCleanupPendingStillThere)
	t.Run("lost abort response", su.testLostAbortResponse)
	t.Run("completing object exists becomes completed", su.testCompletingObjectExists)
	t.Run("completing without object stays and is flagged stuck once", su.testCompletingStuck)
	t.Run("young sessions untouched", su.testYoungUntouched)
	t.Run("concurrent change wins", su.testConcurrentChange)
	t.Run("prune", su.testPrune)
	t.Run("backend fails", su.testBackendFails)
	t.Run("etcd fails before the read", su.testEtcdFailsBeforeRead)
	t.Run("etcd fails before the intent", su.testEtcdFailsBeforeIntent)
	t.Run("fence", su.testFence)
	t.Run("bounded actions", su.testBoundedActions)
	t.Run("undecodable record", su.testUndecodable)
}

func (su *suite) testAbortingGone(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	id := f.createUpload("gone")
	f.abortOnMinIO("gone", id)
	f.putSession("gone", id, etcdstore.StateAborting, t0.Add(-10*time.Minute), nil)
	// A session whose whole bucket is gone is gone too.
	f.putSession("k", "upload-in-a-deleted-bucket", etcdstore.StateCleanupPending, t0.Add(-10*time.Minute), func(s *etcdstore.Session) {
		s.Bucket = f.bucket + "-deleted"
	})

	rep := f.mustReconcile(multipart.ReconcileOptions{})
	if rep.Examined != 2 || rep.Aborted != 2 || rep.Retried != 0 || rep.Errors != 0 {
		t.Fatalf("report %+v, want 2 examined and aborted, none retried", rep)
	}
	v := f.get(id)
	requireState(t, v, etcdstore.StateAborted)
	requireLast(t, v, etcdstore.StateAborting, etcdstore.StateAborted, "reconciler", "reconciler: upload gone on the backend")
	if !last(v).At.Equal(t0) || v.Value.AbortAttempts != 0 {
		t.Fatalf("transition at %v with %d abort attempts, want at %v with none", last(v).At, v.Value.AbortAttempts, t0)
	}
	nb, err := f.store.GetSession(t.Context(), f.bucket+"-deleted", "upload-in-a-deleted-bucket")
	if err != nil {
		t.Fatal(err)
	}
	requireState(t, nb, etcdstore.StateAborted)
	requireLast(t, nb, etcdstore.StateCleanupPending, etcdstore.StateAborted, "reconciler", "bucket gone")
	if n := f.tap.count(http.MethodDelete); n != 0 {
		t.Fatalf("the reconciler sent %d aborts for uploads that were gone", n)
	}
}

func (su *suite) testCleanupPendingStillThere(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	id := f.createUpload("left")
	f.uploadPart("left", id, 1, []byte("a part the lost abort left behind"))
	f.uploadPart("left", id, 2, []byte("and another"))
	f.putSession("left", id, etcdstore.StateCleanupPending, t0.Add(-time.Hour), func(s *etcdstore.Session) {
		s.AbortAttempts = 1
		s.Uncertain = "no answer from the backend: timeout"
	})

	rep := f.mustReconcile(multipart.ReconcileOptions{Actor: "reclaimer", Term: 42})
	if rep.Examined != 1 || rep.Retried != 1 || rep.Aborted != 1 || rep.Errors != 0 {
		t.Fatalf("report %+v, want one session retried and aborted", rep)
	}
	v := f.get(id)
	requireState(t, v, etcdstore.StateAborted)
	if v.Value.AbortAttempts != 2 || v.Value.Uncertain != "" {
		t.Fatalf("abort attempts %d, uncertain %q; want 2 and none", v.Value.AbortAttempts, v.Value.Uncertain)
	}
	h := v.Value.History
	intent, done := h[len(h)-2], h[len(h)-1]
	if intent.From != etcdstore.StateCleanupPending || intent.To != etcdstore.StateAborting || !strings.Contains(intent.Reason, "attempt 2") ||
		done.From != etcdstore.StateAborting || done.To != etcdstore.StateAborted || done.Reason != "reconciler: backend confirmed abort" {
		t.Fatalf("history ends %+v, %+v; want the recorded attempt, then aborted", intent, done)
	}
	for _, e := range []etcdstore.Transition{intent, done} {
		if e.Actor != "reclaimer" || e.Term != 42 {
			t.Fatalf("transition %+v, want actor reclaimer with term 42", e)
		}
	}
	if f.tap.count(http.MethodGet) != 1 || f.tap.count(http.MethodDelete) != 1 {
		t.Fatalf("backend calls %v, want one listing and one abort", f.tap.calls)
	}
	f.requireUploadGone("left", id)
}

func (su *suite) testLostAbortResponse(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	id := f.createUpload("lost")
	f.uploadPart("lost", id, 1, []byte("part"))
	// A gateway that crashed after recording its intent left "aborting".
	f.putSession("lost", id, etcdstore.StateAborting, t0.Add(-10*time.Minute), nil)
	f.tap.drop = func(r *http.Request) bool { return r.Method == http.MethodDelete }

	rep, err := f.reconcile(multipart.ReconcileOptions{})
	if !errors.Is(err, multipart.ErrUnsettled) || rep.Retried != 1 || rep.Errors != 1 || rep.Aborted != 0 {
		t.Fatalf("Reconcile = %+v, %v; want one retried abort left unsettled", rep, err)
	}
	v := f.get(id)
	requireState(t, v, etcdstore.StateCleanupPending)
	requireLast(t, v, etcdstore.StateAborting, etcdstore.StateCleanupPending, "reconciler", "abort outcome unclear")
	if v.Value.AbortAttempts != 1 || !strings.Contains(v.Value.Uncertain, "no answer from the backend") {
		t.Fatalf("abort attempts %d, uncertain %q; want 1 and the lost answer recorded", v.Value.AbortAttempts, v.Value.Uncertain)
	}
	// MinIO acted on the abort; only its answer was lost.
	f.requireUploadGone("lost", id)

	// Just recorded: not yet the reconciler's to act on again.
	f.tap.drop = nil
	rep = f.mustReconcile(multipart.ReconcileOptions{})
	if rep.Young != 1 || rep.Examined != 0 {
		t.Fatalf("report %+v, want the just-settled session left alone", rep)
	}
	f.requireUnchanged(v)

	// Later the listing shows the upload gone, and that is recorded; no
	// second abort is sent.
	f.clock.Advance(after)
	deletes := f.tap.count(http.MethodDelete)
	rep = f.mustReconcile(multipart.ReconcileOptions{})
	if rep.Aborted != 1 || rep.Retried != 0 {
		t.Fatalf("report %+v, want the session aborted from the listing", rep)
	}
	v = f.get(id)
	requireState(t, v, etcdstore.StateAborted)
	requireLast(t, v, etcdstore.StateCleanupPending, etcdstore.StateAborted, "reconciler", "upload gone on the backend")
	if f.tap.count(http.MethodDelete) != deletes {
		t.Fatal("the reconciler aborted again an upload the listing showed gone")
	}
}

func (su *suite) testCompletingObjectExists(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	id, etag := f.completeOnMinIO("done")
	f.putSession("done", id, etcdstore.StateCompleting, t0.Add(-10*time.Minute), func(s *etcdstore.Session) {
		s.PartsDigest = "digest"
		s.ExpectedETag = etag
		s.Uncertain = "no answer from the backend: EOF"
	})

	rep := f.mustReconcile(multipart.ReconcileOptions{StuckLimit: stuckLimit})
	if rep.Examined != 1 || rep.Completed != 1 || rep.Errors != 0 || rep.Stuck != 0 {
		t.Fatalf("report %+v, want one session completed", rep)
	}
	v := f.get(id)
	requireState(t, v, etcdstore.StateCompleted)
	requireLast(t, v, etcdstore.StateCompleting, etcdstore.StateCompleted, "reconciler", "object found with the expected ETag")
	c := v.Value.Completion
	if c == nil || c.ETag != `"`+etag+`"` || c.Bucket != f.bucket || c.Key != "done" || c.Location != "/"+f.bucket+"/done" || !c.At.Equal(t0) {
		t.Fatalf("completion %+v, want ETag %q for %s/done at %v", c, etag, f.bucket, t0)
	}
	if v.Value.Uncertain != "" || v.Value.PartsDigest != "digest" {
		t.Fatalf("uncertain %q, parts digest %q; want the doubt cleared and the digest kept for retries", v.Value.Uncertain, v.Value.PartsDigest)
	}
	if f.tap.count(http.MethodDelete) != 0 {
		t.Fatal("the reconciler sent an abort for a completing upload")
	}
}

func (su *suite) testCompletingStuck(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	missing := f.putSession("missing", "upload-missing", etcdstore.StateCompleting, t0.Add(-10*time.Minute), func(s *etcdstore.Session) {
		s.ExpectedETag = "0123456789abcdef0123456789abcdef-2"
	})
	// An object at the key, but not the one the complete would make.
	if _, err := f.su.s3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String("other"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	other := f.putSession("other", "upload-other", etcdstore.StateCompleting, t0.Add(-10*time.Minute), func(s *etcdstore.Session) {
		s.ExpectedETag = "0123456789abcdef0123456789abcdef-2"
	})
	opts := multipart.ReconcileOptions{StuckLimit: stuckLimit}

	// Not yet past the stuck limit: looked up, left exactly as it is.
	rep := f.mustReconcile(opts)
	if rep.Examined != 2 || rep.Completed != 0 || rep.Stuck != 0 || rep.Flagged != 0 {
		t.Fatalf("report %+v, want two sessions examined and left", rep)
	}
	f.requireUnchanged(missing)
	f.requireUnchanged(other)

	// Past the limit: flagged for a person, once, and still completing.
	f.clock.Advance(stuckLimit)
	rep = f.mustReconcile(opts)
	if rep.Stuck != 2 || rep.Flagged != 2 || rep.Completed != 0 {
		t.Fatalf("report %+v, want two sessions flagged stuck", rep)
	}
	for _, c := range []struct {
		v     etcdstore.Versioned[etcdstore.Session]
		found string
	}{{missing, "no object at the key"}, {other, "not the expected"}} {
		v := f.get(c.v.Value.UploadID)
		requireState(t, v, etcdstore.StateCompleting)
		requireLast(t, v, etcdstore.StateCompleting, etcdstore.StateCompleting, "reconciler", "flagged stuck")
		if !strings.HasPrefix(v.Value.Uncertain, "stuck: ") || !strings.Contains(v.Value.Uncertain, c.found) ||
			!strings.Contains(v.Value.Uncertain, t0.Add(-10*time.Minute).Format(time.RFC3339)) {
			t.Fatalf("uncertain %q, want a stuck note saying since when and %q", v.Value.Uncertain, c.found)
		}
		if v.Value.ExpectedETag != c.v.Value.ExpectedETag {
			t.Fatal("flagging changed the expected ETag")
		}
	}
	if !strings.Contains(f.logs.String(), "level=WARN") || !strings.Contains(f.logs.String(), "stuck") {
		t.Fatalf("no warning logged for the stuck sessions:\n%s", f.logs.String())
	}
	flagged := [2]etcdstore.Versioned[etcdstore.Session]{f.get(missing.Value.UploadID), f.get(other.Value.UploadID)}

	// The flag is not rewritten on later runs, whether they look the
	// sessions up again or not, and the sessions are still counted stuck.
	rep = f.mustReconcile(opts)
	if rep.Stuck != 2 || rep.Flagged != 0 || rep.Young != 2 {
		t.Fatalf("report %+v, want two stuck sessions, none flagged again", rep)
	}
	f.clock.Advance(after)
	rep = f.mustReconcile(opts)
	if rep.Stuck != 2 || rep.Flagged != 0 || rep.Examined != 2 {
		t.Fatalf("report %+v, want two stuck sessions looked up, none flagged again", rep)
	}
	for _, v := range flagged {
		f.requireUnchanged(v)
	}
	if f.tap.count(http.MethodDelete) != 0 {
		t.Fatal("the reconciler sent an abort for a completing upload")
	}
}

func (su *suite) testYoungUntouched(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	recent := t0.Add(-time.Minute)
	abortingID := f.createUpload("aborting")
	pendingID := f.createUpload("pending")
	completingID, etag := f.completeOnMinIO("completing")
	sessions := []etcdstore.Versioned[etcdstore.Session]{
		f.putSession("aborting", abortingID, etcdstore.StateAborting, recent, nil),
		f.putSession("pending", pendingID, etcdstore.StateCleanupPending, recent, nil),
		f.putSession("completing", completingID, etcdstore.StateCompleting, recent, func(s *etcdstore.Session) { s.ExpectedETag = etag }),
		// A clock that ran ahead is never "old": the session is kept.
		f.putSession("future", "upload-future", etcdstore.StateAborting, t0.Add(time.Hour), nil),
		f.putSession("completed", "upload-completed", etcdstore.StateCompleted, t0.Add(-retention+time.Minute), nil),
		f.putSession("aborted", "upload-aborted", etcdstore.StateAborted, t0.Add(time.Hour), nil),
	}
	rep := f.mustReconcile(multipart.ReconcileOptions{StuckLimit: stuckLimit, Retention: retention})
	if rep.Scanned != 6 || rep.Young != 4 || rep.Examined != 0 || rep.Pruned != 0 {
		t.Fatalf("report %+v, want six sessions read, four young, none acted on", rep)
	}
	for _, v := range sessions {
		f.requireUnchanged(v)
	}
	if n := f.tap.total(); n != 0 {
		t.Fatalf("the backend got %d calls for sessions too young to act on", n)
	}
	f.requireUploadThere("aborting", abortingID, 0)
	f.requireUploadThere("pending", pendingID, 0)
}

func (su *suite) testConcurrentChange(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	old := t0.Add(-10 * time.Minute)

	goneID := f.createUpload("gone")
	f.abortOnMinIO("gone", goneID)
	f.putSession("gone", goneID, etcdstore.StateAborting, old, nil)

	thereID := f.createUpload("there")
	f.uploadPart("there", thereID, 1, []byte("part"))
	f.putSession("there", thereID, etcdstore.StateCleanupPending, old, nil)

	doneID, etag := f.completeOnMinIO("done")
	f.putSession("done", doneID, etcdstore.StateCompleting, old, func(s *etcdstore.Session) { s.ExpectedETag = etag })

	// Between the reconciler's read and its write, someone else settles
	// each session: the gateway's own abort and complete finishing, and
	// another reconciler recording its abort attempt.
	change := map[string]func(*etcdstore.Session){
		goneID: func(s *etcdstore.Session) {
			s.Transition(etcdstore.StateAborted, t0, "gateway", "backend confirmed abort")
		},
		thereID: func(s *etcdstore.Session) {
			s.AbortAttempts++
			s.Transition(etcdstore.StateAborting, t0, "reclaimer", "reconciler: upload still on the backend; aborting again (attempt 1)")
		},
		doneID: func(s *etcdstore.Session) {
			s.Completion = &etcdstore.Completion{ETag: `"` + etag + `"`, Bucket: f.bucket, Key: "done", VersionID: "by-the-gateway", At: t0}
			s.Transition(etcdstore.StateCompleted, t0, "gateway", "backend completed")
		},
	}
	var mu sync.Mutex
	f.tap.before = func(r *http.Request) {
		id := r.URL.Query().Get("uploadId")
		if r.Method == http.MethodHead {
			id = doneID
		}
		mu.Lock()
		fn := change[id]
		delete(change, id)
		mu.Unlock()
		if fn == nil {
			return
		}
		v, err := f.store.GetSession(context.Background(), f.bucket, id)
		if err != nil {
			t.Errorf("GetSession: %v", err)
			return
		}
		fn(&v.Value)
		if _, err := f.store.UpdateSession(context.Background(), etcdstore.SessionUpdate{Session: &v.Value, ModRev: v.ModRev}); err != nil {
			t.Errorf("UpdateSession: %v", err)
		}
	}

	rep := f.mustReconcile(multipart.ReconcileOptions{})
	if rep.Examined != 3 || rep.Conflicts != 3 || rep.Aborted != 0 || rep.Completed != 0 || rep.Retried != 0 {
		t.Fatalf("report %+v, want three sessions examined, all lost to the concurrent change", rep)
	}
	v := f.get(goneID)
	requireLast(t, v, etcdstore.StateAborting, etcdstore.StateAborted, "gateway", "backend confirmed abort")
	v = f.get(thereID)
	requireLast(t, v, etcdstore.StateCleanupPending, etcdstore.StateAborting, "reclaimer", "attempt 1")
	if v.Value.AbortAttempts != 1 {
		t.Fatalf("abort attempts %d, want the other writer's 1", v.Value.AbortAttempts)
	}
	v = f.get(doneID)
	requireLast(t, v, etcdstore.StateCompleting, etcdstore.StateCompleted, "gateway", "backend completed")
	if v.Value.Completion == nil || v.Value.Completion.VersionID != "by-the-gateway" {
		t.Fatalf("completion %+v, want the gateway's", v.Value.Completion)
	}
	// The lost intent write means the abort was not sent.
	if n := f.tap.count(http.MethodDelete); n != 0 {
		t.Fatalf("the reconciler sent %d aborts after losing its intent write", n)
	}
	f.requireUploadThere("there", thereID, 1)
}

func (su *suite) testPrune(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	ctx := t.Context()
	old := t0.Add(-retention - time.Minute)
	// In key order, which is the order a run takes them in.
	prunable := []string{"a-touched", "old-aborted", "old-completed", "old-completed-2"}
	kept := f.seedPrune(prunable, old)
	opts := multipart.ReconcileOptions{Retention: retention, MaxPrune: 2, After: retention * 2}

	// Retention zero keeps everything.
	rep := f.mustReconcile(multipart.ReconcileOptions{After: opts.After})
	if rep.Pruned != 0 || rep.Deferred != 0 {
		t.Fatalf("report %+v, want nothing pruned without a retention", rep)
	}

	// A session changed between the run's read and its delete (a retried
	// complete answered from it, say) is not deleted in that run. The
	// change is made while the run lists a due upload, which it does
	// before it prunes.
	dueID := f.createUpload("due")
	f.abortOnMinIO("due", dueID)
	f.putSession("due", dueID, etcdstore.StateAborting, t0.Add(-3*retention), nil)
	var once sync.Once
	f.tap.before = func(*http.Request) {
		once.Do(func() {
			v, err := f.store.GetSession(context.Background(), f.bucket, "a-touched")
			if err != nil {
				t.Errorf("GetSession: %v", err)
				return
			}
			v.Value.LastActivity = t0
			if _, err := f.store.UpdateSession(context.Background(), etcdstore.SessionUpdate{Session: &v.Value, ModRev: v.ModRev}); err != nil {
				t.Errorf("UpdateSession: %v", err)
			}
		})
	}
	rep = f.mustReconcile(opts)
	if rep.Aborted != 1 || rep.Pruned != 1 || rep.Conflicts != 1 || rep.Deferred != 2 {
		t.Fatalf("report %+v, want the due session aborted, one of two pruned, one lost to the change, two left for the next run", rep)
	}
	if _, err := f.store.GetSession(ctx, f.bucket, "a-touched"); err != nil {
		t.Fatalf("the session changed during the run was pruned: %v", err)
	}
	if n := f.records("a-touched"); n != 4 {
		t.Fatalf("the session changed during the run has %d part and activity records, want 4", n)
	}

	// Bounded batches: the next runs take the rest, two at a time, and
	// decide again about the changed session (still terminal and old).
	f.tap.before = func(*http.Request) { t.Error("pruning called the backend") }
	rep = f.mustReconcile(opts)
	if rep.Pruned != 2 || rep.Deferred != 1 {
		t.Fatalf("report %+v, want two pruned and one left", rep)
	}
	rep = f.mustReconcile(opts)
	if rep.Pruned != 1 || rep.Deferred != 0 {
		t.Fatalf("report %+v, want the last one pruned", rep)
	}
	rep = f.mustReconcile(opts)
	if rep.Pruned != 0 {
		t.Fatalf("report %+v, want nothing left to prune", rep)
	}
	for _, id := range prunable {
		if _, err := f.store.GetSession(ctx, f.bucket, id); !errors.Is(err, etcdstore.ErrNotFound) {
			t.Fatalf("session %s after pruning: %v, want ErrNotFound", id, err)
		}
		if n := f.records(id); n != 0 {
			t.Fatalf("session %s pruned but %d of its part and activity records remain", id, n)
		}
	}
	for _, v := range kept {
		f.requireUnchanged(v)
		if n := f.records(v.Value.UploadID); n != 4 {
			t.Fatalf("kept session %s has %d part and activity records, want 4", v.Value.UploadID, n)
		}
	}
	// The due session was aborted just now: young, so kept.
	requireState(t, f.get(dueID), etcdstore.StateAborted)
}
