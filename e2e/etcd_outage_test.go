//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

const (
	// outagePhase is how long etcd stays frozen, and then killed.
	outagePhase = 30 * time.Second
	// outageRequestTimeout is the gateway's etcd.request_timeout: the
	// bound within which a request that needs etcd is answered.
	outageRequestTimeout = 2 * time.Second
)

// outageLoad is the session-free workload's record: every request's
// latency, and every failure.
type outageLoad struct {
	mu        sync.Mutex
	latencies []time.Duration
	failures  []string
	written   map[string][]byte // key -> body of every PUT that succeeded
	deleted   map[string]bool
}

// record notes one request; one cut off because the workload ended is
// not counted.
func (l *outageLoad) record(ctx context.Context, what string, start time.Time, err error) {
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latencies = append(l.latencies, time.Since(start))
	if err != nil {
		l.failures = append(l.failures, fmt.Sprintf("%s: %v", what, err))
	}
}

// TestEtcdOutageKeepsSessionFreeTraffic freezes the gateway's external
// etcd (SIGSTOP, a hung member) and then kills it, under a workload of
// plain PUT/GET/HEAD/LIST/DELETE, GETs and HEADs of a registry's blobs
// (`digests.preset: distribution`) and crane pulls through the registry:
// none of those fails and their p99 stays under a second; multipart calls are
// answered 503 SlowDown within the request bound, also those of an upload
// begun before the outage; once etcd is back a multipart upload works
// within 10 s, the upload begun before completes with its parts, and every
// object written before or during the outage is there, unchanged.
func TestEtcdOutageKeepsSessionFreeTraffic(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	harness.SkipInShardMode(t, "it freezes and kills the one etcd its bucket is in")
	etcd := harness.StartEtcdCluster(t, 1)
	bucket := harness.BucketName(t)
	e := harness.Start(t, harness.Options{
		EtcdEndpoints: etcd.Endpoints(),
		Config: map[string]any{
			"etcd":    map[string]any{"request_timeout": outageRequestTimeout.String(), "dial_timeout": "2s"},
			"digests": map[string]any{"preset": "distribution", "preset_storage": bucket + "/registry"},
			"reclaim": map[string]any{"interval": "1h", "election_ttl": "2s"},
		},
	})
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	ctx := t.Context()
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	crane, image, blobs := pushOutageImage(t, e, bucket)
	layers := t.TempDir()
	load := &outageLoad{written: map[string][]byte{}, deleted: map[string]bool{}}
	for i := range 5 {
		key := fmt.Sprintf("plain/before-%d", i)
		body := []byte("written before the outage " + key)
		if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		load.written[key] = body
	}

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() { runOutageWorker(wctx, sdk, bucket, w, blobs, load) })
	}
	var pulls, pullFailures []string
	wg.Go(func() {
		for wctx.Err() == nil {
			dir, err := os.MkdirTemp(layers, "pull-")
			if err == nil {
				_, err = crane.Run("pull", "--format", "oci", image.Ref, dir)
				os.RemoveAll(dir)
			}
			if wctx.Err() != nil {
				return
			}
			pulls = append(pulls, image.Ref)
			if err != nil {
				pullFailures = append(pullFailures, err.Error())
			}
		}
	})

	inflight := beginInflightUpload(t, sdk, bucket)
	etcd.Freeze(0)
	frozen := time.Now()
	refusals := outageMultipart(t, sdk, bucket, "frozen", frozen.Add(outagePhase), inflight)
	etcd.Kill(0)
	killed := time.Now()
	refusals += outageMultipart(t, sdk, bucket, "killed", killed.Add(outagePhase), inflight)
	etcd.Restart(0)
	back := time.Now()

	// Multipart uploads work again within 10 s of etcd's return.
	var uploaded bool
	for !uploaded && time.Since(back) < 10*time.Second {
		uploaded = tryMultipart(ctx, sdk, bucket, "uploads/after") == nil
		if !uploaded {
			time.Sleep(200 * time.Millisecond)
		}
	}
	stop()
	wg.Wait()
	if !uploaded {
		t.Errorf("no multipart upload succeeded within 10s of etcd's return: %v", tryMultipart(ctx, sdk, bucket, "uploads/after"))
	}
	inflight.finish(t, sdk, direct, bucket)
	if refusals == 0 {
		t.Error("no multipart call was tried during the outage")
	}
	for _, f := range pullFailures[:min(len(pullFailures), 5)] {
		t.Errorf("a crane pull through the registry failed during the outage: %s", f)
	}
	if len(pulls) < 10 {
		t.Errorf("only %d crane pulls ran during the outage", len(pulls))
	}
	crane.RequirePullIntact(image)

	load.check(t, direct, bucket, blobs, len(pulls), refusals)
}

