//go:build chaos

package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestCompleteOutlivesItsClient is a case the campaigns found: a client
// that gives up on a CompleteMultipartUpload while the backend is slow to
// take it must not cut the backend's complete short. MinIO does not
// complete atomically when its client goes away midway: the upload stays
// listed without its parts and no object is made, so every retry gets
// InvalidPart and the upload is lost. The gateway finishes the complete
// whatever its client does, and the client's retry gets the result.
func TestCompleteOutlivesItsClient(t *testing.T) {
	e, back := harness.StartWithFaultProxy(t, harness.Options{})
	d := direct{c: harness.NewS3Client(e.MinIO.Endpoint, e.Region, e.MinIO.AccessKey, e.MinIO.SecretKey, newTransport(t), true), bucket: "cutoff"}
	if _, err := d.c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(d.bucket)}); err != nil {
		t.Fatal(err)
	}
	for i, ops := range []s3ops{
		newAWSOps(t, e.Endpoint, e.Region, e.AccessKey, e.SecretKey, d.bucket),
		newMinioOps(t, e.Endpoint, e.Region, e.AccessKey, e.SecretKey, d.bucket),
	} {
		key := "object-" + ops.lib()
		data := harness.NewData(uint64(i), 300<<10)
		id, err := ops.create(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ops.part(t.Context(), key, id, 1, data.Section(0, data.Size))
		if err != nil {
			t.Fatal(err)
		}
		// The backend takes the complete only after the client has given
		// up on it.
		release := make(chan struct{})
		held := back.Inject(harness.Rule{Match: harness.MatchUpload("POST", id), Fault: harness.HoldRequest, Times: 1, Until: release})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err = ops.complete(ctx, key, id, []partResult{p})
		cancel()
		if err == nil {
			t.Fatalf("%s: the complete answered before the backend took it", ops.lib())
		}
		close(release)
		time.Sleep(time.Second)
		held.Remove()
		if held.Hits() != 1 {
			t.Fatalf("%s: the complete never reached the backend proxy", ops.lib())
		}

		etag, err := ops.complete(t.Context(), key, id, []partResult{p})
		if err != nil {
			t.Fatalf("%s: the retried complete failed: %v (the first, cut off, destroyed the upload)", ops.lib(), err)
		}
		out, err := d.c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s: object missing on MinIO after a complete answered %s: %v", ops.lib(), etag, err)
		}
		sum, n, err := hashBody(out.Body)
		if err != nil || n != data.Size || sum != data.SHA256() {
			t.Fatalf("%s: object reads back %d bytes %s (%v), want %d bytes %s", ops.lib(), n, sum, err, data.Size, data.SHA256())
		}
	}
}
