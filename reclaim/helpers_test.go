//go:build integration

package reclaim_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// clock is the injected clock of the test's world, wall and monotonic:
// time moves only when a test says so. Advance is time passing (both
// move); Jump moves the wall clock alone, as a clock set wrong does.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	mono time.Duration
}

// backendLag is how far the test clock starts ahead of MinIO's. A test
// writes its parts on MinIO while setting the scene and records activity in
// the past of the test clock; starting ahead keeps those parts older than
// any recorded activity, as they would be had the scene been played out in
// time, instead of reading as activity around the gateway. Tests of that
// rule start from the backend's clock (syncClock).
const backendLag = 72 * time.Hour

func newClock() *clock {
	return &clock{now: time.Now().UTC().Truncate(time.Second).Add(backendLag)}
}

// syncClock sets the clock to MinIO's (the machine's) time.
func (c *clock) syncClock() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = time.Now().UTC()
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.mono += d
}

// Jump moves the wall clock by d and not the monotonic one.
func (c *clock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Mono is the monotonic clock: the time passed since the test began.
func (c *clock) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// countingBackend is the real backend client, counting the aborts sent
// through it and optionally losing their answers.
type countingBackend struct {
	multipart.Backend
	aborts atomic.Int64
	// loseAbortAnswer makes an abort reach the backend but its answer get
	// lost, as a timed-out response would.
	loseAbortAnswer atomic.Bool
	// hidden is an upload id left out of ListMultipartUploads answers, as
	// MinIO leaves out the uploads made before it last started.
	hidden atomic.Value
	// date, when set, is the backend's clock: every answer's Date header
	// is rewritten from it, so that a backend shares the test's clock
	// (MinIO's own is the machine's, which the test does not move).
	date atomic.Pointer[func() time.Time]
	// failListParts makes every ListParts fail as a broken connection would.
	failListParts atomic.Bool
	// listParts counts the ListParts requests sent.
	listParts atomic.Int64
}

func (b *countingBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	isAbort := req.Method == http.MethodDelete && req.URL.Query().Has("uploadId")
	if isAbort {
		b.aborts.Add(1)
	}
	if req.Method == http.MethodGet && req.URL.Query().Has("uploadId") {
		b.listParts.Add(1)
	}
	if req.Method == http.MethodGet && req.URL.Query().Has("uploadId") && b.failListParts.Load() {
		return nil, fmt.Errorf("read tcp: connection reset by peer (list parts failed by the test)")
	}
	resp, err := b.Backend.RoundTrip(req)
	if f := b.date.Load(); err == nil && f != nil {
		resp.Header.Set("Date", (*f)().UTC().Format(http.TimeFormat))
	}
	if err == nil && isAbort && b.loseAbortAnswer.Load() {
		resp.Body.Close()
		return nil, fmt.Errorf("read tcp: i/o timeout (answer lost by the test)")
	}
	if id, _ := b.hidden.Load().(string); err == nil && id != "" && req.Method == http.MethodGet && req.URL.Query().Has("uploads") {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		s := string(body)
		if i := strings.Index(s, "<UploadId>"+id+"</UploadId>"); i >= 0 {
			start := strings.LastIndex(s[:i], "<Upload>")
			end := i + strings.Index(s[i:], "</Upload>") + len("</Upload>")
			s = s[:start] + s[end:]
		}
		resp.Body = io.NopCloser(strings.NewReader(s))
		resp.ContentLength = int64(len(s))
		resp.Header.Del("Content-Length")
	}
	return resp, err
}

// env is one test's world: a real MinIO, a real etcd, the session service
// and the clock.
type env struct {
	t       *testing.T
	minio   *harness.MinIO
	direct  minio.Core
	backend *countingBackend
	etcd    *etcdstore.Embedded
	cli     *clientv3.Client
	store   *etcdstore.Store
	svc     *multipart.Service
	clock   *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, clock: newClock()}
	e.minio = harness.StartMinIO(t)
	mc, err := harness.NewMinioGo(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.direct = minio.Core{Client: mc}
	be, err := backend.NewStatic(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	e.backend = &countingBackend{Backend: be}
	e.setBackendDate(e.clock.Now)

	e.etcd, e.cli = etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/sweepgate-test/")
	if err != nil {
		t.Fatal(err)
	}
	e.store = etcdstore.NewStore(e.cli, keys)
	e.svc, err = multipart.New(multipart.Config{Store: e.store, Backend: e.backend, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// setBackendDate makes the backend's answers carry now's time as their
// Date.
func (e *env) setBackendDate(now func() time.Time) { e.backend.date.Store(&now) }

// connect opens another etcd client, closed at the end of the test.
func (e *env) connect() *clientv3.Client {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	cli, err := etcdstore.Connect(ctx, e.etcd.Endpoints(), 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cli.Close() })
	return cli
}

func (e *env) logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// config is the reclaimer configuration of the acceptance scenarios.
func (e *env) config() reclaim.Config {
	return reclaim.Config{
		Store: e.store, Sessions: e.svc, Backend: e.backend,
		Grace: 24 * time.Hour, DeleteAfter: 12 * time.Hour, StuckLimit: time.Hour, ClockSkew: 5 * time.Minute,
		MaxDelete: 1000, MaxDeleteFraction: 0.5,
		// A test's few uploads are often all marked or deleted at once.
		MaxDeleteUploadsFraction: 0.5, MaxMarkFraction: 1,
		// Passes run on Trigger only, and guards are settled by passes
		// only unless a test sets a shorter GuardCheck.
		Interval:    24 * time.Hour,
		GuardCheck:  24 * time.Hour,
		BatchSize:   2,
		ElectionTTL: 60 * time.Second,
		Now:         e.clock.Now, Monotonic: e.clock.Mono, Logger: e.logger(),
	}
}

// start runs a reclaimer until the test ends and waits until it leads.
func (e *env) start(cfg reclaim.Config) *reclaim.Reclaimer {
	e.t.Helper()
	r := e.run(cfg)
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	defer cancel()
	if _, err := r.Elector().AwaitLeader(ctx); err != nil {
		e.t.Fatalf("reclaimer did not win the election: %v", err)
	}
	return r
}

// run runs a reclaimer until the test ends, without waiting for it to lead.
func (e *env) run(cfg reclaim.Config) *reclaim.Reclaimer {
	e.t.Helper()
	r, err := reclaim.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// trigger runs one pass and returns its report and error.
func (e *env) trigger(r *reclaim.Reclaimer) (reclaim.Report, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	defer cancel()
	return r.Trigger(ctx)
}

func (e *env) mustPass(r *reclaim.Reclaimer) reclaim.Report {
	e.t.Helper()
	rep, err := e.trigger(r)
	if err != nil {
		e.t.Fatalf("pass failed: %v (report: %+v)", err, rep)
	}
	return rep
}

func (e *env) bucket(name string) {
	e.t.Helper()
	if err := e.direct.MakeBucket(e.t.Context(), name, minio.MakeBucketOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// partSize is the size of every part the tests upload; MinIO checks the
// 5 MiB minimum only on complete.
const partSize = 1024

// upload creates an upload with n parts directly on MinIO.
func (e *env) upload(bucket, key string, n int) string {
	e.t.Helper()
	ctx := e.t.Context()
	id, err := e.direct.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for p := 1; p <= n; p++ {
		data := bytes.Repeat([]byte{byte(p)}, partSize)
		if _, err := e.direct.PutObjectPart(ctx, bucket, key, id, p, bytes.NewReader(data), partSize, minio.PutObjectPartOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}

// partsOnMinIO counts an upload's parts on MinIO; -1 means NoSuchUpload.
func (e *env) partsOnMinIO(bucket, key, id string) int {
	e.t.Helper()
	res, err := e.direct.ListObjectParts(e.t.Context(), bucket, key, id, 0, 1000)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
			return -1
		}
		e.t.Fatal(err)
	}
	return len(res.ObjectParts)
}

// session records a session the way the gateway would have: created at
// created, last active at last, and (for completing) completing since last.
func (e *env) session(bucket, key, id string, st etcdstore.SessionState, created, last time.Time) {
	e.t.Helper()
	s := &etcdstore.Session{Bucket: bucket, Key: key, UploadID: id, Owner: "alice", Created: created, LastActivity: last}
	s.Transition(etcdstore.StateActive, created, "gateway", "created")
	if st != etcdstore.StateActive {
		s.Transition(st, last, "gateway", "test")
	}
	if _, err := e.store.CreateSession(e.t.Context(), s); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) getSession(bucket, id string) etcdstore.Session {
	e.t.Helper()
	v, err := e.store.GetSession(e.t.Context(), bucket, id)
	if err != nil {
		e.t.Fatalf("session %s/%s: %v", bucket, id, err)
	}
	return v.Value
}

// uploadPart sends one part through the session service, as the gateway
// does for a client's UploadPart: activity is recorded, then the bytes go
// to MinIO.
func (e *env) uploadPart(bucket, key, id string, n int) {
	e.t.Helper()
	if code, body := e.sendPart(bucket, key, id, n, bytes.NewReader(bytes.Repeat([]byte{0xee}, partSize))); code != http.StatusOK {
		e.t.Fatalf("UploadPart through the session service: %d %s", code, body)
	}
}

// sendPart sends part n with partSize bytes read from body through the
// session service and returns the answer's status and body. It does not
// fail the test, so it may run on any goroutine (a fault hook, a part held
// open).
func (e *env) sendPart(bucket, key, id string, n int, body io.Reader) (int, string) {
	req, err := e.backend.NewRequest(context.Background(), http.MethodPut, bucket, key, url.Values{"partNumber": {fmt.Sprint(n)}, "uploadId": {id}})
	if err != nil {
		return 0, err.Error()
	}
	// The service hashes the part as it is sent (Observe), as it hashes a
	// client's verified payload.
	observed := &observedReader{r: body}
	req.Body = io.NopCloser(observed)
	req.ContentLength = partSize
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	call := &multipart.Call{
		Op: s3op.UploadPart, Bucket: bucket, Key: key, UploadID: id, PartNumber: fmt.Sprint(n),
		Principal: "alice", RequestID: "test-part", Resource: "/" + bucket + "/" + key, Header: http.Header{},
		Observe:    func(w io.Writer) { observed.w = w },
		Forward:    backend.NewForward(req, nil),
		PayloadErr: func() error { return nil },
	}
	return answerOf(e.svc.Serve(context.Background(), call))
}

// observedReader copies what is read from r to w, once w is set.
type observedReader struct {
	r io.Reader
	w io.Writer
}

func (o *observedReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if n > 0 && o.w != nil {
		_, _ = o.w.Write(p[:n])
	}
	return n, err
}

// answerOf returns the status and body a client gets for rep.
func answerOf(rep reply.Reply) (int, string) {
	switch {
	case rep.Err != nil:
		e := s3err.As(rep.Err)
		return e.HTTPStatus, string(s3err.Document(e, "", ""))
	case rep.Stream != nil:
		defer rep.Stream.Body.Close()
		b, _ := io.ReadAll(rep.Stream.Body)
		return rep.Stream.StatusCode, string(b)
	}
	return rep.Status, string(rep.Body)
}

// revision returns etcd's current revision.
func (e *env) revision() int64 {
	e.t.Helper()
	resp, err := e.cli.Get(e.t.Context(), "health", clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Header.Revision
}

// revokeLeader revokes the lease of the election's leader key, as if the
// leader had stopped answering for longer than its TTL.
func (e *env) revokeLeader() {
	e.t.Helper()
	resp, err := e.cli.Get(e.t.Context(), e.store.Keys().Election(), clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		e.t.Fatalf("no election leader key: %v", err)
	}
	if _, err := e.cli.Revoke(e.t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		e.t.Fatal(err)
	}
}

// inventory is the 27-part inventory of the reclaimer's acceptance
// scenario (TestScenarioInventory).
type inventory struct {
	bucket         string
	s1, s2, s3, s4 string
	k1, k2, k3, k4 string
}

// scenarioInventory builds it: S1 12 parts active 10 minutes ago; S2 7 parts
// completing, idle 30h; S3 5 parts active, idle 30h; S4 3 parts, no
// session.
func (e *env) scenarioInventory() inventory {
	e.t.Helper()
	now := e.clock.Now()
	inv := inventory{bucket: "uploads", k1: "s1/object", k2: "s2/object", k3: "s3/object", k4: "s4/object"}
	e.bucket(inv.bucket)
	inv.s1 = e.upload(inv.bucket, inv.k1, 12)
	inv.s2 = e.upload(inv.bucket, inv.k2, 7)
	inv.s3 = e.upload(inv.bucket, inv.k3, 5)
	inv.s4 = e.upload(inv.bucket, inv.k4, 3)
	e.session(inv.bucket, inv.k1, inv.s1, etcdstore.StateActive, now.Add(-2*time.Hour), now.Add(-10*time.Minute))
	e.session(inv.bucket, inv.k2, inv.s2, etcdstore.StateCompleting, now.Add(-31*time.Hour), now.Add(-30*time.Hour))
	e.session(inv.bucket, inv.k3, inv.s3, etcdstore.StateActive, now.Add(-31*time.Hour), now.Add(-30*time.Hour))
	return inv
}

// parts returns the counts of S1..S4's parts on MinIO.
func (e *env) parts(inv inventory) [4]int {
	return [4]int{
		e.partsOnMinIO(inv.bucket, inv.k1, inv.s1), e.partsOnMinIO(inv.bucket, inv.k2, inv.s2),
		e.partsOnMinIO(inv.bucket, inv.k3, inv.s3), e.partsOnMinIO(inv.bucket, inv.k4, inv.s4),
	}
}

func count(sessions, parts int64) reclaim.Count {
	return reclaim.Count{Sessions: sessions, Parts: parts, Bytes: parts * partSize}
}

func wantUploads(t *testing.T, got reclaim.Uploads, keep, mark, del, hold reclaim.Count) {
	t.Helper()
	want := reclaim.Uploads{Keep: keep, Mark: mark, Delete: del, Hold: hold}
	if got != want {
		t.Errorf("uploads = %+v, want %+v", got, want)
	}
}

// metric reads one series from a registry; labels are name=value pairs.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// waitFor polls cond until it holds (real events such as a lease expiring
// in etcd, never simulated time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
