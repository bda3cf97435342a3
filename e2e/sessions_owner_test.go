//go:build e2e

package e2e

// Upload sessions: only their owner (or an admin principal) acts on them,
// and calls the gateway cannot judge are refused.

import (
	"maps"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// ownerCreds are the principals of the ownership tests.
var ownerCreds = []harness.Credential{
	{AccessKey: "alicekey", SecretKey: "alice-secret-0123456789", Principal: "alice"},
	{AccessKey: "bobkey", SecretKey: "bob-secret-0123456789", Principal: "bob"},
	{AccessKey: "opskey", SecretKey: "ops-secret-0123456789", Principal: "ops"},
}

// TestSessionsOwnership checks that only an upload's owner (or an admin
// principal) may act on it, and that a refused call changes nothing, in
// etcd or on MinIO; and that with enforce_ownership off anyone may.
func TestSessionsOwnership(t *testing.T) {
	alice, bob, ops := ownerCreds[0], ownerCreds[1], ownerCreds[2]
	client := func(t *testing.T, e *harness.Env, c harness.Credential) *s3.Client {
		return e.SDK(t, harness.WithCredentials(c.AccessKey, c.SecretKey))
	}
	part := harness.NewData(5201, 5*mib)
	tail := harness.NewData(5202, 321)

	type upload = ownerUpload
	calls := ownerCalls(tail)
	// start makes an upload of alice's with one part, and a source object
	// for part copies.
	start := func(t *testing.T, e *harness.Env, key string) (upload, []s3types.CompletedPart) {
		t.Helper()
		ac := client(t, e, alice)
		bucket := e.Bucket(t)
		putData(t, ac, bucket, "source", tail)
		u := upload{bucket: bucket, key: key}
		u.id = createUpload(t, ac, bucket, key)
		first := mustUploadPart(t, ac, bucket, key, u.id, 1, part.Section(0, part.Size))
		return u, []s3types.CompletedPart{{PartNumber: first.PartNumber, ETag: first.ETag}}
	}

	t.Run("enforced", func(t *testing.T) {
		e := harness.Start(t, harness.Options{
			Credentials: ownerCreds,
			Config:      map[string]any{"sessions": map[string]any{"admin_principals": []string{"ops"}}},
		})
		store := newSessionStore(t, e)
		direct := e.DirectSDK(t)
		u, parts := start(t, e, "owned")
		if rec := store.session(t, u.bucket, u.id); rec.Owner != "alice" {
			t.Fatalf("session owner %q, want alice", rec.Owner)
		}
		bc := client(t, e, bob)
		for _, call := range calls {
			t.Run("other principal "+call.name, func(t *testing.T) {
				before := store.dump(t)
				partsBefore := backendPartNumbers(t, direct, u.bucket, u.key, u.id)
				requireAPIError(t, call.do(t, bc, u, parts), "AccessDenied")
				requireUnchanged(t, "a refused "+call.name, before, store.dump(t))
				if after := backendPartNumbers(t, direct, u.bucket, u.key, u.id); !maps.Equal(partsBefore, after) {
					t.Fatalf("MinIO's parts changed from %v to %v", partsBefore, after)
				}
				requireAbsent(t, direct, u.bucket, u.key)
			})
		}
		// The backend's own key is a principal of its own, not an admin.
		requireAPIError(t, calls[0].do(t, e.SDK(t), u, parts), "AccessDenied")
		store.requireState(t, u.bucket, u.id, "active")

		oc := client(t, e, ops)
		t.Run("admin principal", func(t *testing.T) {
			for _, call := range calls[:3] {
				if err := call.do(t, oc, u, parts); err != nil {
					t.Fatalf("admin %s: %v", call.name, err)
				}
			}
			out, err := completeUpload(t.Context(), oc, u.bucket, u.key, u.id, parts)
			if err != nil {
				t.Fatalf("admin complete: %v", err)
			}
			requireObjectSum(t, direct, u.bucket, u.key, part.SHA256(), part.Size)
			requireCompletedSession(t, store, u.bucket, u.id, aws.ToString(out.ETag))
			other, _ := start(t, e, "owned-aborted")
			if err := abortUpload(t.Context(), oc, other.bucket, other.key, other.id); err != nil {
				t.Fatalf("admin abort: %v", err)
			}
			store.requireState(t, other.bucket, other.id, "aborted")
			requireUploadGone(t, direct, other.bucket, other.key, other.id)
		})
	})

	t.Run("not enforced", func(t *testing.T) {
		e := harness.Start(t, harness.Options{
			Credentials: ownerCreds,
			Config:      map[string]any{"sessions": map[string]any{"enforce_ownership": false}},
		})
		store := newSessionStore(t, e)
		direct := e.DirectSDK(t)
		bc := client(t, e, bob)
		u, parts := start(t, e, "shared")
		for _, call := range calls[:3] {
			if err := call.do(t, bc, u, parts); err != nil {
				t.Fatalf("%s by another principal with ownership off: %v", call.name, err)
			}
		}
		out, err := completeUpload(t.Context(), bc, u.bucket, u.key, u.id, parts)
		if err != nil {
			t.Fatalf("complete by another principal with ownership off: %v", err)
		}
		requireCompletedSession(t, store, u.bucket, u.id, aws.ToString(out.ETag))
		other, _ := start(t, e, "shared-aborted")
		if err := abortUpload(t.Context(), bc, other.bucket, other.key, other.id); err != nil {
			t.Fatalf("abort by another principal with ownership off: %v", err)
		}
		store.requireState(t, other.bucket, other.id, "aborted")
		requireUploadGone(t, direct, other.bucket, other.key, other.id)
	})
}

// ownerUpload is an upload of alice's in TestSessionsOwnership.
type ownerUpload struct{ bucket, key, id string }

// ownerCall is an upload call a principal may make, returning the client's
// error.
type ownerCall struct {
	name string
	do   func(t *testing.T, c *s3.Client, u ownerUpload, parts []s3types.CompletedPart) error
}

// ownerCalls are the upload calls a principal may make; UploadPart sends
// tail as part 2.
func ownerCalls(tail harness.Data) []ownerCall {
	return []ownerCall{
		{"UploadPart", func(t *testing.T, c *s3.Client, u ownerUpload, _ []s3types.CompletedPart) error {
			_, err := uploadPart(t.Context(), c, u.bucket, u.key, u.id, 2, tail.Section(0, tail.Size))
			return err
		}},
		{"UploadPartCopy", func(t *testing.T, c *s3.Client, u ownerUpload, _ []s3types.CompletedPart) error {
			_, err := c.UploadPartCopy(t.Context(), &s3.UploadPartCopyInput{
				Bucket: aws.String(u.bucket), Key: aws.String(u.key), UploadId: aws.String(u.id), PartNumber: aws.Int32(3),
				CopySource: aws.String(u.bucket + "/source"),
			})
			return err
		}},
		{"ListParts", func(t *testing.T, c *s3.Client, u ownerUpload, _ []s3types.CompletedPart) error {
			_, err := c.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(u.bucket), Key: aws.String(u.key), UploadId: aws.String(u.id)})
			return err
		}},
		{"CompleteMultipartUpload", func(t *testing.T, c *s3.Client, u ownerUpload, parts []s3types.CompletedPart) error {
			_, err := completeUpload(t.Context(), c, u.bucket, u.key, u.id, parts)
			return err
		}},
		{"AbortMultipartUpload", func(t *testing.T, c *s3.Client, u ownerUpload, _ []s3types.CompletedPart) error {
			return abortUpload(t.Context(), c, u.bucket, u.key, u.id)
		}},
		{"AbortMultipartUpload with Idempotency-Key", func(t *testing.T, c *s3.Client, u ownerUpload, _ []s3types.CompletedPart) error {
			_, err := c.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{Bucket: aws.String(u.bucket), Key: aws.String(u.key), UploadId: aws.String(u.id)},
				withIdempotencyKey("steal-"+u.id))
			return err
		}},
	}
}

