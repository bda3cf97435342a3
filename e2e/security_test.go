//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
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

// The security tests attack the real binary the way a
// hostile client, a leaked URL or a careless operator would, and check what
// a user relies on: that another principal cannot touch their uploads, that
// a presigned URL does only what it was signed for and only while it is
// valid, that nothing unsigned rides along on a signed request, that
// oversized requests are refused before the gateway reads them, that the
// admin API needs its token, and that no secret ends up in a log, a metric
// or a help text. They extend refusal_test.go and sessions_rules_test.go
// where those stop.

// The principals of the security tests, with secrets distinctive enough to
// search for.
var (
	secAlice = harness.Credential{AccessKey: "AKIASECALICE", SecretKey: "alice-Secr3t-9f2c1e7d5b3a", Principal: "alice"}
	secBob   = harness.Credential{AccessKey: "AKIASECBOB", SecretKey: "bob-Secr3t-4a8e6c2f1d0b", Principal: "bob"}
	secOps   = harness.Credential{AccessKey: "AKIASECOPS", SecretKey: "ops-Secr3t-7c5a3e1b9d2f", Principal: "ops"}
)

// wirePrompt bounds how long a refusal that needs no body may take: the
// gateway answers from the headers alone, so anything near a timeout means
// it waited for bytes that were never sent.
const wirePrompt = 5 * time.Second

// secSign signs req in its Authorization header with c at the current time.
func secSign(t *testing.T, e *harness.Env, c harness.Credential, req *http.Request, payloadHash string) *http.Request {
	t.Helper()
	if err := harness.SignV4(t.Context(), req, c.AccessKey, c.SecretKey, e.Region, payloadHash, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// secPresign returns a presigned URL for method on u, signed by c at at.
func secPresign(t *testing.T, e *harness.Env, c harness.Credential, method, u string, at time.Time, expires time.Duration) string {
	t.Helper()
	signed, _, err := harness.PresignV4(t.Context(), newRequest(t, method, u, nil), c.AccessKey, c.SecretKey, e.Region, at, expires)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// envCred is the credential a harness.Env's clients use by default.
func envCred(e *harness.Env) harness.Credential {
	return harness.Credential{AccessKey: e.AccessKey, SecretKey: e.SecretKey}
}

// requireRefusal checks that resp is an S3 error whose "STATUS CODE" is one
// of allowed, with a request id, and closes its body.
func requireRefusal(t *testing.T, resp *http.Response, allowed ...string) {
	t.Helper()
	e, body, err := harness.ReadS3Error(resp)
	if err != nil {
		t.Fatalf("%s: %v; body:\n%s", resp.Status, err, body)
	}
	got := fmt.Sprintf("%d %s", resp.StatusCode, e.Code)
	if !slices.Contains(allowed, got) {
		t.Fatalf("got %s (%s), want one of %q", got, e.Message, allowed)
	}
	requireRequestID(t, resp)
}

// wireHead renders a request's line and headers as they go on the wire,
// with Content-Length n (none when n < 0) and extra raw header lines, for
// requests that net/http would not send (or not send that way).
func wireHead(req *http.Request, n int64, extra ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.URL.Host)
	if n >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", n)
	}
	for _, l := range extra {
		b.WriteString(l + "\r\n")
	}
	_ = req.Header.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// wireAnswer is what came back on a raw connection.
type wireAnswer struct {
	status int
	header http.Header
	body   []byte
	// took is the time from dialing to the complete answer.
	took time.Duration
	// closed says the gateway closed the connection after answering.
	closed bool
}

// code returns the S3 error code in the answer's body, or "".
func (a wireAnswer) code() string { return answer{body: a.body}.errorCode() }

// exchange sends head and body (nil: nothing, so that a request announcing
// a body waits for bytes that never come) on a new connection to addr,
// reads one answer, and looks whether the connection is then closed. It
// fails the test if no answer arrives within wirePrompt.
//
// Head and body go out in one write. A request of up to 4 KiB (what Go's
// server reads at a time) thus reaches the gateway over loopback as one
// segment, which its first read takes whole: when it refuses the request
// from its head and closes at once (as Go's server does for bad framing),
// no byte of the request is left unread or still to come, so the close is
// a FIN. Were the body sent after the head, it could arrive after that
// read, and the kernel would answer it (or the close with bytes unread)
// with a RST, which can destroy the answer before the client has read it.
func exchange(t *testing.T, addr string, head, body []byte) wireAnswer {
	t.Helper()
	start := time.Now()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(start.Add(wirePrompt)); err != nil {
		t.Fatal(err)
	}
	request := append(slices.Clip(head), body...)
	go func() {
		// A large request may be answered and closed before all of it
		// went out.
		_, _ = conn.Write(request)
	}()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %v (%v): the gateway is waiting for what the client never sends", time.Since(start).Round(time.Millisecond), err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: reading the answer's body: %v", resp.Status, err)
	}
	a := wireAnswer{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start)}
	if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = br.ReadByte()
	var ne net.Error
	a.closed = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	return a
}

// requireWireRefusal checks a raw answer: status and (when not empty) S3
// error code, in time, and the connection closed after it, so that the
// body the client announced is never taken for another request.
func requireWireRefusal(t *testing.T, a wireAnswer, status int, code string) {
	t.Helper()
	if a.status != status || (code != "" && a.code() != code) {
		t.Fatalf("got %d %q, want %d %s; body:\n%s", a.status, a.code(), status, code, a.body)
	}
	if a.took > wirePrompt {
		t.Fatalf("the answer took %v", a.took)
	}
	if !a.closed {
		t.Fatalf("%d %s: the gateway kept the connection open after refusing a request whose body it did not read", a.status, code)
	}
}

// proxiedTo counts the requests the fault proxy passed on to MinIO that
// would change or read bucket's objects (object paths, or any method but a
// listing's GET on the bucket), leaving out the reclaimer's listings.
func proxiedTo(p *harness.FaultProxy, buckets ...string) []harness.ProxiedRequest {
	return p.Find(func(r harness.ProxiedRequest) bool {
		for _, b := range buckets {
			if strings.HasPrefix(r.Path, "/"+b+"/") || (r.Path == "/"+b && r.Method != http.MethodGet) {
				return true
			}
		}
		return false
	})
}

func describeProxied(rs []harness.ProxiedRequest) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s?%s", r.Method, r.Path, r.Query.Encode()))
	}
	return strings.Join(out, "\n  ")
}

