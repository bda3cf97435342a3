//go:build e2e

package e2e

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestPresigned uses presigned GET and PUT URLs made by both Go clients with
// a plain HTTP client, as a browser or curl would.
func TestPresigned(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	hc := e.HTTPClient(t)
	presign := s3.NewPresignClient(e.SDK(t), s3.WithPresignExpires(5*time.Minute))

	t.Run("aws-sdk-go-v2 PUT then GET", func(t *testing.T) {
		d := harness.NewData(11, 300*kib)
		req, err := presign.PresignPutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("presigned/sdk")})
		if err != nil {
			t.Fatal(err)
		}
		put := newRequest(t, req.Method, req.URL, d.Bytes())
		for k, v := range req.SignedHeader {
			if k != "Host" {
				put.Header[k] = v
			}
		}
		requireStatus(t, do(t, hc, put), http.StatusOK)
		requireObject(t, direct, bucket, "presigned/sdk", d)

		get, err := presign.PresignGetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("presigned/sdk")})
		if err != nil {
			t.Fatal(err)
		}
		body := requireStatus(t, do(t, hc, newRequest(t, get.Method, get.URL, nil)), http.StatusOK)
		if !bytes.Equal(body, d.Bytes()) {
			t.Fatalf("presigned GET returned %d bytes that differ", len(body))
		}
	})

	t.Run("minio-go PUT then GET", func(t *testing.T) {
		mc := e.MinioGo(t)
		d := harness.NewData(12, 70*kib)
		u, err := mc.PresignedPutObject(t.Context(), bucket, "presigned/minio-go", 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		requireStatus(t, do(t, hc, newRequest(t, http.MethodPut, u.String(), d.Bytes())), http.StatusOK)
		requireObject(t, direct, bucket, "presigned/minio-go", d)

		u, err = mc.PresignedGetObject(t.Context(), bucket, "presigned/minio-go", 5*time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		body := requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, u.String(), nil)), http.StatusOK)
		if !bytes.Equal(body, d.Bytes()) {
			t.Fatalf("presigned GET returned %d bytes that differ", len(body))
		}
	})

	t.Run("HEAD", func(t *testing.T) {
		get, err := presign.PresignHeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("presigned/sdk")})
		if err != nil {
			t.Fatal(err)
		}
		resp := do(t, hc, newRequest(t, get.Method, get.URL, nil))
		requireStatus(t, resp, http.StatusOK)
		if resp.ContentLength != 300*kib {
			t.Fatalf("presigned HEAD: Content-Length %d, want %d", resp.ContentLength, 300*kib)
		}
	})
}
