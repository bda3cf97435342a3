//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// s3ops is what the workload does with S3, implemented once with each
// client library, so a campaign mixes both.
type s3ops interface {
	lib() string
	create(ctx context.Context, key string) (uploadID string, err error)
	part(ctx context.Context, key, uploadID string, n int, body *io.SectionReader) (partResult, error)
	listParts(ctx context.Context, key, uploadID string) (int, error)
	complete(ctx context.Context, key, uploadID string, parts []partResult) (etag string, err error)
	abort(ctx context.Context, key, uploadID string) error
	put(ctx context.Context, key string, body []byte) error
	del(ctx context.Context, key string) error
	// get reads an object and returns its SHA-256 and size.
	get(ctx context.Context, key string) (sum string, size int64, err error)
	// head returns an object's size.
	head(ctx context.Context, key string) (size int64, err error)
	// list returns how many keys the bucket lists under prefix (up to a
	// thousand: one page).
	list(ctx context.Context, prefix string) (int, error)
}

// partResult is what complete needs of an uploaded part.
type partResult struct {
	n     int
	etag  string
	crc32 string // aws-sdk-go-v2's checksum of the part, when it sent one
}

// newTransport returns an HTTP transport of its own, closed at cleanup, so
// that one client's connections to a killed gateway do not affect another.
func newTransport(t *testing.T) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 8
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// awsOps is aws-sdk-go-v2, with no retries of its own (the workload
// retries, on the other gateway, and logs each attempt).
type awsOps struct {
	c      *s3.Client
	bucket string
}

func newAWSOps(t *testing.T, endpoint, region, ak, sk, bucket string) awsOps {
	return awsOps{c: harness.NewS3Client(endpoint, region, ak, sk, newTransport(t), true), bucket: bucket}
}

func (a awsOps) lib() string { return "aws" }

func (a awsOps) create(ctx context.Context, key string) (string, error) {
	out, err := a.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(a.bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.UploadId), nil
}

func (a awsOps) part(ctx context.Context, key, uploadID string, n int, body *io.SectionReader) (partResult, error) {
	out, err := a.c.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: aws.String(a.bucket), Key: aws.String(key), UploadId: aws.String(uploadID), PartNumber: aws.Int32(int32(n)),
		Body: body, ContentLength: aws.Int64(body.Size()),
	})
	if err != nil {
		return partResult{}, err
	}
	return partResult{n: n, etag: aws.ToString(out.ETag), crc32: aws.ToString(out.ChecksumCRC32)}, nil
}

func (a awsOps) listParts(ctx context.Context, key, uploadID string) (int, error) {
	out, err := a.c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(a.bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	if err != nil {
		return 0, err
	}
	return len(out.Parts), nil
}

func (a awsOps) complete(ctx context.Context, key, uploadID string, parts []partResult) (string, error) {
	var cp []s3types.CompletedPart
	for _, p := range parts {
		c := s3types.CompletedPart{PartNumber: aws.Int32(int32(p.n)), ETag: aws.String(p.etag)}
		if p.crc32 != "" {
			c.ChecksumCRC32 = aws.String(p.crc32)
		}
		cp = append(cp, c)
	}
	out, err := a.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(a.bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: cp},
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

func (a awsOps) abort(ctx context.Context, key, uploadID string) error {
	_, err := a.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(a.bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	return err
}

func (a awsOps) put(ctx context.Context, key string, body []byte) error {
	_, err := a.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
	return err
}

func (a awsOps) del(ctx context.Context, key string) error {
	_, err := a.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key)})
	return err
}

func (a awsOps) get(ctx context.Context, key string) (string, int64, error) {
	out, err := a.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key)})
	if err != nil {
		return "", 0, err
	}
	defer out.Body.Close()
	sum, n, err := harness.HashReader(out.Body)
	if err != nil {
		return "", n, fmt.Errorf("read %s after %d bytes: %w", key, n, err)
	}
	return sum, n, nil
}

func (a awsOps) head(ctx context.Context, key string) (int64, error) {
	out, err := a.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	return aws.ToInt64(out.ContentLength), nil
}

func (a awsOps) list(ctx context.Context, prefix string) (int, error) {
	out, err := a.c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(a.bucket), Prefix: aws.String(prefix)})
	if err != nil {
		return 0, err
	}
	return len(out.Contents), nil
}

// minioOps is minio-go's Core API (the calls its high-level API is made
// of), with minio-go's own retries off.
type minioOps struct {
	c      minio.Core
	bucket string
}

func newMinioOps(t *testing.T, endpoint, region, ak, sk, bucket string) minioOps {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        miniocreds.NewStaticV4(ak, sk, ""),
		Region:       region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    newTransport(t),
		MaxRetries:   1,
	})
	if err != nil {
		t.Fatalf("chaos: minio-go client: %v", err)
	}
	return minioOps{c: minio.Core{Client: c}, bucket: bucket}
}

