//go:build e2e

package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestDigestGatewaysDisagreeOnLayout runs two gateways over one etcd and
// one MinIO: the reclaiming one without a reference source the other has.
// Manifests are written into that source through each (the reclaiming one
// stores its as a plain object). While both run, no pass deletes the blobs
// only those manifests name, and each pass's report says which gateway
// differs; the metric counts it.
func TestDigestGatewaysDisagreeOnLayout(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	bucket := harness.BucketName(t)
	digestsConfig := func(sources ...string) map[string]any {
		return map[string]any{
			"namespaces":          []string{bucket + "/blobs/sha256/"},
			"sources":             sources,
			"placement_grace":     digestPlacementGrace.String(),
			"max_delete_fraction": 1,
			"max_mark_fraction":   1,
		}
	}
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"digests": digestsConfig(bucket + "/manifests/"),
		"reclaim": map[string]any{"interval": "1h"},
	}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	awaitLeading(t, e.Gateway)
	other := harness.StartGateway(t, e.MinIO, harness.Options{
		EtcdEndpoints: []string{e.Gateway.EtcdClientURL},
		Config: map[string]any{
			"digests": digestsConfig(bucket+"/manifests/", bucket+"/charts/"),
			"reclaim": map[string]any{"enabled": false},
		},
	})
	otherID := "@" + strings.TrimPrefix(other.AdminEndpoint, "http://")
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	otherSDK := harness.NewS3Client(other.Endpoint, e.Region, e.AccessKey, e.SecretKey, http.DefaultTransport, true)
	ctx := t.Context()
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	blobs := pushLayers(t, sdk, bucket, 3)
	for i, c := range []*s3.Client{sdk, otherSDK} {
		key := []string{"charts/through-reclaimer", "charts/through-other"}[i]
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(ociManifest(blobs, i))}); err != nil {
			t.Fatalf("manifest %s: %v", key, err)
		}
	}
	time.Sleep(digestPlacementGrace + 200*time.Millisecond)
	for range 4 {
		rep := digestPassReport(t, admin, shardFlags(e.Gateway, bucket)...)
		if rep.Digests.Deleted != 0 || rep.Digests.Pending != 0 || !strings.Contains(rep.Digests.Kept, otherID) || !strings.Contains(rep.Digests.Kept, "layout") {
			t.Fatalf("pass with a gateway of another layout: kept %q, pending %d, deleted %d; want everything kept, naming %s",
				rep.Digests.Kept, rep.Digests.Pending, rep.Digests.Deleted, otherID)
		}
	}
	requireLayersPresent(t, direct, bucket, blobs, "while the gateways disagree", 0, 1, 2)
	metrics, _ := readMetrics(t, e.Gateway)
	if v, _ := metrics.series("sweepgate_reclaim_layout_mismatch_gateways", shardLabel(e.Gateway, bucket)...); v != 1 {
		t.Errorf("layout mismatch gauge %v, want 1", v)
	}
}
