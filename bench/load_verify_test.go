//go:build bench

package bench

// BenchmarkLoad's checks: every object the load wrote reads back byte for
// byte, and is deleted afterwards.

import (
	"bytes"
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// verifyLoad reads every completed object back through t's client and
// compares it with what was sent, then checks that no upload was left on
// MinIO under the side's prefix.
func verifyLoad(ctx context.Context, t *loadTarget, admin *s3.Client, s *loadSide) {
	start := time.Now()
	next := atomic.Int64{}
	var read atomic.Int64
	var objects atomic.Int64
	var wg sync.WaitGroup
	for range loadVerifyParallel {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for {
				u := int(next.Add(1) - 1)
				if u >= t.uploads {
					return
				}
				if t.etags[u] == "" {
					continue // its failure is counted already
				}
				n, ok := verifyObject(ctx, t, u, buf)
				read.Add(n)
				if ok {
					objects.Add(1)
				}
			}
		})
	}
	wg.Wait()
	s.Verify.Seconds = time.Since(start).Seconds()
	s.Verify.Objects = int(objects.Load())
	s.Verify.Bytes = read.Load()
	s.Verify.MiBPerSec = float64(s.Verify.Bytes) / mib / s.Verify.Seconds

	prefix := "load/" + t.name + "/"
	out, err := admin.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(t.bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.faults.err("%s: ListMultipartUploads %s: %v", t.name, prefix, err)
		return
	}
	s.Verify.LeftoverUploads = len(out.Uploads)
	for _, up := range out.Uploads {
		t.faults.mismatch("%s: upload %s of %s is still on MinIO after the load", t.name, aws.ToString(up.UploadId), aws.ToString(up.Key))
	}
}

// verifyObject GETs upload u's object and compares its length, ETag and
// every byte; it returns the bytes read and whether all matched.
func verifyObject(ctx context.Context, t *loadTarget, u int, buf []byte) (int64, bool) {
	key := t.key(u)
	out, err := t.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(t.bucket), Key: aws.String(key)})
	if err != nil {
		t.faults.err("%s: read-back GET %s: %v", t.name, key, err)
		return 0, false
	}
	defer out.Body.Close()
	size := t.lay.objectSize()
	if n := aws.ToInt64(out.ContentLength); n != size {
		t.faults.mismatch("%s: read-back %s: Content-Length %d, want %d", t.name, key, n, size)
		return 0, false
	}
	if got, want := unquoteETag(out.ETag), t.lay.etag(u); got != want {
		t.faults.mismatch("%s: read-back %s: ETag %s, want %s", t.name, key, got, want)
		return 0, false
	}
	var pos int64
	for p := range loadParts {
		want, _ := t.lay.part(u, p)
		for len(want) > 0 {
			n := min(len(buf), len(want))
			if _, err := io.ReadFull(out.Body, buf[:n]); err != nil {
				t.faults.err("%s: read-back %s at byte %d: %v", t.name, key, pos, err)
				return pos, false
			}
			if !bytes.Equal(buf[:n], want[:n]) {
				t.faults.mismatch("%s: read-back %s: bytes %d..%d (part %d) differ from what was sent", t.name, key, pos, pos+int64(n), p+1)
				return pos + int64(n), false
			}
			pos += int64(n)
			want = want[n:]
		}
	}
	if n, _ := out.Body.Read(buf[:1]); n != 0 {
		t.faults.mismatch("%s: read-back %s: longer than the %d bytes sent", t.name, key, size)
		return pos, false
	}
	return pos, true
}

// deleteLoadObjects deletes the side's multipart objects directly on MinIO,
// so that the next side starts with the same disk.
func deleteLoadObjects(b *testing.B, admin *s3.Client, t *loadTarget) {
	const batch = 500
	var ids []types.ObjectIdentifier
	for u := range t.uploads {
		if t.etags[u] != "" {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(t.key(u))})
		}
	}
	for len(ids) > 0 {
		n := min(batch, len(ids))
		out, err := admin.DeleteObjects(b.Context(), &s3.DeleteObjectsInput{
			Bucket: aws.String(t.bucket), Delete: &types.Delete{Objects: ids[:n], Quiet: aws.Bool(true)},
		})
		if err != nil {
			b.Fatalf("delete the %s side's objects: %v", t.name, err)
		}
		if len(out.Errors) > 0 {
			b.Fatalf("delete the %s side's objects: %s: %s", t.name, aws.ToString(out.Errors[0].Key), aws.ToString(out.Errors[0].Message))
		}
		ids = ids[n:]
	}
}