func (m minioOps) lib() string { return "minio" }

func (m minioOps) create(ctx context.Context, key string) (string, error) {
	return m.c.NewMultipartUpload(ctx, m.bucket, key, minio.PutObjectOptions{})
}

func (m minioOps) part(ctx context.Context, key, uploadID string, n int, body *io.SectionReader) (partResult, error) {
	p, err := m.c.PutObjectPart(ctx, m.bucket, key, uploadID, n, body, body.Size(), minio.PutObjectPartOptions{})
	if err != nil {
		return partResult{}, err
	}
	return partResult{n: n, etag: p.ETag}, nil
}

func (m minioOps) listParts(ctx context.Context, key, uploadID string) (int, error) {
	res, err := m.c.ListObjectParts(ctx, m.bucket, key, uploadID, 0, 1000)
	if err != nil {
		return 0, err
	}
	return len(res.ObjectParts), nil
}

func (m minioOps) complete(ctx context.Context, key, uploadID string, parts []partResult) (string, error) {
	var cp []minio.CompletePart
	for _, p := range parts {
		cp = append(cp, minio.CompletePart{PartNumber: p.n, ETag: p.etag})
	}
	info, err := m.c.CompleteMultipartUpload(ctx, m.bucket, key, uploadID, cp, minio.PutObjectOptions{})
	if err != nil {
		return "", err
	}
	return info.ETag, nil
}

func (m minioOps) abort(ctx context.Context, key, uploadID string) error {
	return m.c.AbortMultipartUpload(ctx, m.bucket, key, uploadID)
}

func (m minioOps) put(ctx context.Context, key string, body []byte) error {
	_, err := m.c.PutObject(ctx, m.bucket, key, bytes.NewReader(body), int64(len(body)), "", "", minio.PutObjectOptions{})
	return err
}

func (m minioOps) del(ctx context.Context, key string) error {
	return m.c.RemoveObject(ctx, m.bucket, key, minio.RemoveObjectOptions{})
}

func (m minioOps) get(ctx context.Context, key string) (string, int64, error) {
	body, _, _, err := m.c.GetObject(ctx, m.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", 0, err
	}
	defer body.Close()
	sum, n, err := harness.HashReader(body)
	if err != nil {
		return "", n, fmt.Errorf("read %s after %d bytes: %w", key, n, err)
	}
	return sum, n, nil
}

func (m minioOps) head(ctx context.Context, key string) (int64, error) {
	info, err := m.c.StatObject(ctx, m.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return 0, err
	}
	return info.Size, nil
}

// list reads one page of ListObjectsV2 (Core's own takes no context).
func (m minioOps) list(ctx context.Context, prefix string) (int, error) {
	n := 0
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for o := range m.c.Client.ListObjects(ctx, m.bucket, minio.ListObjectsOptions{Prefix: prefix, MaxKeys: 1000}) {
		if o.Err != nil {
			return n, o.Err
		}
		if n++; n == 1000 {
			break
		}
	}
	return n, nil
}

// partsMissing is a ListParts that does not show a part the client
// uploaded: a part deleted under a live upload.
type partsMissing struct{ n int }

func (p partsMissing) Error() string {
	return fmt.Sprintf("ListParts shows %d parts, want the client's 1 and those written around the gateway", p.n)
}

// gone says an answer means the upload, or a part of it, is no more.
func gone(err error) bool {
	_, code := errInfo(err)
	return code == "NoSuchUpload" || code == "InvalidPart" || code == "PartsMissing"
}

// errInfo returns an S3 call's HTTP status (0 when no answer came) and
// error code, from either library.
func errInfo(err error) (status int, code string) {
	var pm partsMissing
	if errors.As(err, &pm) {
		return http.StatusOK, "PartsMissing"
	}
	var me minio.ErrorResponse
	if errors.As(err, &me) {
		return me.StatusCode, me.Code
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	return status, code
}

// retryable says whether a client would try the call again: no answer
// (a gateway died, a response was lost, a paused gateway timed out), a
// server error (etcd or the backend unreachable, SlowDown) or
// OperationAborted (a complete of the upload in flight).
func retryable(err error) bool {
	status, code := errInfo(err)
	// A gateway whose clock a fault offset may refuse the request's
	// signature as too old or too new; the other one takes it.
	return status == 0 || status >= 500 || status == http.StatusConflict && code == "OperationAborted" ||
		status == http.StatusForbidden && code == "RequestTimeTooSkewed"
}

// describe is a short form of an error for the log.
func describe(err error) string {
	if err == nil {
		return "ok"
	}
	status, code := errInfo(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case status == 0:
		return "no-answer"
	case code == "":
		return fmt.Sprintf("%d", status)
	}
	return fmt.Sprintf("%d-%s", status, code)
}

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
