//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// refusalFixture is a bucket holding exactly one object, which every refused
// request must leave as it is, with nothing else appearing beside it.
type refusalFixture struct {
	e        *harness.Env
	bucket   string
	existing harness.Data
	etag     string
}

const existingKey = "existing"

func newRefusalFixture(t *testing.T, e *harness.Env) *refusalFixture {
	t.Helper()
	f := &refusalFixture{e: e, bucket: e.Bucket(t), existing: harness.NewData(400, 100*kib)}
	out := putData(t, e.DirectSDK(t), f.bucket, existingKey, f.existing)
	f.etag = aws.ToString(out.ETag)
	return f
}

// url returns the gateway URL of key in the fixture's bucket.
func (f *refusalFixture) url(key string) string { return objectURL(f.e.Endpoint, f.bucket, key) }

// requireUnchanged checks on the backend that the bucket still holds just
// the existing object with its bytes, and no multipart upload.
func (f *refusalFixture) requireUnchanged(t *testing.T) {
	t.Helper()
	direct := f.e.DirectSDK(t)
	out, err := direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(f.bucket)})
	if err != nil {
		t.Fatalf("ListObjectsV2 on the backend: %v", err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if len(keys) != 1 || keys[0] != existingKey || aws.ToString(out.Contents[0].ETag) != f.etag {
		t.Fatalf("the backend's bucket changed: keys %v (want just %s with ETag %s)", keys, existingKey, f.etag)
	}
	requireObject(t, direct, f.bucket, existingKey, f.existing)
	requireNoUploads(t, direct, f.bucket)
}

// refusal is a request the gateway must refuse with an S3 XML error.
type refusal struct {
	name   string
	req    func(t *testing.T) *http.Request
	status int
	code   string
	// gateway marks a request that MinIO alone does not refuse (direct
	// mode skips it).
	gateway bool
	// minioStatus and minioCode are what MinIO answers where it differs
	// from S3 (and so from the gateway), for direct mode.
	minioStatus int
	minioCode   string
}

func runRefusals(t *testing.T, f *refusalFixture, cases []refusal) {
	t.Helper()
	hc := f.e.HTTPClient(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gateway {
				f.e.RequireGateway(t)
			}
			status, code := tc.status, tc.code
			if harness.DirectMode() && tc.minioCode != "" {
				status, code = tc.minioStatus, tc.minioCode
			}
			resp := do(t, hc, tc.req(t))
			requireS3Error(t, resp, status, code)
			f.requireUnchanged(t)
		})
	}
}

