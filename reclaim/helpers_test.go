//go:build integration

package reclaim_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// env is one test's world (reclaimtest.Env: a real MinIO, a real etcd,
// the session service and the clock), with the helpers of the upload
// sweep's tests.
type env struct{ *reclaimtest.Env }

func newEnv(t *testing.T) *env { return &env{reclaimtest.NewEnv(t)} }

// digestEnv is a test world with the CAS bucket and a reclaimer
// configuration that sweeps it (reclaimtest.DigestEnv), for the tests of
// what the reclaimer does around the digest sweep (the digest sweep's own
// tests live in package digestsweep).
type digestEnv struct{ *reclaimtest.DigestEnv }

func newDigestEnv(t *testing.T) *digestEnv {
	return &digestEnv{DigestEnv: reclaimtest.NewDigestEnv(t)}
}

// env is the digest world's env, for the helpers of the upload sweep's
// tests.
func (d *digestEnv) env() *env { return &env{d.Env} }

// connect opens another etcd client, closed at the end of the test.
func (e *env) connect() *clientv3.Client {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.T.Context(), 10*time.Second)
	defer cancel()
	cli, err := etcdstore.Connect(ctx, e.Etcd.Endpoints(), 5*time.Second)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { cli.Close() })
	return cli
}

// partsOnMinIO counts an upload's parts on MinIO; -1 means NoSuchUpload.
func (e *env) partsOnMinIO(bucket, key, id string) int {
	e.T.Helper()
	res, err := e.Direct.ListObjectParts(e.T.Context(), bucket, key, id, 0, 1000)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
			return -1
		}
		e.T.Fatal(err)
	}
	return len(res.ObjectParts)
}

// session records a session the way the gateway would have: created at
// created, last active at last, and (for completing) completing since last.
func (e *env) session(bucket, key, id string, st etcdstore.SessionState, created, last time.Time) {
	e.T.Helper()
	s := &etcdstore.Session{Bucket: bucket, Key: key, UploadID: id, Owner: "alice", Created: created, LastActivity: last}
	s.Transition(etcdstore.StateActive, created, "gateway", "created")
	if st != etcdstore.StateActive {
		s.Transition(st, last, "gateway", "test")
	}
	if _, err := e.Store.CreateSession(e.T.Context(), s); err != nil {
		e.T.Fatal(err)
	}
}

func (e *env) getSession(bucket, id string) etcdstore.Session {
	e.T.Helper()
	v, err := e.Store.GetSession(e.T.Context(), bucket, id)
	if err != nil {
		e.T.Fatalf("session %s/%s: %v", bucket, id, err)
	}
	return v.Value
}

// uploadPart sends one part through the session service, as the gateway
// does for a client's UploadPart: activity is recorded, then the bytes go
// to MinIO.
func (e *env) uploadPart(bucket, key, id string, n int) {
	e.T.Helper()
	if code, body := e.sendPart(bucket, key, id, n, bytes.NewReader(bytes.Repeat([]byte{0xee}, reclaimtest.PartSize))); code != http.StatusOK {
		e.T.Fatalf("UploadPart through the session service: %d %s", code, body)
	}
}

// sendPart sends part n with PartSize bytes read from body through the
// session service and returns the answer's status and body. It does not
// fail the test, so it may run on any goroutine (a fault hook, a part held
// open).
func (e *env) sendPart(bucket, key, id string, n int, body io.Reader) (int, string) {
	return e.sendPartAs("alice", bucket, key, id, n, body)
}

// sendPartAs is sendPart for the client principal.
func (e *env) sendPartAs(principal, bucket, key, id string, n int, body io.Reader) (int, string) {
	req, err := e.Backend.NewRequest(context.Background(), http.MethodPut, bucket, key, url.Values{"partNumber": {fmt.Sprint(n)}, "uploadId": {id}})
	if err != nil {
		return 0, err.Error()
	}
	// The service hashes the part as it is sent (Observe), as it hashes a
	// client's verified payload.
	observed := &observedReader{r: body}
	req.Body = io.NopCloser(observed)
	req.ContentLength = reclaimtest.PartSize
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	call := &multipart.Call{
		Op: s3op.UploadPart, Bucket: bucket, Key: key, UploadID: id, PartNumber: fmt.Sprint(n),
		Principal: principal, RequestID: "test-part", Resource: "/" + bucket + "/" + key, Header: http.Header{},
		Observe:    func(w io.Writer) { observed.w = w },
		Forward:    backend.NewForward(req, nil),
		PayloadErr: func() error { return nil },
	}
	return answerOf(e.Svc.Serve(context.Background(), call))
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
	e.T.Helper()
	now := e.Clock.Now()
	inv := inventory{bucket: "uploads", k1: "s1/object", k2: "s2/object", k3: "s3/object", k4: "s4/object"}
	e.Bucket(inv.bucket)
	inv.s1 = e.Upload(inv.bucket, inv.k1, 12)
	inv.s2 = e.Upload(inv.bucket, inv.k2, 7)
	inv.s3 = e.Upload(inv.bucket, inv.k3, 5)
	inv.s4 = e.Upload(inv.bucket, inv.k4, 3)
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
	return reclaim.Count{Sessions: sessions, Parts: parts, Bytes: parts * reclaimtest.PartSize}
}

func wantUploads(t *testing.T, got reclaim.Uploads, keep, mark, del, hold reclaim.Count) {
	t.Helper()
	want := reclaim.Uploads{Keep: keep, Mark: mark, Delete: del, Hold: hold}
	if got != want {
		t.Errorf("uploads = %+v, want %+v", got, want)
	}
}
