//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	kib = 1 << 10
	mib = 1 << 20
)

// putData uploads d with aws-sdk-go-v2.
func putData(t *testing.T, c *s3.Client, bucket, key string, d harness.Data, mods ...func(*s3.PutObjectInput)) *s3.PutObjectOutput {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: d.Reader(), ContentLength: aws.Int64(d.Size)}
	for _, m := range mods {
		m(in)
	}
	out, err := c.PutObject(t.Context(), in)
	if err != nil {
		t.Fatalf("PutObject %s/%s (%d bytes): %v", bucket, key, d.Size, err)
	}
	return out
}

// requireObject GETs bucket/key with c and checks that its bytes are d's,
// without holding them in memory.
func requireObject(t *testing.T, c *s3.Client, bucket, key string, d harness.Data) {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	sum, n, err := harness.HashReader(out.Body)
	if err != nil {
		t.Fatalf("read %s/%s: %v (after %d bytes)", bucket, key, err, n)
	}
	if n != d.Size || sum != d.SHA256() {
		t.Fatalf("%s/%s: got %d bytes sha256 %s, want %d bytes sha256 %s", bucket, key, n, sum, d.Size, d.SHA256())
	}
	if out.ContentLength != nil && *out.ContentLength != d.Size {
		t.Fatalf("%s/%s: Content-Length %d, want %d", bucket, key, *out.ContentLength, d.Size)
	}
}

// requireObjectMinioGo is requireObject for a minio-go client.
func requireObjectMinioGo(t *testing.T, c *minio.Client, bucket, key string, d harness.Data) {
	t.Helper()
	obj, err := c.GetObject(t.Context(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("minio-go GetObject %s/%s: %v", bucket, key, err)
	}
	defer obj.Close()
	sum, n, err := harness.HashReader(obj)
	if err != nil {
		t.Fatalf("minio-go read %s/%s: %v (after %d bytes)", bucket, key, err, n)
	}
	if n != d.Size || sum != d.SHA256() {
		t.Fatalf("minio-go %s/%s: got %d bytes sha256 %s, want %d bytes sha256 %s", bucket, key, n, sum, d.Size, d.SHA256())
	}
}

// requireAbsent checks with a client of the backend that bucket/key does not
// exist.
func requireAbsent(t *testing.T, direct *s3.Client, bucket, key string) {
	t.Helper()
	_, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err == nil {
		t.Fatalf("%s/%s exists on the backend; it must not", bucket, key)
	}
	if code := apiErrorCode(err); code != "NotFound" && code != "NoSuchKey" {
		t.Fatalf("HeadObject %s/%s on the backend: %v, want not found", bucket, key, err)
	}
}

// requireNoUploads checks with a client of the backend that bucket has no
// multipart uploads in progress.
func requireNoUploads(t *testing.T, direct *s3.Client, bucket string) {
	t.Helper()
	out, err := direct.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads %s on the backend: %v", bucket, err)
	}
	if len(out.Uploads) != 0 {
		t.Fatalf("the backend has %d multipart uploads in %s; want none", len(out.Uploads), bucket)
	}
}

// apiErrorCode returns the S3 error code of an aws-sdk-go-v2 error, or "".
func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// requireAPIError checks that err is an aws-sdk-go-v2 API error with code.
func requireAPIError(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the call succeeded; want %s", code)
	}
	if got := apiErrorCode(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}

// requireS3Error checks that resp is an S3 XML error with the status and
// code, carrying a request id, and closes its body.
func requireS3Error(t *testing.T, resp *http.Response, status int, code string) harness.S3Error {
	t.Helper()
	e, body, err := harness.ReadS3Error(resp)
	if err != nil {
		t.Fatalf("%s: %v; body:\n%s", resp.Status, err, body)
	}
	if resp.StatusCode != status || e.Code != code {
		t.Fatalf("got %s %s (%s), want %d %s; body:\n%s", resp.Status, e.Code, e.Message, status, code, body)
	}
	requireRequestID(t, resp)
	return e
}

// requireRequestID checks that a response carries a request id.
func requireRequestID(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.Header.Get("X-Amz-Request-Id") == "" {
		t.Fatalf("%s %s: %s without an X-Amz-Request-Id header; headers: %v", resp.Request.Method, resp.Request.URL, resp.Status, resp.Header)
	}
}

// objectURL returns the path-style URL of bucket/key at endpoint.
func objectURL(endpoint, bucket, key string) string {
	u := endpoint + "/" + bucket
	if key != "" {
		u += "/" + key
	}
	return u
}

// newRequest makes an HTTP request with a byte body (nil for none).
func newRequest(t *testing.T, method, url string, body []byte) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// signed signs req with the env's client credentials at the current time.
func signed(t *testing.T, e *harness.Env, req *http.Request, payloadHash string) *http.Request {
	t.Helper()
	if err := harness.SignV4(context.Background(), req, e.AccessKey, e.SecretKey, e.Region, payloadHash, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// do sends req with a plain client.
func do(t *testing.T, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return resp
}

// requireStatus checks resp's status, reads and closes its body, and
// returns it.
func requireStatus(t *testing.T, resp *http.Response, status int) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %s, want %d; body:\n%s", resp.Request.Method, resp.Request.URL, resp.Status, status, b)
	}
	return b
}

// crc32Base64 returns the value of an x-amz-checksum-crc32 header for b.
func crc32Base64(b []byte) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE(b))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// dataCRC32Base64 is crc32Base64 for a Data.
func dataCRC32Base64(t *testing.T, d harness.Data) string {
	t.Helper()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, d.Reader()); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// casBlobKey returns content's digest and the key of its blob in a digest
// namespace under blobs/sha256/.
func casBlobKey(content []byte) (digest, key string) {
	sum := sha256.Sum256(content)
	h := hex.EncodeToString(sum[:])
	return "sha256:" + h, "blobs/sha256/" + h
}

// smallPart returns a part of 4 KiB.
func smallPart() *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(bytes.Repeat([]byte("p"), 4096)), 0, 4096)
}
