//go:build e2e

package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// requirePayloadMode checks that every PUT a Recorder saw declared a payload
// mode matching want, so each case tests the mode it is named after.
func requirePayloadMode(t *testing.T, rec *harness.Recorder, want func(string) bool, desc string) {
	t.Helper()
	puts := rec.Find("PUT", "")
	if len(puts) == 0 {
		t.Fatal("the client sent no PUT")
	}
	for _, r := range puts {
		if got := r.Header.Get("X-Amz-Content-Sha256"); !want(got) {
			t.Fatalf("PUT %s declared x-amz-content-sha256 %q; this case is about %s", r.Path, got, desc)
		}
	}
}

// requireBackendCRC32 checks that the backend stored the CRC32 checksum the
// client sent for bucket/key.
func requireBackendCRC32(t *testing.T, direct *s3.Client, bucket, key string, d harness.Data) {
	t.Helper()
	h, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: s3types.ChecksumModeEnabled})
	if err != nil {
		t.Fatalf("HeadObject on the backend: %v", err)
	}
	if got, want := aws.ToString(h.ChecksumCRC32), dataCRC32Base64(t, d); got != want {
		t.Fatalf("the backend has CRC32 %q for %s, want %q: the checksum did not reach it", got, key, want)
	}
}

// TestPayloadModes uploads through the gateway in each payload signing mode
// that real clients use, checks that the client really used it, and checks
// the bytes on the backend.
func TestPayloadModes(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	// aws-sdk-go-v2 sends a body over TLS as one aws-chunked chunk, and MinIO
	// refuses chunks over 16 MiB; larger sizes are in TestLargeTLSChunk.
	sizes := []int64{1, 64 * kib, 3*mib + 1, 15 * mib}

	t.Run("aws-sdk-go-v2 over HTTP, hex SHA-256", func(t *testing.T) { payloadHexSHA256(t, e, bucket, direct, sizes) })

	t.Run("aws-sdk-go-v2 over HTTP, UNSIGNED-PAYLOAD", func(t *testing.T) { payloadUnsigned(t, e, bucket, direct, sizes) })

	t.Run("minio-go over HTTP, signed chunks", func(t *testing.T) { payloadSignedChunks(t, e, bucket, direct, sizes) })

	t.Run("aws-sdk-go-v2 over TLS, default checksum (unsigned trailer)", func(t *testing.T) {
		rec := &harness.Recorder{}
		c := e.TLSSDK(t, harness.WithTransport(rec.Wrap))
		for i, size := range sizes {
			d := harness.NewData(uint64(330+i), size)
			key := "trailer/" + d.SHA256()[:8]
			putData(t, c, bucket, key, d)
			requireObject(t, c, bucket, key, d)
			requireObject(t, direct, bucket, key, d)
			requireBackendCRC32(t, direct, bucket, key, d)
		}
		requirePayloadMode(t, rec, func(s string) bool { return s == harness.StreamingUnsignedTrail }, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
		for _, r := range rec.Find("PUT", "") {
			if !strings.EqualFold(r.Header.Get("X-Amz-Trailer"), "x-amz-checksum-crc32") {
				t.Fatalf("PUT %s: x-amz-trailer %q, want x-amz-checksum-crc32", r.Path, r.Header.Get("X-Amz-Trailer"))
			}
		}
	})

	t.Run("aws-sdk-go-v2 over TLS, multipart parts with trailers", func(t *testing.T) {
		rec := &harness.Recorder{}
		c := e.TLSSDK(t, harness.WithTransport(rec.Wrap))
		whole := harness.NewData(340, 5*mib+10)
		key := "trailer/multipart"
		created, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32,
		})
		if err != nil {
			t.Fatal(err)
		}
		var parts []s3types.CompletedPart
		for i, p := range [][2]int64{{0, 5 * mib}, {5 * mib, 10}} {
			n := aws.Int32(int32(i + 1))
			out, err := c.UploadPart(t.Context(), &s3.UploadPartInput{
				Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId, PartNumber: n,
				Body: whole.Section(p[0], p[1]), ContentLength: aws.Int64(p[1]), ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32,
			})
			if err != nil {
				t.Fatalf("UploadPart %d: %v", *n, err)
			}
			parts = append(parts, s3types.CompletedPart{PartNumber: n, ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32})
		}
		if _, err := c.CompleteMultipartUpload(t.Context(), &s3.CompleteMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: created.UploadId,
			MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
		}); err != nil {
			t.Fatalf("CompleteMultipartUpload: %v", err)
		}
		requireObject(t, direct, bucket, key, whole)
		requirePayloadMode(t, rec, func(s string) bool { return s == harness.StreamingUnsignedTrail }, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
	})

	t.Run("minio-go over TLS", func(t *testing.T) {
		rec := &harness.Recorder{}
		mc := e.TLSMinioGo(t, harness.WithTransport(rec.Wrap))
		for i, size := range sizes {
			d := harness.NewData(uint64(350+i), size)
			key := "minio-go-tls/" + d.SHA256()[:8]
			if _, err := mc.PutObject(t.Context(), bucket, key, d.Reader(), d.Size, minio.PutObjectOptions{}); err != nil {
				t.Fatalf("PutObject %d bytes: %v", size, err)
			}
			requireObjectMinioGo(t, mc, bucket, key, d)
			requireObject(t, direct, bucket, key, d)
		}
		requirePayloadMode(t, rec, func(s string) bool {
			return s == harness.StreamingUnsignedTrail || s == harness.UnsignedPayload
		}, "minio-go's TLS default")
		var modes []string
		for _, r := range rec.Find("PUT", "") {
			modes = append(modes, r.Header.Get("X-Amz-Content-Sha256"))
		}
		t.Logf("minio-go over TLS used %v", modes)
	})
}

