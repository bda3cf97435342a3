//go:build e2e

package e2e

// Security: one principal cannot reach another's multipart uploads.

import (
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

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

	t.Run("listing", func(t *testing.T) { isolationListing(t, e, direct, ac, bc, oc, bucket, id, bobsOwn) })

	calls := bobsCallsOnUpload(t, e, hc, bucket, key, id, abortedKey, aborted, aliceIdemKey, parts)
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

// isolationListing checks that ListMultipartUploads shows bob his own upload
// bobsOwn and not alice's upload id, alice hers and not his, and the admin
// principal both, through aws-sdk-go-v2 (ac, bc, oc) and minio-go.
func isolationListing(t *testing.T, e *harness.Env, direct, ac, bc, oc *s3.Client, bucket, id, bobsOwn string) {
	if got := backendUploads(t, direct, bucket); !slices.Contains(got, id) || !slices.Contains(got, bobsOwn) {
		t.Fatalf("MinIO holds uploads %v; want alice's %s and bob's %s", got, id, bobsOwn)
	}
	if got := backendUploads(t, bc, bucket); slices.Contains(got, id) || !slices.Contains(got, bobsOwn) {
		t.Fatalf("bob's ListMultipartUploads shows %v; want his own %s and not alice's %s", got, bobsOwn, id)
	}
	out, err := bc.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String("alice/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Fatalf("bob's listing of prefix alice/ shows %d uploads", len(out.Uploads))
	}
	res, err := minio.Core{Client: e.MinioGo(t, harness.WithCredentials(secBob.AccessKey, secBob.SecretKey))}.
		ListMultipartUploads(t.Context(), bucket, "", "", "", "", 1000)
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
}

// isolationCall is one call bob makes on alice's upload: each must be
// refused.
type isolationCall struct {
	name string
	call func(t *testing.T) answer
}

// bobsCallsOnUpload returns the calls bob makes, with header signatures,
// presigned URLs and minio-go, on alice's upload id of key, with parts
// uploaded. Two of them send alice's Idempotency-Key aliceIdemKey, under
// which her abort of the upload aborted of abortedKey is recorded.
func bobsCallsOnUpload(t *testing.T, e *harness.Env, hc *http.Client, bucket, key, id, abortedKey, aborted, aliceIdemKey string, parts []s3types.CompletedPart) []isolationCall {
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
	return []isolationCall{
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
}
