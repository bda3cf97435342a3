//go:build e2e

package e2e

// TestMultiNode's workload: multipart uploads spread over the gateways,
// retried across them, and the report of what became of each.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// mnUpload is one upload of the workload.
type mnUpload struct {
	worker   int
	key      string
	uploadID string
	data     harness.Data
	etag     string
	created  time.Time
	done     time.Time
	// maxGap is the longest time between two of its calls succeeding:
	// about the longest its session went without recorded activity.
	maxGap time.Duration
}

// mnWorkload is the clients: mnWorkers goroutines, each with an
// aws-sdk-go-v2 client per gateway, uploading objects in parts until
// told to stop. A call that gets no answer, a 5xx or OperationAborted is
// retried on the other gateway; any other error, and NoSuchUpload above
// all, is a failure of the test.
type mnWorkload struct {
	bucket  string
	names   []string
	clients [][]*s3.Client // [worker][gateway]
	stop    chan struct{}
	wg      sync.WaitGroup

	mu       sync.Mutex
	done     []mnUpload
	failures []string
	retries  map[string]int // by gateway and cause
}

func newMNWorkload(t *testing.T, m *harness.MinIO, bucket string, gateways []*harness.Gateway, names []string) *mnWorkload {
	w := &mnWorkload{bucket: bucket, names: names, stop: make(chan struct{}), retries: map[string]int{}}
	for range mnWorkers {
		var cs []*s3.Client
		for _, g := range gateways {
			cs = append(cs, harness.NewS3Client(g.Endpoint, m.Region, m.AccessKey, m.SecretKey, mnTransport(t), true))
		}
		w.clients = append(w.clients, cs)
	}
	return w
}

func (w *mnWorkload) start(ctx context.Context) {
	for i := range mnWorkers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.worker(ctx, i)
		}()
	}
}

// finish lets every worker complete the upload it is in and waits for
// them.
func (w *mnWorkload) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	finished := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(mnPhaseTimeout):
		t.Fatalf("the workers did not finish their uploads within %v", mnPhaseTimeout)
	}
	w.check(t)
}

// check fails the test with the workers' failures, if any.
func (w *mnWorkload) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failures) > 0 {
		t.Fatalf("the workload failed:\n%s", strings.Join(w.failures, "\n"))
	}
}

func (w *mnWorkload) completed() []mnUpload {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.done)
}

// awaitCreatedAndCompleted waits until n uploads created after since have
// completed (and read back intact).
func (w *mnWorkload) awaitCreatedAndCompleted(t *testing.T, since time.Time, n int, when string) {
	t.Helper()
	eventually(t, mnPhaseTimeout, func() (bool, string) {
		w.check(t)
		got := 0
		for _, u := range w.completed() {
			if !u.created.Before(since) {
				got++
			}
		}
		return got >= n, fmt.Sprintf("%d uploads created %s completed, want %d", got, when, n)
	})
}

func (w *mnWorkload) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures = append(w.failures, fmt.Sprintf(format, args...))
}

// worker uploads objects until the workload stops (or ctx ends).
func (w *mnWorkload) worker(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(uint64(id), 0x6d6e))
	gw := id % len(w.names) // the gateway this worker talks to, until it fails
	for n := 0; ; n++ {
		// A pause between uploads keeps a two-core machine from
		// spending all its time on the workload's bytes.
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(200+rng.IntN(300)) * time.Millisecond):
		}
		u, err := w.upload(ctx, id, n, rng, &gw)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.fail("worker %d: %v", id, err)
			return
		}
		w.mu.Lock()
		w.done = append(w.done, u)
		w.mu.Unlock()
	}
}