// randomToken returns n random bytes in hex.
func randomToken(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestSecuritySessionIsolation: with two credentials, bob can do nothing to
// alice's upload — not by header signature, not by presigned URL, not with
// minio-go's signed chunks, not by replaying alice's Idempotency-Key — nor
// see it listed; none of his calls reaches MinIO or changes etcd, and alice
// completes her upload afterwards. After her complete, bob does not get her
// recorded answer either.
func TestSecuritySessionIsolation(t *testing.T) {
	t.Parallel()
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{
		Credentials: []harness.Credential{secAlice, secBob, secOps},
		Config:      map[string]any{"sessions": map[string]any{"admin_principals": []string{"ops"}}},
	})
	store := newSessionStore(t, e)
	direct := e.DirectSDK(t)
	hc := e.HTTPClient(t)
	ctx := t.Context()
	as := func(c harness.Credential) *s3.Client {
		return e.SDK(t, harness.WithCredentials(c.AccessKey, c.SecretKey))
	}
	ac, bc, oc := as(secAlice), as(secBob), as(secOps)
	bucket := e.Bucket(t)

	key := "alice/report.bin"
	p1, p2 := harness.NewData(7001, 5*mib), harness.NewData(7002, 1234)
	id := createUpload(t, ac, bucket, key)
	parts := []s3types.CompletedPart{
		mustUploadPart(t, ac, bucket, key, id, 1, p1.Section(0, p1.Size)),
		mustUploadPart(t, ac, bucket, key, id, 2, p2.Section(0, p2.Size)),
	}
	// Another upload of alice's, aborted with an Idempotency-Key whose
	// recorded 204 bob must not be able to replay.
	const aliceIdemKey = "alice-abort-0001"
	abortedKey := "alice/aborted.bin"
	aborted := createUpload(t, ac, bucket, abortedKey)
	if _, err := ac.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(abortedKey), UploadId: aws.String(aborted)},
		withIdempotencyKey(aliceIdemKey)); err != nil {
		t.Fatalf("alice's abort with an Idempotency-Key: %v", err)
	}
	bobsOwn := createUpload(t, bc, bucket, "bob/own.bin")

	t.Run("listing", func(t *testing.T) {
		if got := backendUploads(t, direct, bucket); !slices.Contains(got, id) || !slices.Contains(got, bobsOwn) {
			t.Fatalf("MinIO holds uploads %v; want alice's %s and bob's %s", got, id, bobsOwn)
		}
		if got := backendUploads(t, bc, bucket); slices.Contains(got, id) || !slices.Contains(got, bobsOwn) {
			t.Fatalf("bob's ListMultipartUploads shows %v; want his own %s and not alice's %s", got, bobsOwn, id)
		}
		out, err := bc.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String("alice/")})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Uploads) != 0 {
			t.Fatalf("bob's listing of prefix alice/ shows %d uploads", len(out.Uploads))
		}
		res, err := minio.Core{Client: e.MinioGo(t, harness.WithCredentials(secBob.AccessKey, secBob.SecretKey))}.
			ListMultipartUploads(ctx, bucket, "", "", "", "", 1000)
		if err != nil {
			t.Fatalf("minio-go ListMultipartUploads as bob: %v", err)
		}
		for _, u := range res.Uploads {
			if u.UploadID == id {
				t.Fatalf("bob's minio-go listing shows alice's upload %s (%s)", id, u.Key)
			}
		}
		if got := backendUploads(t, ac, bucket); !slices.Contains(got, id) || slices.Contains(got, bobsOwn) {
			t.Fatalf("alice's listing shows %v; want her %s and not bob's %s", got, id, bobsOwn)
		}
		if got := backendUploads(t, oc, bucket); !slices.Contains(got, id) || !slices.Contains(got, bobsOwn) {
			t.Fatalf("the admin principal's listing shows %v; want both uploads", got)
		}
	})

	asBob := func(method, key string, q url.Values, body []byte) rawCall {
		c := raw(e, method, bucket, key, q, body)
		c.accessKey, c.secretKey = secBob.AccessKey, secBob.SecretKey
		return c
	}
	presignedByBob := func(t *testing.T, method string, q url.Values, body []byte) answer {
		u := secPresign(t, e, secBob, method, objectURL(e.Endpoint, bucket, key)+"?"+q.Encode(), time.Now(), time.Hour)
		resp := do(t, hc, newRequest(t, method, u, body))
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return answer{status: resp.StatusCode, header: resp.Header, body: b}
	}
	mc := minio.Core{Client: e.MinioGo(t, harness.WithCredentials(secBob.AccessKey, secBob.SecretKey))}
	tail := harness.NewData(7003, 777)
	xml := completeXML(parts...)
	calls := []struct {
		name string
		call func(t *testing.T) answer
	}{
		{"UploadPart, header signature", func(t *testing.T) answer {
			return asBob(http.MethodPut, key, uploadQ(id, "partNumber", "3"), tail.Bytes()).must(t, hc)
		}},
		{"UploadPart over part 1, header signature", func(t *testing.T) answer {
			return asBob(http.MethodPut, key, uploadQ(id, "partNumber", "1"), tail.Bytes()).must(t, hc)
		}},
		{"ListParts, header signature", func(t *testing.T) answer {
			return asBob(http.MethodGet, key, uploadQ(id), nil).must(t, hc)
		}},
		{"CompleteMultipartUpload, header signature", func(t *testing.T) answer {
			return asBob(http.MethodPost, key, uploadQ(id), xml).must(t, hc)
		}},
		{"AbortMultipartUpload, header signature", func(t *testing.T) answer {
			return asBob(http.MethodDelete, key, uploadQ(id), nil).must(t, hc)
		}},
		{"AbortMultipartUpload with alice's Idempotency-Key", func(t *testing.T) answer {
			c := asBob(http.MethodDelete, key, uploadQ(id), nil)
			c.header = http.Header{"Idempotency-Key": {aliceIdemKey}}
			return c.must(t, hc)
		}},
		{"replay of alice's recorded abort", func(t *testing.T) answer {
			c := asBob(http.MethodDelete, abortedKey, uploadQ(aborted), nil)
			c.header = http.Header{"Idempotency-Key": {aliceIdemKey}}
			return c.must(t, hc)
		}},
		{"UploadPart, presigned by bob", func(t *testing.T) answer {
			return presignedByBob(t, http.MethodPut, uploadQ(id, "partNumber", "3"), tail.Bytes())
		}},
		{"ListParts, presigned by bob", func(t *testing.T) answer {
			return presignedByBob(t, http.MethodGet, uploadQ(id), nil)
		}},
		{"CompleteMultipartUpload, presigned by bob", func(t *testing.T) answer {
			return presignedByBob(t, http.MethodPost, uploadQ(id), xml)
		}},
		{"AbortMultipartUpload, presigned by bob", func(t *testing.T) answer {
			return presignedByBob(t, http.MethodDelete, uploadQ(id), nil)
		}},
		{"UploadPart, minio-go signed chunks", func(t *testing.T) answer {
			_, err := mc.PutObjectPart(t.Context(), bucket, key, id, 3, tail.Reader(), tail.Size, minio.PutObjectPartOptions{})
			er := minio.ToErrorResponse(err)
			return answer{status: er.StatusCode, header: http.Header{"X-Amz-Request-Id": {er.RequestID}},
				body: []byte("<Error><Code>" + er.Code + "</Code></Error>")}
		}},
		{"ListParts, minio-go", func(t *testing.T) answer {
			_, err := mc.ListObjectParts(t.Context(), bucket, key, id, 0, 1000)
			er := minio.ToErrorResponse(err)
			return answer{status: er.StatusCode, header: http.Header{"X-Amz-Request-Id": {er.RequestID}},
				body: []byte("<Error><Code>" + er.Code + "</Code></Error>")}
		}},
	}
	t.Run("other principal", func(t *testing.T) {
		for _, c := range calls {
			t.Run(c.name, func(t *testing.T) {
				before := store.dump(t)
				partsBefore := backendPartNumbers(t, direct, bucket, key, id)
				forwarded := len(proxiedTo(proxy, bucket))
				a := c.call(t)
				a.requireError(t, http.StatusForbidden, "AccessDenied")
				if a.header.Get("X-Sweepgate-Idempotent-Replay") != "" {
					t.Fatal("bob got a replay of alice's recorded answer")
				}
				requireUnchanged(t, "bob's "+c.name, before, store.dump(t))
				if after := backendPartNumbers(t, direct, bucket, key, id); !maps.Equal(partsBefore, after) {
					t.Fatalf("MinIO's parts of alice's upload changed from %v to %v", partsBefore, after)
				}
				if got := proxiedTo(proxy, bucket); len(got) != forwarded {
					t.Fatalf("bob's refused call reached MinIO:\n  %s", describeProxied(got[forwarded:]))
				}
			})
		}
	})
	store.requireState(t, bucket, id, "active")
	store.requireState(t, bucket, aborted, "aborted")

	out, err := completeUpload(ctx, ac, bucket, key, id, parts)
	if err != nil {
		t.Fatalf("alice's complete after bob's attempts: %v", err)
	}
	sum, size := concatSum(t, p1.Reader(), p2.Reader())
	requireObjectSum(t, direct, bucket, key, sum, size)
	requireCompletedSession(t, store, bucket, id, aws.ToString(out.ETag))

	t.Run("after the complete", func(t *testing.T) {
		// Alice's retry gets her recorded answer; bob's identical
		// request does not.
		again, err := completeUpload(ctx, ac, bucket, key, id, parts)
		if err != nil || aws.ToString(again.ETag) != aws.ToString(out.ETag) {
			t.Fatalf("alice's retried complete: %v (ETag %s, want %s)", err, aws.ToString(again.ETag), aws.ToString(out.ETag))
		}
		before := store.dump(t)
		_, err = completeUpload(ctx, bc, bucket, key, id, parts)
		requireAPIError(t, err, "AccessDenied")
		requireAPIError(t, abortUpload(ctx, bc, bucket, key, id), "AccessDenied")
		requireUnchanged(t, "bob's calls on alice's completed upload", before, store.dump(t))
		requireObjectSum(t, direct, bucket, key, sum, size)
	})
}

