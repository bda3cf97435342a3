//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// rawCall is one hand-made, signed S3 request.
type rawCall struct {
	method, endpoint, bucket, key string
	query                         url.Values
	body                          []byte
	header                        http.Header
	accessKey, secretKey, region  string
}

// answer is what came back: status, headers and the whole body.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// send signs and sends a rawCall; a transport error is returned, not fatal.
func (r rawCall) send(t *testing.T, c *http.Client) (answer, error) {
	t.Helper()
	u := objectURL(r.endpoint, r.bucket, r.key)
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), r.method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	sum := sha256.Sum256(r.body)
	if err := harness.SignV4(context.Background(), req, r.accessKey, r.secretKey, r.region, hex.EncodeToString(sum[:]), time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// must sends a rawCall and fails the test on a transport error.
func (r rawCall) must(t *testing.T, c *http.Client) answer {
	t.Helper()
	a, err := r.send(t, c)
	if err != nil {
		t.Fatalf("%s %s/%s?%s: %v", r.method, r.bucket, r.key, r.query.Encode(), err)
	}
	return a
}

// errorCode returns the S3 error code of an answer, or "".
func (a answer) errorCode() string {
	_, rest, ok := strings.Cut(string(a.body), "<Code>")
	if !ok {
		return ""
	}
	code, _, _ := strings.Cut(rest, "</Code>")
	return code
}

func (a answer) requireError(t *testing.T, status int, code string) {
	t.Helper()
	if a.status != status || a.errorCode() != code {
		t.Fatalf("got %d %q, want %d %s; body:\n%s", a.status, a.errorCode(), status, code, a.body)
	}
	if a.header.Get("X-Amz-Request-Id") == "" {
		t.Fatalf("%d %s without an X-Amz-Request-Id", a.status, code)
	}
}

// raw returns a rawCall to the env's gateway signed with its default
// credentials.
func raw(e *harness.Env, method, bucket, key string, query url.Values, body []byte) rawCall {
	return rawCall{method: method, endpoint: e.Endpoint, bucket: bucket, key: key, query: query, body: body,
		accessKey: e.AccessKey, secretKey: e.SecretKey, region: e.Region}
}

func uploadQ(id string, kv ...string) url.Values {
	q := url.Values{"uploadId": {id}}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

// completeXML renders a CompleteMultipartUpload document.
func completeXML(parts ...s3types.CompletedPart) []byte {
	var b strings.Builder
	b.WriteString("<CompleteMultipartUpload>")
	for _, p := range parts {
		fmt.Fprintf(&b, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", aws.ToInt32(p.PartNumber), aws.ToString(p.ETag))
	}
	b.WriteString("</CompleteMultipartUpload>")
	return []byte(b.String())
}

// TestSessionsClientLostResponse loses the gateway's answer to an abort on
// the way to the client (a fault-injecting proxy in front of the gateway)
// and checks that the client's retry gets 204, and that with an
// Idempotency-Key the replayed answer is the recorded one, byte for byte.
func TestSessionsClientLostResponse(t *testing.T) {
	e := harness.Start(t)
	store := newSessionStore(t, e)
	front := harness.StartFaultProxy(t, e.Endpoint)
	viaProxy := harness.NewS3Client(front.URL, e.Region, e.AccessKey, e.SecretKey, http.DefaultTransport.(*http.Transport).Clone(), true)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	hc := e.HTTPClient(t)
	once := oneShotClient()
	bucket := e.Bucket(t)
	p := harness.NewData(5001, 1000)

	t.Run("retry without a key", func(t *testing.T) {
		key := "client-lost/plain"
		id := createUpload(t, viaProxy, bucket, key)
		mustUploadPart(t, viaProxy, bucket, key, id, 1, p.Section(0, p.Size))
		drop := front.Inject(harness.Rule{Match: harness.MatchUpload(http.MethodDelete, id), Fault: harness.DropResponse, Times: 1})
		defer drop.Remove()
		if err := abortUpload(t.Context(), viaProxy, bucket, key, id); err == nil {
			t.Fatal("the abort's answer arrived; the proxy should have lost it")
		}
		if err := abortUpload(t.Context(), viaProxy, bucket, key, id); err != nil {
			t.Fatalf("retried abort: %v, want 204", err)
		}
		rec := store.requireState(t, bucket, id, "aborted")
		if n := countSteps(rec, "aborting"); n != 1 {
			t.Fatalf("history %s: the upload was moved to aborting %d times, want once", rec.path(), n)
		}
		requireUploadGone(t, direct, bucket, key, id)
	})

	t.Run("retry with an Idempotency-Key", func(t *testing.T) {
		key := "client-lost/idempotent"
		id := createUpload(t, c, bucket, key)
		mustUploadPart(t, c, bucket, key, id, 1, p.Section(0, p.Size))
		abort := raw(e, http.MethodDelete, bucket, key, uploadQ(id), nil)
		abort.endpoint = front.URL
		abort.header = http.Header{"Idempotency-Key": {"abort-" + id}}
		drop := front.Inject(harness.Rule{Match: harness.MatchUpload(http.MethodDelete, id), Fault: harness.DropResponse, Times: 1})
		defer drop.Remove()
		if _, err := abort.send(t, once); err == nil {
			t.Fatal("the abort's answer arrived; the proxy should have lost it")
		}
		first := abort.must(t, once)
		if first.status != http.StatusNoContent || len(first.body) != 0 {
			t.Fatalf("retried abort: %d %q, want 204", first.status, first.body)
		}
		second := abort.must(t, once)
		requireSameAnswer(t, first, second)
		rec := store.requireState(t, bucket, id, "aborted")
		if n := countSteps(rec, "aborting"); n != 1 {
			t.Fatalf("history %s: moved to aborting %d times, want once", rec.path(), n)
		}
		requireUploadGone(t, direct, bucket, key, id)
	})

	t.Run("replay is identical", func(t *testing.T) {
		key := "client-lost/replay"
		// An abort's 204, and the NoSuchUpload of an abort of a completed
		// upload: each replayed exactly.
		aborted := createUpload(t, c, bucket, key)
		completed := createUpload(t, c, bucket, key)
		done := mustUploadPart(t, c, bucket, key, completed, 1, p.Section(0, p.Size))
		if _, err := completeUpload(t.Context(), c, bucket, key, completed, []s3types.CompletedPart{done}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			id     string
			status int
			code   string
		}{{aborted, http.StatusNoContent, ""}, {completed, http.StatusNotFound, "NoSuchUpload"}} {
			call := raw(e, http.MethodDelete, bucket, key, uploadQ(tc.id), nil)
			call.header = http.Header{"Idempotency-Key": {"replay-" + tc.id}}
			first := call.must(t, hc)
			if first.status != tc.status || first.errorCode() != tc.code {
				t.Fatalf("abort of %s: %d %q, want %d %q", tc.id, first.status, first.body, tc.status, tc.code)
			}
			before := store.dump(t)
			again := call.must(t, hc)
			requireSameAnswer(t, first, again)
			requireUnchanged(t, "a replayed abort", before, store.dump(t))
		}
		store.requireState(t, bucket, aborted, "aborted")
		store.requireState(t, bucket, completed, "completed")

		// The key of one upload's abort never answers for another upload.
		other := createUpload(t, c, bucket, key)
		reuse := raw(e, http.MethodDelete, bucket, key, uploadQ(other), nil)
		reuse.header = http.Header{"Idempotency-Key": {"replay-" + aborted}}
		a := reuse.must(t, hc)
		st := store.session(t, bucket, other).State
		if a.status == http.StatusNoContent && st != "aborted" {
			t.Fatalf("an Idempotency-Key reused for another upload answered 204, but that upload is %s", st)
		}
		if a.status != http.StatusNoContent && st != "active" {
			t.Fatalf("a refused abort (%d %s) left the upload %s", a.status, a.errorCode(), st)
		}
	})
}

// oneShotClient returns a client that opens a new connection per request.
// net/http would resend a request that carries an Idempotency-Key on its
// own when a kept-alive connection fails; with this client a test's
// retries are the only ones.
func oneShotClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// countSteps counts the transitions into state.
func countSteps(rec sessionRecord, state string) int {
	n := 0
	for _, h := range rec.History {
		if h.To == state {
			n++
		}
	}
	return n
}

// requireSameAnswer checks that two answers have the same status, body and
// content headers.
func requireSameAnswer(t *testing.T, a, b answer) {
	t.Helper()
	if a.status != b.status || !bytes.Equal(a.body, b.body) {
		t.Fatalf("answers differ:\n  %d %q\n  %d %q", a.status, a.body, b.status, b.body)
	}
	for _, h := range []string{"Content-Type", "Content-Length"} {
		if a.header.Get(h) != b.header.Get(h) {
			t.Fatalf("answers differ in %s: %q, %q", h, a.header.Get(h), b.header.Get(h))
		}
	}
}

// TestSessionsPartAfterAbort checks that a part sent after an abort is
// refused and never reaches MinIO, that a part sent to an expired session
// revives it, and that a part is refused while a complete is in flight.
func TestSessionsPartAfterAbort(t *testing.T) {
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{})
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	bucket := e.Bucket(t)
	src := harness.NewData(5101, 2*kib)
	putData(t, c, bucket, "source", src)
	p := harness.NewData(5102, 5*mib)
	tail := harness.NewData(5103, 10)
	partPuts := func(id string) []harness.ProxiedRequest { return partTwoPuts(proxy, id) }
	copyPart := func(key, id string) error { return copyPartTwo(t, c, bucket, key, id) }

	t.Run("after abort", func(t *testing.T) {
		key := "after-abort"
		id := createUpload(t, c, bucket, key)
		mustUploadPart(t, c, bucket, key, id, 1, p.Section(0, p.Size))
		if err := abortUpload(t.Context(), c, bucket, key, id); err != nil {
			t.Fatal(err)
		}
		_, err := uploadPart(t.Context(), c, bucket, key, id, 2, tail.Section(0, tail.Size))
		requireAPIError(t, err, "NoSuchUpload")
		requireAPIError(t, copyPart(key, id), "NoSuchUpload")
		if sent := partPuts(id); len(sent) != 0 {
			t.Fatalf("%d part uploads after the abort reached MinIO", len(sent))
		}
		requireUploadGone(t, direct, bucket, key, id)
		if parts := store.parts(t, bucket, id); len(parts) != 1 {
			t.Fatalf("recorded parts %v, want just part 1", slices.Sorted(maps.Keys(parts)))
		}
	})

	t.Run("expired revives", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			act  func(t *testing.T, key, id string)
		}{
			{"UploadPart", func(t *testing.T, key, id string) {
				mustUploadPart(t, c, bucket, key, id, 2, tail.Section(0, tail.Size))
			}},
			{"UploadPartCopy", func(t *testing.T, key, id string) {
				if err := copyPart(key, id); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := "expired/" + tc.name
				id := createUpload(t, c, bucket, key)
				first := mustUploadPart(t, c, bucket, key, id, 1, p.Section(0, p.Size))
				store.setState(t, bucket, id, "expired")
				tc.act(t, key, id)
				rec := store.requireState(t, bucket, id, "active")
				if last := rec.History[len(rec.History)-1]; last.From != "expired" || last.To != "active" || last.Actor != "gateway" {
					t.Fatalf("history %s: want the last step expired->active by the gateway", rec.path())
				}
				got := backendPartNumbers(t, direct, bucket, key, id)
				if len(got) != 2 {
					t.Fatalf("MinIO holds parts %v, want 1 and 2", got)
				}
				second := s3types.CompletedPart{PartNumber: aws.Int32(2), ETag: aws.String(got[2])}
				out, err := completeUpload(t.Context(), c, bucket, key, id, []s3types.CompletedPart{{PartNumber: first.PartNumber, ETag: first.ETag}, second})
				if err != nil {
					t.Fatalf("complete after the revival: %v", err)
				}
				requireCompletedSession(t, store, bucket, id, aws.ToString(out.ETag))
			})
		}
	})

	t.Run("refused while completing", func(t *testing.T) {
		// A part is accepted only by an active or expired session, and a
		// part for any other state never reaches MinIO. A complete in
		// flight (completing) is written here directly, as a slow complete
		// would leave it. NoSuchUpload would do as the refusal; but a
		// complete can still fail (InvalidPart) and return the upload to
		// active, and S3's answer for "a conflicting operation is in
		// progress" (409 OperationAborted) is then the one that stays true.
		// The race test holds the answers to that.
		key := "completing"
		id := createUpload(t, c, bucket, key)
		mustUploadPart(t, c, bucket, key, id, 1, p.Section(0, p.Size))
		store.setState(t, bucket, id, "completing")
		_, err := uploadPart(t.Context(), c, bucket, key, id, 2, tail.Section(0, tail.Size))
		if code := apiErrorCode(err); code != "NoSuchUpload" && code != "OperationAborted" {
			t.Errorf("a part for a completing session: %v (code %q), want it refused (OperationAborted, or NoSuchUpload)", err, code)
		}
		if sent := partPuts(id); len(sent) != 0 {
			t.Errorf("a part for a completing session reached MinIO")
		}
		if got := backendPartNumbers(t, direct, bucket, key, id); len(got) != 1 {
			t.Errorf("MinIO holds parts %v of the completing upload, want just 1", got)
		}
	})
}