// check fails t for every session-free request that failed, a p99 latency
// of a second or more, and any object written (and not deleted) or blob
// that is missing or different on the backend.
func (l *outageLoad) check(t *testing.T, direct *s3.Client, bucket string, blobs []layerBlob, pulls, refusals int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.failures[:min(len(l.failures), 10)] {
		t.Errorf("a session-free request failed during the outage: %s", f)
	}
	if len(l.latencies) < 100 {
		t.Fatalf("only %d session-free requests ran", len(l.latencies))
	}
	slices.Sort(l.latencies)
	if p99 := l.latencies[len(l.latencies)*99/100]; p99 > time.Second {
		t.Errorf("session-free p99 latency %v over %d requests, want under 1s", p99, len(l.latencies))
	}
	t.Logf("%d session-free requests, p99 %v, max %v; %d crane pulls; %d multipart calls refused", len(l.latencies),
		l.latencies[len(l.latencies)*99/100], l.latencies[len(l.latencies)-1], pulls, refusals)
	for key, body := range l.written {
		if l.deleted[key] {
			continue
		}
		out, err := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Errorf("%s, written before or during the outage, is missing: %v", key, err)
			continue
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, body) {
			t.Errorf("%s reads back different from what was written", key)
		}
	}
	for i := range blobs {
		if !layerPresent(t, direct, bucket, blobs, i) {
			t.Errorf("blob %s, named by a manifest, is gone", blobs[i].digest)
		}
	}
}

// pushOutageImage starts a registry writing through e's gateway under
// bucket/registry, pushes an image of two layers to it, and returns crane,
// the image and its manifest and config as blobs of the layout (the
// layers' stored bytes are compressed: the pulls read those).
func pushOutageImage(t *testing.T, e *harness.Env, bucket string) (*harness.Crane, harness.Pushed, []layerBlob) {
	t.Helper()
	storage := harness.RegistryStorage{Endpoint: e.Gateway.Endpoint, AccessKey: e.AccessKey, SecretKey: e.SecretKey,
		Bucket: bucket, RootDirectory: "registry"}
	reg := harness.StartRegistry(t, storage)
	crane := harness.NewCrane(t)
	layers := t.TempDir()
	image := crane.PushImage(reg.Ref("app", ":v1"), false,
		harness.WriteLayerTar(t, layers, 1, 200<<10), harness.WriteLayerTar(t, layers, 2, 100<<10))
	var blobs []layerBlob
	for d, b := range image.Blobs {
		if b.LayerTar != "" {
			continue
		}
		hexDigest := strings.TrimPrefix(d, "sha256:")
		blobs = append(blobs, layerBlob{digest: d, key: storage.BlobsPrefix() + "sha256/" + hexDigest[:2] + "/" + hexDigest + "/data", body: b.Bytes})
	}
	return crane, image, blobs
}