// TestSecurityPresigned: a presigned URL works for what it was signed for
// while it is valid, and for nothing else: not after its expiry (which the
// gateway's max_clock_skew does not lengthen), not with its validity moved
// or lengthened by editing the query, not for another key, bucket or call.
func TestSecurityPresigned(t *testing.T) {
	t.Parallel()
	const skew = 5 * time.Second
	e := harness.Start(t, harness.Options{MaxClockSkew: skew})
	e.RequireGateway(t)
	hc := e.HTTPClient(t)
	direct := e.DirectSDK(t)
	cred := envCred(e)

	t.Run("replay after expiry", func(t *testing.T) {
		bucket := e.Bucket(t)
		first, second := harness.NewData(7101, 64*kib), harness.NewData(7102, 64*kib)
		const validity = 3 * time.Second
		// X-Amz-Date has whole seconds: the URLs expire at signedAt+validity.
		signedAt := time.Now().Truncate(time.Second)
		u := objectURL(e.Endpoint, bucket, "replayed")
		putURL := secPresign(t, e, cred, http.MethodPut, u, signedAt, validity)
		getURL := secPresign(t, e, cred, http.MethodGet, u, signedAt, validity)
		requireStatus(t, do(t, hc, newRequest(t, http.MethodPut, putURL, first.Bytes())), http.StatusOK)
		if got := requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, getURL, nil)), http.StatusOK); !bytes.Equal(got, first.Bytes()) {
			t.Fatal("the presigned GET returned other bytes")
		}
		if time.Now().After(signedAt.Add(validity)) {
			t.Fatalf("the valid uses took past the URLs' expiry; the test cannot tell expiry from slowness")
		}
		// A second past expiry: well inside the clock skew, which must not
		// count for a presigned URL's expiry.
		time.Sleep(time.Until(signedAt.Add(validity + time.Second)))
		requireS3Error(t, do(t, hc, newRequest(t, http.MethodPut, putURL, second.Bytes())), http.StatusForbidden, "AccessDenied")
		requireS3Error(t, do(t, hc, newRequest(t, http.MethodGet, getURL, nil)), http.StatusForbidden, "AccessDenied")
		requireObject(t, direct, bucket, "replayed", first)

		// The expired URL cannot be brought back by editing its query.
		now := time.Now().UTC()
		for _, tc := range []struct {
			name    string
			edit    func(q url.Values)
			allowed []string
		}{
			{"X-Amz-Expires lengthened to a week", func(q url.Values) { q.Set("X-Amz-Expires", "604800") },
				[]string{"403 SignatureDoesNotMatch"}},
			{"X-Amz-Date moved to now", func(q url.Values) { q.Set("X-Amz-Date", now.Format("20060102T150405Z")) },
				// Across midnight the credential's date no longer matches.
				[]string{"403 SignatureDoesNotMatch", "400 AuthorizationQueryParametersError"}},
			{"X-Amz-Date and the credential's date moved to now", func(q url.Values) {
				q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), signedAt.UTC().Format("20060102"), now.Format("20060102"), 1))
				q.Set("X-Amz-Date", now.Format("20060102T150405Z"))
			}, []string{"403 SignatureDoesNotMatch"}},
			{"a second X-Amz-Expires", func(q url.Values) { q.Add("X-Amz-Expires", "3600") },
				[]string{"400 AuthorizationQueryParametersError"}},
			{"a lower-case x-amz-expires", func(q url.Values) { q.Set("x-amz-expires", "3600") },
				[]string{"403 AccessDenied", "403 SignatureDoesNotMatch", "400 AuthorizationQueryParametersError"}},
			{"X-Amz-Expires removed", func(q url.Values) { q.Del("X-Amz-Expires") },
				[]string{"400 AuthorizationQueryParametersError"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, signedURL := range []string{putURL, getURL} {
					pu, err := url.Parse(signedURL)
					if err != nil {
						t.Fatal(err)
					}
					q := pu.Query()
					tc.edit(q)
					pu.RawQuery = q.Encode()
					method, body := http.MethodGet, []byte(nil)
					if signedURL == putURL {
						method, body = http.MethodPut, second.Bytes()
					}
					requireRefusal(t, do(t, hc, newRequest(t, method, pu.String(), body)), tc.allowed...)
				}
				requireObject(t, direct, bucket, "replayed", first)
			})
		}
	})

	t.Run("validity cannot be moved", func(t *testing.T) {
		f := newRefusalFixture(t, e)
		get := func(at time.Time, expires time.Duration) string {
			return secPresign(t, e, cred, http.MethodGet, f.url(existingKey), at, expires)
		}
		edited := func(signed string, edit func(q url.Values)) string {
			pu, err := url.Parse(signed)
			if err != nil {
				t.Fatal(err)
			}
			q := pu.Query()
			edit(q)
			pu.RawQuery = q.Encode()
			return pu.String()
		}
		getReq := func(u string) func(t *testing.T) *http.Request {
			return func(t *testing.T) *http.Request { return newRequest(t, http.MethodGet, u, nil) }
		}
		past := time.Now().Add(-10 * time.Minute)
		otherKey := secPresign(t, e, cred, http.MethodGet, f.url("other"), time.Now(), time.Hour)
		runRefusals(t, f, []refusal{
			// Dating a URL ahead would make it valid for longer; beyond
			// the clock skew it is not valid yet.
			{name: "signed an hour ahead", status: 403, code: "AccessDenied", gateway: true, req: getReq(get(time.Now().Add(time.Hour), time.Minute))},
			{name: "signed a week ahead with a week's validity", status: 403, code: "AccessDenied", gateway: true, req: getReq(get(time.Now().Add(7*24*time.Hour), 7*24*time.Hour))},
			{name: "validity over a week, as signed", status: 400, code: "AuthorizationQueryParametersError", gateway: true, req: getReq(get(time.Now(), 7*24*time.Hour+time.Second))},
			{name: "X-Amz-Expires zero", status: 400, code: "AuthorizationQueryParametersError", gateway: true,
				req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-Expires", "0") }))},
			{name: "X-Amz-Expires negative", status: 400, code: "AuthorizationQueryParametersError", gateway: true,
				req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-Expires", "-60") }))},
			{name: "X-Amz-Date moved forward on an expired URL", status: 403, code: "SignatureDoesNotMatch", gateway: true,
				req: getReq(edited(get(past, time.Minute), func(q url.Values) {
					moved := past.Add(9*time.Minute + 30*time.Second).UTC()
					q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), past.UTC().Format("20060102"), moved.Format("20060102"), 1))
					q.Set("X-Amz-Date", moved.Format("20060102T150405Z"))
				}))},
			{name: "another URL's signature", status: 403, code: "SignatureDoesNotMatch", gateway: true,
				req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-Signature", mustQuery(t, otherKey, "X-Amz-Signature")) }))},
			{name: "X-Amz-SignedHeaders without host", status: 400, code: "AuthorizationQueryParametersError", gateway: true,
				req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-SignedHeaders", "x-amz-date") }))},
			{name: "X-Amz-SignedHeaders lengthened", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
				r := newRequest(t, http.MethodGet, edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-SignedHeaders", "host;x-amz-acl") }), nil)
				r.Header.Set("X-Amz-Acl", "public-read")
				return r
			}},
			// Query parameters turn a GET of an object into other calls
			// (its ACL, a version, a part, a listing) or change the answer
			// (response-*): every one is signed.
			{name: "versionId added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
				req: getReq(get(time.Now(), time.Hour) + "&versionId=null")},
			{name: "acl added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
				req: getReq(get(time.Now(), time.Hour) + "&acl=")},
			{name: "response-content-type added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
				req: getReq(get(time.Now(), time.Hour) + "&response-content-type=text%2Fhtml")},
			{name: "partNumber added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
				req: getReq(get(time.Now(), time.Hour) + "&partNumber=1")},
		})
		// Within the clock skew, a URL dated a little ahead is accepted:
		// the refusals above are about the distance, not the direction.
		t.Run("control: signed within the skew", func(t *testing.T) {
			got := requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, get(time.Now().Add(skew/2), time.Minute), nil)), http.StatusOK)
			if !bytes.Equal(got, f.existing.Bytes()) {
				t.Fatal("the presigned GET returned other bytes")
			}
		})
	})

	t.Run("PUT URL is for its key only", func(t *testing.T) {
		f := newRefusalFixture(t, e)
		other := e.Bucket(t)
		d := harness.NewData(7103, 8*kib)
		body := d.Bytes()
		const signedKey = "dir/signed-key"
		putURL := secPresign(t, e, cred, http.MethodPut, f.url(signedKey), time.Now(), time.Hour)
		retarget := func(path string) func(t *testing.T) *http.Request {
			return func(t *testing.T) *http.Request {
				return newRequest(t, http.MethodPut, e.Endpoint+path+"?"+strings.SplitN(putURL, "?", 2)[1], body)
			}
		}
		b := "/" + f.bucket + "/"
		runRefusals(t, f, []refusal{
			{name: "another key", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "dir/other-key")},
			{name: "the existing object", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + existingKey)},
			{name: "another bucket", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget("/" + other + "/" + signedKey)},
			{name: "a longer key", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + signedKey + ".exe")},
			{name: "a shorter key", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "dir/signed")},
			{name: "other case", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "Dir/Signed-Key")},
			{name: "dot segments", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "x/../" + signedKey)},
			{name: "virtual-hosted style", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
				r := retarget("/" + signedKey)(t)
				r.Host = f.bucket + ".localhost:" + fmt.Sprint(e.Gateway.Port())
				return r
			}},
			{name: "made an UploadPart", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
				return newRequest(t, http.MethodPut, putURL+"&partNumber=1&uploadId=bm90LWFuLXVwbG9hZA", body)
			}},
			{name: "made a CreateMultipartUpload", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
				return newRequest(t, http.MethodPost, putURL+"&uploads=", nil)
			}},
		})
		if out, err := direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(other)}); err != nil || len(out.Contents) != 0 {
			t.Fatalf("the other bucket: %v, %d objects; want none", err, len(out.Contents))
		}
		// The URL itself works, more than once, as S3's do.
		t.Run("control: its own key", func(t *testing.T) {
			for range 2 {
				requireStatus(t, do(t, hc, newRequest(t, http.MethodPut, putURL, body)), http.StatusOK)
			}
			requireObject(t, direct, f.bucket, signedKey, d)
		})
	})
}

// mustQuery returns the query parameter name of a URL.
func mustQuery(t *testing.T, u, name string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Query().Get(name)
}

