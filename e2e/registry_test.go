//go:build e2e

package e2e

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The registry tests run the CNCF distribution registry (bin/registry) with
// its S3 storage driver and push and pull with crane (bin/crane). The
// oracle for what a digest sweep may reclaim is distribution's own
// `registry garbage-collect --dry-run` on the same storage.

// TestRegistryGarbageCollectOracle checks the oracle itself, with the
// registry writing to MinIO directly: two tags share a base layer, one
// tag's manifest is deleted through the registry API, and garbage-collect
// --dry-run lists exactly that manifest, its config and its private layer.
// The other tag still pulls intact.
func TestRegistryGarbageCollectOracle(t *testing.T) {
	t.Parallel()
	m := harness.StartMinIO(t)
	storage := harness.RegistryStorage{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Bucket: harness.BucketName(t), RootDirectory: "oracle"}
	direct := harness.NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
	if _, err := direct.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(storage.Bucket)}); err != nil {
		t.Fatal(err)
	}
	reg := harness.StartRegistry(t, storage)
	crane := harness.NewCrane(t)
	dir := t.TempDir()
	base := harness.WriteLayerTar(t, dir, 1, 300<<10)
	a := crane.PushImage(reg.Ref("app", ":a"), false, base, harness.WriteLayerTar(t, dir, 2, 200<<10))
	b := crane.PushImage(reg.Ref("app", ":b"), false, base, harness.WriteLayerTar(t, dir, 3, 100<<10))

	before := registryBlobs(t, direct, storage)
	requireDigests(t, "the blobs on MinIO after the pushes", before, union(a.Digests(), b.Digests()))
	requireDigests(t, "garbage-collect --dry-run with both tags", reg.GarbageCollectDryRun(), nil)

	crane.Delete(a.ByDigest())
	want := minus(a.Digests(), b.Digests())
	if len(want) != 3 {
		t.Fatalf("tag a reaches %d blobs tag b does not, want 3 (manifest, config, private layer): %v", len(want), want)
	}
	requireDigests(t, "garbage-collect --dry-run after deleting a's manifest", reg.GarbageCollectDryRun(), want)
	requireDigests(t, "the blobs on MinIO after the dry run", registryBlobs(t, direct, storage), before)
	if _, err := crane.Run("digest", a.Ref); err == nil {
		t.Fatalf("tag %s still resolves after its manifest was deleted", a.Ref)
	}
	crane.RequirePullIntact(b)
}

// registryBlobs lists the digests of the blobs in the registry's blob store
// on c (MinIO itself): the keys BLOBS/sha256/XX/HEX/data.
func registryBlobs(t *testing.T, c *s3.Client, s harness.RegistryStorage) map[string]bool {
	t.Helper()
	prefix := s.BlobsPrefix()
	set := map[string]bool{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("list %s/%s: %v", s.Bucket, prefix, err)
		}
		for _, o := range page.Contents {
			rest, ok := strings.CutSuffix(strings.TrimPrefix(aws.ToString(o.Key), prefix), "/data")
			parts := strings.Split(rest, "/")
			if !ok || len(parts) != 3 || !strings.HasPrefix(parts[2], parts[1]) {
				t.Fatalf("unexpected key in the blob store: %s", aws.ToString(o.Key))
			}
			set[parts[0]+":"+parts[2]] = true
		}
	}
	return set
}

// requireDigests fails the test unless got and want hold the same digests,
// naming what is missing and what is extra.
func requireDigests(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	missing, extra := minus(want, got), minus(got, want)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("%s: %d digests, want %d\nmissing: %v\nextra:   %v", what, len(got), len(want),
			slices.Sorted(maps.Keys(missing)), slices.Sorted(maps.Keys(extra)))
	}
}

// union returns the digests in any of the sets.
func union(sets ...map[string]bool) map[string]bool {
	u := map[string]bool{}
	for _, s := range sets {
		maps.Copy(u, s)
	}
	return u
}

// minus returns the digests of a that are not in any of others.
func minus(a map[string]bool, others ...map[string]bool) map[string]bool {
	d, drop := map[string]bool{}, union(others...)
	for k := range a {
		if !drop[k] {
			d[k] = true
		}
	}
	return d
}
