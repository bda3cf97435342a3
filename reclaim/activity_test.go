//go:build integration

package reclaim_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// activityWorld is one idle upload with no parts and a session last active
// 30 hours ago, on a clock that agrees with MinIO's, and a reclaimer whose
// fault hook runs planned() once at FaultPlanned when it is set.
type activityWorld struct {
	e        *env
	r        *reclaim.Reclaimer
	reg      *prometheus.Registry
	bucket   string
	key, id  string
	planned  atomic.Pointer[func()]
	hookDone chan struct{}
}

func newActivityWorld(t *testing.T) *activityWorld {
	t.Helper()
	e := newEnv(t)
	e.Clock.Sync()
	w := &activityWorld{e: e, reg: prometheus.NewRegistry(), bucket: "uploads", key: "idle/object", hookDone: make(chan struct{}, 1)}
	e.Bucket(w.bucket)
	w.id = e.Upload(w.bucket, w.key, 0)
	now := e.Clock.Now()
	e.session(w.bucket, w.key, w.id, etcdstore.StateActive, now.Add(-31*time.Hour), now.Add(-30*time.Hour))
	cfg := e.Config()
	cfg.Metrics = w.reg
	cfg.MaxDeleteFraction, cfg.MaxDeleteUploadsFraction = 1, 1 // one upload is all there is
	cfg.Fault = func(point string) {
		if point != reclaim.FaultPlanned {
			return
		}
		if f := w.planned.Swap(nil); f != nil {
			(*f)()
			w.hookDone <- struct{}{}
		}
	}
	w.r = e.Start(cfg)
	return w
}

// atPlanned makes the next pass run f once its plan is made, before it acts.
func (w *activityWorld) atPlanned(f func()) { w.planned.Store(&f) }

// ranHook fails the test unless the hook set by atPlanned ran.
func (w *activityWorld) ranHook(t *testing.T) {
	t.Helper()
	select {
	case <-w.hookDone:
	default:
		t.Fatal("the pass never reached its planned point")
	}
}

// partOnMinIO writes part n straight to MinIO with the backend's
// credentials, around the gateway (a presigned URL made against MinIO, a
// second cluster). It returns the error, so it may run in a fault hook.
func (w *activityWorld) partOnMinIO(n int) error {
	data := bytes.Repeat([]byte{byte(n)}, reclaimtest.PartSize)
	_, err := w.e.Direct.PutObjectPart(w.e.T.Context(), w.bucket, w.key, w.id, n, bytes.NewReader(data), reclaimtest.PartSize, minio.PutObjectPartOptions{})
	return err
}

// markIt runs the pass that marks the idle upload.
func (w *activityWorld) markIt(t *testing.T) {
	t.Helper()
	if rep := w.e.MustPass(w.r); rep.Acted.Marked.Sessions != 1 {
		t.Fatalf("pass one acted %+v, want the idle upload marked", rep.Acted)
	}
}

// TestPartOnTheBackendRevertsTheMark: a part written directly to MinIO
// between the mark and the delete is activity the gateway never saw; the
// delete pass reverts the mark instead of aborting, counts it and keeps
// the upload, which stays usable.
func TestPartOnTheBackendRevertsTheMark(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	w.markIt(t)
	if err := w.partOnMinIO(1); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(13 * time.Hour) // past delete_after (12h)

	rep := e.MustPass(w.r)
	if rep.Uploads.Delete.Sessions != 1 || rep.Acted.AroundGateway.Sessions != 1 || rep.Acted.Intents.Sessions != 0 || e.Backend.Aborts.Load() != 0 {
		t.Errorf("delete pass planned %+v and acted %+v with %d aborts; want the planned delete not done, counted around the gateway",
			rep.Uploads, rep.Acted, e.Backend.Aborts.Load())
	}
	if n := e.partsOnMinIO(w.bucket, w.key, w.id); n != 1 {
		t.Errorf("parts on MinIO = %d, want the part written around the gateway", n)
	}
	s := e.getSession(w.bucket, w.id)
	last := s.History[len(s.History)-1]
	if s.State != etcdstore.StateActive || s.ExpiredAt != nil || last.From != etcdstore.StateExpired || last.Actor != "reclaimer" ||
		!reclaimtest.Contains(last.Reason, "around the gateway", "mark reverted") {
		t.Errorf("session = %s (expired at %v), last transition %+v; want the mark reverted with the reason", s.State, s.ExpiredAt, last)
	}
	if got := reclaimtest.Metric(t, w.reg, "sweepgate_reclaim_activity_around_gateway_total", "verdict", "delete"); got != 1 {
		t.Errorf("activity_around_gateway_total{delete} = %v, want 1", got)
	}
	// The part's time is the session's activity now: the next pass keeps
	// it within the grace, and the session takes parts as before.
	if rep := e.MustPass(w.r); rep.Uploads.Keep.Sessions != 1 || rep.Acted != (reclaim.Acted{}) {
		t.Errorf("the pass after the revert planned %+v, acted %+v; want the upload kept", rep.Uploads, rep.Acted)
	}
	e.uploadPart(w.bucket, w.key, w.id, 2)
}

