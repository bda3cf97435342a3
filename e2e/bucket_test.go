//go:build e2e

package e2e

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestBuckets creates, lists and deletes buckets through the gateway with
// both Go clients, checking each step on the backend.
func TestBuckets(t *testing.T) {
	e := harness.Start(t)
	direct := e.DirectSDK(t)

	backendHas := func(t *testing.T, bucket string) bool {
		t.Helper()
		_, err := direct.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		if err == nil {
			return true
		}
		if code := apiErrorCode(err); code != "NotFound" && code != "NoSuchBucket" {
			t.Fatalf("HeadBucket %s on the backend: %v", bucket, err)
		}
		return false
	}

	t.Run("aws-sdk-go-v2", func(t *testing.T) {
		c := e.SDK(t)
		bucket := harness.BucketName(t)
		if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("CreateBucket: %v", err)
		}
		if !backendHas(t, bucket) {
			t.Fatalf("bucket %s not on the backend after CreateBucket", bucket)
		}
		if _, err := c.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("HeadBucket: %v", err)
		}
		list, err := c.ListBuckets(t.Context(), &s3.ListBucketsInput{})
		if err != nil {
			t.Fatalf("ListBuckets: %v", err)
		}
		if !slices.ContainsFunc(list.Buckets, func(b s3types.Bucket) bool { return aws.ToString(b.Name) == bucket }) {
			t.Fatalf("ListBuckets does not list %s", bucket)
		}
		_, err = c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		requireAPIError(t, err, "BucketAlreadyOwnedByYou")
		if _, err := c.DeleteBucket(t.Context(), &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("DeleteBucket: %v", err)
		}
		if backendHas(t, bucket) {
			t.Fatalf("bucket %s still on the backend after DeleteBucket", bucket)
		}
		_, err = c.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		requireAPIError(t, err, "NotFound")
	})

	t.Run("minio-go", func(t *testing.T) {
		c := e.MinioGo(t)
		bucket := harness.BucketName(t)
		if err := c.MakeBucket(t.Context(), bucket, minio.MakeBucketOptions{Region: e.Region}); err != nil {
			t.Fatalf("MakeBucket: %v", err)
		}
		if !backendHas(t, bucket) {
			t.Fatalf("bucket %s not on the backend after MakeBucket", bucket)
		}
		ok, err := c.BucketExists(t.Context(), bucket)
		if err != nil || !ok {
			t.Fatalf("BucketExists: %v %v", ok, err)
		}
		list, err := c.ListBuckets(t.Context())
		if err != nil {
			t.Fatalf("ListBuckets: %v", err)
		}
		if !slices.ContainsFunc(list, func(b minio.BucketInfo) bool { return b.Name == bucket }) {
			t.Fatalf("ListBuckets does not list %s", bucket)
		}
		if err := c.RemoveBucket(t.Context(), bucket); err != nil {
			t.Fatalf("RemoveBucket: %v", err)
		}
		if backendHas(t, bucket) {
			t.Fatalf("bucket %s still on the backend after RemoveBucket", bucket)
		}
	})

	t.Run("delete non-empty bucket is refused by the backend", func(t *testing.T) {
		c := e.SDK(t)
		bucket := e.Bucket(t)
		putData(t, c, bucket, "keep", harness.NewData(1, 10))
		_, err := c.DeleteBucket(t.Context(), &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
		requireAPIError(t, err, "BucketNotEmpty")
		if !backendHas(t, bucket) {
			t.Fatal("non-empty bucket deleted")
		}
	})
}
