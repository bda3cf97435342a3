package multipart_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway"
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
	backend, err := gateway.NewBackendClient(m.Endpoint, m.Region, m.AccessKey, m.SecretKey)
	if err != nil {
		t.Fatalf("NewBackendClient: %v", err)
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

// ---- fixtures -------------------------------------------------------------

type etcdServer struct {
	e   *etcdstore.Embedded
	cli *clientv3.Client
}

// startEtcd starts an embedded etcd with its data in dir, where a test
// restarts it.
func startEtcd(t *testing.T, dir string) etcdServer {
	t.Helper()
	e, cli := etcdtest.StartWith(t, etcdtest.Config{DataDir: dir})
	return etcdServer{e: e, cli: cli}
}

// clock is the injected clock: time passes only when a test says so.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// errLost stands for a response lost on its way back from the backend.
var errLost = errors.New("read tcp: connection reset by peer (response dropped by the test)")

// tap passes calls through to a backend (the real MinIO), recording each,
// and lets a test act just before a call is sent (to change etcd in the
// window between the reconciler's read and its write) or drop the real
// response after the backend acted on the request.
type tap struct {
	multipart.Backend
	mu     sync.Mutex
	calls  []string
	before func(*http.Request)
	drop   func(*http.Request) bool
}

func (b *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.calls = append(b.calls, req.Method)
	before, drop := b.before, b.drop
	b.mu.Unlock()
	if before != nil {
		before(req)
	}
	resp, err := b.Backend.RoundTrip(req)
	if err == nil && drop != nil && drop(req) {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errLost
	}
	return resp, err
}

// count returns how many calls with method the backend got.
func (b *tap) count(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, m := range b.calls {
		if m == method {
			n++
		}
	}
	return n
}

func (b *tap) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

// syncBuffer collects log output written from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	t      *testing.T
	su     *suite
	store  *etcdstore.Store
	bucket string
	clock  *clock
	tap    *tap
	svc    *multipart.Service
	logs   *syncBuffer
}

// fixture returns a subtest's fixture over the suite's etcd.
func (su *suite) fixture(t *testing.T) *fixture {
	return su.fixtureOn(t, su.cli, su.backend)
}

