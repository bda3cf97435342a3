//go:build integration

package reclaim_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// lingerWorld is an idle upload (no parts, a session of alice's last
// active 30 hours ago) in a keyspace in schema 2, where the parts of an
// upload on one gateway share a lingering in-flight record; the session
// service enforces ownership and runs the records' removals when the test
// fires them; a reclaimer leads.
type lingerWorld struct {
	e       *env
	r       *reclaim.Reclaimer
	timers  *reclaimtest.Timers
	bucket  string
	key, id string
}

func newLingerWorld(t *testing.T) *lingerWorld {
	t.Helper()
	e := newEnv(t)
	e.Clock.Sync()
	if _, err := e.Cli.Put(t.Context(), e.Store.Keys().Schema(), `{"v":1,"schema":2}`); err != nil {
		t.Fatal(err)
	}
	if err := etcdstore.NewSchemaCheck(e.Store, nil).Check(t.Context()); err != nil || e.Store.WritesSchema() != 2 {
		t.Fatalf("schema check: %v (writes schema %d)", err, e.Store.WritesSchema())
	}
	w := &lingerWorld{e: e, timers: &reclaimtest.Timers{}, bucket: "uploads", key: "linger/object"}
	var err error
	e.Svc, err = multipart.New(multipart.Config{Store: e.Store, Backend: e.Backend, Now: e.Clock.Now,
		EnforceOwnership: true, AfterFunc: w.timers.After})
	if err != nil {
		t.Fatal(err)
	}
	e.Bucket(w.bucket)
	w.id = e.Upload(w.bucket, w.key, 0)
	now := e.Clock.Now()
	e.session(w.bucket, w.key, w.id, etcdstore.StateActive, now.Add(-31*time.Hour), now.Add(-30*time.Hour))
	cfg := e.Config()
	cfg.MaxDeleteFraction, cfg.MaxDeleteUploadsFraction = 1, 1 // one upload is all there is
	w.r = e.Start(cfg)
	return w
}

