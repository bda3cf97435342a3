//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// activityGrace is the grace and delete_after of the activity tests: short,
// so that a part can outlast it.
const activityGrace = time.Second

// startActivityGateway starts a gateway whose reclaimer has the short grace
// and runs passes only when asked, and waits until it leads.
func startActivityGateway(t *testing.T) *harness.Env {
	t.Helper()
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"reclaim": map[string]any{
			"grace": activityGrace.String(), "delete_after": activityGrace.String(), "interval": "1h",
			"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1, // one upload is all there is
		},
	}})
	e.RequireGateway(t)
	awaitLeading(t, e.Gateway)
	return e
}

// requireNothingDone fails unless pass rep neither marked nor deleted.
func requireNothingDone(t *testing.T, rep reclaim.Report) {
	t.Helper()
	if a := rep.Acted; a.Marked.Sessions+a.Intents.Sessions+a.Deleted.Sessions != 0 || rep.Stopped != "" {
		t.Fatalf("pass %d acted %+v (stopped %q); want nothing marked or deleted", rep.Pass, a, rep.Stopped)
	}
}

// TestReclaimPartStreamingPastGrace: a part whose body streams through the
// gateway for longer than the grace keeps its upload alive; passes that run
// meanwhile mark and delete nothing, and the part and the complete succeed.
func TestReclaimPartStreamingPastGrace(t *testing.T) {
	t.Parallel()
	e := startActivityGateway(t)
	admin := e.Gateway.AdminEndpoint
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	store := newSessionStore(t, e)
	bucket, key := e.Bucket(t), "slow/part.bin"
	id := createUpload(t, sdk, bucket, key)

	// The part goes through a presigned URL (unsigned payload), so its
	// body can be fed by hand while the request streams.
	preq, err := s3.NewPresignClient(sdk).PresignUploadPart(t.Context(), &s3.UploadPartInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id), PartNumber: aws.Int32(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	body, feed := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), preq.Method, preq.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range preq.SignedHeader {
		if k != "Host" {
			req.Header[k] = v
		}
	}
	d := harness.NewData(1301, 6000)
	data := d.Bytes()
	req.ContentLength = d.Size
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := e.HTTPClient(t).Do(req)
		if err != nil {
			feed.CloseWithError(err)
			resp = &http.Response{StatusCode: 0, Status: err.Error(), Body: io.NopCloser(strings.NewReader(""))}
		}
		answered <- resp
	}()
	if _, err := feed.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	inFlight := func() int64 {
		ctx, cancel := store.ctx(t)
		defer cancel()
		resp, err := store.client(bucket).Get(ctx, store.prefix+"inflight/"+id+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	eventually(t, 10*time.Second, func() (bool, string) { return inFlight() == 1, "the part's in-flight record" })

	// The part began longer ago than the grace, and is still streaming.
	time.Sleep(2 * activityGrace)
	for range 2 {
		rep := runPass(t, admin, shardFlags(e.Gateway, bucket)...)
		requireNothingDone(t, rep)
		if rep.Uploads.Keep.Sessions != 1 {
			t.Fatalf("pass %d during the part planned %+v; want the upload kept", rep.Pass, rep.Uploads)
		}
		store.requireState(t, bucket, id, "active")
		time.Sleep(activityGrace + 100*time.Millisecond)
	}

	if _, err := feed.Write(data[len(data)/2:]); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	resp := <-answered
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the streamed part answered %s", resp.Status)
	}
	part := s3types.CompletedPart{PartNumber: aws.Int32(1), ETag: aws.String(resp.Header.Get("ETag"))}
	if _, err := completeUpload(t.Context(), sdk, bucket, key, id, []s3types.CompletedPart{part}); err != nil {
		t.Fatalf("complete after the streamed part: %v", err)
	}
	requireObject(t, direct, bucket, key, d)
	// The keyspace is in schema 2, where the gateway keeps the upload's
	// in-flight record for multipart.PartLinger after its last part, for
	// the next part to take; then it deletes it.
	eventually(t, multipart.PartLinger+10*time.Second, func() (bool, string) {
		n := inFlight()
		return n == 0, fmt.Sprintf("%d in-flight records %s after the part; want none once its linger is over", n, multipart.PartLinger)
	})
}

// TestReclaimPartAroundGatewayRevertsMark: a part written directly to
// MinIO with the backend's credentials after the upload was marked makes
// the next pass revert the mark instead of deleting; the metric counts it
// and the upload completes through the gateway afterwards.
func TestReclaimPartAroundGatewayRevertsMark(t *testing.T) {
	t.Parallel()
	e := startActivityGateway(t)
	admin := e.Gateway.AdminEndpoint
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	store := newSessionStore(t, e)
	bucket, key := e.Bucket(t), "around/gateway.bin"
	id := createUpload(t, sdk, bucket, key)
	first := bytes.Repeat([]byte{'a'}, 5<<20) // every part but the last is at least 5 MiB
	p1 := mustUploadPart(t, sdk, bucket, key, id, 1, io.NewSectionReader(bytes.NewReader(first), 0, int64(len(first))))
	idleSince := time.Now()

	time.Sleep(time.Until(idleSince.Add(activityGrace + 200*time.Millisecond)))
	eventually(t, 30*time.Second, func() (bool, string) {
		rep := runPass(t, admin, shardFlags(e.Gateway, bucket)...)
		return rep.Acted.Marked.Sessions == 1, fmt.Sprintf("pass %d marked %+v", rep.Pass, rep.Acted.Marked)
	})
	store.requireState(t, bucket, id, "expired")

	second := []byte("written around the gateway")
	p2 := mustUploadPart(t, direct, bucket, key, id, 2, io.NewSectionReader(bytes.NewReader(second), 0, int64(len(second))))
	before, _ := readMetrics(t, e.Gateway)

	time.Sleep(activityGrace + 200*time.Millisecond) // the mark has stood delete_after
	rep := runPass(t, admin, shardFlags(e.Gateway, bucket)...)
	if rep.Uploads.Delete.Sessions != 1 || rep.Acted.AroundGateway.Sessions != 1 || rep.Acted.Intents.Sessions != 0 {
		t.Fatalf("pass %d planned %+v, acted %+v; want the planned delete not done, counted around the gateway", rep.Pass, rep.Uploads, rep.Acted)
	}
	rec := store.requireState(t, bucket, id, "active")
	if !strings.Contains(rec.path(), "active->expired(reclaimer) expired->active(reclaimer)") {
		t.Errorf("history %s; want the mark reverted by the reclaimer", rec.path())
	}
	after, _ := readMetrics(t, e.Gateway)
	labels := append([]string{"verdict", "delete"}, shardLabel(e.Gateway, bucket)...)
	b, _ := before.series("sweepgate_reclaim_activity_around_gateway_total", labels...)
	a, _ := after.series("sweepgate_reclaim_activity_around_gateway_total", labels...)
	if a != b+1 {
		t.Errorf("activity_around_gateway_total{delete} went from %v to %v, want one more", b, a)
	}
	if got := backendPartNumbers(t, direct, bucket, key, id); len(got) != 2 {
		t.Fatalf("MinIO holds parts %v, want both", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := completeUpload(ctx, sdk, bucket, key, id, []s3types.CompletedPart{p1, p2}); err != nil {
		t.Fatalf("complete through the gateway after the revert: %v", err)
	}
	obj, err := direct.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if got, err := io.ReadAll(obj.Body); err != nil || !bytes.Equal(got, append(first, second...)) {
		t.Errorf("the completed object has %d bytes (%v); want both parts", len(got), err)
	}
}
