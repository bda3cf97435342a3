//go:build integration

package multipart_test

// The reconciler's tests under failures: the backend or etcd failing, a
// fenced reconciler, bounded actions and an undecodable record.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
)

// failingBackend answers every call with a connection reset, or, when hang
// is set, never answers until the caller gives up: failures a real MinIO
// does not produce on demand.
type failingBackend struct {
	multipart.Backend
	hang bool
}

func (b failingBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.hang {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return nil, fmt.Errorf("read tcp 127.0.0.1:1->127.0.0.1:2: %w", syscall.ECONNRESET)
}

func (su *suite) testBackendFails(t *testing.T) {
	t.Parallel()
	wrongKey, err := backend.NewStatic(su.minio.Endpoint, su.minio.Region, su.minio.AccessKey, "not-the-secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		backend multipart.Backend
		timeout time.Duration
		// examined is how many sessions the run asks about: after three
		// calls in a row go unanswered it stops asking.
		examined int
	}{
		// A real MinIO refusing the credentials: a definite answer, but
		// not one that says whether the upload exists.
		{"refused", wrongKey, 0, 4},
		{"connection reset", failingBackend{Backend: su.backend}, 0, 3},
		{"timeout", failingBackend{Backend: su.backend, hang: true}, 50 * time.Millisecond, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := su.fixtureOn(t, su.cli, c.backend)
			old := t0.Add(-2 * stuckLimit)
			id := f.createUpload("pending")
			f.uploadPart("pending", id, 1, []byte("part"))
			doneID, etag := f.completeOnMinIO("done")
			sessions := []etcdstore.Versioned[etcdstore.Session]{
				f.putSession("pending", id, etcdstore.StateCleanupPending, old, nil),
				f.putSession("aborting", "upload-aborting", etcdstore.StateAborting, old, nil),
				f.putSession("done", doneID, etcdstore.StateCompleting, old, func(s *etcdstore.Session) { s.ExpectedETag = etag }),
				f.putSession("aborting", "upload-aborting-2", etcdstore.StateAborting, old, nil),
			}
			rep, err := f.reconcile(multipart.ReconcileOptions{StuckLimit: stuckLimit, BackendTimeout: c.timeout})
			if !errors.Is(err, multipart.ErrUnsettled) {
				t.Fatalf("Reconcile error %v, want ErrUnsettled", err)
			}
			if rep.Examined != c.examined || rep.Errors != c.examined || rep.Deferred != 4-c.examined ||
				rep.Aborted+rep.Completed+rep.Retried+rep.Flagged != 0 {
				t.Fatalf("report %+v, want %d sessions examined, all unsettled, the rest deferred, nothing done", rep, c.examined)
			}
			// Unverified, so unchanged: the completing session is not
			// even flagged stuck, as nobody knows it did not complete.
			if rep.Stuck != 1 {
				t.Fatalf("report %+v, want the completing session counted stuck", rep)
			}
			for _, v := range sessions {
				f.requireUnchanged(v)
			}
			if n := f.tap.count(http.MethodDelete); n != 0 {
				t.Fatalf("the reconciler sent %d aborts without a listing", n)
			}
			f.requireUploadThere("pending", id, 1)
		})
	}
}

func (su *suite) testEtcdFailsBeforeRead(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t, filepath.Join(t.TempDir(), "etcd"))
	f := su.fixtureOn(t, etcd.cli, su.backend)
	id := f.createUpload("pending")
	f.putSession("pending", id, etcdstore.StateCleanupPending, t0.Add(-time.Hour), nil)
	etcd.e.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	rep, err := f.svc.Reconcile(ctx, multipart.ReconcileOptions{After: after})
	if err == nil || errors.Is(err, multipart.ErrUnsettled) {
		t.Fatalf("Reconcile with etcd down = %+v, %v; want the read's error", rep, err)
	}
	if rep != (multipart.ReconcileReport{}) {
		t.Fatalf("report %+v, want nothing reported from a failed read", rep)
	}
	if n := f.tap.total(); n != 0 {
		t.Fatalf("the backend got %d calls though no session could be read", n)
	}
	f.requireUploadThere("pending", id, 0)
}

