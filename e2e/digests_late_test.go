//go:build e2e

package e2e

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestDigestLateDelete has MinIO execute the reclaimer's DeleteObjects
// after the reclaimer gave up on it: the fault proxy between the gateway
// process and MinIO holds the request past reclaim.backend_timeout and
// forwards it once the test says so. Until the guard is settled (the
// delete's deadline plus digests.guard_settle plus reclaim.clock_skew),
// a producer's push of a manifest naming the blob is refused with the
// retryable 503 and the blob reads 404, before and after the delete
// lands; afterwards the producer uploads the blob again and pushes, and
// no manifest names a missing blob.
func TestDigestLateDelete(t *testing.T) {
	t.Parallel()
	l := startLateDeleteEnv(t, 2*time.Second, 4*time.Second, time.Second)
	admin, proxy, sdk, direct, bucket, blobs := l.admin, l.proxy, l.sdk, l.direct, l.bucket, l.blobs
	ctx := t.Context()
	put := func(key string, ids ...int) error { return l.put(t, key, ids...) }

	release := make(chan struct{})
	held := proxy.Inject(harness.Rule{
		Match: func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPost && r.Query.Has("delete") },
		Fault: harness.HoldRequest, Times: 1, Until: release,
	})
	if rep := digestPassReport(t, admin, l.shard...); rep.Digests.Settling != 1 || rep.Digests.Deleted != 0 {
		t.Errorf("pass whose delete is held: %+v, want the guard kept settling", *rep.Digests)
	}
	if held.Hits() != 1 {
		t.Fatalf("the proxy held %d deletes, want 1", held.Hits())
	}
	requireGuardHolds(t, sdk, bucket, blobs, "while the delete is held")
	close(release)
	deadline := time.Now().Add(30 * time.Second)
	for layerPresent(t, direct, bucket, blobs, 1) {
		if time.Now().After(deadline) {
			t.Fatal("the held delete did not land within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	requireGuardHolds(t, sdk, bucket, blobs, "after the late delete landed")

	// Passes settle the guard once the delete can no longer be executed;
	// then the producer uploads the blob again and pushes.
	deadline = time.Now().Add(60 * time.Second)
	for {
		digestPassReport(t, admin, l.shard...)
		_, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(blobs[1].key), Body: bytes.NewReader(blobs[1].body)})
		if err == nil {
			break
		}
		if apiErrorCode(err) != "SlowDown" || time.Now().After(deadline) {
			t.Fatalf("re-upload of the blob: %v, want SlowDown until the guard is settled, within 60s", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := put("manifests/app/v2", 0, 1); err != nil {
		t.Fatalf("push after the guard was settled: %v", err)
	}
	digestPassReport(t, admin, l.shard...)
	requireLayersPresent(t, direct, bucket, blobs, "at the end: every blob a manifest names", 0, 1)
}

// lateDeleteEnv is a sweepgate behind a fault proxy to MinIO, passes an
// hour apart, two layers pushed, a manifest naming layer 0, and passes
// run until layer 1 is pending.
type lateDeleteEnv struct {
	e             *harness.Env
	proxy         *harness.FaultProxy
	admin, bucket string
	// shard sends a pass to the layout's shard (shardFlags).
	shard       []string
	sdk, direct *s3.Client
	blobs       []layerBlob
}

func startLateDeleteEnv(t *testing.T, backendTimeout, guardSettle, clockSkew time.Duration) *lateDeleteEnv {
	t.Helper()
	bucket := harness.BucketName(t)
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"namespaces":          []string{bucket + "/blobs/sha256/"},
			"sources":             []string{bucket + "/manifests/"},
			"placement_grace":     digestPlacementGrace.String(),
			"max_delete_fraction": 1,
			"guard_settle":        guardSettle.String(),
		},
		"reclaim": map[string]any{"interval": "1h", "backend_timeout": backendTimeout.String(), "election_ttl": "1s", "clock_skew": clockSkew.String()},
	}})
	e.RequireGateway(t)
	awaitLeading(t, e.Gateway)
	l := &lateDeleteEnv{e: e, proxy: proxy, admin: e.Gateway.AdminEndpoint, bucket: bucket, shard: shardFlags(e.Gateway, bucket), sdk: e.SDK(t), direct: e.DirectSDK(t)}
	if _, err := l.sdk.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	l.blobs = pushLayers(t, l.sdk, bucket, 2)
	if err := l.put(t, "manifests/app/v1", 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for digestPassReport(t, l.admin, l.shard...).Digests.Pending != 1 {
		if time.Now().After(deadline) {
			t.Fatal("blob 1 not pending within 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return l
}

// put pushes a manifest naming the layers ids to key.
func (l *lateDeleteEnv) put(t *testing.T, key string, ids ...int) error {
	_, err := l.sdk.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(l.bucket), Key: aws.String(key), Body: bytes.NewReader(ociManifest(l.blobs, ids...))})
	return err
}

// requireGuardHolds checks that blobs[1]'s guard holds producers off: a
// manifest naming it is refused with the retryable SlowDown and not
// stored, and a HEAD of the blob answers 404.
func requireGuardHolds(t *testing.T, sdk *s3.Client, bucket string, blobs []layerBlob, when string) {
	t.Helper()
	ctx := t.Context()
	_, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/held"), Body: bytes.NewReader(ociManifest(blobs, 1))})
	if apiErrorCode(err) != "SlowDown" {
		t.Fatalf("%s: push naming the guarded blob: %v, want SlowDown", when, err)
	}
	_, err = sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(blobs[1].key)})
	if code := apiErrorCode(err); code != "NotFound" && code != "NoSuchKey" {
		t.Fatalf("%s: HEAD of the guarded blob: %v, want 404", when, err)
	}
	if _, err := sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/held")}); err == nil {
		t.Fatalf("%s: the refused manifest is stored", when)
	}
}