// runOutageWorker sends session-free requests until ctx ends: a PUT, GET,
// HEAD and LIST of a plain key, a DELETE of every other one, and a GET
// and HEAD of a blob in the digest layout.
func runOutageWorker(ctx context.Context, sdk *s3.Client, bucket string, w int, blobs []layerBlob, load *outageLoad) {
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("plain/w%d-%d", w, i)
		body := []byte("written during the outage " + key)
		start := time.Now()
		_, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
		if ctx.Err() != nil {
			return // whether it landed is unknown
		}
		load.record(ctx, "PUT "+key, start, err)
		if err == nil {
			load.mu.Lock()
			load.written[key] = body
			load.mu.Unlock()
		}
		start = time.Now()
		out, err := sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			got, rerr := io.ReadAll(out.Body)
			out.Body.Close()
			if err = rerr; err == nil && !bytes.Equal(got, body) {
				err = errors.New("read back different bytes")
			}
		}
		load.record(ctx, "GET "+key, start, err)
		start = time.Now()
		_, err = sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		load.record(ctx, "HEAD "+key, start, err)
		start = time.Now()
		_, err = sdk.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(fmt.Sprintf("plain/w%d-", w)), MaxKeys: aws.Int32(50)})
		load.record(ctx, "LIST", start, err)
		if i%2 == 1 {
			// Marked before it is sent: a DELETE whose answer is cut off
			// may still have landed.
			load.mu.Lock()
			load.deleted[key] = true
			load.mu.Unlock()
			start = time.Now()
			_, err = sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			load.record(ctx, "DELETE "+key, start, err)
		}
		b := blobs[i%len(blobs)]
		start = time.Now()
		out, err = sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(b.key)})
		if err == nil {
			got, rerr := io.ReadAll(out.Body)
			out.Body.Close()
			if err = rerr; err == nil && !bytes.Equal(got, b.body) {
				err = errors.New("blob read back different bytes")
			}
		}
		load.record(ctx, "GET blob "+b.key, start, err)
		start = time.Now()
		_, err = sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(b.key)})
		load.record(ctx, "HEAD blob "+b.key, start, err)
	}
}

// outageMultipart tries multipart calls until the deadline while etcd is
// out: a CreateMultipartUpload, and an UploadPart, ListParts and
// CompleteMultipartUpload of the upload begun before the outage. Each must
// be refused with 503 SlowDown within the request bound (and a little for
// the request itself). It returns how many it tried.
func outageMultipart(t *testing.T, sdk *s3.Client, bucket, phase string, until time.Time, inflight *inflightUpload) int {
	t.Helper()
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"CreateMultipartUpload", func(ctx context.Context) error {
			_, err := sdk.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("uploads/" + phase)})
			return err
		}},
		{"UploadPart of an upload begun before", func(ctx context.Context) error {
			_, err := uploadPart(ctx, sdk, bucket, inflight.key, inflight.id, 2, inflight.lastPart())
			return err
		}},
		{"ListParts of an upload begun before", func(ctx context.Context) error {
			_, err := sdk.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(inflight.key), UploadId: aws.String(inflight.id)})
			return err
		}},
		{"CompleteMultipartUpload of an upload begun before", func(ctx context.Context) error {
			_, err := completeUpload(ctx, sdk, bucket, inflight.key, inflight.id, []s3types.CompletedPart{inflight.first})
			return err
		}},
	}
	n := 0
	for time.Now().Before(until) {
		c := calls[n%len(calls)]
		// A call that hangs is cut off a little after the bound, so that
		// it fails here and names itself instead of stalling the test.
		ctx, cancel := context.WithTimeout(t.Context(), outageRequestTimeout+5*time.Second)
		start := time.Now()
		err := c.call(ctx)
		took := time.Since(start)
		cancel()
		n++
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "SlowDown" {
			t.Errorf("etcd %s: %s = %v, want SlowDown", phase, c.name, err)
		}
		if took > outageRequestTimeout+time.Second {
			t.Errorf("etcd %s: %s answered after %v, want within %v", phase, c.name, took, outageRequestTimeout+time.Second)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return n
}

// inflightUpload is a multipart upload begun, with its first part, before
// etcd went away.
type inflightUpload struct {
	key, id string
	first   s3types.CompletedPart
	body    []byte // both parts, as the completed object must read
}

// beginInflightUpload creates an upload and uploads its first part (5 MiB,
// the least a part that is not the last may be) through the gateway.
func beginInflightUpload(t *testing.T, sdk *s3.Client, bucket string) *inflightUpload {
	t.Helper()
	u := &inflightUpload{key: "uploads/inflight", body: append(bytes.Repeat([]byte{'1'}, 5<<20), bytes.Repeat([]byte{'2'}, 4096)...)}
	u.id = createUpload(t, sdk, bucket, u.key)
	u.first = mustUploadPart(t, sdk, bucket, u.key, u.id, 1, io.NewSectionReader(bytes.NewReader(u.body[:5<<20]), 0, 5<<20))
	return u
}

// lastPart is the upload's second and last part.
func (u *inflightUpload) lastPart() *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(u.body[5<<20:]), 0, int64(len(u.body)-5<<20))
}

