//go:build e2e

package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestRequestIDAndBackendErrors checks that every answer carries a request
// id, and that the backend's errors reach the client as the backend sent
// them: the same status, code and message as MinIO gives directly.
func TestRequestIDAndBackendErrors(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	putData(t, e.DirectSDK(t), bucket, "present", harness.NewData(700, 100))
	hc := e.HTTPClient(t)

	type call struct {
		name   string
		method string
		path   string // after the endpoint
		body   []byte
		status int
		code   string // S3 error code, "" for success
	}
	calls := []call{
		{"ListBuckets", http.MethodGet, "/", nil, 200, ""},
		{"GET", http.MethodGet, "/" + bucket + "/present", nil, 200, ""},
		{"HEAD", http.MethodHead, "/" + bucket + "/present", nil, 200, ""},
		{"PUT", http.MethodPut, "/" + bucket + "/new", []byte("new"), 200, ""},
		{"DELETE", http.MethodDelete, "/" + bucket + "/new", nil, 204, ""},
		{"NoSuchKey", http.MethodGet, "/" + bucket + "/absent", nil, 404, "NoSuchKey"},
		{"HEAD missing", http.MethodHead, "/" + bucket + "/absent", nil, 404, ""},
		{"NoSuchBucket", http.MethodGet, "/no-such-bucket-e2e/key", nil, 404, "NoSuchBucket"},
		{"BucketAlreadyOwnedByYou", http.MethodPut, "/" + bucket, nil, 409, "BucketAlreadyOwnedByYou"},
		{"InvalidBucketName", http.MethodPut, "/Invalid_Bucket", nil, 400, "InvalidBucketName"},
		{"NoSuchUpload", http.MethodGet, "/" + bucket + "/present?uploadId=nosuchupload", nil, 404, "NoSuchUpload"},
		{"InvalidRange", http.MethodGet, "/" + bucket + "/present", nil, 416, "InvalidRange"},
	}
	send := func(t *testing.T, endpoint string, c call) *http.Response {
		req := newRequest(t, c.method, endpoint+c.path, c.body)
		if c.name == "InvalidRange" {
			req.Header.Set("Range", "bytes=1000-2000")
		}
		payload := harness.EmptySHA256
		if c.body != nil {
			payload = harness.SHA256Hex(c.body)
		}
		return do(t, hc, signed(t, e, req, payload))
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			resp := send(t, e.Endpoint, c)
			requireRequestID(t, resp)
			if c.code == "" {
				requireStatus(t, resp, c.status)
				return
			}
			got := requireS3Error(t, resp, c.status, c.code)
			want := requireS3Error(t, send(t, e.MinIO.Endpoint, c), c.status, c.code)
			if got.Message != want.Message {
				t.Fatalf("message %q, the backend says %q", got.Message, want.Message)
			}
		})
	}
}

// TestCredentialsTable runs a gateway with its own client credentials and
// without the backend's: clients sign with the table's keys, and the
// backend's own key is unknown to the gateway.
func TestCredentialsTable(t *testing.T) {
	alice := harness.Credential{AccessKey: "ALICEKEY0000000000E2E", SecretKey: "alice-secret-0123456789abcdefghijkl", Principal: "alice"}
	bob := harness.Credential{AccessKey: "BOBKEY000000000000E2E", SecretKey: "bob-secret-0123456789abcdefghijklmn", Principal: "bob"}
	e := harness.Start(t, harness.Options{Credentials: []harness.Credential{alice, bob}, RejectBackendCredentials: true})
	e.RequireGateway(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)

	for _, cr := range []harness.Credential{alice, bob} {
		t.Run(cr.Principal, func(t *testing.T) {
			c := e.SDK(t, harness.WithCredentials(cr.AccessKey, cr.SecretKey))
			d := harness.NewData(710, 50*kib)
			putData(t, c, bucket, cr.Principal, d)
			requireObject(t, c, bucket, cr.Principal, d)
			requireObject(t, direct, bucket, cr.Principal, d)
			mc := e.MinioGo(t, harness.WithCredentials(cr.AccessKey, cr.SecretKey))
			if _, err := mc.StatObject(t.Context(), bucket, cr.Principal, minio.StatObjectOptions{}); err != nil {
				t.Fatalf("minio-go StatObject: %v", err)
			}
		})
	}
	t.Run("one's key with the other's secret", func(t *testing.T) {
		c := e.SDK(t, harness.WithCredentials(alice.AccessKey, bob.SecretKey))
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("mixed"), Body: bytes.NewReader([]byte("x"))})
		requireAPIError(t, err, "SignatureDoesNotMatch")
		requireAbsent(t, direct, bucket, "mixed")
	})
	t.Run("backend credentials refused", func(t *testing.T) {
		c := e.SDK(t, harness.WithCredentials(e.MinIO.AccessKey, e.MinIO.SecretKey))
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("backend-key"), Body: bytes.NewReader([]byte("x"))})
		requireAPIError(t, err, "InvalidAccessKeyId")
		requireAbsent(t, direct, bucket, "backend-key")
	})
}

// TestAdminEndpoints checks the admin listener's probes and metrics.
func TestAdminEndpoints(t *testing.T) {
	e := harness.Start(t)
	e.RequireGateway(t)
	// Some traffic, so that request metrics exist.
	putData(t, e.SDK(t), e.Bucket(t), "k", harness.NewData(720, 10))

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(e.Gateway.AdminEndpoint + path)
		if err != nil {
			t.Fatal(err)
		}
		requireStatus(t, resp, http.StatusOK)
	}
	metrics, err := e.Gateway.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, "# TYPE ") || !strings.Contains(metrics, "go_goroutines") {
		t.Fatalf("/metrics does not look like Prometheus text:\n%.2000s", metrics)
	}
	// The S3 listener does not serve the admin paths to the world.
	resp, err := http.Get(e.Endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "go_goroutines") {
		t.Fatal("the S3 listener serves /metrics to anonymous clients")
	}
}
