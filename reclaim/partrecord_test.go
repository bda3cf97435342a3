//go:build integration

package reclaim_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// TestPartRecordBetweenPlanAndMark: in keyspace schema 2 a part's end is
// recorded by its part record alone, without the activity key. A part
// through the session service after the plan decided to mark makes the
// mark skip as changed (the action compares the upload's part records
// too), and the next pass keeps the upload by the part's time.
func TestPartRecordBetweenPlanAndMark(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	ctx := t.Context()
	if _, err := e.Cli.Put(ctx, e.Store.Keys().Schema(), `{"v":1,"schema":2}`); err != nil {
		t.Fatal(err)
	}
	if err := etcdstore.NewSchemaCheck(e.Store, nil).Check(ctx); err != nil || e.Store.WritesSchema() != 2 {
		t.Fatalf("schema check: %v, writes schema %d", err, e.Store.WritesSchema())
	}
	actBefore, actErr := e.Store.GetActivity(ctx, w.id)
	var code int
	var answer string
	w.atPlanned(func() {
		code, answer = e.sendPart(w.bucket, w.key, w.id, 1, bytes.NewReader(bytes.Repeat([]byte{1}, reclaimtest.PartSize)))
	})
	rep := e.MustPass(w.r)
	w.ranHook(t)
	if code != http.StatusOK {
		t.Fatalf("part between plan and act: %d %s", code, answer)
	}
	if rep.Uploads.Mark.Sessions != 1 || rep.Acted.Marked.Sessions != 0 || rep.Acted.Changed.Sessions != 1 {
		t.Errorf("pass planned %+v and acted %+v; want the planned mark skipped as changed", rep.Uploads, rep.Acted)
	}
	actAfter, actAfterErr := e.Store.GetActivity(ctx, w.id)
	if (actErr == nil) != (actAfterErr == nil) || actBefore.ModRev != actAfter.ModRev {
		t.Fatalf("the part wrote the activity key (%+v, %v; before %+v, %v): this test needs a part recorded by its part record alone",
			actAfter, actAfterErr, actBefore, actErr)
	}
	if s := e.getSession(w.bucket, w.id); s.State != etcdstore.StateActive || len(s.History) != 1 {
		t.Errorf("session = %s with %d transitions; want active and untouched", s.State, len(s.History))
	}
	if rep := e.MustPass(w.r); rep.Uploads.Keep.Sessions != 1 || rep.Acted.Marked.Sessions != 0 {
		t.Errorf("the next pass planned %+v, acted %+v; want the upload kept by its part's time", rep.Uploads, rep.Acted)
	}
}