// TestPartOnTheBackendBetweenPlanAndMark: a part reaches MinIO around the
// gateway after the plan decided to mark; the mark is not made.
func TestPartOnTheBackendBetweenPlanAndMark(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	var hookErr error
	w.atPlanned(func() { hookErr = w.partOnMinIO(1) })
	rep := e.MustPass(w.r)
	w.ranHook(t)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if rep.Uploads.Mark.Sessions != 1 || rep.Acted.Marked.Sessions != 0 || rep.Acted.AroundGateway.Sessions != 1 {
		t.Errorf("pass planned %+v and acted %+v; want the planned mark not done, counted around the gateway", rep.Uploads, rep.Acted)
	}
	if s := e.getSession(w.bucket, w.id); s.State != etcdstore.StateActive || len(s.History) != 1 {
		t.Errorf("session = %s with %d transitions; want active and untouched", s.State, len(s.History))
	}
	if got := reclaimtest.Metric(t, w.reg, "sweepgate_reclaim_activity_around_gateway_total", "verdict", "mark"); got != 1 {
		t.Errorf("activity_around_gateway_total{mark} = %v, want 1", got)
	}
}

// TestPartThroughTheGatewayBetweenPlanAndDelete: a client's part arrives
// through the session service after the plan decided to delete; the
// delete is not made and the upload is active again.
func TestPartThroughTheGatewayBetweenPlanAndDelete(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	w.markIt(t)
	e.Clock.Advance(13 * time.Hour)
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
	if rep.Uploads.Delete.Sessions != 1 || rep.Acted.Intents.Sessions != 0 || rep.Acted.Changed.Sessions != 1 || e.Backend.Aborts.Load() != 0 {
		t.Errorf("pass planned %+v and acted %+v with %d aborts; want the planned delete skipped as changed", rep.Uploads, rep.Acted, e.Backend.Aborts.Load())
	}
	if s := e.getSession(w.bucket, w.id); s.State != etcdstore.StateActive {
		t.Errorf("session = %s, want active again", s.State)
	}
	if n := e.partsOnMinIO(w.bucket, w.key, w.id); n != 1 {
		t.Errorf("parts on MinIO = %d, want the client's part", n)
	}
}

// TestFailedPartReadKeeps: when the upload's parts cannot be read right
// before the action, nothing is marked or deleted, and the report says so.
func TestFailedPartReadKeeps(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	w.markIt(t)
	e.Clock.Advance(13 * time.Hour)
	w.atPlanned(func() { e.Backend.FailListParts.Store(true) })
	rep := e.MustPass(w.r)
	w.ranHook(t)
	e.Backend.FailListParts.Store(false)
	if rep.Uploads.Delete.Sessions != 1 || rep.Acted.Unread.Sessions != 1 || rep.Acted.Intents.Sessions != 0 || e.Backend.Aborts.Load() != 0 {
		t.Errorf("pass planned %+v and acted %+v with %d aborts; want the delete not done, counted unread", rep.Uploads, rep.Acted, e.Backend.Aborts.Load())
	}
	if s := e.getSession(w.bucket, w.id); s.State != etcdstore.StateExpired {
		t.Errorf("session = %s, want still expired", s.State)
	}
}