// TestRefusedSignatures covers requests whose credentials or signature are
// wrong: each is refused with S3's code and changes nothing on the backend.
func TestRefusedSignatures(t *testing.T) {
	e := harness.Start(t)
	f := newRefusalFixture(t, e)
	body := harness.NewData(401, 8*kib).Bytes()
	now := time.Now()

	signWith := func(t *testing.T, req *http.Request, ak, sk string, at time.Time) *http.Request {
		t.Helper()
		if err := harness.SignV4(t.Context(), req, ak, sk, e.Region, harness.SHA256Hex(body), at); err != nil {
			t.Fatal(err)
		}
		return req
	}
	withAuth := func(auth string) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			req := newRequest(t, http.MethodPut, f.url("malformed"), body)
			req.Header.Set("X-Amz-Date", now.UTC().Format("20060102T150405Z"))
			req.Header.Set("X-Amz-Content-Sha256", harness.SHA256Hex(body))
			req.Header.Set("Authorization", auth)
			return req
		}
	}
	date := now.UTC().Format("20060102")
	sig := strings.Repeat("0a", 32)
	signedHeaders := "host;x-amz-content-sha256;x-amz-date"

	runRefusals(t, f, []refusal{
		{name: "wrong secret PUT", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			return signWith(t, newRequest(t, http.MethodPut, f.url("wrong-secret"), body), e.AccessKey, e.SecretKey+"x", now)
		}},
		{name: "wrong secret overwrite", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			return signWith(t, newRequest(t, http.MethodPut, f.url(existingKey), body), e.AccessKey, e.SecretKey+"x", now)
		}},
		{name: "wrong secret DELETE", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			req := newRequest(t, http.MethodDelete, f.url(existingKey), nil)
			if err := harness.SignV4(t.Context(), req, e.AccessKey, "not-the-secret", e.Region, harness.EmptySHA256, now); err != nil {
				t.Fatal(err)
			}
			return req
		}},
		{name: "wrong secret GET", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			req := newRequest(t, http.MethodGet, f.url(existingKey), nil)
			if err := harness.SignV4(t.Context(), req, e.AccessKey, "not-the-secret", e.Region, harness.EmptySHA256, now); err != nil {
				t.Fatal(err)
			}
			return req
		}},
		{name: "signed header changed after signing", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			req := newRequest(t, http.MethodPut, f.url("changed-header"), body)
			req.Header.Set("X-Amz-Meta-Role", "reader")
			signWith(t, req, e.AccessKey, e.SecretKey, now)
			req.Header.Set("X-Amz-Meta-Role", "admin")
			return req
		}},
		{name: "path changed after signing", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			req := signWith(t, newRequest(t, http.MethodPut, f.url("signed-path"), body), e.AccessKey, e.SecretKey, now)
			req.URL.Path = "/" + f.bucket + "/other-path"
			return req
		}},
		{name: "unknown access key", status: 403, code: "InvalidAccessKeyId", req: func(t *testing.T) *http.Request {
			return signWith(t, newRequest(t, http.MethodPut, f.url("unknown-key"), body), "AKIANOSUCHKEY0000000", e.SecretKey, now)
		}},
		{name: "clock an hour behind", status: 403, code: "RequestTimeTooSkewed", req: func(t *testing.T) *http.Request {
			return signWith(t, newRequest(t, http.MethodPut, f.url("skewed-past"), body), e.AccessKey, e.SecretKey, now.Add(-time.Hour))
		}},
		{name: "clock an hour ahead", status: 403, code: "RequestTimeTooSkewed", req: func(t *testing.T) *http.Request {
			return signWith(t, newRequest(t, http.MethodPut, f.url("skewed-future"), body), e.AccessKey, e.SecretKey, now.Add(time.Hour))
		}},
		// S3 answers AuthorizationHeaderMalformed to all of these; MinIO
		// differs.
		{name: "malformed: credential scope too short", status: 400, code: "AuthorizationHeaderMalformed",
			minioStatus: 400, minioCode: "AuthorizationQueryParametersError",
			req: withAuth(fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3, SignedHeaders=%s, Signature=%s", e.AccessKey, date, e.Region, signedHeaders, sig))},
		{name: "malformed: no credential", status: 400, code: "AuthorizationHeaderMalformed",
			minioStatus: 400, minioCode: "MissingFields",
			req: withAuth(fmt.Sprintf("AWS4-HMAC-SHA256 SignedHeaders=%s, Signature=%s", signedHeaders, sig))},
		{name: "malformed: garbage", status: 400, code: "AuthorizationHeaderMalformed",
			minioStatus: 400, minioCode: "MissingFields",
			req: withAuth("AWS4-HMAC-SHA256 this is not an authorization header")},
		{name: "malformed: wrong region", status: 400, code: "AuthorizationHeaderMalformed",
			minioStatus: 403, minioCode: "SignatureDoesNotMatch",
			req: withAuth(fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s/eu-north-9/s3/aws4_request, SignedHeaders=%s, Signature=%s", e.AccessKey, date, signedHeaders, sig))},
		{name: "anonymous PUT", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodPut, f.url("anonymous"), body)
		}},
		{name: "anonymous GET", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodGet, f.url(existingKey), nil)
		}},
		{name: "anonymous DELETE", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodDelete, f.url(existingKey), nil)
		}},
		{name: "anonymous list", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodGet, f.url("")+"?list-type=2", nil)
		}},
		{name: "anonymous ListBuckets", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodGet, e.Endpoint+"/", nil)
		}},
		// MinIO accepts Signature V2; the gateway must not.
		{name: "signature V2 PUT", status: 400, code: "InvalidRequest", gateway: true, req: func(t *testing.T) *http.Request {
			req := newRequest(t, http.MethodPut, f.url("sigv2"), body)
			req.Header.Set("Date", now.UTC().Format(http.TimeFormat))
			return signer.SignV2(*req, e.AccessKey, e.SecretKey, false)
		}},
		{name: "signature V2 GET", status: 400, code: "InvalidRequest", gateway: true, req: func(t *testing.T) *http.Request {
			req := newRequest(t, http.MethodGet, f.url(existingKey), nil)
			req.Header.Set("Date", now.UTC().Format(http.TimeFormat))
			return signer.SignV2(*req, e.AccessKey, e.SecretKey, false)
		}},
		{name: "presigned V2 GET", status: 400, code: "InvalidRequest", gateway: true, req: func(t *testing.T) *http.Request {
			req := newRequest(t, http.MethodGet, f.url(existingKey), nil)
			return signer.PreSignV2(*req, e.AccessKey, e.SecretKey, 600, false)
		}},
	})

	// The V2 requests above are valid: MinIO itself accepts them, so the
	// gateway's refusal is its own decision.
	t.Run("signature V2 control on the backend", func(t *testing.T) {
		other := e.Bucket(t)
		req := newRequest(t, http.MethodPut, objectURL(e.MinIO.Endpoint, other, "sigv2"), body)
		req.Header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
		req = signer.SignV2(*req, e.MinIO.AccessKey, e.MinIO.SecretKey, false)
		requireStatus(t, do(t, e.HTTPClient(t), req), http.StatusOK)
		get := signer.PreSignV2(*newRequest(t, http.MethodGet, objectURL(e.MinIO.Endpoint, other, "sigv2"), nil), e.MinIO.AccessKey, e.MinIO.SecretKey, 600, false)
		if got := requireStatus(t, do(t, e.HTTPClient(t), get), http.StatusOK); !bytes.Equal(got, body) {
			t.Fatal("presigned V2 GET on the backend returned other bytes")
		}
	})

	t.Run("aws-sdk-go-v2 wrong secret", func(t *testing.T) {
		c := e.SDK(t, harness.WithCredentials(e.AccessKey, "wrong-"+e.SecretKey))
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String("sdk-wrong-secret"), Body: bytes.NewReader(body)})
		requireAPIError(t, err, "SignatureDoesNotMatch")
		_, err = c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(f.bucket)})
		requireAPIError(t, err, "SignatureDoesNotMatch")
		f.requireUnchanged(t)
	})
	t.Run("aws-sdk-go-v2 unknown access key", func(t *testing.T) {
		c := e.SDK(t, harness.WithCredentials("AKIAUNKNOWNUNKNOWN00", e.SecretKey))
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String("sdk-unknown"), Body: bytes.NewReader(body)})
		requireAPIError(t, err, "InvalidAccessKeyId")
		f.requireUnchanged(t)
	})
	t.Run("minio-go wrong secret, signed stream", func(t *testing.T) {
		mc := e.MinioGo(t, harness.WithCredentials(e.AccessKey, "wrong-"+e.SecretKey))
		d := harness.NewData(402, 200*kib)
		_, err := mc.PutObject(t.Context(), f.bucket, "minio-go-wrong-secret", d.Reader(), d.Size, minio.PutObjectOptions{})
		if code := minio.ToErrorResponse(err).Code; code != "SignatureDoesNotMatch" {
			t.Fatalf("PutObject: %v (code %q), want SignatureDoesNotMatch", err, code)
		}
		f.requireUnchanged(t)
	})
}