// TestSecuritySmuggledHeaders: headers added to a signed request after
// signing (or to a presigned URL) are refused, whether S3's (x-amz-*) or the
// backend's own (x-minio-*), and so are changed signed headers, a changed
// Host, a query added after signing, and requests whose framing is
// ambiguous (two Hosts, two Content-Lengths). None of them reaches MinIO
// and nothing changes there.
func TestSecuritySmuggledHeaders(t *testing.T) {
	t.Parallel()
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{})
	hc := e.HTTPClient(t)
	direct := e.DirectSDK(t)
	cred := envCred(e)
	bucket, private := e.Bucket(t), e.Bucket(t)
	objects := map[string]harness.Data{}
	for i, k := range []string{"existing", "dir/x", "dir/y"} {
		objects[k] = harness.NewData(uint64(7200+i), 3*kib)
		putData(t, direct, bucket, k, objects[k])
	}
	secret := harness.NewData(7210, 5*kib)
	putData(t, direct, private, "secret", secret)

	requireUntouched := func(t *testing.T) {
		t.Helper()
		out, err := direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if want := slices.Sorted(maps.Keys(objects)); !slices.Equal(keys, want) {
			t.Fatalf("the bucket holds %v, want %v", keys, want)
		}
		for k, d := range objects {
			requireObject(t, direct, bucket, k, d)
			head, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
			if err != nil {
				t.Fatal(err)
			}
			if len(head.Metadata) != 0 || head.ServerSideEncryption != "" || head.WebsiteRedirectLocation != nil || aws.ToInt32(head.TagCount) != 0 {
				t.Fatalf("%s changed: metadata %v, SSE %q, redirect %v, tags %d", k, head.Metadata, head.ServerSideEncryption,
					aws.ToString(head.WebsiteRedirectLocation), aws.ToInt32(head.TagCount))
			}
		}
		requireNoUploads(t, direct, bucket)
		out, err = direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(private)})
		if err != nil || len(out.Contents) != 1 {
			t.Fatalf("the private bucket: %v, %d objects, want just the secret", err, len(out.Contents))
		}
		requireObject(t, direct, private, "secret", secret)
	}

	body := harness.NewData(7220, 4*kib).Bytes()
	put := func(t *testing.T, key string, signedHeaders ...string) *http.Request {
		r := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, key), body)
		for i := 0; i+1 < len(signedHeaders); i += 2 {
			r.Header.Set(signedHeaders[i], signedHeaders[i+1])
		}
		return secSign(t, e, cred, r, harness.SHA256Hex(body))
	}
	del := func(t *testing.T, key string) *http.Request {
		return secSign(t, e, cred, newRequest(t, http.MethodDelete, objectURL(e.Endpoint, bucket, key), nil), harness.EmptySHA256)
	}
	presigned := func(t *testing.T, method, key string, b []byte) *http.Request {
		return newRequest(t, method, secPresign(t, e, cred, method, objectURL(e.Endpoint, bucket, key), time.Now(), time.Hour), b)
	}
	adding := func(build func(t *testing.T) *http.Request, kv ...string) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			r := build(t)
			for i := 0; i+1 < len(kv); i += 2 {
				r.Header.Add(kv[i], kv[i+1])
			}
			return r
		}
	}
	putNew := func(t *testing.T) *http.Request { return put(t, "smuggled") }
	putExisting := func(t *testing.T) *http.Request { return put(t, "existing") }
	copyShaped := func(t *testing.T) *http.Request {
		return secSign(t, e, cred, newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "copied"), nil), harness.EmptySHA256)
	}
	copySource := "/" + private + "/secret"

	type smuggle struct {
		name   string
		req    func(t *testing.T) *http.Request
		status int
		code   string
	}
	cases := []smuggle{
		// S3's own headers, added after a header signature.
		{"x-amz-copy-source added to a PUT", adding(putNew, "X-Amz-Copy-Source", copySource), 403, "AccessDenied"},
		{"x-amz-copy-source added to an empty PUT", adding(copyShaped, "X-Amz-Copy-Source", copySource), 403, "AccessDenied"},
		{"x-amz-acl added", adding(putExisting, "X-Amz-Acl", "public-read-write"), 403, "AccessDenied"},
		{"x-amz-grant-full-control added", adding(putExisting, "X-Amz-Grant-Full-Control", `id="mallory"`), 403, "AccessDenied"},
		{"x-amz-meta-* added", adding(putExisting, "X-Amz-Meta-Role", "admin"), 403, "AccessDenied"},
		{"x-amz-server-side-encryption added", adding(putExisting, "X-Amz-Server-Side-Encryption", "AES256"), 403, "AccessDenied"},
		{"x-amz-tagging added", adding(putExisting, "X-Amz-Tagging", "owner=mallory"), 403, "AccessDenied"},
		{"x-amz-website-redirect-location added", adding(putExisting, "X-Amz-Website-Redirect-Location", "https://evil.example/"), 403, "AccessDenied"},
		{"x-amz-storage-class added", adding(putExisting, "X-Amz-Storage-Class", "REDUCED_REDUNDANCY"), 403, "AccessDenied"},
		// MinIO unpacks a tar PUT with this into many objects.
		{"x-amz-meta-snowball-auto-extract added", adding(putNew, "X-Amz-Meta-Snowball-Auto-Extract", "true"), 403, "AccessDenied"},
		{"x-amz-bypass-governance-retention added to a DELETE", adding(func(t *testing.T) *http.Request { return del(t, "existing") },
			"X-Amz-Bypass-Governance-Retention", "true"), 403, "AccessDenied"},
		// MinIO's own: with the gateway's credentials, x-minio-force-delete
		// turns the DELETE of "dir" into the delete of everything under
		// dir/.
		{"x-minio-force-delete added to a DELETE", adding(func(t *testing.T) *http.Request { return del(t, "dir") },
			"X-Minio-Force-Delete", "true"), 403, "AccessDenied"},
		// The same on presigned URLs, which are handed to others.
		{"x-minio-force-delete added to a presigned DELETE", adding(func(t *testing.T) *http.Request { return presigned(t, http.MethodDelete, "dir", nil) },
			"X-Minio-Force-Delete", "true"), 403, "AccessDenied"},
		{"x-amz-copy-source added to a presigned PUT", adding(func(t *testing.T) *http.Request { return presigned(t, http.MethodPut, "copied", nil) },
			"X-Amz-Copy-Source", copySource), 403, "AccessDenied"},
		{"x-amz-acl added to a presigned PUT", adding(func(t *testing.T) *http.Request { return presigned(t, http.MethodPut, "existing", body) },
			"X-Amz-Acl", "public-read"), 403, "AccessDenied"},
		{"x-amz-meta-* added to a presigned PUT", adding(func(t *testing.T) *http.Request { return presigned(t, http.MethodPut, "existing", body) },
			"X-Amz-Meta-Role", "admin"), 403, "AccessDenied"},
		// Signed headers changed or doubled.
		{"signed x-amz-acl changed", func(t *testing.T) *http.Request {
			r := put(t, "existing", "X-Amz-Acl", "private")
			r.Header.Set("X-Amz-Acl", "public-read-write")
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"signed x-amz-copy-source pointed elsewhere", func(t *testing.T) *http.Request {
			r := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "copied"), nil)
			r.Header.Set("X-Amz-Copy-Source", "/"+bucket+"/existing")
			r = secSign(t, e, cred, r, harness.EmptySHA256)
			r.Header.Set("X-Amz-Copy-Source", copySource)
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"second value of a signed x-amz-meta header", adding(func(t *testing.T) *http.Request { return put(t, "existing", "X-Amz-Meta-Role", "reader") },
			"X-Amz-Meta-Role", "admin"), 403, "SignatureDoesNotMatch"},
		{"signed Content-Type changed", func(t *testing.T) *http.Request {
			r := put(t, "existing", "Content-Type", "text/plain")
			r.Header.Set("Content-Type", "text/html")
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"second X-Amz-Date", adding(putExisting, "X-Amz-Date", time.Now().Add(time.Minute).UTC().Format("20060102T150405Z")), 403, "SignatureDoesNotMatch"},
		{"second X-Amz-Content-Sha256", adding(putExisting, "X-Amz-Content-Sha256", harness.UnsignedPayload), 400, "InvalidArgument"},
		{"second Authorization", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.Header.Add("Authorization", r.Header.Get("Authorization"))
			return r
		}, 400, "AuthorizationHeaderMalformed"},
		{"Host changed", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.Host = "localhost:" + fmt.Sprint(e.Gateway.Port())
			return r
		}, 403, "SignatureDoesNotMatch"},
		// A sub-resource added to the query turns a PUT of the object into
		// another call.
		{"?acl added after signing", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.URL.RawQuery = "acl="
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"?tagging added after signing", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.URL.RawQuery = "tagging="
			return r
		}, 403, "SignatureDoesNotMatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireS3Error(t, do(t, hc, tc.req(t)), tc.status, tc.code)
			requireUntouched(t)
			if got := proxiedTo(proxy, bucket, private); len(got) != 0 {
				t.Fatalf("refused requests reached MinIO:\n  %s", describeProxied(got))
			}
		})
	}

	// Framing that two parsers could read two ways is refused before
	// anything is forwarded, and the connection is closed.
	wire := func(t *testing.T, n int64, extra []string, b []byte) wireAnswer {
		r := secSign(t, e, cred, newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "framed"), []byte("hello")), harness.SHA256Hex([]byte("hello")))
		head := wireHead(r, n, extra...)
		if len(head)+len(b) > 4096 {
			// exchange's one write is read whole by the gateway only up
			// to 4 KiB; a longer request could be answered with a RST.
			t.Fatalf("the request is %d bytes, over the 4 KiB the gateway's first read takes", len(head)+len(b))
		}
		return exchange(t, e.Gateway.Addr(), head, b)
	}
	t.Run("two Host headers", func(t *testing.T) {
		requireWireRefusal(t, wire(t, 5, []string{"Host: " + private + ".localhost"}, []byte("hello")), http.StatusBadRequest, "")
	})
	t.Run("two Content-Lengths", func(t *testing.T) {
		requireWireRefusal(t, wire(t, 5, []string{"Content-Length: 6"}, []byte("hello!")), http.StatusBadRequest, "")
	})
	t.Run("Content-Length and chunked", func(t *testing.T) {
		a := wire(t, 5, []string{"Transfer-Encoding: chunked"}, []byte("5\r\nhello\r\n0\r\n\r\n"))
		if a.status < 400 || a.status >= 500 {
			t.Fatalf("got %d %q, want a refusal; body:\n%s", a.status, a.code(), a.body)
		}
	})
	t.Run("nothing changed", func(t *testing.T) {
		requireUntouched(t)
		if got := proxiedTo(proxy, bucket, private); len(got) != 0 {
			t.Fatalf("refused requests reached MinIO:\n  %s", describeProxied(got))
		}
	})

	// The same requests, signed as they are sent, are served: the
	// refusals above are about what was added or changed.
	t.Run("controls", func(t *testing.T) {
		requireStatus(t, do(t, hc, put(t, "control/meta", "X-Amz-Meta-Role", "reader")), http.StatusOK)
		requireStatus(t, do(t, hc, presigned(t, http.MethodPut, "control/presigned", body)), http.StatusOK)
		requireStatus(t, do(t, hc, del(t, "dir")), http.StatusNoContent)
		for _, k := range []string{"dir/x", "dir/y"} {
			requireObject(t, direct, bucket, k, objects[k])
		}
	})
}