// TestDigestGuardSettledWithoutPass drops the reclaimer's DeleteObjects on
// its way to MinIO, so its outcome is unclear and the blob's guard stays
// armed, with passes an hour apart. A producer retrying its manifest push
// once a second gets through within the guard's settle time (the delete's
// deadline, reclaim.backend_timeout after it was sent, plus
// digests.guard_settle plus reclaim.clock_skew) and a few seconds, with no
// pass run meanwhile: the leader settles the guard on its own.
func TestDigestGuardSettledWithoutPass(t *testing.T) {
	t.Parallel()
	const (
		backendTimeout = 2 * time.Second
		guardSettle    = 4 * time.Second
		clockSkew      = time.Second
	)
	l := startLateDeleteEnv(t, backendTimeout, guardSettle, clockSkew)
	admin, proxy, sdk, direct, bucket, blobs := l.admin, l.proxy, l.sdk, l.direct, l.bucket, l.blobs
	ctx := t.Context()
	dropped := proxy.Inject(harness.Rule{
		Match: func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPost && r.Query.Has("delete") },
		Fault: harness.CloseBeforeForward, Times: 1,
	})
	rep := digestPassReport(t, admin, l.shard...)
	sent := time.Now()
	if dropped.Hits() != 1 || rep.Digests.Settling != 1 || rep.Digests.Deleted != 0 {
		t.Fatalf("pass whose delete was dropped: %d dropped, report %+v; want the guard kept settling", dropped.Hits(), *rep.Digests)
	}
	requireGuardHolds(t, sdk, bucket, blobs, "right after the unclear delete")

	// Retry once a second, as a registry client does, and run no pass.
	settled := sent.Add(backendTimeout + guardSettle + clockSkew)
	limit := settled.Add(5 * time.Second)
	for {
		_, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/app/v2"), Body: bytes.NewReader(ociManifest(blobs, 0, 1))})
		if err == nil {
			break
		}
		if apiErrorCode(err) != "SlowDown" {
			t.Fatalf("manifest push while the guard stands: %v, want SlowDown", err)
		}
		if time.Now().After(limit) {
			t.Fatalf("manifest push still refused %v after the guard's settle time, with no pass run: %v", time.Since(settled).Round(time.Millisecond), err)
		}
		time.Sleep(time.Second)
	}
	requireLayersPresent(t, direct, bucket, blobs, "after the guard was settled: every blob a manifest names", 0, 1)
}