// partTwoPuts returns the PUTs of part 2 of upload id that reached MinIO
// through proxy.
func partTwoPuts(proxy *harness.FaultProxy, id string) []harness.ProxiedRequest {
	return proxy.Find(func(r harness.ProxiedRequest) bool {
		return r.Method == http.MethodPut && r.Query.Get("uploadId") == id && r.Query.Get("partNumber") == "2"
	})
}

// copyPartTwo copies the first 100 bytes of bucket/source into part 2 of
// upload id of key.
func copyPartTwo(t *testing.T, c *s3.Client, bucket, key, id string) error {
	_, err := c.UploadPartCopy(t.Context(), &s3.UploadPartCopyInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id), PartNumber: aws.Int32(2),
		CopySource: aws.String(bucket + "/source"), CopySourceRange: aws.String("bytes=0-99"),
	})
	return err
}

// TestSessionsListingHidesAborts checks that ListMultipartUploads leaves out
// the uploads whose session is aborting, cleanup_pending or aborted while
// MinIO still holds them, through aws-sdk-go-v2 (page by page too) and
// minio-go.
func TestSessionsListingHidesAborts(t *testing.T) {
	e := harness.Start(t)
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	core := minio.Core{Client: e.MinioGo(t)}
	bucket := e.Bucket(t)
	states := []string{"active", "aborting", "expired", "cleanup_pending", "completing", "aborted", "active"}
	ids := map[string]string{}
	var visible []string
	for i, st := range states {
		key := fmt.Sprintf("listing/%d-%s", i, st)
		id := createUpload(t, c, bucket, key)
		if st != "active" {
			store.setState(t, bucket, id, st)
		}
		ids[id] = st
		switch st {
		case "aborting", "cleanup_pending", "aborted":
		default:
			visible = append(visible, id)
		}
	}
	slices.Sort(visible)
	all := slices.Sorted(maps.Keys(ids))
	if got := backendUploads(t, direct, bucket); !sameIDs(got, all) {
		t.Fatalf("MinIO holds %v, want all %v", got, all)
	}
	if got := backendUploads(t, c, bucket); !sameIDs(got, visible) {
		t.Fatalf("the gateway lists %s, want %s", describe(got, ids), describe(visible, ids))
	}
	// Page by page: the markers survive the filtering.
	var paged []string
	pages := s3.NewListMultipartUploadsPaginator(c, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), MaxUploads: aws.Int32(2)})
	for n := 0; pages.HasMorePages(); n++ {
		if n > len(states) {
			t.Fatal("the pages do not end")
		}
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatalf("ListMultipartUploads page %d: %v", n, err)
		}
		for _, u := range page.Uploads {
			paged = append(paged, aws.ToString(u.UploadId))
		}
	}
	if !sameIDs(paged, visible) {
		t.Fatalf("the gateway lists %s page by page, want %s", describe(paged, ids), describe(visible, ids))
	}
	// minio-go asks for gzip (Go's transport adds Accept-Encoding), and
	// MinIO compresses a listing of more than a few uploads.
	res, err := core.ListMultipartUploads(t.Context(), bucket, "", "", "", "", 1000)
	if err != nil {
		t.Fatalf("minio-go ListMultipartUploads: %v", err)
	}
	var mg []string
	for _, u := range res.Uploads {
		mg = append(mg, u.UploadID)
	}
	if !sameIDs(mg, visible) {
		t.Fatalf("minio-go lists %s, want %s", describe(mg, ids), describe(visible, ids))
	}
}

