//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// registryBlob is a blob in distribution's layout.
type registryBlob struct {
	digest, key string
	body        []byte
}

func newRegistryBlob(body []byte) registryBlob {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	return registryBlob{digest: "sha256:" + h, key: "docker/registry/v2/blobs/sha256/" + h[:2] + "/" + h + "/data", body: body}
}

// revisionLink is the key of repository repo's revision link to digest.
func revisionLink(repo, digest string) string {
	return "docker/registry/v2/repositories/" + repo + "/_manifests/revisions/sha256/" + strings.TrimPrefix(digest, "sha256:") + "/link"
}

// TestDigestContentThroughTheGateway writes a registry's objects through
// the gateway with digests.preset distribution, the way distribution's S3
// driver writes them: layers and a config by PutObject, one manifest moved
// into place from its upload with CopyObject, another by PutObject, and
// revision links naming the manifests. What each manifest names is
// recorded as it is written (explain shows it as content), a manifest
// that does not hash to its key and a small multipart complete onto a
// blob key are refused with nothing stored, and once one manifest's
// revision link is deleted the passes delete that manifest, then its
// private layer, and keep the shared one.
func TestDigestContentThroughTheGateway(t *testing.T) {
	t.Parallel()
	bucket := harness.BucketName(t)
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"preset": "distribution", "preset_storage": bucket,
			"placement_grace": digestPlacementGrace.String(), "trash_window": digestTrashWindow.String(),
			"max_delete_fraction": 1, "max_mark_fraction": 1,
		},
		"reclaim": map[string]any{"interval": "1h"},
	}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	awaitLeading(t, e.Gateway)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	ctx := t.Context()
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	put := func(key string, body []byte) error {
		_, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
		return err
	}
	shared := newRegistryBlob(bytes.Repeat([]byte("shared layer;"), 500))
	private := newRegistryBlob(bytes.Repeat([]byte("private layer;"), 500))
	config := newRegistryBlob([]byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`))
	desc := func(b registryBlob) string {
		return fmt.Sprintf(`{"mediaType":"application/octet-stream","digest":%q,"size":%d}`, b.digest, len(b.body))
	}
	manifest := func(layers ...registryBlob) registryBlob {
		var ls []string
		for _, l := range layers {
			ls = append(ls, desc(l))
		}
		return newRegistryBlob([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":` + desc(config) + `,"layers":[` + strings.Join(ls, ",") + `]}`))
	}
	one, two := manifest(shared, private), manifest(shared)
	for _, b := range []registryBlob{shared, private, config} {
		if err := put(b.key, b.body); err != nil {
			t.Fatalf("put blob %s: %v", b.digest, err)
		}
	}
	// Manifest one arrives as distribution moves an upload into place.
	upload := "docker/registry/v2/repositories/app/_uploads/0001/data"
	if err := put(upload, one.body); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(one.key), CopySource: aws.String(bucket + "/" + upload)}); err != nil {
		t.Fatalf("copy manifest one into place: %v", err)
	}
	if err := put(two.key, two.body); err != nil {
		t.Fatal(err)
	}
	for _, m := range []registryBlob{one, two} {
		if err := put(revisionLink("app", m.digest), []byte(m.digest)); err != nil {
			t.Fatal(err)
		}
	}

	requireNamedAsContent(t, admin, private.digest, one.key)
	requireContentRefusals(t, sdk, direct, bucket, one.body)

	// Manifest one's revision link goes: one, then its private layer.
	if _, err := sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(revisionLink("app", one.digest))}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(digestTrashWindow)
	present := func(b registryBlob) bool {
		_, err := direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(b.key)})
		if err != nil && apiErrorCode(err) != "NotFound" && apiErrorCode(err) != "NoSuchKey" {
			t.Fatalf("head %s: %v", b.key, err)
		}
		return err == nil
	}
	deadline := time.Now().Add(60 * time.Second)
	sawPrivateOutliveManifest := false
	for present(one) || present(private) {
		if time.Now().After(deadline) {
			t.Fatalf("within 60s: manifest one present %v, its private layer present %v", present(one), present(private))
		}
		digestPassReport(t, admin, shardFlags(e.Gateway, bucket)...)
		if !present(one) && present(private) {
			sawPrivateOutliveManifest = true
		}
		for _, b := range []registryBlob{two, shared, config} {
			if !present(b) {
				t.Fatalf("%s, still named by manifest two, was deleted", b.digest)
			}
		}
	}
	if !sawPrivateOutliveManifest {
		t.Error("the private layer went in the same pass as the manifest naming it; it must outlive the manifest")
	}
}

// requireNamedAsContent checks that explain shows digest named by exactly
// one reference, the manifest blob at key, as content.
func requireNamedAsContent(t *testing.T, admin, digest, key string) {
	t.Helper()
	var ex struct {
		References []struct {
			Key    string `json:"key"`
			Source string `json:"source"`
		} `json:"references"`
	}
	if err := json.Unmarshal([]byte(mustSweepgate(t, 0, admin, "explain", digest, "--json")), &ex); err != nil {
		t.Fatal(err)
	}
	if len(ex.References) != 1 || ex.References[0].Key != key || ex.References[0].Source != "content of registry-blobs" {
		t.Errorf("%s's references = %+v, want the manifest blob %s, as content", digest, ex.References, key)
	}
}

// requireContentRefusals checks that a manifest (body) that does not hash
// to its key, and a multipart complete small enough to be a manifest, are
// refused with nothing stored.
func requireContentRefusals(t *testing.T, sdk, direct *s3.Client, bucket string, body []byte) {
	t.Helper()
	ctx := t.Context()
	wrong := newRegistryBlob([]byte("not this body"))
	_, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(wrong.key), Body: bytes.NewReader(body)})
	requireAPIError(t, err, "BadDigest")
	requireAbsent(t, direct, bucket, wrong.key)
	small := newRegistryBlob(bytes.Repeat([]byte("s"), 4096))
	mp, err := sdk.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(small.key)})
	if err != nil {
		t.Fatal(err)
	}
	part, err := sdk.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(small.key), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(small.body)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sdk.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(small.key), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}})
	requireAPIError(t, err, "InvalidRequest")
	requireAbsent(t, direct, bucket, small.key)
	if _, err := sdk.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(small.key), UploadId: mp.UploadId}); err != nil {
		t.Fatal(err)
	}
}