// finish uploads the last part and completes the upload once etcd is back,
// and checks that MinIO stores both parts as the object.
func (u *inflightUpload) finish(t *testing.T, sdk, direct *s3.Client, bucket string) {
	t.Helper()
	last := mustUploadPart(t, sdk, bucket, u.key, u.id, 2, u.lastPart())
	if _, err := completeUpload(t.Context(), sdk, bucket, u.key, u.id, []s3types.CompletedPart{u.first, last}); err != nil {
		t.Fatalf("completing the upload begun before the outage, after etcd returned: %v", err)
	}
	out, err := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(u.key)})
	if err != nil {
		t.Fatalf("the upload begun before the outage: %v", err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, u.body) {
		t.Errorf("the upload begun before the outage reads back %d bytes, want its two parts (%d)", len(got), len(u.body))
	}
}

// tryMultipart creates, uploads one part to and completes an upload of key.
func tryMultipart(ctx context.Context, sdk *s3.Client, bucket, key string) error {
	created, err := sdk.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return err
	}
	part, err := uploadPart(ctx, sdk, bucket, key, aws.ToString(created.UploadId), 1, smallPart())
	if err != nil {
		return err
	}
	_, err = completeUpload(ctx, sdk, bucket, key, aws.ToString(created.UploadId), []s3types.CompletedPart{
		{PartNumber: aws.Int32(1), ETag: part.ETag, ChecksumCRC32: part.ChecksumCRC32},
	})
	return err
}

// TestServeStartsWithoutEtcd starts a gateway while its external etcd is
// down: it is ready, serves plain PUT and GET, refuses a multipart call
// with SlowDown, and once etcd comes up takes multipart uploads and leads
// the reclaimer election.
func TestServeStartsWithoutEtcd(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	harness.SkipInShardMode(t, "it starts serve with its one etcd down, and with shards the default shard must answer at start")
	etcd := harness.StartEtcdCluster(t, 1)
	etcd.Kill(0)
	bucket := harness.BucketName(t)
	e := harness.Start(t, harness.Options{
		EtcdEndpoints: etcd.Endpoints(),
		Config: map[string]any{
			"etcd":    map[string]any{"request_timeout": outageRequestTimeout.String(), "dial_timeout": "1s"},
			"reclaim": map[string]any{"interval": "1h", "election_ttl": "2s"},
		},
	})
	sdk := e.SDK(t)
	ctx := t.Context()
	for path, want := range map[string]int{"/readyz": http.StatusOK, "/etcdz": http.StatusServiceUnavailable} {
		resp, err := http.Get(e.Gateway.AdminEndpoint + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s without etcd = %d, want %d", path, resp.StatusCode, want)
		}
	}
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	body := []byte("written while etcd was down")
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("plain"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("PUT without etcd: %v", err)
	}
	out, err := sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("plain")})
	if err != nil {
		t.Fatalf("GET without etcd: %v", err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, body) {
		t.Error("GET without etcd read back different bytes")
	}
	var api smithy.APIError
	if err := tryMultipart(ctx, sdk, bucket, "uploads/early"); !errors.As(err, &api) || api.ErrorCode() != "SlowDown" {
		t.Errorf("multipart upload without etcd = %v, want SlowDown", err)
	}

	etcd.Restart(0)
	eventually(t, 10*time.Second, func() (bool, string) {
		err := tryMultipart(ctx, sdk, bucket, "uploads/after")
		return err == nil, fmt.Sprintf("multipart upload after etcd came up: %v", err)
	})
	awaitLeading(t, e.Gateway)
}