// TestPartInFlightKeepsTheUpload: a part whose body is still arriving
// when the grace has run out keeps its upload for as long as it streams;
// once it ends, its end is the upload's activity.
func TestPartInFlightKeepsTheUpload(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	body, feed := io.Pipe()
	answered := make(chan int, 1)
	go func() {
		code, _ := e.sendPart(w.bucket, w.key, w.id, 1, body)
		answered <- code
	}()
	inFlight := func() int64 {
		resp, err := e.Cli.Get(t.Context(), e.Store.Keys().InFlight(w.id), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	reclaimtest.WaitFor(t, "the part's in-flight record", func() bool { return inFlight() == 1 })
	if _, err := feed.Write(make([]byte, reclaimtest.PartSize/2)); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(25 * time.Hour) // the part began longer ago than the grace

	rep := e.MustPass(w.r)
	if rep.Uploads.Keep.Sessions != 1 || rep.Uploads.Mark.Sessions != 0 || rep.Acted != (reclaim.Acted{}) {
		t.Errorf("pass during the part planned %+v, acted %+v; want the upload kept", rep.Uploads, rep.Acted)
	}
	ex, err := w.r.ExplainUpload(t.Context(), w.bucket, w.id, "")
	if err != nil || ex.Verdict != "keep" || !strings.Contains(ex.Reason, "a part is streaming") || ex.Session.PartsInFlight != 1 {
		t.Errorf("explain during the part = %q %q (%d in flight), %v; want keep, streaming", ex.Verdict, ex.Reason, ex.Session.PartsInFlight, err)
	}

	if _, err := feed.Write(make([]byte, reclaimtest.PartSize-reclaimtest.PartSize/2)); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("the held part answered %d", code)
	}
	if n := inFlight(); n != 0 {
		t.Errorf("%d in-flight records after the part ended, want none", n)
	}
	a, err := e.Store.GetActivity(t.Context(), w.id)
	if err != nil || a.Value.What != "UploadPart ended" || !a.Value.At.Equal(e.Clock.Now()) {
		t.Errorf("activity after the part = %+v, %v; want its end, now", a.Value, err)
	}
	if rep := e.MustPass(w.r); rep.Uploads.Keep.Sessions != 1 || rep.Acted != (reclaim.Acted{}) {
		t.Errorf("pass after the part planned %+v, acted %+v; want the upload kept (its part just ended)", rep.Uploads, rep.Acted)
	}
}

// TestInFlightRecordBlocksTheAction: a mark planned while no part was in
// flight is not made once one is: the action's transaction compares that
// the upload has no in-flight record. (The record is written alone here;
// a real part writes its activity with it, which the action compares too.)
func TestInFlightRecordBlocksTheAction(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	var hookErr error
	w.atPlanned(func() {
		_, hookErr = e.Cli.Put(t.Context(), e.Store.Keys().InFlightPart(w.id, "held"), `{"at":"2020-01-01T00:00:00Z","what":"UploadPart","part":1}`)
	})
	rep := e.MustPass(w.r)
	w.ranHook(t)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if rep.Uploads.Mark.Sessions != 1 || rep.Acted.Marked.Sessions != 0 || rep.Acted.Changed.Sessions != 1 {
		t.Errorf("pass planned %+v and acted %+v; want the mark skipped", rep.Uploads, rep.Acted)
	}
	if s := e.getSession(w.bucket, w.id); s.State != etcdstore.StateActive {
		t.Errorf("session = %s, want active", s.State)
	}
}

// TestFailedPartEndsToo: a part the backend refuses has ended all the same:
// its in-flight record goes and its end is recorded as activity, while the
// client gets the backend's answer.
func TestFailedPartEndsToo(t *testing.T) {
	t.Parallel()
	w := newActivityWorld(t)
	e := w.e
	if err := e.Direct.AbortMultipartUpload(t.Context(), w.bucket, w.key, w.id); err != nil {
		t.Fatal(err)
	}
	code, answer := e.sendPart(w.bucket, w.key, w.id, 1, bytes.NewReader(bytes.Repeat([]byte{1}, reclaimtest.PartSize)))
	if code != http.StatusNotFound || !strings.Contains(answer, "NoSuchUpload") {
		t.Errorf("part to an upload gone from MinIO answered %d %s; want the backend's NoSuchUpload", code, answer)
	}
	resp, err := e.Cli.Get(t.Context(), e.Store.Keys().InFlight(w.id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d in-flight records after the failed part, want none", resp.Count)
	}
	if a, err := e.Store.GetActivity(t.Context(), w.id); err != nil || a.Value.What != "UploadPart ended" {
		t.Errorf("activity after the failed part = %+v, %v; want its end", a.Value, err)
	}
}