// TestSecurityLimits: requests over a limit are refused from their headers,
// before the gateway reads the body, records anything or asks MinIO: a
// header block of a megabyte, a part or object over 5 GiB, a
// CompleteMultipartUpload or DeleteObjects document over its size, and a
// write into a digest reference source over its parse limit.
func TestSecurityLimits(t *testing.T) {
	t.Parallel()
	bucket := harness.BucketName(t)
	const maxRef = 64 * kib
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"namespaces": []string{bucket + "/blobs/sha256/"},
			"sources":    []string{bucket + "/manifests/"},
			"max_body":   maxRef,
		},
	}})
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	hc := e.HTTPClient(t)
	cred := envCred(e)
	ctx := t.Context()
	if _, err := direct.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	// signedHead signs a request announcing n body bytes (with the payload
	// unsigned, as the body is never sent whole) and renders its head.
	signedHead := func(t *testing.T, method, target string, n int64, header ...string) []byte {
		r := newRequest(t, method, target, nil)
		r.ContentLength = n
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		hash := r.Header.Get("X-Amz-Content-Sha256")
		if hash == "" {
			hash = harness.UnsignedPayload
		}
		return wireHead(secSign(t, e, cred, r, hash), n)
	}
	reached := func(match func(harness.ProxiedRequest) bool) []harness.ProxiedRequest { return proxy.Find(match) }

	t.Run("header block", func(t *testing.T) {
		many := []byte("GET /" + bucket + " HTTP/1.1\r\nHost: " + e.Gateway.Addr() + "\r\n")
		for i := range 1024 {
			many = fmt.Appendf(many, "X-Filler-%04d: %s\r\n", i, strings.Repeat("f", 1000))
		}
		many = append(many, "\r\n"...)
		long := []byte("GET /" + bucket + " HTTP/1.1\r\nHost: " + e.Gateway.Addr() + "\r\nX-Long: " + strings.Repeat("l", mib) + "\r\n\r\n")
		for _, tc := range []struct {
			name, addr string
			head       []byte
		}{
			{"S3, a thousand headers", e.Gateway.Addr(), many},
			{"S3, one header of a megabyte", e.Gateway.Addr(), long},
			{"admin listener", strings.TrimPrefix(e.Gateway.AdminEndpoint, "http://"), many},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := exchange(t, tc.addr, tc.head, nil)
				if a.status != http.StatusRequestHeaderFieldsTooLarge && a.status != http.StatusBadRequest {
					t.Fatalf("got %d, want 431 or 400; body:\n%s", a.status, a.body)
				}
				requireWireRefusal(t, a, a.status, "")
			})
		}
		if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("the gateway after the header floods: %v", err)
		}
	})

	t.Run("CompleteMultipartUpload body", func(t *testing.T) {
		key := "limits/complete"
		id := createUpload(t, c, bucket, key)
		part := mustUploadPart(t, c, bucket, key, id, 1, harness.NewData(7401, kib).Section(0, kib))
		before := store.dump(t)
		// A well-formed start, then parts past the 4 MiB the gateway
		// reads; the request announces 64 MiB and sends a little over 4.
		doc := []byte("<CompleteMultipartUpload>")
		for len(doc) < 4*mib+64*kib {
			doc = fmt.Appendf(doc, "<Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>", aws.ToString(part.ETag))
		}
		head := signedHead(t, http.MethodPost, objectURL(e.Endpoint, bucket, key)+"?uploadId="+url.QueryEscape(id), 64*mib)
		a := exchange(t, e.Gateway.Addr(), head, doc)
		requireWireRefusal(t, a, http.StatusBadRequest, "MaxMessageLengthExceeded")
		requireUnchanged(t, "an oversized complete", before, store.dump(t))
		if got := reached(harness.MatchUpload(http.MethodPost, id)); len(got) != 0 {
			t.Fatalf("the oversized complete reached MinIO:\n  %s", describeProxied(got))
		}
		// The upload is unharmed.
		if _, err := completeUpload(ctx, c, bucket, key, id, []s3types.CompletedPart{part}); err != nil {
			t.Fatalf("complete after the oversized one: %v", err)
		}
	})

	t.Run("part or object over 5 GiB", func(t *testing.T) {
		key := "limits/huge"
		id := createUpload(t, c, bucket, key)
		const size = 5<<30 + 1
		target := objectURL(e.Endpoint, bucket, key)
		presignedPut := func(t *testing.T) []byte {
			r := newRequest(t, http.MethodPut, secPresign(t, e, cred, http.MethodPut, target, time.Now(), time.Hour), nil)
			return wireHead(r, size)
		}
		for _, tc := range []struct {
			name string
			head func(t *testing.T) []byte
		}{
			{"UploadPart", func(t *testing.T) []byte {
				return signedHead(t, http.MethodPut, target+"?partNumber=1&uploadId="+url.QueryEscape(id), size)
			}},
			{"UploadPart of 6 GiB", func(t *testing.T) []byte {
				return signedHead(t, http.MethodPut, target+"?partNumber=2&uploadId="+url.QueryEscape(id), 6<<30)
			}},
			{"UploadPart, signed chunks", func(t *testing.T) []byte {
				return signedHead(t, http.MethodPut, target+"?partNumber=3&uploadId="+url.QueryEscape(id), size+64*mib,
					"X-Amz-Content-Sha256", harness.StreamingSigned, "Content-Encoding", "aws-chunked",
					"X-Amz-Decoded-Content-Length", fmt.Sprint(int64(size)))
			}},
			{"PutObject", func(t *testing.T) []byte { return signedHead(t, http.MethodPut, target, size) }},
			{"PutObject, presigned", presignedPut},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := store.dump(t)
				a := exchange(t, e.Gateway.Addr(), tc.head(t), nil)
				requireWireRefusal(t, a, http.StatusBadRequest, "EntityTooLarge")
				requireUnchanged(t, "an oversized upload", before, store.dump(t))
				if got := reached(func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPut && r.Path == "/"+bucket+"/"+key }); len(got) != 0 {
					t.Fatalf("the oversized upload reached MinIO:\n  %s", describeProxied(got))
				}
			})
		}
		requireAbsent(t, direct, bucket, key)
		if got := backendPartNumbers(t, direct, bucket, key, id); len(got) != 0 {
			t.Fatalf("MinIO holds parts %v", got)
		}
	})

	t.Run("DeleteObjects body", func(t *testing.T) {
		kept := harness.NewData(7402, 100)
		for _, k := range []string{"limits/keep-1", "limits/keep-2"} {
			putData(t, direct, bucket, k, kept)
		}
		doc := []byte("<Delete>")
		for len(doc) < 2*mib+64*kib {
			doc = append(doc, "<Object><Key>limits/keep-1</Key></Object>"...)
		}
		head := signedHead(t, http.MethodPost, objectURL(e.Endpoint, bucket, "")+"?delete=", 64*mib)
		a := exchange(t, e.Gateway.Addr(), head, doc)
		requireWireRefusal(t, a, http.StatusBadRequest, "MaxMessageLengthExceeded")

		// Over 1000 keys in a small document.
		var b strings.Builder
		b.WriteString("<Delete>")
		for i := range 1001 {
			fmt.Fprintf(&b, "<Object><Key>limits/keep-%d</Key></Object>", i%2+1)
		}
		b.WriteString("</Delete>")
		many := []byte(b.String())
		r := secSign(t, e, cred, newRequest(t, http.MethodPost, objectURL(e.Endpoint, bucket, "")+"?delete=", many), harness.SHA256Hex(many))
		requireS3Error(t, do(t, hc, r), http.StatusBadRequest, "MalformedXML")

		for _, k := range []string{"limits/keep-1", "limits/keep-2"} {
			requireObject(t, direct, bucket, k, kept)
		}
		if got := reached(func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPost && r.Query.Has("delete") }); len(got) != 0 {
			t.Fatalf("a refused DeleteObjects reached MinIO:\n  %s", describeProxied(got))
		}
	})

	t.Run("reference object over the parse limit", func(t *testing.T) {
		// A manifest naming a digest, padded past max_body.
		ref := func(n int) []byte {
			b := []byte(`{"layers":[{"digest":"sha256:` + strings.Repeat("ab", 32) + `"}],"pad":"`)
			b = append(b, bytes.Repeat([]byte("p"), n-len(b)-2)...)
			return append(b, `"}`...)
		}
		over := ref(maxRef + 1)
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/over"), Body: bytes.NewReader(over)})
		requireAPIError(t, err, "EntityTooLarge")
		requireAbsent(t, direct, bucket, "manifests/over")

		// Announced, not sent: refused from the headers.
		a := exchange(t, e.Gateway.Addr(), signedHead(t, http.MethodPut, objectURL(e.Endpoint, bucket, "manifests/announced"), 1<<30), nil)
		requireWireRefusal(t, a, http.StatusBadRequest, "EntityTooLarge")
		requireAbsent(t, direct, bucket, "manifests/announced")

		// Assembled from parts, or copied from a large object.
		id := createUpload(t, c, bucket, "manifests/assembled")
		part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("manifests/assembled"), UploadId: aws.String(id),
			PartNumber: aws.Int32(1), Body: bytes.NewReader(over), ContentLength: aws.Int64(int64(len(over)))})
		if err != nil {
			t.Fatal(err)
		}
		_, err = completeUpload(ctx, c, bucket, "manifests/assembled", id, []s3types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}})
		requireAPIError(t, err, "EntityTooLarge")
		requireAbsent(t, direct, bucket, "manifests/assembled")

		if _, err := direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("limits/large-source"), Body: bytes.NewReader(over)}); err != nil {
			t.Fatal(err)
		}
		_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/copied"), CopySource: aws.String(bucket + "/limits/large-source")})
		requireAPIError(t, err, "EntityTooLarge")
		requireAbsent(t, direct, bucket, "manifests/copied")

		if got := reached(func(r harness.ProxiedRequest) bool {
			return r.Method != http.MethodGet && r.Method != http.MethodHead && strings.HasPrefix(r.Path, "/"+bucket+"/manifests/") &&
				!r.Query.Has("uploads") && !r.Query.Has("partNumber")
		}); len(got) != 0 {
			t.Fatalf("refused reference writes reached MinIO:\n  %s", describeProxied(got))
		}
		// At the limit, it is served.
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/at-limit"), Body: bytes.NewReader(ref(maxRef))}); err != nil {
			t.Fatalf("a reference object at the parse limit: %v", err)
		}
	})
}

