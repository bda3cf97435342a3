//go:build e2e

package e2e

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestBackendOverTLS runs the binary in front of a MinIO that serves HTTPS
// with a certificate of a private CA, named by backend.ca_file: the
// gateway becomes ready (its readiness check reaches MinIO) and an object
// put through it is read back through it and directly.
func TestBackendOverTLS(t *testing.T) {
	t.Parallel()
	m := harness.StartMinIOTLS(t)
	g := harness.StartGateway(t, m, harness.Options{Config: map[string]any{
		"backend": map[string]any{"ca_file": m.Cert.CertFile},
	}})
	ctx := t.Context()
	trusting := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.Cert.Pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(trusting.CloseIdleConnections)
	direct := harness.NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, trusting, true)
	bucket := harness.BucketName(t)
	if _, err := direct.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	through := harness.NewS3Client(g.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
	body := []byte("over a verified TLS connection")
	if _, err := through.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("PUT through the gateway: %v", err)
	}
	for name, c := range map[string]*s3.Client{"through the gateway": through, "directly": direct} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
		if err != nil {
			t.Fatalf("GET %s: %v", name, err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("GET %s: %q, %v; want %q", name, got, err, body)
		}
	}
}