func sameIDs(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func describe(idList []string, states map[string]string) string {
	var out []string
	for _, id := range idList {
		out = append(out, states[id])
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

// TestSessionsUploadIDOfAnotherKey sends abort and complete for an upload id
// with an object key that is not the upload's. S3 knows an upload by bucket,
// key and id together, and so does MinIO: such a call must not move the
// real upload's session, which would leave it aborted in etcd while MinIO
// keeps its parts, or completing forever.
func TestSessionsUploadIDOfAnotherKey(t *testing.T) {
	e := harness.Start(t)
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	bucket := e.Bucket(t)
	p1 := harness.NewData(5401, 5*mib)
	p2 := harness.NewData(5402, 10)
	start := func(t *testing.T, key string) (string, []s3types.CompletedPart) {
		id := createUpload(t, c, bucket, key)
		return id, []s3types.CompletedPart{
			mustUploadPart(t, c, bucket, key, id, 1, p1.Section(0, p1.Size)),
			mustUploadPart(t, c, bucket, key, id, 2, p2.Section(0, p2.Size)),
		}
	}
	requireUntouched := func(t *testing.T, what string, before map[string]etcdKV, key, id string) {
		t.Helper()
		requireUnchanged(t, what, before, store.dump(t))
		if got := backendPartNumbers(t, direct, bucket, key, id); len(got) != 2 {
			t.Fatalf("MinIO holds parts %v, want 1 and 2", got)
		}
	}

	t.Run("abort", func(t *testing.T) {
		key := "real/abort"
		id, _ := start(t, key)
		before := store.dump(t)
		err := abortUpload(t.Context(), c, bucket, "wrong/abort", id)
		if err != nil && apiErrorCode(err) != "NoSuchUpload" {
			t.Fatalf("abort under another key: %v, want NoSuchUpload", err)
		}
		requireUntouched(t, "an abort under another key", before, key, id)
		if err := abortUpload(t.Context(), c, bucket, key, id); err != nil {
			t.Fatal(err)
		}
		store.requireState(t, bucket, id, "aborted")
		requireUploadGone(t, direct, bucket, key, id)
	})

	t.Run("complete", func(t *testing.T) {
		key := "real/complete"
		id, parts := start(t, key)
		before := store.dump(t)
		_, err := completeUpload(t.Context(), c, bucket, "wrong/complete", id, parts[:1])
		requireAPIError(t, err, "NoSuchUpload")
		requireUntouched(t, "a complete under another key", before, key, id)
		requireAbsent(t, direct, bucket, "wrong/complete")
		out, err := completeUpload(t.Context(), c, bucket, key, id, parts)
		if err != nil {
			t.Fatalf("the real complete after one under another key: %v", err)
		}
		sum, size := concatSum(t, p1.Reader(), p2.Reader())
		requireObjectSum(t, direct, bucket, key, sum, size)
		requireCompletedSession(t, store, bucket, id, aws.ToString(out.ETag))
	})
}