// TestRefusedPresigned covers presigned URLs that are expired or altered.
func TestRefusedPresigned(t *testing.T) {
	e := harness.Start(t)
	f := newRefusalFixture(t, e)
	body := harness.NewData(410, 4*kib).Bytes()
	presign := func(t *testing.T, method, key string, sk string, at time.Time, expires time.Duration) string {
		t.Helper()
		u, _, err := harness.PresignV4(t.Context(), newRequest(t, method, f.url(key), nil), e.AccessKey, sk, e.Region, at, expires)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	runRefusals(t, f, []refusal{
		{name: "expired GET", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodGet, presign(t, http.MethodGet, existingKey, e.SecretKey, time.Now().Add(-10*time.Minute), time.Minute), nil)
		}},
		{name: "expired PUT", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodPut, presign(t, http.MethodPut, "expired-put", e.SecretKey, time.Now().Add(-10*time.Minute), time.Minute), body)
		}},
		{name: "expired DELETE", status: 403, code: "AccessDenied", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodDelete, presign(t, http.MethodDelete, existingKey, e.SecretKey, time.Now().Add(-2*time.Hour), time.Hour), nil)
		}},
		{name: "wrong secret", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodPut, presign(t, http.MethodPut, "presigned-wrong-secret", "nope", time.Now(), time.Hour), body)
		}},
		{name: "key changed after signing", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			u := presign(t, http.MethodPut, "signed-key", e.SecretKey, time.Now(), time.Hour)
			return newRequest(t, http.MethodPut, strings.Replace(u, "/signed-key?", "/other-key?", 1), body)
		}},
		{name: "method changed after signing", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			return newRequest(t, http.MethodDelete, presign(t, http.MethodGet, existingKey, e.SecretKey, time.Now(), time.Hour), nil)
		}},
		{name: "expiry lengthened after signing", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			u := presign(t, http.MethodGet, existingKey, e.SecretKey, time.Now().Add(-10*time.Minute), time.Minute)
			return newRequest(t, http.MethodGet, strings.Replace(u, "X-Amz-Expires=60", "X-Amz-Expires=6000", 1), nil)
		}},
	})
}