// TestSecurityAdminToken: with admin.token set, every admin API route and
// the status page refuse a request without the token, with a wrong one, or
// with the token anywhere but an Authorization: Bearer header, and the
// refused calls have no effect (no pass runs, no orphan is deleted or
// adopted, no frontier is recorded); /metrics, /healthz and /readyz stay
// open; the command-line clients need the token too.
func TestSecurityAdminToken(t *testing.T) {
	t.Parallel()
	token := "sgadm-" + randomToken(t, 24)
	nearMiss := token[:len(token)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", token[len(token)-1])+1)%16])
	e := harness.Start(t, harness.Options{Config: map[string]any{"admin": map[string]any{"token": token}}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	direct := e.DirectSDK(t)
	store := newSessionStore(t, e)
	bucket := e.Bucket(t)
	// An upload with a session, and an orphan made on MinIO directly.
	id := createUpload(t, e.SDK(t), bucket, "with-session")
	orphan := createUpload(t, direct, bucket, "orphan")

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(t *testing.T, method, path string, body []byte, authorization string, cookies ...*http.Cookie) (int, http.Header, []byte) {
		t.Helper()
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, admin+path, r)
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	bearer := "Bearer " + token
	status := func(t *testing.T) reclaimStatus {
		t.Helper()
		code, _, b := call(t, http.MethodGet, "/admin/v1/reclaim/status", nil, bearer)
		var st reclaimStatus
		if code != http.StatusOK || json.Unmarshal(b, &st) != nil {
			t.Fatalf("reclaim status with the token: %d %s", code, b)
		}
		return st
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		return status(t).Reclaimer.Leading, "the gateway does not lead the reclaimer election"
	})
	passes := status(t).Pass

	t.Run("probes and metrics stay open", func(t *testing.T) {
		for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
			if code, _, b := call(t, http.MethodGet, p, nil, ""); code != http.StatusOK {
				t.Errorf("GET %s without a token: %d %s", p, code, b)
			}
		}
	})

	orphanRef, _ := json.Marshal(map[string]any{"refs": []map[string]string{{"bucket": bucket, "key": "orphan", "upload_id": orphan}}, "confirm": true, "principal": "mallory"})
	routes := []struct {
		method, path string
		body         []byte
	}{
		{http.MethodGet, "/admin/v1/sessions", nil},
		{http.MethodGet, "/admin/v1/sessions?state=active", nil},
		{http.MethodGet, "/admin/v1/sessions/" + bucket + "/" + url.PathEscape(id), nil},
		{http.MethodGet, "/admin/v1/reclaim/status", nil},
		{http.MethodPost, "/admin/v1/reclaim/run", []byte(`{}`)},
		{http.MethodGet, "/admin/v1/reclaim/plan", nil},
		{http.MethodGet, "/admin/v1/reclaim/reports", nil},
		{http.MethodGet, "/admin/v1/reclaim/orphans", nil},
		{http.MethodPost, "/admin/v1/reclaim/orphans/adopt", orphanRef},
		{http.MethodPost, "/admin/v1/reclaim/orphans/delete", orphanRef},
		{http.MethodGet, "/admin/v1/frontiers", nil},
		{http.MethodPost, "/admin/v1/frontiers/mallory-plane", []byte(`{"revision":999999}`)},
		{http.MethodGet, "/admin/v1/trash", nil},
		{http.MethodPost, "/admin/v1/trash/restore", []byte(`{"bucket":"` + bucket + `","key":"x"}`)},
		{http.MethodGet, "/", nil},
		{http.MethodGet, "/status", nil},
		{http.MethodGet, "/admin/v1/no-such-route", nil},
		{http.MethodDelete, "/admin/v1/sessions", nil},
		{http.MethodPut, "/admin/v1/reclaim/run", nil},
		// Other spellings of the same paths.
		{http.MethodGet, "/admin/v1/%73essions", nil},
		{http.MethodGet, "/admin/v1/sessions/", nil},
		{http.MethodGet, "/admin/v1/reclaim/../sessions", nil},
		{http.MethodGet, "//admin/v1/sessions", nil},
		{http.MethodPost, "/admin/v1/reclaim//run", []byte(`{}`)},
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+token))
	leaks := func(b []byte) bool { return bytes.Contains(b, []byte(id)) || bytes.Contains(b, []byte(orphan)) }
	for _, auth := range []struct{ name, header, query string }{
		{"no token", "", ""},
		{"wrong token", "Bearer " + nearMiss, ""},
		{"token with a suffix", bearer + "x", ""},
		{"token prefix", "Bearer " + token[:len(token)/2], ""},
		{"empty bearer", "Bearer ", ""},
		{"token without a scheme", token, ""},
		{"token as basic auth", basic, ""},
		{"token under another scheme", "Token " + token, ""},
		{"token in the query", "", "token=" + token},
		{"token in the query as access_token", "", "access_token=" + token},
	} {
		t.Run(auth.name, func(t *testing.T) {
			for _, rt := range routes {
				path := rt.path
				if auth.query != "" {
					sep := "?"
					if strings.Contains(path, "?") {
						sep = "&"
					}
					path += sep + auth.query
				}
				code, hdr, b := call(t, rt.method, path, rt.body, auth.header)
				requireAdminRefusal(t, rt.method+" "+path+" with "+auth.name, code, hdr, b, leaks,
					func(loc string) (int, http.Header, []byte) { return call(t, rt.method, loc, rt.body, auth.header) })
			}
		})
	}

	// The status page's sign-in: a browser posts the token once and gets
	// a cookie that lets it read the page, and nothing else.
	t.Run("status page sign-in", func(t *testing.T) {
		form := func(tok string) (int, http.Header, []byte) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, admin+"/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header, b
		}
		for _, tok := range []string{nearMiss, "", token + " ", strings.ToUpper(token)} {
			code, hdr, b := form(tok)
			if code < 400 || len(hdr.Values("Set-Cookie")) != 0 {
				t.Fatalf("sign-in with a wrong token: %d, cookies %q; body:\n%s", code, hdr.Values("Set-Cookie"), b)
			}
		}
		code, hdr, b := form(token)
		cookies := (&http.Response{Header: hdr}).Cookies()
		if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
			t.Logf("no sign-in form on this build (%d): nothing more to check", code)
			return
		}
		if code >= 400 || len(cookies) == 0 {
			t.Fatalf("sign-in with the token: %d, cookies %q; body:\n%s", code, hdr.Values("Set-Cookie"), b)
		}
		for _, c := range cookies {
			if strings.Contains(c.Value, token) || strings.Contains(c.Value, base64.StdEncoding.EncodeToString([]byte(token))) {
				t.Errorf("cookie %s holds the token", c.Name)
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("cookie %s: HttpOnly %v, SameSite %v; want HttpOnly and SameSite=Strict", c.Name, c.HttpOnly, c.SameSite)
			}
		}
		if code, _, b := call(t, http.MethodGet, "/status", nil, "", cookies...); code != http.StatusOK {
			t.Fatalf("the status page with the sign-in cookie: %d %s", code, b)
		}
		// The cookie is for reading the page: not the API, not a change.
		for _, rt := range routes {
			if statusPage := rt.method == http.MethodGet && (rt.path == "/" || rt.path == "/status"); statusPage {
				continue
			}
			code, hdr, b := call(t, rt.method, rt.path, rt.body, "", cookies...)
			requireAdminRefusal(t, rt.method+" "+rt.path+" with the sign-in cookie", code, hdr, b, leaks,
				func(loc string) (int, http.Header, []byte) { return call(t, rt.method, loc, rt.body, "", cookies...) })
		}
		// A cookie that is not the gateway's is no sign-in.
		forged := *cookies[0]
		forged.Value = strings.Repeat("0", len(forged.Value))
		code, hdr, b = call(t, http.MethodGet, "/status", nil, "", &forged)
		requireAdminRefusal(t, "the status page with a forged cookie", code, hdr, b, leaks, nil)
	})

	t.Run("refused calls had no effect", func(t *testing.T) {
		if got := status(t).Pass; got != passes {
			t.Errorf("the pass count went from %d to %d: a refused run ran", passes, got)
		}
		if ids := backendUploads(t, direct, bucket); !slices.Contains(ids, orphan) {
			t.Errorf("the orphan %s is gone from MinIO: a refused delete deleted it", orphan)
		}
		if _, _, _, found := store.lookup(t, bucket, orphan); found {
			t.Errorf("the orphan %s has a session: a refused adopt adopted it", orphan)
		}
		if code, _, b := call(t, http.MethodGet, "/admin/v1/frontiers", nil, bearer); code != http.StatusOK || bytes.Contains(b, []byte("mallory-plane")) {
			t.Errorf("frontiers with the token: %d %s; want no mallory-plane", code, b)
		}
	})

	t.Run("with the token", func(t *testing.T) {
		for _, rt := range routes[:4] {
			if code, _, b := call(t, rt.method, rt.path, rt.body, bearer); code != http.StatusOK {
				t.Errorf("%s %s with the token: %d %s", rt.method, rt.path, code, b)
			}
		}
		if code, _, b := call(t, http.MethodGet, "/status", nil, "bearer "+token); code != http.StatusOK {
			t.Errorf("the status page with a lower-case scheme: %d %s", code, b)
		}
		if code, _, b := call(t, http.MethodPost, "/admin/v1/reclaim/run", []byte(`{}`), bearer); code != http.StatusOK {
			t.Fatalf("a pass with the token: %d %s", code, b)
		}
		if got := status(t).Pass; got <= passes {
			t.Errorf("the pass count is %d after a run with the token, was %d", got, passes)
		}
	})

	t.Run("command-line clients", func(t *testing.T) {
		for _, args := range [][]string{{"reclaim", "status"}, {"sessions", "list"}, {"reclaim", "run"}} {
			args = append(args, "--admin", admin)
			code, out, errOut := runSweepgate(t, nil, args...)
			if code != 5 || !strings.Contains(errOut, "SWEEPGATE_ADMIN_TOKEN") {
				t.Errorf("sweepgate %s without a token: exit %d, want 5 naming SWEEPGATE_ADMIN_TOKEN\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
			}
			code, out, errOut = runSweepgate(t, []string{"SWEEPGATE_ADMIN_TOKEN=" + nearMiss}, args...)
			if code != 5 || strings.Contains(out+errOut, nearMiss) {
				t.Errorf("sweepgate %s with a wrong token: exit %d, want 5 without quoting the token\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
			}
		}
		if code, out, errOut := runSweepgate(t, []string{"SWEEPGATE_ADMIN_TOKEN=" + token}, "reclaim", "status", "--admin", admin); code != 0 {
			t.Errorf("sweepgate reclaim status with the token: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		file := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := runSweepgate(t, nil, "sessions", "list", "--admin", admin, "--token-file", file); code != 0 {
			t.Errorf("sweepgate sessions list --token-file: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
}

// requireAdminRefusal checks an admin listener's answer to a request
// without the right token: 401 with WWW-Authenticate: Bearer and the API's
// error code, or a redirect (to the status page's sign-in form, or to the
// clean form of a path) whose target refuses in turn or is the sign-in
// form; never data. follow requests a redirect's target (nil: none
// expected).
func requireAdminRefusal(t *testing.T, what string, code int, hdr http.Header, b []byte, leaks func([]byte) bool, follow func(loc string) (int, http.Header, []byte)) {
	t.Helper()
	if leaks(b) {
		t.Errorf("%s: answered with upload data: %s", what, b)
	}
	switch {
	case code == http.StatusUnauthorized:
		if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 with WWW-Authenticate %q", what, hdr.Get("WWW-Authenticate"))
		}
		if !strings.Contains(string(b), `"unauthorized"`) && !strings.Contains(string(b), `action="/login"`) {
			t.Errorf("%s: 401 with body %s", what, b)
		}
	case code == http.StatusSeeOther && hdr.Get("Location") == "/login":
		// The status page sends a browser to its sign-in form.
	case code >= 300 && code < 400 && follow != nil:
		loc := hdr.Get("Location")
		c2, h2, b2 := follow(loc)
		if c2 == http.StatusOK && strings.Contains(string(b2), `action="/login"`) && !leaks(b2) {
			return
		}
		requireAdminRefusal(t, what+" redirected to "+loc, c2, h2, b2, leaks, nil)
	default:
		t.Errorf("%s: %d %s, want 401", what, code, b)
	}
}

// signatureRE finds the signature of an Authorization header.
var signatureRE = regexp.MustCompile(`Signature=([0-9a-f]{64})`)

// TestSecurityNoSecretsLeak runs a workload with distinctive secrets (a
// client secret, the backend's secret, the admin token and a near miss of
// it) through every path that logs — successes, refused signatures, expired
// and altered presigned URLs, a body cut short, multipart calls, admin
// calls with and without the token — and checks that none of the secrets,
// none of the Authorization headers' signatures and none of the presigned
// URLs' X-Amz-Signature values appears in the gateway's log (at debug
// level, with its configuration dump), in /metrics, in the admin API's and
// status page's answers, in the S3 error bodies, in `serve --help` run with
// the secrets in its environment, or in the errors of a configuration
// that fails to load.
func TestSecurityNoSecretsLeak(t *testing.T) {
	t.Parallel()
	client := harness.Credential{AccessKey: "AKIALEAKCHECK0001", SecretKey: "CliSecret-" + randomToken(t, 16), Principal: "leak-checker"}
	adminToken := "AdmTok-" + randomToken(t, 16)
	nearMiss := adminToken[:len(adminToken)-4] + "zzzz"
	e := harness.Start(t, harness.Options{
		Credentials:              []harness.Credential{client},
		RejectBackendCredentials: true,
		LogLevel:                 "debug",
		Env:                      []string{"SWEEPGATE_ADMIN_TOKEN=" + adminToken},
	})
	e.RequireGateway(t)
	secrets := map[string]string{
		"client secret":          client.SecretKey,
		"backend secret":         e.MinIO.SecretKey,
		"admin token":            adminToken,
		"near miss of the token": nearMiss,
	}
	// signatures holds every signature a request carried, by where it came
	// from; texts holds every text the gateway produced that is checked.
	signatures := map[string]string{}
	texts := map[string]string{}
	ctx := t.Context()
	hc := e.HTTPClient(t)
	bucket := e.Bucket(t)

	rec := &harness.Recorder{}
	c := e.SDK(t, harness.WithCredentials(client.AccessKey, client.SecretKey), harness.WithTransport(rec.Wrap))
	mcRec := &harness.Recorder{}
	mc := e.MinioGo(t, harness.WithCredentials(client.AccessKey, client.SecretKey), harness.WithTransport(mcRec.Wrap))
	wrongRec := &harness.Recorder{}
	wrong := e.SDK(t, harness.WithCredentials(client.AccessKey, "not-"+client.SecretKey), harness.WithTransport(wrongRec.Wrap))

	// Ordinary work, with both clients.
	d := harness.NewData(7601, 300*kib)
	putData(t, c, bucket, "plain", d)
	requireObject(t, c, bucket, "plain", d)
	if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, bucket, "minio-go", d.Reader(), d.Size, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	p := harness.NewData(7602, 5*mib)
	id := createUpload(t, c, bucket, "multipart")
	parts := []s3types.CompletedPart{mustUploadPart(t, c, bucket, "multipart", id, 1, p.Section(0, p.Size))}
	if _, err := completeUpload(ctx, c, bucket, "multipart", id, parts); err != nil {
		t.Fatal(err)
	}
	if err := abortUpload(ctx, c, bucket, "aborted", createUpload(t, c, bucket, "aborted")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("minio-go")}); err != nil {
		t.Fatal(err)
	}
	// Refused signatures.
	_, err := wrong.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("refused"), Body: bytes.NewReader([]byte("x"))})
	requireAPIError(t, err, "SignatureDoesNotMatch")
	// The signature the gateway expected must not come back in the error
	// or the log: it would be a valid signature for that request.
	at := time.Now()
	forged := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "forged"), []byte("forged"))
	if err := harness.SignV4(ctx, forged, client.AccessKey, "guess-"+client.SecretKey, e.Region, harness.SHA256Hex([]byte("forged")), at); err != nil {
		t.Fatal(err)
	}
	right := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "forged"), []byte("forged"))
	if err := harness.SignV4(ctx, right, client.AccessKey, client.SecretKey, e.Region, harness.SHA256Hex([]byte("forged")), at); err != nil {
		t.Fatal(err)
	}
	signatures["the signature the gateway expected"] = signatureRE.FindStringSubmatch(right.Header.Get("Authorization"))[1]
	signatures["a forged request's signature"] = signatureRE.FindStringSubmatch(forged.Header.Get("Authorization"))[1]
	resp := do(t, hc, forged)
	_, body, _ := harness.ReadS3Error(resp)
	texts["the error body of a forged request"] = body
	// Presigned URLs: used, expired, altered, and one whose body is cut
	// short.
	presign := s3.NewPresignClient(c)
	pget, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("plain")})
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, pget.URL, nil)), http.StatusOK)
	expired := secPresign(t, e, client, http.MethodGet, objectURL(e.Endpoint, bucket, "plain"), time.Now().Add(-time.Hour), time.Minute)
	resp = do(t, hc, newRequest(t, http.MethodGet, expired, nil))
	_, body, _ = harness.ReadS3Error(resp)
	texts["the error body of an expired URL"] = body
	altered := secPresign(t, e, client, http.MethodGet, objectURL(e.Endpoint, bucket, "plain"), time.Now(), time.Hour)
	requireS3Error(t, do(t, hc, newRequest(t, http.MethodGet, strings.Replace(altered, "/plain?", "/other?", 1), nil)), http.StatusForbidden, "SignatureDoesNotMatch")
	cut := secPresign(t, e, client, http.MethodPut, objectURL(e.Endpoint, bucket, "cut"), time.Now(), time.Hour)
	if r := sendTruncated(t, newRequest(t, http.MethodPut, cut, nil), d.Bytes(), 1000); r != nil {
		r.Body.Close()
	}
	for what, u := range map[string]string{"presigned GET": pget.URL, "expired URL": expired, "altered URL": altered, "cut-short PUT": cut} {
		signatures[what] = mustQuery(t, u, "X-Amz-Signature")
	}
	for _, r := range append(append(rec.Requests(), mcRec.Requests()...), wrongRec.Requests()...) {
		if m := signatureRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			signatures[fmt.Sprintf("Authorization of %s %s", r.Method, r.Path)] = m[1]
		}
	}
	if len(signatures) < 10 {
		t.Fatalf("only %d signatures recorded; the workload did not run as meant", len(signatures))
	}

	// The admin API, with the token, without it and with a near miss; and
	// its command-line clients.
	adminGet := func(path, authorization string) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Gateway.AdminEndpoint+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp := do(t, http.DefaultClient, req)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Status + "\n" + string(b)
	}
	for _, path := range []string{"/admin/v1/sessions", "/admin/v1/reclaim/status", "/status", "/admin/v1/sessions/" + bucket + "/" + url.PathEscape(id)} {
		texts["admin "+path+" with the token"] = adminGet(path, "Bearer "+adminToken)
		texts["admin "+path+" with a near miss"] = adminGet(path, "Bearer "+nearMiss)
	}
	for _, env := range [][]string{{"SWEEPGATE_ADMIN_TOKEN=" + adminToken}, {"SWEEPGATE_ADMIN_TOKEN=" + nearMiss}} {
		_, out, errOut := runSweepgate(t, env, "reclaim", "status", "--admin", e.Gateway.AdminEndpoint)
		texts["sweepgate reclaim status with "+strings.SplitN(env[0], "=", 2)[0]] = out + errOut
	}

	metrics, err := e.Gateway.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	texts["/metrics"] = metrics

	// serve --help with every secret in its environment and on its
	// command line.
	secretEnv := []string{
		"SWEEPGATE_ADMIN_TOKEN=" + adminToken,
		"SWEEPGATE_BACKEND_SECRET_KEY=" + e.MinIO.SecretKey,
		"SWEEPGATE_CREDENTIALS=" + client.AccessKey + ":" + client.SecretKey + ":" + client.Principal,
	}
	_, out, errOut := runSweepgate(t, secretEnv, "serve", "--config", e.Gateway.ConfigFile, "--admin-token", adminToken, "--help")
	if !strings.Contains(out+errOut, "admin.token") {
		t.Fatalf("serve --help does not describe admin.token:\n%s%s", out, errOut)
	}
	texts["serve --help"] = out + errOut

	// Configurations that fail to load, holding the secrets: the errors
	// must name what is wrong without quoting them. Listeners and etcd
	// point elsewhere in case one did load.
	elsewhere := []string{
		"SWEEPGATE_LISTEN=127.0.0.1:0", "SWEEPGATE_TLS_LISTEN=", "SWEEPGATE_ADMIN_LISTEN=127.0.0.1:0",
		"SWEEPGATE_ETCD_EMBEDDED_DATA_DIR=" + t.TempDir(),
		"SWEEPGATE_ETCD_EMBEDDED_CLIENT_URL=http://127.0.0.1:0", "SWEEPGATE_ETCD_EMBEDDED_PEER_URL=http://127.0.0.1:0",
	}
	shortToken := "short" + nearMiss[:4]
	for _, tc := range []struct {
		what, names string
		env         []string
	}{
		{"a short admin token", "admin.token", []string{"SWEEPGATE_ADMIN_TOKEN=" + shortToken}},
		{"a credential without a secret separator", "SWEEPGATE_CREDENTIALS", []string{"SWEEPGATE_CREDENTIALS=" + client.SecretKey}},
		{"an admin token and a token file", "admin.token_file", []string{"SWEEPGATE_ADMIN_TOKEN=" + adminToken, "SWEEPGATE_ADMIN_TOKEN_FILE=" + filepath.Join(t.TempDir(), "none")}},
	} {
		code, out, errOut := runSweepgate(t, append(slices.Clone(elsewhere), tc.env...), "serve", "--config", e.Gateway.ConfigFile)
		if code == 0 || !strings.Contains(out+errOut, tc.names) {
			t.Fatalf("serve with %s: exit %d, want a failure naming %s:\n%s%s", tc.what, code, tc.names, out, errOut)
		}
		texts["the error of a configuration with "+tc.what] = out + errOut
	}
	secrets["the short admin token"] = shortToken

	// The gateway's own log, last: everything above has been logged.
	log := e.Gateway.Log()
	for _, want := range []string{`"msg":"configuration"`, "[redacted]", `"msg":"request"`, "admin API: request refused"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the gateway's log has no %s; the check would prove nothing", want)
		}
	}
	texts["the gateway's log"] = log

	t.Logf("looked for %d secrets and %d signatures in %d texts (%d bytes of log)", len(secrets), len(signatures), len(texts), len(log))
	for where, text := range texts {
		for what, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the %s:\n%s", where, what, excerpt(text, s))
			}
		}
		for what, sig := range signatures {
			if strings.Contains(text, sig) {
				t.Errorf("%s holds %s:\n%s", where, what, excerpt(text, sig))
			}
		}
	}
}

// excerpt returns the line of text around the first occurrence of s.
func excerpt(text, s string) string {
	i := strings.Index(text, s)
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text) - i
	}
	line := text[start : i+end]
	if len(line) > 600 {
		line = line[:600] + "..."
	}
	return "  " + line
}
