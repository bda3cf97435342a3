//go:build e2e

package e2e

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestWriteOnceBlobs runs the real binary with a registry-like layout and
// writes the wrong content onto a blob that a manifest references, by each
// write that can land on its key: a PUT, a CopyObject and a multipart
// complete. The blob stays on MinIO byte for byte, with its ETag and
// modification time; a complete of the wrong content onto a new key is
// refused and leaves nothing behind.
func TestWriteOnceBlobs(t *testing.T) {
	t.Parallel()
	e, bucket := startWriteOnce(t)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	ctx := t.Context()

	content := bytes.Repeat([]byte("a layer that a manifest names;"), 200)
	digest, key := casBlobKey(content)
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(content)}); err != nil {
		t.Fatal(err)
	}
	doc := `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"` + digest + `"}]}`
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/app/v1"), Body: strings.NewReader(doc)}); err != nil {
		t.Fatal(err)
	}
	head, err := direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	// MinIO keeps modification times in milliseconds: a rewrite must not
	// fall in the same one.
	time.Sleep(10 * time.Millisecond)
	requireBlob := func(when string) {
		t.Helper()
		out, err := direct.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s: read the blob on MinIO: %v", when, err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: the blob on MinIO changed (%d bytes, %v)", when, len(got), err)
		}
		if aws.ToString(out.ETag) != aws.ToString(head.ETag) || !aws.ToTime(out.LastModified).Equal(aws.ToTime(head.LastModified)) {
			t.Fatalf("%s: the blob on MinIO was rewritten: ETag %s, modified %s; was %s, %s", when,
				aws.ToString(out.ETag), aws.ToTime(out.LastModified), aws.ToString(head.ETag), aws.ToTime(head.LastModified))
		}
	}
	wrong := []byte("not the content the key names")
	upload := func(key string, body []byte) (string, []types.CompletedPart) {
		t.Helper()
		created, err := sdk.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		part, err := sdk.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(body),
		})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(created.UploadId), []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}
	}
	complete := func(key, id string, parts []types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
		return sdk.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
	}

	// A PUT of the wrong content is refused while it streams.
	_, err = sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(wrong)})
	requireAPIError(t, err, "BadDigest")
	requireBlob("after a PUT of the wrong content")

	// A CopyObject of the wrong content is refused before it is sent.
	if _, err := direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("staging/wrong"), Body: bytes.NewReader(wrong)}); err != nil {
		t.Fatal(err)
	}
	_, err = sdk.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), CopySource: aws.String(bucket + "/staging/wrong")})
	requireAPIError(t, err, "BadDigest")
	requireBlob("after a CopyObject of the wrong content")

	// A complete of the wrong content does not land on the stored blob: the
	// blob stays, the client hears of it, and the upload is aborted.
	id, parts := upload(key, wrong)
	out, err := complete(key, id, parts)
	if err != nil {
		t.Fatalf("complete onto the stored blob: %v", err)
	}
	if aws.ToString(out.ETag) != aws.ToString(head.ETag) {
		t.Fatalf("complete answered ETag %s, want the stored blob's %s", aws.ToString(out.ETag), aws.ToString(head.ETag))
	}
	requireBlob("after a complete of the wrong content")
	requireNoUploads(t, direct, bucket)

	// A complete of the wrong content onto a new key is refused and
	// deleted again: it was the gateway's own write.
	_, newKey := casBlobKey([]byte("a layer nobody uploaded"))
	id, parts = upload(newKey, wrong)
	_, err = complete(newKey, id, parts)
	requireAPIError(t, err, "BadDigest")
	requireAbsent(t, direct, bucket, newKey)
	requireBlob("at the end")
}

// startWriteOnce starts a gateway whose bucket, which it returns, has a
// digest namespace under blobs/sha256/ named by manifests under manifests/.
func startWriteOnce(t *testing.T) (*harness.Env, string) {
	t.Helper()
	bucket := harness.BucketName(t)
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"namespaces": []string{bucket + "/blobs/sha256/"},
			"sources":    []string{bucket + "/manifests/"},
		},
	}})
	e.RequireGateway(t)
	if _, err := e.SDK(t).CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return e, bucket
}
