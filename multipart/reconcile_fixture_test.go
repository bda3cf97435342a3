//go:build integration

package multipart_test

// The reconciler tests' fixtures: etcd, the injected clock, the tap on the
// backend, and a subtest's fixture with its sessions in etcd and its
// uploads on MinIO.

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/logbuf"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/multipart"
)

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

type fixture struct {
	t      *testing.T
	su     *suite
	store  *etcdstore.Store
	bucket string
	clock  *clock
	tap    *tap
	svc    *multipart.Service
	logs   *logbuf.Buffer
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
		logs:   &logbuf.Buffer{},
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

// seedPrune records the sessions of the prune test, each with three part
// records and an activity record at old: the prunable ones (terminal and
// old) and the ones pruning must keep, which it returns.
func (f *fixture) seedPrune(prunable []string, old time.Time) []etcdstore.Versioned[etcdstore.Session] {
	f.t.Helper()
	for _, id := range prunable {
		state := etcdstore.StateCompleted
		if id == "old-aborted" {
			state = etcdstore.StateAborted
		}
		f.putSession("k/"+id, id, state, old, nil)
		f.putRecords(id, old)
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
		f.putRecords(c.id, old)
	}
	return kept
}

// putRecords records parts 1 to 3 of upload id and an activity, at at.
func (f *fixture) putRecords(id string, at time.Time) {
	f.t.Helper()
	ctx := f.t.Context()
	for n := 1; n <= 3; n++ {
		if err := f.store.PutPart(ctx, id, etcdstore.Part{Number: n, ETag: `"e"`, Size: 1, At: at}); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := f.store.RecordActivity(ctx, f.bucket, id, f.get(id).ModRev, etcdstore.Activity{At: at, What: "UploadPart", Part: 3}); err != nil {
		f.t.Fatal(err)
	}
}

// records counts upload id's part and activity records.
func (f *fixture) records(id string) int64 {
	f.t.Helper()
	ctx := f.t.Context()
	parts, err := f.store.Client().Get(ctx, f.store.Keys().Parts(id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	act, err := f.store.Client().Get(ctx, f.store.Keys().Activity(id), clientv3.WithCountOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	return parts.Count + act.Count
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