// inFlight returns the keys of the upload's in-flight records.
func (w *lingerWorld) inFlight(t *testing.T) []string {
	t.Helper()
	resp, err := w.e.Cli.Get(t.Context(), w.e.Store.Keys().InFlight(w.id), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// part sends part n whole and fails the test unless it is taken.
func (w *lingerWorld) part(t *testing.T, n int) {
	t.Helper()
	if code, answer := w.e.sendPart(w.bucket, w.key, w.id, n, bytes.NewReader(bytes.Repeat([]byte{byte(n)}, reclaimtest.PartSize))); code != http.StatusOK {
		t.Fatalf("part %d: %d %s", n, code, answer)
	}
}

// streamingPart is a part whose body is half sent: it has begun (its
// bytes are on their way to MinIO) and has not ended.
type streamingPart struct {
	feed     *io.PipeWriter
	answered chan int
}

func (w *lingerWorld) stream(t *testing.T, n int) *streamingPart {
	t.Helper()
	body, feed := io.Pipe()
	p := &streamingPart{feed: feed, answered: make(chan int, 1)}
	go func() {
		code, _ := w.e.sendPart(w.bucket, w.key, w.id, n, body)
		p.answered <- code
	}()
	// The write returns once the service reads the body, which it does
	// only after the part's start is recorded.
	if _, err := feed.Write(make([]byte, reclaimtest.PartSize/2)); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *streamingPart) finish(t *testing.T) {
	t.Helper()
	if _, err := p.feed.Write(make([]byte, reclaimtest.PartSize-reclaimtest.PartSize/2)); err != nil {
		t.Fatal(err)
	}
	p.feed.Close()
	if code := <-p.answered; code != http.StatusOK {
		t.Fatalf("the streamed part answered %d", code)
	}
}

// requireKept runs a pass and fails the test unless it kept the upload
// and did nothing.
func (w *lingerWorld) requireKept(t *testing.T, when string) {
	t.Helper()
	rep := w.e.MustPass(w.r)
	if rep.Uploads.Keep.Sessions != 1 || rep.Uploads.Mark.Sessions != 0 || rep.Acted != (reclaim.Acted{}) {
		t.Fatalf("pass %s planned %+v, acted %+v; want the upload kept", when, rep.Uploads, rep.Acted)
	}
	if s := w.e.getSession(w.bucket, w.id); s.State != etcdstore.StateActive {
		t.Fatalf("session %s = %s, want active", when, s.State)
	}
}

// requireMarked runs a pass and fails the test unless it marked the
// upload.
func (w *lingerWorld) requireMarked(t *testing.T, when string) {
	t.Helper()
	rep := w.e.MustPass(w.r)
	if rep.Uploads.Mark.Sessions != 1 || rep.Acted.Marked.Sessions != 1 {
		t.Fatalf("pass %s planned %+v, acted %+v; want the upload marked", when, rep.Uploads, rep.Acted)
	}
	if s := w.e.getSession(w.bucket, w.id); s.State != etcdstore.StateExpired {
		t.Fatalf("session %s = %s, want expired", when, s.State)
	}
}

// setState moves the session to st, as another call or a reclaimer would.
func (w *lingerWorld) setState(t *testing.T, st etcdstore.SessionState) {
	t.Helper()
	v, err := w.e.Store.GetSession(t.Context(), w.bucket, w.id)
	if err != nil {
		t.Fatal(err)
	}
	v.Value.Transition(st, w.e.Clock.Now(), "test", "set")
	if _, err := w.e.Store.UpdateSession(t.Context(), etcdstore.SessionUpdate{Session: &v.Value, ModRev: v.ModRev}); err != nil {
		t.Fatal(err)
	}
}

// TestPartEndsAfterTheSessionMoved: a part that began under the held
// record and ends after its session moved on (a complete began) still has
// its part recorded when its client gets the answer.
func TestPartEndsAfterTheSessionMoved(t *testing.T) {
	t.Parallel()
	w := newLingerWorld(t)
	w.part(t, 1)
	p := w.stream(t, 2)
	w.setState(t, etcdstore.StateCompleting)
	p.finish(t)
	parts, err := w.e.Store.ListParts(t.Context(), w.id)
	if err != nil || len(parts) != 2 || parts[1].Number != 2 {
		t.Fatalf("part records after the part ended on a completing session: %+v (%v); want parts 1 and 2", parts, err)
	}
}

// TestLingeringRecordKeepsStreamingParts: the second and third parts of an
// upload reuse the record its first part wrote, and each streams longer
// than the grace with its upload kept. After the last part the record
// keeps the upload until it is removed, once, after the linger; then the
// service holds nothing for the upload and the next pass marks it.
func TestLingeringRecordKeepsStreamingParts(t *testing.T) {
	t.Parallel()
	w := newLingerWorld(t)
	e := w.e
	w.part(t, 1)
	first := w.inFlight(t)
	if len(first) != 1 {
		t.Fatalf("in-flight records after the first part: %v, want one", first)
	}
	for n := 2; n <= 3; n++ {
		p := w.stream(t, n)
		if got := w.inFlight(t); !slices.Equal(got, first) {
			t.Fatalf("in-flight records during part %d: %v, want the first part's %v", n, got, first)
		}
		e.Clock.Advance(25 * time.Hour) // the part began longer ago than the grace
		w.requireKept(t, "during a streaming part")
		p.finish(t)
	}
	if got := w.inFlight(t); !slices.Equal(got, first) || e.Svc.HeldRecords() != 1 {
		t.Fatalf("after the parts: in-flight records %v, %d held; want the first part's %v, held", got, e.Svc.HeldRecords(), first)
	}
	e.Clock.Advance(25 * time.Hour)
	w.requireKept(t, "while the record lingers")

	if fired := w.timers.Fire(); fired != 1 {
		t.Fatalf("%d removals pending after the parts, want 1", fired)
	}
	if got := w.inFlight(t); len(got) != 0 || e.Svc.HeldRecords() != 0 {
		t.Fatalf("after the linger: in-flight records %v, %d held; want none", got, e.Svc.HeldRecords())
	}
	w.requireMarked(t, "after the linger")
}

// TestParallelPartsShareOneRecord: parts of one upload that start at once
// on one gateway write one in-flight record between them, not one each,
// and once they ended and the linger passed no record is left.
func TestParallelPartsShareOneRecord(t *testing.T) {
	t.Parallel()
	w := newLingerWorld(t)
	const n = 6
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			codes[i], _ = w.e.sendPart(w.bucket, w.key, w.id, i+1, bytes.NewReader(bytes.Repeat([]byte{byte(i)}, reclaimtest.PartSize)))
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK {
			t.Fatalf("part %d answered %d", i+1, code)
		}
	}
	if got := w.inFlight(t); len(got) != 1 {
		t.Fatalf("in-flight records after %d parallel parts: %v, want one", n, got)
	}
	w.timers.Fire()
	if got := w.inFlight(t); len(got) != 0 || w.e.Svc.HeldRecords() != 0 {
		t.Fatalf("after the linger: in-flight records %v, %d held; want none", got, w.e.Svc.HeldRecords())
	}
}

// TestLingeringRecordRefusesAsBefore: with the upload's record held, a
// part of another principal is refused, a part of a completing session is
// refused for now and one of an aborted session for good, none reaching
// MinIO; a part of an expired session brings it back to active, under a
// new instance of the record that replaces the old one.
func TestLingeringRecordRefusesAsBefore(t *testing.T) {
	t.Parallel()
	w := newLingerWorld(t)
	e := w.e
	w.part(t, 1)
	held := w.inFlight(t)
	send := func(principal string, n int) (int, string) {
		return e.sendPartAs(principal, w.bucket, w.key, w.id, n, bytes.NewReader(bytes.Repeat([]byte{9}, reclaimtest.PartSize)))
	}
	if code, answer := send("bob", 2); code != http.StatusForbidden || !strings.Contains(answer, "AccessDenied") {
		t.Errorf("bob's part: %d %s, want AccessDenied", code, answer)
	}
	setState := func(st etcdstore.SessionState) { w.setState(t, st) }
	setState(etcdstore.StateCompleting)
	if code, answer := send("alice", 3); code != http.StatusConflict || !strings.Contains(answer, "OperationAborted") {
		t.Errorf("part of a completing session: %d %s, want OperationAborted", code, answer)
	}
	if n := e.partsOnMinIO(w.bucket, w.key, w.id); n != 1 {
		t.Fatalf("parts on MinIO = %d, want the first only", n)
	}
	if got := w.inFlight(t); !slices.Equal(got, held) {
		t.Fatalf("in-flight records after the refused parts: %v, want %v", got, held)
	}

	setState(etcdstore.StateExpired)
	if code, answer := send("alice", 4); code != http.StatusOK {
		t.Fatalf("part of an expired session: %d %s", code, answer)
	}
	if s := e.getSession(w.bucket, w.id); s.State != etcdstore.StateActive {
		t.Errorf("session after the part = %s, want active again", s.State)
	}
	if got := w.inFlight(t); len(got) != 1 || got[0] == held[0] {
		t.Errorf("in-flight records after the revival: %v, want one new instance in place of %v", got, held)
	}

	setState(etcdstore.StateAborted)
	if code, answer := send("alice", 5); code != http.StatusNotFound || !strings.Contains(answer, "NoSuchUpload") {
		t.Errorf("part of an aborted session: %d %s, want NoSuchUpload", code, answer)
	}
	if n := e.partsOnMinIO(w.bucket, w.key, w.id); n != 2 {
		t.Errorf("parts on MinIO = %d, want the first and the revival's", n)
	}
}

// TestLingeringRecordGone: a part whose upload's record is gone (its
// lease ended, here its key deleted behind the gateway's back) notices in
// its read-only check and writes a new instance. A gateway that dies
// holding a record keeps the upload no longer than its lease: once the
// lease ends the reclaimer marks the idle upload.
func TestLingeringRecordGone(t *testing.T) {
	t.Parallel()
	w := newLingerWorld(t)
	e := w.e
	w.part(t, 1)
	first := w.inFlight(t)
	if _, err := e.Cli.Delete(t.Context(), first[0]); err != nil {
		t.Fatal(err)
	}
	w.part(t, 2)
	second := w.inFlight(t)
	if len(second) != 1 || second[0] == first[0] {
		t.Fatalf("in-flight records after the record was lost: %v, want one new instance", second)
	}

	e.Clock.Advance(25 * time.Hour)
	w.requireKept(t, "with the record held")
	got, err := e.Cli.Get(t.Context(), second[0])
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("read the record: %v", err)
	}
	if _, err := e.Cli.Revoke(t.Context(), clientv3.LeaseID(got.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	w.requireMarked(t, "once the lease ended")
}

// TestCrashAfterPartBeforeRecord: a gateway takes a part to MinIO and dies
// before it records the part's end; its lingering record ends with its
// lease. The part on MinIO, which the gateway never recorded, keeps the
// upload within the grace as activity around the gateway (read right
// before the mark), and past it the reclaimer marks and then deletes the
// upload.
func TestCrashAfterPartBeforeRecord(t *testing.T) {
	t.Parallel()
	w := newLingerWorld(t)
	e := w.e
	cliB := e.connect()
	// B dies holding the upload's record: its lease is the one to end.
	var leaseB clientv3.LeaseID
	beB := &dyingBackend{Backend: e.Backend, die: func() {
		if r, err := e.Cli.Get(t.Context(), e.Store.Keys().InFlight(w.id), clientv3.WithPrefix()); err == nil && len(r.Kvs) == 1 {
			leaseB = clientv3.LeaseID(r.Kvs[0].Lease)
		}
		cliB.Close()
	}}
	storeB := etcdstore.NewStore(cliB, e.Store.Keys())
	if err := etcdstore.NewSchemaCheck(storeB, nil).Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	svcB, err := multipart.New(multipart.Config{Store: storeB, Backend: beB, Now: e.Clock.Now, AfterFunc: (&reclaimtest.Timers{}).After})
	if err != nil {
		t.Fatal(err)
	}
	svc := e.Svc
	e.Svc = svcB
	code, answer := e.sendPart(w.bucket, w.key, w.id, 1, bytes.NewReader(bytes.Repeat([]byte{1}, reclaimtest.PartSize)))
	e.Svc = svc
	if code != http.StatusOK || !beB.died {
		t.Fatalf("B's part answered %d %s (died %v); want it taken by MinIO, then B dead", code, answer, beB.died)
	}
	parts, err := e.Store.ListParts(t.Context(), w.id)
	if err != nil || len(parts) != 0 || e.partsOnMinIO(w.bucket, w.key, w.id) != 1 {
		t.Fatalf("after B died: part records %v (%v); want none, and the part on MinIO", parts, err)
	}
	if leaseB == 0 {
		t.Fatal("B held no in-flight record when it died")
	}
	// B's lease ends (its TTL, run out at once, if it has not run out).
	if _, err := e.Cli.Revoke(t.Context(), leaseB); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatal(err)
	}
	if got := w.inFlight(t); len(got) != 0 {
		t.Fatalf("in-flight records once B's lease ended: %v, want none", got)
	}
	// The plan would mark the upload by its recorded activity; the read of
	// MinIO before the mark finds B's part and keeps it.
	rep := e.MustPass(w.r)
	if rep.Acted.Marked.Sessions != 0 || rep.Acted.AroundGateway.Sessions != 1 {
		t.Fatalf("pass with B's part on MinIO within the grace acted %+v; want the upload kept by the part", rep.Acted)
	}
	if s := e.getSession(w.bucket, w.id); s.State != etcdstore.StateActive {
		t.Fatalf("session after that pass = %s, want active", s.State)
	}
	e.Clock.Advance(25 * time.Hour)
	w.requireMarked(t, "past the grace")
	e.Clock.Advance(13 * time.Hour)
	rep = e.MustPass(w.r)
	if rep.Acted.Deleted.Sessions != 1 || e.partsOnMinIO(w.bucket, w.key, w.id) != -1 {
		t.Errorf("pass past delete_after acted %+v; want the upload deleted from MinIO", rep.Acted)
	}
}

// dyingBackend is the backend connection of a process that dies right
// after the backend answers its first UploadPart: die runs, and nothing of
// the process reaches the backend again.
type dyingBackend struct {
	multipart.Backend
	die  func()
	died bool
}

func (b *dyingBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.died {
		return nil, errors.New("the process is dead")
	}
	resp, err := b.Backend.RoundTrip(req)
	if req.Method == http.MethodPut && req.URL.Query().Has("partNumber") {
		b.died = true
		b.die()
	}
	return resp, err
}