// payloadHexSHA256 sends bodies with aws-sdk-go-v2 over HTTP signed with their hex SHA-256, one of each of sizes, and checks each on MinIO.
func payloadHexSHA256(t *testing.T, e *harness.Env, bucket string, direct *s3.Client, sizes []int64) {
	rec := &harness.Recorder{}
	c := e.SDK(t, harness.WithTransport(rec.Wrap))
	for i, size := range sizes {
		d := harness.NewData(uint64(300+i), size)
		key := "sha256/" + d.SHA256()[:8]
		putData(t, c, bucket, key, d)
		requireObject(t, direct, bucket, key, d)
		requireBackendCRC32(t, direct, bucket, key, d)
	}
	requirePayloadMode(t, rec, hexSHA256.MatchString, "a hex SHA-256 payload")
}

// payloadUnsigned sends bodies with aws-sdk-go-v2 over HTTP as UNSIGNED-PAYLOAD, one of each of sizes, and checks each on MinIO.
func payloadUnsigned(t *testing.T, e *harness.Env, bucket string, direct *s3.Client, sizes []int64) {
	rec := &harness.Recorder{}
	c := e.SDK(t, harness.WithTransport(rec.Wrap), harness.WithS3Options(func(o *s3.Options) {
		// A checksum computed up front would bring the SHA-256 back.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	}))
	for i, size := range sizes {
		d := harness.NewData(uint64(310+i), size)
		key := "unsigned/" + d.SHA256()[:8]
		putData(t, c, bucket, key, d)
		requireObject(t, direct, bucket, key, d)
	}
	requirePayloadMode(t, rec, func(s string) bool { return s == harness.UnsignedPayload }, "UNSIGNED-PAYLOAD")
}

// payloadSignedChunks sends bodies with minio-go over HTTP in signed chunks, one of each of sizes, and checks each on MinIO.
func payloadSignedChunks(t *testing.T, e *harness.Env, bucket string, direct *s3.Client, sizes []int64) {
	rec := &harness.Recorder{}
	mc := e.MinioGo(t, harness.WithTransport(rec.Wrap))
	for i, size := range sizes {
		d := harness.NewData(uint64(320+i), size)
		key := "chunked/" + d.SHA256()[:8]
		if _, err := mc.PutObject(t.Context(), bucket, key, d.Reader(), d.Size, minio.PutObjectOptions{}); err != nil {
			t.Fatalf("PutObject %d bytes: %v", size, err)
		}
		requireObject(t, direct, bucket, key, d)
	}
	requirePayloadMode(t, rec, func(s string) bool { return strings.HasPrefix(s, harness.StreamingSigned) }, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
}

// TestLargeTLSChunk puts a 100 MiB object with aws-sdk-go-v2's defaults over
// TLS, which sends it as a single 100 MiB aws-chunked chunk with a trailing
// CRC32. MinIO itself refuses chunks over 16 MiB, so this passes only if the
// gateway streams the decoded body on to the backend in a form it accepts;
// a client must not get less from the gateway than from the backend alone,
// and here it gets more.
func TestLargeTLSChunk(t *testing.T) {
	e := harness.Start(t)
	e.RequireGateway(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	rec := &harness.Recorder{}
	c := e.TLSSDK(t, harness.WithTransport(rec.Wrap))
	d := harness.NewData(360, 100*mib)
	putData(t, c, bucket, "big", d)
	requirePayloadMode(t, rec, func(s string) bool { return s == harness.StreamingUnsignedTrail }, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
	requireObject(t, c, bucket, "big", d)
	requireObject(t, direct, bucket, "big", d)
	requireBackendCRC32(t, direct, bucket, "big", d)
}