// TestRefusedPayloads covers bodies that do not match what was signed or
// declared: the gateway must refuse them and the backend must not create or
// change the object, even when most of the body had already gone by.
func TestRefusedPayloads(t *testing.T) {
	e := harness.Start(t)
	f := newRefusalFixture(t, e)
	signedBody := harness.NewData(420, 8*mib).Bytes()
	flipped := bytes.Clone(signedBody)
	flipped[len(flipped)-1] ^= 0x01
	flippedFirst := bytes.Clone(signedBody)
	flippedFirst[0] ^= 0x80

	mismatch := func(key string, declared, sent []byte) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			return signed(t, e, newRequest(t, http.MethodPut, f.url(key), sent), harness.SHA256Hex(declared))
		}
	}
	streamData := harness.NewData(421, 200*kib).Bytes() // four chunks: 3 x 64 KiB + 8 KiB
	tampered := func(key string, chunk, n int) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			req, body := signedStream(t, e, f.url(key), streamData, time.Now())
			body[chunkDataOffset(t, body, chunk, n)] ^= 0x01
			setBody(req, body)
			return req
		}
	}
	trailerData := harness.NewData(422, 200*kib).Bytes()

	runRefusals(t, f, []refusal{
		{name: "SHA-256 mismatch, same length, last byte", status: 400, code: "XAmzContentSHA256Mismatch",
			req: mismatch("sha-last-byte", signedBody, flipped)},
		{name: "SHA-256 mismatch, same length, first byte", status: 400, code: "XAmzContentSHA256Mismatch",
			req: mismatch("sha-first-byte", signedBody, flippedFirst)},
		{name: "SHA-256 mismatch, shorter body", status: 400, code: "XAmzContentSHA256Mismatch",
			req: mismatch("sha-shorter", signedBody, signedBody[:len(signedBody)-1000])},
		{name: "SHA-256 mismatch, overwrite", status: 400, code: "XAmzContentSHA256Mismatch",
			req: mismatch(existingKey, signedBody, flipped)},
		{name: "signed stream, chunk 2 tampered", status: 403, code: "SignatureDoesNotMatch",
			req: tampered("stream-chunk-2", 1, 100)},
		{name: "signed stream, last chunk tampered", status: 403, code: "SignatureDoesNotMatch",
			req: tampered("stream-last-chunk", 3, 8*kib-1)},
		{name: "signed stream, first byte tampered, overwrite", status: 403, code: "SignatureDoesNotMatch",
			req: tampered(existingKey, 0, 0)},
		{name: "signed stream, chunk signature altered", status: 403, code: "SignatureDoesNotMatch", req: func(t *testing.T) *http.Request {
			req, body := signedStream(t, e, f.url("stream-bad-chunk-sig"), streamData, time.Now())
			i := bytes.Index(body, []byte("chunk-signature=")) + len("chunk-signature=")
			if body[i] == 'a' {
				body[i] = 'b'
			} else {
				body[i] = 'a'
			}
			setBody(req, body)
			return req
		}},
		// S3 answers BadDigest; MinIO has its own code.
		{name: "wrong trailing CRC32", status: 400, code: "BadDigest",
			minioStatus: 400, minioCode: "XAmzContentChecksumMismatch", req: func(t *testing.T) *http.Request {
				return unsignedTrailerRequest(t, e, f.url("trailer-wrong"), trailerData, crc32Base64([]byte("something else")))
			}},
		{name: "wrong trailing CRC32, overwrite", status: 400, code: "BadDigest",
			minioStatus: 400, minioCode: "XAmzContentChecksumMismatch", req: func(t *testing.T) *http.Request {
				return unsignedTrailerRequest(t, e, f.url(existingKey), trailerData, crc32Base64(trailerData[1:]))
			}},
	})

	// The same constructions with nothing wrong must succeed, or the cases
	// above would prove nothing.
	t.Run("controls", func(t *testing.T) {
		hc := e.HTTPClient(t)
		direct := e.DirectSDK(t)
		requireStatus(t, do(t, hc, mismatch("control-sha", signedBody, signedBody)(t)), http.StatusOK)
		req, _ := signedStream(t, e, f.url("control-stream"), streamData, time.Now())
		requireStatus(t, do(t, hc, req), http.StatusOK)
		requireStatus(t, do(t, hc, unsignedTrailerRequest(t, e, f.url("control-trailer"), trailerData, crc32Base64(trailerData))), http.StatusOK)
		for key, want := range map[string][]byte{"control-sha": signedBody, "control-stream": streamData, "control-trailer": trailerData} {
			out, err := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("%s on the backend: %v", key, err)
			}
			sum, n, err := harness.HashReader(out.Body)
			out.Body.Close()
			if err != nil || sum != harness.SHA256Hex(want) {
				t.Fatalf("%s on the backend: %d bytes, sha256 %s, %v; want %d bytes", key, n, sum, err, len(want))
			}
		}
	})
}
