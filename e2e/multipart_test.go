//go:build e2e

package e2e

import (
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestMultipart runs multipart uploads through the gateway, which passes
// them to the backend for now: create, upload parts (and a part copy), list
// parts, complete; and create, upload, abort.
func TestMultipart(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	c := e.SDK(t)
	direct := e.DirectSDK(t)

	t.Run("aws-sdk-go-v2 complete", func(t *testing.T) { multipartSDKComplete(t, c, direct, bucket) })

	t.Run("aws-sdk-go-v2 part copy", func(t *testing.T) {
		src := harness.NewData(24, 6*mib)
		putData(t, c, bucket, "multipart/copy-source", src)
		tail := harness.NewData(25, 100)
		key := "multipart/part-copy"
		created, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := c.UploadPartCopy(t.Context(), &s3.UploadPartCopyInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId, PartNumber: aws.Int32(1),
			CopySource: aws.String(bucket + "/multipart/copy-source"), CopySourceRange: aws.String("bytes=0-5242879"),
		})
		if err != nil {
			t.Fatalf("UploadPartCopy: %v", err)
		}
		up, err := c.UploadPart(t.Context(), &s3.UploadPartInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId, PartNumber: aws.Int32(2),
			Body: tail.Reader(), ContentLength: aws.Int64(tail.Size),
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CompleteMultipartUpload(t.Context(), &s3.CompleteMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId,
			MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{
				{ETag: cp.CopyPartResult.ETag, PartNumber: aws.Int32(1)},
				{ETag: up.ETag, PartNumber: aws.Int32(2)},
			}},
		})
		if err != nil {
			t.Fatalf("CompleteMultipartUpload: %v", err)
		}
		out, err := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		got, n, err := harness.HashReader(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		want := harness.SHA256Hex(append(src.Range(0, 5*mib), tail.Bytes()...))
		if got != want || n != 5*mib+100 {
			t.Fatalf("assembled object: %d bytes sha256 %s, want %d bytes %s", n, got, 5*mib+100, want)
		}
	})

	t.Run("aws-sdk-go-v2 abort", func(t *testing.T) {
		key := "multipart/aborted"
		created, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		p := harness.NewData(26, 5*mib)
		if _, err := c.UploadPart(t.Context(), &s3.UploadPartInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId, PartNumber: aws.Int32(1),
			Body: p.Reader(), ContentLength: aws.Int64(p.Size),
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId}); err != nil {
			t.Fatalf("AbortMultipartUpload: %v", err)
		}
		requireNoUploads(t, direct, bucket)
		requireAbsent(t, direct, bucket, key)
		_, err = c.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId})
		requireAPIError(t, err, "NoSuchUpload")
	})

	t.Run("minio-go", func(t *testing.T) {
		mc := e.MinioGo(t)
		d := harness.NewData(27, 40*mib+3)
		// 16 MiB parts: three UploadPart calls, each a signed stream.
		info, err := mc.PutObject(t.Context(), bucket, "multipart/minio-go", d.Reader(), d.Size, minio.PutObjectOptions{PartSize: 16 * mib})
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		if !strings.HasSuffix(info.ETag, "-3") {
			t.Fatalf("ETag %s is not a three-part multipart ETag", info.ETag)
		}
		requireObjectMinioGo(t, mc, bucket, "multipart/minio-go", d)
		requireObject(t, direct, bucket, "multipart/minio-go", d)
		requireNoUploads(t, direct, bucket)
	})
}

// multipartSDKComplete uploads parts with aws-sdk-go-v2, lists them and completes
// the upload, checking the object and the listings on MinIO.
func multipartSDKComplete(t *testing.T, c, direct *s3.Client, bucket string) {
	key := "multipart/sdk"
	whole := harness.NewData(21, 11*mib+7)
	parts := []*io.SectionReader{whole.Section(0, 5*mib), whole.Section(5*mib, 5*mib), whole.Section(10*mib, mib+7)}

	created, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{
		Bucket: aws.String(bucket), Key: aws.String(key), ContentType: aws.String("application/x-mp"),
		Metadata: map[string]string{"kind": "multipart"},
	})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	uploadID := created.UploadId
	var done []s3types.CompletedPart
	for i, p := range parts {
		n := int32(i + 1)
		out, err := c.UploadPart(t.Context(), &s3.UploadPartInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID, PartNumber: aws.Int32(n),
			Body: p, ContentLength: aws.Int64(p.Size()),
		})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		done = append(done, s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n), ChecksumCRC32: out.ChecksumCRC32})
	}
	listed, err := c.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID})
	if err != nil {
		t.Fatalf("ListParts: %v", err)
	}
	if len(listed.Parts) != len(parts) {
		t.Fatalf("ListParts lists %d parts, want %d", len(listed.Parts), len(parts))
	}
	for i, p := range listed.Parts {
		if aws.ToInt64(p.Size) != parts[i].Size() || aws.ToString(p.ETag) != aws.ToString(done[i].ETag) {
			t.Fatalf("part %d: size %d etag %s, want %d %s", i+1, aws.ToInt64(p.Size), aws.ToString(p.ETag), parts[i].Size(), aws.ToString(done[i].ETag))
		}
	}
	uploads, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(uploads.Uploads) != 1 || aws.ToString(uploads.Uploads[0].UploadId) != aws.ToString(uploadID) {
		t.Fatalf("ListMultipartUploads: %d uploads, want just %s", len(uploads.Uploads), aws.ToString(uploadID))
	}
	out, err := c.CompleteMultipartUpload(t.Context(), &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: done},
	})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	if !strings.HasSuffix(strings.Trim(aws.ToString(out.ETag), `"`), "-3") {
		t.Fatalf("completed ETag %s is not a three-part multipart ETag", aws.ToString(out.ETag))
	}
	requireObject(t, c, bucket, key, whole)
	requireObject(t, direct, bucket, key, whole)
	head, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if head.Metadata["kind"] != "multipart" || aws.ToString(head.ContentType) != "application/x-mp" {
		t.Fatalf("metadata %v content type %q", head.Metadata, aws.ToString(head.ContentType))
	}
	requireNoUploads(t, direct, bucket)
}
