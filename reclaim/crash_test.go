//go:build integration

package reclaim_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// mortalBackend is a backend connection that dies with its process: once
// dead, no request reaches the backend.
type mortalBackend struct {
	multipart.Backend
	dead atomic.Bool
}

func (b *mortalBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.dead.Load() {
		return nil, errors.New("the process is dead")
	}
	return b.Backend.RoundTrip(req)
}

// TestCrashAfterDeleteIntent kills reclaimer A at the point after S3's
// "aborting" is recorded and before the backend abort: from there on
// nothing of A reaches MinIO or etcd, and its lease ends. The next
// reclaimer's pass finishes it: its reconciler finds S3 aborting, aborts it
// and records it aborted, with one audit line; the rest is untouched.
func TestCrashAfterDeleteIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()

	// A: its own etcd client and backend connection, both of which die at
	// the fault point.
	cliA := e.connect()
	beA := &mortalBackend{Backend: e.Backend}
	var crash atomic.Bool
	cfgA := e.Config()
	cfgA.ID, cfgA.Store, cfgA.Backend = "a", etcdstore.NewStore(cliA, e.Store.Keys()), beA
	cfgA.Fault = func(point string) {
		if point == reclaim.FaultDeleteAfterIntent && crash.CompareAndSwap(true, false) {
			beA.dead.Store(true)
			cliA.Close()
		}
	}
	a := e.Start(cfgA)
	termA, _ := a.Leader()
	e.marked(a)

	crash.Store(true)
	if _, err := e.Trigger(a); err == nil {
		t.Fatal("the pass of the crashed reclaimer succeeded")
	}
	s3 := e.getSession(inv.bucket, inv.s3)
	if s3.State != etcdstore.StateAborting || lastTerm(s3) != termA || e.Backend.Aborts.Load() != 0 {
		t.Fatalf("S3 after the crash = %s under term %d, %d aborts; want aborting under %d, no abort sent", s3.State, lastTerm(s3), e.Backend.Aborts.Load(), termA)
	}
	if got := e.parts(inv); got != [4]int{12, 7, 5, 3} {
		t.Fatalf("parts on MinIO after the crash = %v, want all 27", got)
	}

	// B: the restarted process, with a log of its own.
	logs := &auditLog{}
	svcB, err := multipart.New(multipart.Config{Store: e.Store, Backend: e.Backend, Now: e.Clock.Now, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	cfgB := e.Config()
	cfgB.ID, cfgB.Sessions, cfgB.Logger = "b", svcB, logs.logger()
	b := e.Run(cfgB)
	termB := e.handOver(b, termA)
	e.Clock.Advance(2 * time.Minute) // past ReconcileAfter
	rep := e.MustPass(b)
	if rep.Pass != 2 || rep.Resumed != 1 || rep.Reconcile == nil || rep.Reconcile.Aborted != 1 {
		t.Errorf("B's pass = %d resumed %d reconciled %+v; want A's pass 2 resumed and S3 settled", rep.Pass, rep.Resumed, rep.Reconcile)
	}
	s3 = e.getSession(inv.bucket, inv.s3)
	if s3.State != etcdstore.StateAborted || lastTerm(s3) != termB {
		t.Errorf("S3 = %s under term %d, want aborted under B's term %d", s3.State, lastTerm(s3), termB)
	}
	if got := e.parts(inv); got != [4]int{12, 7, -1, 3} || e.Backend.Aborts.Load() != 1 {
		t.Errorf("parts on MinIO = %v after %d aborts; want S3 gone by one abort, the rest intact", got, e.Backend.Aborts.Load())
	}
	if lines := logs.audits(t, "abort_upload"); len(lines) != 1 || lines[0]["what"] != inv.bucket+"/"+inv.k3+"?uploadId="+inv.s3 {
		t.Errorf("abort audit lines %v, want exactly one, for S3", lines)
	}
	if st := e.getSession(inv.bucket, inv.s1).State; st != etcdstore.StateActive {
		t.Errorf("S1 = %s, want active", st)
	}
	if st := e.getSession(inv.bucket, inv.s2).State; st != etcdstore.StateCompleting {
		t.Errorf("S2 = %s, want completing", st)
	}
}