// TestSessionsRefusedCalls sends malformed completes, part numbers outside
// 1..10000, parts out of order and unknown upload ids, and checks that each
// gets S3's error and changes nothing in etcd or on MinIO.
func TestSessionsRefusedCalls(t *testing.T) {
	e := harness.Start(t)
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	hc := e.HTTPClient(t)
	bucket := e.Bucket(t)
	key := "refused"
	id := createUpload(t, c, bucket, key)
	p1 := harness.NewData(5301, 5*mib)
	p2 := harness.NewData(5302, 100)
	parts := []s3types.CompletedPart{
		mustUploadPart(t, c, bucket, key, id, 1, p1.Section(0, p1.Size)),
		mustUploadPart(t, c, bucket, key, id, 2, p2.Section(0, p2.Size)),
	}
	for i := range parts {
		parts[i].ChecksumCRC32 = nil
	}
	part := func(n int32) s3types.CompletedPart {
		for _, p := range parts {
			if aws.ToInt32(p.PartNumber) == n {
				return p
			}
		}
		return s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: parts[0].ETag}
	}
	const unknown = "bm90LWFuLXVwbG9hZC1pZA"
	tests := []struct {
		name   string
		call   rawCall
		status int
		code   string
	}{
		{"complete not XML", raw(e, http.MethodPost, bucket, key, uploadQ(id), []byte("this is not xml")), 400, "MalformedXML"},
		{"complete without parts", raw(e, http.MethodPost, bucket, key, uploadQ(id), []byte("<CompleteMultipartUpload></CompleteMultipartUpload>")), 400, "MalformedXML"},
		{"complete truncated", raw(e, http.MethodPost, bucket, key, uploadQ(id), completeXML(parts...)[:60]), 400, "MalformedXML"},
		{"complete part 0", raw(e, http.MethodPost, bucket, key, uploadQ(id), completeXML(part(0), part(1))), 400, "InvalidArgument"},
		{"complete part 10001", raw(e, http.MethodPost, bucket, key, uploadQ(id), completeXML(part(1), part(10001))), 400, "InvalidArgument"},
		{"complete out of order", raw(e, http.MethodPost, bucket, key, uploadQ(id), completeXML(part(2), part(1))), 400, "InvalidPartOrder"},
		{"complete repeated part", raw(e, http.MethodPost, bucket, key, uploadQ(id), completeXML(part(1), part(1), part(2))), 400, "InvalidPartOrder"},
		{"part 0", raw(e, http.MethodPut, bucket, key, uploadQ(id, "partNumber", "0"), []byte("x")), 400, "InvalidArgument"},
		{"part 10001", raw(e, http.MethodPut, bucket, key, uploadQ(id, "partNumber", "10001"), []byte("x")), 400, "InvalidArgument"},
		{"part -1", raw(e, http.MethodPut, bucket, key, uploadQ(id, "partNumber", "-1"), []byte("x")), 400, "InvalidArgument"},
		{"part not a number", raw(e, http.MethodPut, bucket, key, uploadQ(id, "partNumber", "one"), []byte("x")), 400, "InvalidArgument"},
		{"part of an unknown upload", raw(e, http.MethodPut, bucket, key, uploadQ(unknown, "partNumber", "1"), []byte("x")), 404, "NoSuchUpload"},
		{"list parts of an unknown upload", raw(e, http.MethodGet, bucket, key, uploadQ(unknown), nil), 404, "NoSuchUpload"},
		{"complete an unknown upload", raw(e, http.MethodPost, bucket, key, uploadQ(unknown), completeXML(parts...)), 404, "NoSuchUpload"},
		// An upload id without a session passes through to MinIO (it may
		// be older than the gateway), so the answer is MinIO's own: it
		// answers an abort of an unknown upload with 204, where S3 says
		// NoSuchUpload.
		{"abort an unknown upload", raw(e, http.MethodDelete, bucket, key, uploadQ(unknown), nil), 0, ""},
		{"part for the upload id under another key", raw(e, http.MethodPut, bucket, "other-key", uploadQ(id, "partNumber", "3"), []byte("x")), 404, "NoSuchUpload"},
		{"list parts of the upload id under another key", raw(e, http.MethodGet, bucket, "other-key", uploadQ(id), nil), 404, "NoSuchUpload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := store.dump(t)
			partsBefore := backendPartNumbers(t, direct, bucket, key, id)
			got := tc.call.must(t, hc)
			if tc.status == 0 {
				asMinIO := tc.call
				asMinIO.endpoint = e.MinIO.Endpoint
				want := asMinIO.must(t, hc)
				if got.status != want.status || got.errorCode() != want.errorCode() {
					t.Fatalf("got %d %q, MinIO answers %d %q", got.status, got.errorCode(), want.status, want.errorCode())
				}
			} else {
				got.requireError(t, tc.status, tc.code)
			}
			requireUnchanged(t, tc.name, before, store.dump(t))
			if after := backendPartNumbers(t, direct, bucket, key, id); !maps.Equal(partsBefore, after) {
				t.Fatalf("MinIO's parts changed from %v to %v", partsBefore, after)
			}
		})
	}
	// The upload is still whole and completes.
	store.requireState(t, bucket, id, "active")
	out, err := completeUpload(t.Context(), c, bucket, key, id, parts)
	if err != nil {
		t.Fatalf("complete after the refused calls: %v", err)
	}
	sum, size := concatSum(t, p1.Reader(), p2.Reader())
	requireObjectSum(t, direct, bucket, key, sum, size)
	requireCompletedSession(t, store, bucket, id, aws.ToString(out.ETag))
}