func (su *suite) testEtcdFailsBeforeIntent(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "etcd")
	etcd := startEtcd(t, dir)
	f := su.fixtureOn(t, etcd.cli, su.backend)
	id := f.createUpload("pending")
	f.uploadPart("pending", id, 1, []byte("part"))
	before := f.putSession("pending", id, etcdstore.StateCleanupPending, t0.Add(-time.Hour), nil)
	// etcd goes away after the listing, before the reconciler can record
	// its abort attempt: the abort must then not be sent.
	f.tap.before = func(r *http.Request) {
		if r.Method == http.MethodGet {
			etcd.e.Close()
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	rep, err := f.svc.Reconcile(ctx, multipart.ReconcileOptions{After: after})
	if err == nil || errors.Is(err, multipart.ErrUnsettled) {
		t.Fatalf("Reconcile = %+v, %v; want the failed write's error", rep, err)
	}
	if rep.Retried != 0 || rep.Aborted != 0 {
		t.Fatalf("report %+v, want nothing done", rep)
	}
	if n := f.tap.count(http.MethodDelete); n != 0 {
		t.Fatalf("the reconciler sent %d aborts without recording the attempt", n)
	}
	f.requireUploadThere("pending", id, 1)

	// After a restart the session is as it was.
	etcd2 := startEtcd(t, dir)
	v, err := etcdstore.NewStore(etcd2.cli, f.store.Keys()).GetSession(t.Context(), f.bucket, id)
	if err != nil {
		t.Fatalf("GetSession after restart: %v", err)
	}
	if v.ModRev != before.ModRev || v.Value.State != etcdstore.StateCleanupPending {
		t.Fatalf("session after restart: %s at %d, want cleanup_pending at %d", v.Value.State, v.ModRev, before.ModRev)
	}
}

func (su *suite) testFence(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	ctx := t.Context()
	leader := f.store.Keys().Root() + "election/leader"
	elect := func() int64 {
		t.Helper()
		if _, err := f.store.Client().Delete(ctx, leader); err != nil {
			t.Fatal(err)
		}
		resp, err := f.store.Client().Put(ctx, leader, "me")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	term := elect()
	fence := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(leader), "=", term)}

	goneID := f.createUpload("gone")
	f.abortOnMinIO("gone", goneID)
	thereID := f.createUpload("there")
	sessions := []etcdstore.Versioned[etcdstore.Session]{
		f.putSession("there", thereID, etcdstore.StateCleanupPending, t0.Add(-time.Hour), nil),
		f.putSession("gone", goneID, etcdstore.StateAborting, t0.Add(-time.Hour), nil),
	}

	// A new leader was elected: the former one's writes are refused by
	// etcd, and its run stops before it aborts anything.
	elect()
	rep, err := f.reconcile(multipart.ReconcileOptions{Actor: "reclaimer", Term: term, Fence: fence})
	if !errors.Is(err, multipart.ErrFenced) || rep.Aborted+rep.Retried+rep.Conflicts != 0 {
		t.Fatalf("Reconcile with a lost fence = %+v, %v; want ErrFenced and nothing done", rep, err)
	}
	for _, v := range sessions {
		f.requireUnchanged(v)
	}
	if n := f.tap.count(http.MethodDelete); n != 0 {
		t.Fatalf("a fenced-off reconciler sent %d aborts", n)
	}
	f.requireUploadThere("there", thereID, 0)

	// With the current term the same run goes through, recording it.
	term = elect()
	fence = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(leader), "=", term)}
	rep = f.mustReconcile(multipart.ReconcileOptions{Actor: "reclaimer", Term: term, Fence: fence})
	if rep.Aborted != 2 || rep.Retried != 1 {
		t.Fatalf("report %+v, want both aborted", rep)
	}
	for _, v := range sessions {
		h := last(f.get(v.Value.UploadID))
		if h.Actor != "reclaimer" || h.Term != term || h.To != etcdstore.StateAborted {
			t.Fatalf("last transition %+v, want aborted by the reclaimer in term %d", h, term)
		}
	}
	f.requireUploadGone("there", thereID)
}

func (su *suite) testBoundedActions(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	for i := range 3 {
		f.putSession("k", fmt.Sprintf("upload-%d", i), etcdstore.StateAborting, t0.Add(-time.Hour), nil)
	}
	rep := f.mustReconcile(multipart.ReconcileOptions{MaxActions: 2})
	if rep.Examined != 2 || rep.Deferred != 1 || rep.Aborted != 2 {
		t.Fatalf("report %+v, want two settled and one left for the next run", rep)
	}
	rep = f.mustReconcile(multipart.ReconcileOptions{MaxActions: 2})
	if rep.Examined != 1 || rep.Aborted != 1 || rep.Deferred != 0 {
		t.Fatalf("report %+v, want the last one settled", rep)
	}
}

func (su *suite) testUndecodable(t *testing.T) {
	t.Parallel()
	f := su.fixture(t)
	bad := f.store.Keys().Session(f.bucket, "damaged")
	if _, err := f.store.Client().Put(t.Context(), bad, "{not a session"); err != nil {
		t.Fatal(err)
	}
	f.putSession("k", "upload-gone", etcdstore.StateAborting, t0.Add(-time.Hour), nil)
	rep, err := f.reconcile(multipart.ReconcileOptions{})
	if !errors.Is(err, multipart.ErrUnsettled) || !errors.Is(err, etcdstore.ErrUndecodable) {
		t.Fatalf("Reconcile error %v, want ErrUnsettled naming the undecodable record", err)
	}
	if rep.Errors != 1 || rep.Aborted != 1 {
		t.Fatalf("report %+v, want the readable session settled and the other counted", rep)
	}
	resp, err := f.store.Client().Get(t.Context(), bad)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "{not a session" {
		t.Fatalf("the undecodable record was changed: %v %v", resp, err)
	}
}
