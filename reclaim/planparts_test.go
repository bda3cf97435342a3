//go:build integration

package reclaim_test

import (
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestPlanReadsPartsWhereNeeded: a plan reads the backend's parts only of
// the uploads whose figures the gateway's records cannot give: one it
// would delete (the breaker counts the backend's parts, here two more than
// the gateway recorded), an orphan and an upload with a session but no
// part record. A kept upload counts the parts the gateway recorded.
func TestPlanReadsPartsWhereNeeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const bucket = "uploads"
	e.Bucket(bucket)
	now := e.Clock.Now()
	idle := e.Upload(bucket, "idle", 2) // two parts around the gateway
	e.session(bucket, "idle", idle, etcdstore.StateActive, now, now)
	e.uploadPart(bucket, "idle", idle, 3)
	e.Clock.Advance(30 * time.Hour)
	now = e.Clock.Now()
	live := e.Upload(bucket, "live", 0)
	e.session(bucket, "live", live, etcdstore.StateActive, now, now)
	e.uploadPart(bucket, "live", live, 1)
	e.uploadPart(bucket, "live", live, 2)
	e.Upload(bucket, "orphan", 2)
	unrecorded := e.Upload(bucket, "unrecorded", 3)
	e.session(bucket, "unrecorded", unrecorded, etcdstore.StateActive, now, now)
	r := e.Start(e.Config())
	if one := e.MustPass(r); one.Acted.Marked.Sessions != 1 {
		t.Fatalf("pass one marked %+v, want the idle upload", one.Acted.Marked)
	}
	e.Clock.Advance(13 * time.Hour)

	before := e.Backend.ListParts.Load()
	plan, err := r.Plan(t.Context())
	if err != nil {
		t.Fatalf("plan: %v (report %+v)", err, plan)
	}
	if got := e.Backend.ListParts.Load() - before; got != 3 {
		t.Errorf("the plan listed the parts of %d uploads on the backend, want 3 (the one it deletes, the orphan, the upload with no part record)", got)
	}
	// Kept: the live upload's two recorded parts and the unrecorded one's
	// three on the backend; deleted: the idle one's three on the backend;
	// held: the orphan's two.
	wantUploads(t, plan.Uploads, count(2, 5), count(0, 0), count(1, 3), count(1, 2))
}