// upload makes one object of two or three parts, with pauses shorter than
// the grace period between them, and reads it back.
func (w *mnWorkload) upload(ctx context.Context, worker, n int, rng *rand.Rand, gw *int) (mnUpload, error) {
	parts := 2 + rng.IntN(2)
	size := int64(parts-1)*mnPartSize + 1 + rng.Int64N(256*kib)
	u := mnUpload{
		worker: worker,
		key:    fmt.Sprintf("w%d/%03d.bin", worker, n),
		data:   harness.NewData(uint64(worker)<<32|uint64(n), size),
	}
	bucket, key := aws.String(w.bucket), aws.String(u.key)
	err := w.call(ctx, worker, gw, "CreateMultipartUpload "+u.key, func(ctx context.Context, c *s3.Client) error {
		out, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bucket, Key: key})
		if err == nil {
			u.uploadID = aws.ToString(out.UploadId)
		}
		return err
	})
	if err != nil {
		// A create whose answer was lost may have left a session
		// behind: it is abandoned, and the reclaimer's to delete.
		return u, err
	}
	u.created = time.Now()
	last := u.created
	activity := func() {
		now := time.Now()
		u.maxGap = max(u.maxGap, now.Sub(last))
		last = now
	}

	var completed []s3types.CompletedPart
	for p := 1; p <= parts; p++ {
		if p > 1 {
			pause := time.Duration(100+rng.IntN(200)) * time.Millisecond
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return u, ctx.Err()
			}
		}
		off := int64(p-1) * mnPartSize
		length := min(mnPartSize, size-off)
		what := fmt.Sprintf("UploadPart %d of %s (upload %s)", p, u.key, u.uploadID)
		err := w.call(ctx, worker, gw, what, func(ctx context.Context, c *s3.Client) error {
			out, err := uploadPart(ctx, c, w.bucket, u.key, u.uploadID, int32(p), u.data.Section(off, length))
			if err == nil {
				completed = append(completed, s3types.CompletedPart{PartNumber: aws.Int32(int32(p)), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32})
			}
			return err
		})
		if err != nil {
			return u, err
		}
		activity()
	}

	what := fmt.Sprintf("CompleteMultipartUpload %s (upload %s)", u.key, u.uploadID)
	err = w.call(ctx, worker, gw, what, func(ctx context.Context, c *s3.Client) error {
		out, err := completeUpload(ctx, c, w.bucket, u.key, u.uploadID, completed)
		if err == nil {
			u.etag = aws.ToString(out.ETag)
		}
		return err
	})
	if err != nil {
		return u, err
	}
	activity()
	u.done = time.Now()

	// Read it back, through whichever gateway the worker uses now.
	want := u.data.SHA256()
	err = w.call(ctx, worker, gw, "GetObject "+u.key, func(ctx context.Context, c *s3.Client) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		sum, got, err := harness.HashReader(out.Body)
		if err != nil {
			return fmt.Errorf("read body after %d bytes: %w", got, err)
		}
		if got != size || sum != want {
			return mnCorrupt{fmt.Sprintf("%s reads back %d bytes sha256 %s, want %d bytes sha256 %s", u.key, got, sum, size, want)}
		}
		return nil
	})
	return u, err
}

// mnCorrupt is an object that read back wrong: never retried.
type mnCorrupt struct{ msg string }

func (e mnCorrupt) Error() string { return e.msg }

// call runs op on the worker's current gateway and retries it, on the
// other gateway, while the answer says nothing was done or there was none
// (the gateway died, or hangs on etcd), until mnOpDeadline.
func (w *mnWorkload) call(ctx context.Context, worker int, gw *int, what string, op func(context.Context, *s3.Client) error) error {
	deadline := time.Now().Add(mnOpDeadline)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, mnOpTimeout)
		err := op(actx, w.clients[worker][*gw])
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cause, retry := mnRetryable(err)
		if !retry {
			return fmt.Errorf("%s on %s: %s: %w", what, w.names[*gw], cause, err)
		}
		w.mu.Lock()
		w.retries[w.names[*gw]+" "+cause]++
		w.mu.Unlock()
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: gave up after %d attempts, the last on %s: %w", what, attempt, w.names[*gw], err)
		}
		*gw = (*gw + 1) % len(w.names)
		select {
		case <-time.After(min(time.Duration(attempt)*50*time.Millisecond, 500*time.Millisecond)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// mnRetryable classifies an S3 call's error: retried are a missing answer
// (connection refused or reset, timeout), 5xx (the gateway could not reach
// etcd or the backend) and OperationAborted (a complete of the upload is,
// or was on a killed gateway, in flight). NoSuchUpload is never retried:
// it would mean a live upload was deleted.
func mnRetryable(err error) (cause string, retry bool) {
	var corrupt mnCorrupt
	if errors.As(err, &corrupt) {
		return "corrupt object", false
	}
	// The SDK wraps a request that got no answer in a ResponseError too,
	// with status 0.
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() > 0 {
		status, code := re.HTTPStatusCode(), apiErrorCode(err)
		switch {
		case status >= 500:
			return fmt.Sprintf("%d %s", status, code), true
		case status == http.StatusConflict && code == "OperationAborted":
			return "409 OperationAborted", true
		}
		return fmt.Sprintf("%d %s", status, code), false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout", true
	}
	return "no answer", true
}

// report logs what the workload did: the evidence a reader of a passing
// run wants (how many uploads, how the clients failed over, how long
// sessions went without activity).
func (w *mnWorkload) report(t *testing.T, took time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var maxGap time.Duration
	var bytes int64
	for _, u := range w.done {
		maxGap = max(maxGap, u.maxGap)
		bytes += u.data.Size
	}
	var causes []string
	for k, v := range w.retries {
		causes = append(causes, fmt.Sprintf("%s x%d", k, v))
	}
	sort.Strings(causes)
	t.Logf("%d uploads (%d MiB) completed and read back in %s; longest time between an upload's calls %s (grace %s); retries: %s",
		len(w.done), bytes>>20, took.Round(time.Millisecond), maxGap.Round(time.Millisecond), mnGrace, strings.Join(causes, ", "))
}