// fixtureOn returns a fixture over the given etcd client and backend.
func (su *suite) fixtureOn(t *testing.T, cli *clientv3.Client, backend multipart.Backend) *fixture {
	t.Helper()
	keys, err := etcdstore.NewKeys("/reconcile-test/" + strings.ReplaceAll(t.Name(), " ", "_") + "/")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		t: t, su: su,
		store:  etcdstore.NewStore(cli, keys),
		bucket: harness.BucketName(t),
		clock:  &clock{t: t0},
		tap:    &tap{Backend: backend},
		logs:   &syncBuffer{},
	}
	if _, err := su.s3.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(f.bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	f.svc, err = multipart.New(multipart.Config{
		Store: f.store, Backend: f.tap, Now: f.clock.Now,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(f.logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("multipart.New: %v", err)
	}
	return f
}

func (f *fixture) reconcile(opts multipart.ReconcileOptions) (multipart.ReconcileReport, error) {
	f.t.Helper()
	if opts.After == 0 {
		opts.After = after
	}
	rep, err := f.svc.Reconcile(f.t.Context(), opts)
	f.t.Logf("report %+v, err %v", rep, err)
	return rep, err
}

// mustReconcile runs the reconciler and requires it to end without error.
func (f *fixture) mustReconcile(opts multipart.ReconcileOptions) multipart.ReconcileReport {
	f.t.Helper()
	rep, err := f.reconcile(opts)
	if err != nil {
		f.t.Fatalf("Reconcile: %v", err)
	}
	return rep
}

// putSession records a session for an upload of key, created an hour before
// changed and moved to state at changed.
func (f *fixture) putSession(key, uploadID string, state etcdstore.SessionState, changed time.Time, mutate func(*etcdstore.Session)) etcdstore.Versioned[etcdstore.Session] {
	f.t.Helper()
	created := changed.Add(-time.Hour)
	sess := &etcdstore.Session{
		Bucket: f.bucket, Key: key, UploadID: uploadID, Owner: "alice",
		Created: created, LastActivity: created,
	}
	sess.Transition(etcdstore.StateActive, created, "gateway", "created")
	if state != etcdstore.StateActive {
		sess.Transition(state, changed, "gateway", "test setup")
	}
	if mutate != nil {
		mutate(sess)
	}
	if _, err := f.store.CreateSession(f.t.Context(), sess); err != nil {
		f.t.Fatalf("CreateSession: %v", err)
	}
	v, err := f.store.GetSession(f.t.Context(), sess.Bucket, uploadID)
	if err != nil {
		f.t.Fatalf("GetSession: %v", err)
	}
	return v
}

func (f *fixture) get(uploadID string) etcdstore.Versioned[etcdstore.Session] {
	f.t.Helper()
	v, err := f.store.GetSession(f.t.Context(), f.bucket, uploadID)
	if err != nil {
		f.t.Fatalf("GetSession %s: %v", uploadID, err)
	}
	return v
}

// requireUnchanged fails unless the session is exactly as it was.
func (f *fixture) requireUnchanged(v etcdstore.Versioned[etcdstore.Session]) {
	f.t.Helper()
	if now := f.get(v.Value.UploadID); now.ModRev != v.ModRev {
		f.t.Fatalf("session %s changed (mod revision %d -> %d): state %s, history %+v", v.Value.UploadID, v.ModRev, now.ModRev, now.Value.State, now.Value.History)
	}
}

// last returns a session's last history entry.
func last(v etcdstore.Versioned[etcdstore.Session]) etcdstore.Transition {
	return v.Value.History[len(v.Value.History)-1]
}

func requireState(t *testing.T, v etcdstore.Versioned[etcdstore.Session], want etcdstore.SessionState) {
	t.Helper()
	if v.Value.State != want {
		t.Fatalf("session %s is %s, want %s (history %+v)", v.Value.UploadID, v.Value.State, want, v.Value.History)
	}
}

func requireLast(t *testing.T, v etcdstore.Versioned[etcdstore.Session], from, to etcdstore.SessionState, actor, reason string) {
	t.Helper()
	h := last(v)
	if h.From != from || h.To != to || h.Actor != actor || !strings.Contains(h.Reason, reason) {
		t.Fatalf("last transition %+v, want %s -> %s by %s for %q", h, from, to, actor, reason)
	}
}

// ---- MinIO ----------------------------------------------------------------

func (f *fixture) createUpload(key string) string {
	f.t.Helper()
	out, err := f.su.s3.CreateMultipartUpload(f.t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(f.bucket), Key: aws.String(key)})
	if err != nil {
		f.t.Fatalf("CreateMultipartUpload: %v", err)
	}
	return aws.ToString(out.UploadId)
}

func (f *fixture) uploadPart(key, uploadID string, n int32, data []byte) s3types.CompletedPart {
	f.t.Helper()
	out, err := f.su.s3.UploadPart(f.t.Context(), &s3.UploadPartInput{
		Bucket: aws.String(f.bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		PartNumber: aws.Int32(n), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		f.t.Fatalf("UploadPart: %v", err)
	}
	return s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
}

func (f *fixture) abortOnMinIO(key, uploadID string) {
	f.t.Helper()
	if _, err := f.su.s3.AbortMultipartUpload(f.t.Context(), &s3.AbortMultipartUploadInput{
		Bucket: aws.String(f.bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
	}); err != nil {
		f.t.Fatalf("AbortMultipartUpload: %v", err)
	}
}

// completeOnMinIO makes a one-part multipart object at key directly on
// MinIO and returns the multipart ETag MinIO gave it (unquoted). It checks
// that the ETag is the one the gateway predicts from the part ETags.
func (f *fixture) completeOnMinIO(key string) (uploadID, etag string) {
	f.t.Helper()
	uploadID = f.createUpload(key)
	part := f.uploadPart(key, uploadID, 1, []byte("the one and only part of "+key))
	out, err := f.su.s3.CompleteMultipartUpload(f.t.Context(), &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(f.bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{part}},
	})
	if err != nil {
		f.t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	etag = strings.Trim(aws.ToString(out.ETag), `"`)
	partMD5, err := hex.DecodeString(strings.Trim(aws.ToString(part.ETag), `"`))
	if err != nil {
		f.t.Fatalf("part ETag %s is not hex: %v", aws.ToString(part.ETag), err)
	}
	sum := md5.Sum(partMD5)
	if want := hex.EncodeToString(sum[:]) + "-1"; etag != want {
		f.t.Fatalf("MinIO's multipart ETag %s, want %s (the MD5 of the part MD5s)", etag, want)
	}
	return uploadID, etag
}

// uploadOnMinIO reports whether MinIO still holds the upload, and how many
// parts it lists for it.
func (f *fixture) uploadOnMinIO(key, uploadID string) (bool, int) {
	f.t.Helper()
	out, err := f.su.s3.ListParts(f.t.Context(), &s3.ListPartsInput{Bucket: aws.String(f.bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" {
		return false, 0
	}
	if err != nil {
		f.t.Fatalf("ListParts: %v", err)
	}
	return true, len(out.Parts)
}

func (f *fixture) requireUploadGone(key, uploadID string) {
	f.t.Helper()
	if there, n := f.uploadOnMinIO(key, uploadID); there {
		f.t.Fatalf("MinIO still holds upload %s with %d parts", uploadID, n)
	}
	out, err := f.su.s3.ListMultipartUploads(f.t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(f.bucket)})
	if err != nil {
		f.t.Fatalf("ListMultipartUploads: %v", err)
	}
	for _, u := range out.Uploads {
		if aws.ToString(u.UploadId) == uploadID {
			f.t.Fatalf("MinIO lists upload %s", uploadID)
		}
	}
}

func (f *fixture) requireUploadThere(key, uploadID string, parts int) {
	f.t.Helper()
	if there, n := f.uploadOnMinIO(key, uploadID); !there || n != parts {
		f.t.Fatalf("MinIO holds upload %s: %v with %d parts, want it with %d", uploadID, there, n, parts)
	}
}

// ---- tests ----------------------------------------------------------------

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
	withRecords := func(id string) {
		t.Helper()
		for n := 1; n <= 3; n++ {
			if err := f.store.PutPart(ctx, id, etcdstore.Part{Number: n, ETag: `"e"`, Size: 1, At: old}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.store.RecordActivity(ctx, f.bucket, id, f.get(id).ModRev, etcdstore.Activity{At: old, What: "UploadPart", Part: 3}); err != nil {
			t.Fatal(err)
		}
	}
	records := func(id string) int64 {
		t.Helper()
		parts, err := f.store.Client().Get(ctx, f.store.Keys().Parts(id), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		act, err := f.store.Client().Get(ctx, f.store.Keys().Activity(id), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return parts.Count + act.Count
	}
	// In key order, which is the order a run takes them in.
	prunable := []string{"a-touched", "old-aborted", "old-completed", "old-completed-2"}
	for _, id := range prunable {
		state := etcdstore.StateCompleted
		if id == "old-aborted" {
			state = etcdstore.StateAborted
		}
		f.putSession("k/"+id, id, state, old, nil)
		withRecords(id)
	}
	var kept []etcdstore.Versioned[etcdstore.Session]
	for _, c := range []struct {
		id    string
		state etcdstore.SessionState
		at    time.Time
	}{
		{"young-completed", etcdstore.StateCompleted, t0.Add(-retention + time.Minute)},
		{"young-aborted", etcdstore.StateAborted, t0.Add(-time.Hour)},
		{"old-active", etcdstore.StateActive, old},
		{"old-expired", etcdstore.StateExpired, old},
		{"old-completing", etcdstore.StateCompleting, old},
	} {
		kept = append(kept, f.putSession("k/"+c.id, c.id, c.state, c.at, nil))
		withRecords(c.id)
	}
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
	if n := records("a-touched"); n != 4 {
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
		if n := records(id); n != 0 {
			t.Fatalf("session %s pruned but %d of its part and activity records remain", id, n)
		}
	}
	for _, v := range kept {
		f.requireUnchanged(v)
		if n := records(v.Value.UploadID); n != 4 {
			t.Fatalf("kept session %s has %d part and activity records, want 4", v.Value.UploadID, n)
		}
	}
	// The due session was aborted just now: young, so kept.
	requireState(t, f.get(dueID), etcdstore.StateAborted)
}

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
	wrongKey, err := gateway.NewBackendClient(su.minio.Endpoint, su.minio.Region, su.minio.AccessKey, "not-the-secret")
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
