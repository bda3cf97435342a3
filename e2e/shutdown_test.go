//go:build e2e

package e2e

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestShutdownDrainsBeforeStopping sends SIGTERM while a client is halfway
// through uploading an object, and checks the order an operator's load
// balancer relies on: /readyz answers 503 at once, the S3 listener still
// serves new requests (closing their connections) for the drain delay,
// then stops accepting, the upload in flight completes intact, and the
// process exits with status 0.
func TestShutdownDrainsBeforeStopping(t *testing.T) {
	const drain = 6 * time.Second
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"shutdown": map[string]any{"drain_delay": drain.String(), "timeout": "60s"},
	}})
	e.RequireGateway(t)
	ctx := t.Context()
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	small := harness.NewData(61, 4*kib)
	if _, err := e.SDK(t).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("drain/small"), Body: small.Reader(),
	}); err != nil {
		t.Fatal(err)
	}

	// The upload in flight: a presigned PUT whose body the test feeds.
	big := harness.NewData(62, 8*mib)
	pu, err := e.MinioGo(t).PresignedPutObject(ctx, bucket, "drain/inflight", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	feed, put := startFedPut(t, e, pu.String(), big.Size)
	if _, err := feed.Write(big.Bytes()[:big.Size/2]); err != nil {
		t.Fatalf("first half of the body: %v", err)
	}

	signalled := time.Now()
	if err := e.Gateway.Terminate(); err != nil {
		t.Fatal(err)
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	awaitStatus(t, fresh, e.Gateway.AdminEndpoint+"/readyz", http.StatusServiceUnavailable, drain)
	resp, err := fresh.Get(e.Gateway.AdminEndpoint + "/readyz")
	if err != nil {
		t.Fatalf("/readyz during the drain delay: %v", err)
	}
	resp.Body.Close()
	if !resp.Close {
		t.Errorf("/readyz during the drain delay kept its connection open; responses should say Connection: close")
	}

	// A new client on a new connection is still served, and told to go.
	out, err := e.SDK(t).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("drain/small")})
	if err != nil {
		t.Fatalf("GET during the drain delay: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || string(got) != string(small.Bytes()) {
		t.Fatalf("GET during the drain delay read %d bytes, %v", len(got), err)
	}
	if since := time.Since(signalled); since >= drain {
		t.Fatalf("the checks during the drain took %v, longer than the drain delay %v; nothing was proven", since, drain)
	}

	// After the drain delay the listener stops accepting.
	closed := awaitRefused(t, e.Gateway.Addr(), drain+20*time.Second)
	if d := closed.Sub(signalled); d < drain {
		t.Errorf("the S3 listener stopped accepting %v after SIGTERM, before the drain delay of %v", d, drain)
	}
	select {
	case err := <-put:
		t.Fatalf("the upload in flight ended before its body was sent: %v", err)
	default:
	}

	// The upload in flight still completes, intact.
	if _, err := feed.Write(big.Bytes()[big.Size/2:]); err != nil {
		t.Fatalf("second half of the body: %v", err)
	}
	feed.Close()
	if err := <-put; err != nil {
		t.Fatalf("the upload in flight at SIGTERM failed: %v", err)
	}
	requireObject(t, direct, bucket, "drain/inflight", big)

	if err := e.Gateway.WaitExit(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Gateway.Exited(); err != nil {
		t.Errorf("sweepgate exited with %v after a clean drain, want status 0", err)
	}
}

// startFedPut starts a PUT of size bytes to url whose body the test writes
// into feed; put receives how the request ended.
func startFedPut(t *testing.T, e *harness.Env, url string, size int64) (feed *io.PipeWriter, put <-chan error) {
	body, feed := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	client := e.HTTPClient(t)
	done := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = &statusError{resp.Status}
			}
		}
		done <- err
	}()
	return feed, done
}

type statusError struct{ status string }

func (e *statusError) Error() string { return "status " + e.status }

// awaitStatus polls url until it answers status, failing the test after
// timeout.
func awaitStatus(t *testing.T, c *http.Client, url string, status int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := c.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == status {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %d within %v (last: %v)", url, status, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitRefused polls addr with new connections until one is refused, and
// returns when; it fails the test after timeout.
func awaitRefused(t *testing.T, addr string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return time.Now()
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepted connections %v after SIGTERM", addr, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
