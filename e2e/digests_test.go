//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The digest test's grace periods: a blob younger than digestPlacementGrace
// is never reclaimed, a deleted manifest's digests stay retained for
// digestTrashWindow.
const (
	digestPlacementGrace = 2 * time.Second
	digestTrashWindow    = 4 * time.Second
)

// digestReport is what the test reads of a pass report's digest section.
type digestReport struct {
	Digests *struct {
		Pending  int64  `json:"pending"`
		Ready    int64  `json:"ready"`
		Deleted  int64  `json:"deleted"`
		Bytes    int64  `json:"bytes"`
		Refused  string `json:"refused"`
		Kept     string `json:"kept"`
		Settling int64  `json:"settling"`
	} `json:"digests"`
}

// TestDigestReclamation runs a registry-like layout through the real
// binary and real clients: blobs pushed through the gateway (verified
// against their digests), manifests naming them (one written directly to
// MinIO, around the gateway), and passes run with `sweepgate reclaim run`.
// Exactly the unreferenced blobs older than the placement grace go; a
// deleted manifest's unshared blob stays while its trash lasts, comes back
// with `sweepgate trash restore`, and goes once its trash expires.
func TestDigestReclamation(t *testing.T) {
	t.Parallel()
	bucket := harness.BucketName(t)
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"namespaces":      []string{bucket + "/blobs/sha256/"},
			"sources":         []string{bucket + "/manifests/"},
			"placement_grace": digestPlacementGrace.String(),
			"trash_window":    digestTrashWindow.String(),
			// Two of six blobs go at once: above the default breaker.
			"max_delete_fraction": 1,
			"max_mark_fraction":   1,
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

	blobs := pushLayers(t, sdk, bucket, 6)
	manifest := func(ids ...int) []byte { return ociManifest(blobs, ids...) }
	put := func(c *s3.Client, key string, body []byte) {
		t.Helper()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put(sdk, "manifests/app/v1", manifest(0, 1))
	put(sdk, "manifests/app/v2", manifest(1, 2))
	put(direct, "manifests/around/v1", manifest(3)) // a producer the gateway does not know
	// Blobs 4 and 5 are named by nothing.

	requireBlobWritesRefused(t, sdk, direct, bucket, blobs[1].key)

	present := func(i int) bool { t.Helper(); return layerPresent(t, direct, bucket, blobs, i) }
	requirePresent := func(when string, ids ...int) { requireLayersPresent(t, direct, bucket, blobs, when, ids...) }
	pass := func() digestReport { t.Helper(); return digestPassReport(t, admin, shardFlags(e.Gateway, bucket)...) }
	// passesUntil runs passes until gone reports true, checking after each
	// that the blobs in keep are all there.
	passesUntil := func(what string, gone func() bool, keep ...int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !gone() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 30s: %s", what)
			}
			pass()
			requirePresent("after a pass waiting for "+what, keep...)
			time.Sleep(200 * time.Millisecond)
		}
	}

	// While the blobs are younger than the placement grace, passes keep
	// everything.
	pass()
	requirePresent("within the placement grace", 0, 1, 2, 3, 4, 5)

	passesUntil("the unreferenced blobs 4 and 5 are deleted", func() bool { return !present(4) && !present(5) }, 0, 1, 2, 3)
	if m, err := e.Gateway.Metrics(); err != nil || !hasPositiveSample(m, "sweepgate_reclaim_unknown_producer_refs_total") {
		t.Errorf("the manifest written around the gateway is not counted in sweepgate_reclaim_unknown_producer_refs_total (%v)", err)
	}

	// Deleting v1 puts blob 0 (named by v1 only) in the trash: kept while
	// it lasts. Restored, it stays after the window too.
	if _, err := sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/app/v1")}); err != nil {
		t.Fatal(err)
	}
	if out := mustSweepgate(t, 0, admin, "trash", "list", "--bucket", bucket, "--json"); !strings.Contains(out, "manifests/app/v1") || !strings.Contains(out, blobs[0].digest) {
		t.Fatalf("trash list does not show the deleted manifest:\n%s", out)
	}
	pass()
	requirePresent("with v1 in the trash", 0, 1, 2, 3)
	mustSweepgate(t, 0, admin, "trash", "restore", bucket, "manifests/app/v1")
	time.Sleep(digestTrashWindow)
	for range 3 {
		pass()
	}
	requirePresent("after the restore, past the trash window", 0, 1, 2, 3)

	// Written again and deleted for good: blob 0 goes once the trash
	// expires; blob 1, still named by v2, stays.
	put(sdk, "manifests/app/v1", manifest(0, 1))
	if _, err := sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/app/v1")}); err != nil {
		t.Fatal(err)
	}
	passesUntil("blob 0 is deleted after v1's trash expired", func() bool { return !present(0) }, 1, 2, 3)

	// A producer that pushes blob 0 again and then the manifest is served.
	put(sdk, blobs[0].key, blobs[0].body)
	put(sdk, "manifests/app/v1", manifest(0, 1))
	for range 2 {
		pass()
	}
	requirePresent("after the re-push", 0, 1, 2, 3)
}

// requireBlobWritesRefused checks that a blob whose content does not match
// its key is refused and not stored, and that a client that is no admin
// cannot delete the referenced blob of referencedKey.
func requireBlobWritesRefused(t *testing.T, sdk, direct *s3.Client, bucket, referencedKey string) {
	t.Helper()
	ctx := t.Context()
	badKey := "blobs/sha256/" + strings.Repeat("ab", 32)
	_, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(badKey), Body: strings.NewReader("not that")})
	requireAPIError(t, err, "BadDigest")
	requireAbsent(t, direct, bucket, badKey)
	_, err = sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(referencedKey)})
	requireAPIError(t, err, "BlobReferenced")
}

// requireLayersPresent checks, when, that the blobs of ids are on MinIO.
func requireLayersPresent(t *testing.T, direct *s3.Client, bucket string, blobs []layerBlob, when string, ids ...int) {
	t.Helper()
	for _, i := range ids {
		if !layerPresent(t, direct, bucket, blobs, i) {
			t.Fatalf("%s: blob %d (%s) is gone", when, i, blobs[i].digest)
		}
	}
}

// layerBlob is a blob pushed into a digest namespace under blobs/sha256/.
type layerBlob struct {
	digest, key string
	body        []byte
}

// pushLayers pushes n distinct blobs into bucket's namespace through sdk.
func pushLayers(t *testing.T, sdk *s3.Client, bucket string, n int) []layerBlob {
	t.Helper()
	blobs := make([]layerBlob, n)
	for i := range blobs {
		body := bytes.Repeat([]byte(fmt.Sprintf("layer %d of %s;", i, bucket)), 100+i)
		digest, key := casBlobKey(body)
		blobs[i] = layerBlob{digest: digest, key: key, body: body}
		if _, err := sdk.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("push blob %d: %v", i, err)
		}
	}
	return blobs
}

// ociManifest is an OCI image manifest naming the blobs of ids as layers.
func ociManifest(blobs []layerBlob, ids ...int) []byte {
	var layers []string
	for _, i := range ids {
		layers = append(layers, fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":%q}`, blobs[i].digest))
	}
	return []byte(`{"schemaVersion":2,"layers":[` + strings.Join(layers, ",") + `]}`)
}

// layerPresent reports whether blobs[i] is on MinIO; a blob there must
// hold its bytes.
func layerPresent(t *testing.T, direct *s3.Client, bucket string, blobs []layerBlob, i int) bool {
	t.Helper()
	out, err := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(blobs[i].key)})
	if apiErrorCode(err) == "NoSuchKey" {
		return false
	}
	if err != nil {
		t.Fatalf("read blob %d on MinIO: %v", i, err)
	}
	defer out.Body.Close()
	got, err := io.ReadAll(out.Body)
	if err != nil || !bytes.Equal(got, blobs[i].body) {
		t.Fatalf("blob %d on MinIO changed: %v", i, err)
	}
	return true
}

// digestPassReport runs a reclaimer pass through the admin listener at
// admin and returns its report, which must have a digest section that was
// not refused; flags are added to the command (shardFlags of a bucket of
// the digest layout).
func digestPassReport(t *testing.T, admin string, flags ...string) digestReport {
	t.Helper()
	out := mustSweepgate(t, 0, admin, append([]string{"reclaim", "run", "--json"}, flags...)...)
	var rep digestReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Digests == nil {
		t.Fatalf("reclaim run --json has no digests section (%v):\n%s", err, out)
	}
	if rep.Digests.Refused != "" {
		t.Fatalf("digest sweep refused: %s", rep.Digests.Refused)
	}
	return rep
}

// hasPositiveSample reports whether the Prometheus text exposition holds a
// sample of name (any labels) above zero.
func hasPositiveSample(text, name string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		var v float64
		if len(fields) > 0 {
			if _, err := fmt.Sscan(fields[0], &v); err == nil && v > 0 {
				return true
			}
		}
	}
	return false
}

// TestDigestPassKilled kills sweepgate (through its test fault hook) in
// the middle of a digest pass, once after the tombstones of a page were
// decided and once with the collector's guards armed and the bytes not yet
// deleted. After each restart the passes go on from what etcd recorded:
// the unreferenced blobs go, and every blob a manifest names is still
// there at the end.
func TestDigestPassKilled(t *testing.T) {
	t.Parallel()
	bucket := harness.BucketName(t)
	const firstFault = "digest.before-tombstone"
	e := harness.Start(t, harness.Options{
		Config: map[string]any{
			"digests": map[string]any{
				"namespaces":          []string{bucket + "/blobs/sha256/"},
				"sources":             []string{bucket + "/manifests/"},
				"placement_grace":     digestPlacementGrace.String(),
				"max_delete_fraction": 1,
				"max_mark_fraction":   1,
			},
			"reclaim": map[string]any{"interval": "1h", "election_ttl": "1s"},
		},
		Env: []string{"SWEEPGATE_TEST_FAULT=" + firstFault},
	})
	e.RequireGateway(t)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	ctx := t.Context()
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	referenced, unreferenced := pushHalfReferenced(t, sdk, bucket)
	time.Sleep(digestPlacementGrace)

	exists := func(key string) bool {
		_, err := direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil && apiErrorCode(err) != "NotFound" && apiErrorCode(err) != "NoSuchKey" {
			t.Fatalf("HEAD %s on MinIO: %v", key, err)
		}
		return err == nil
	}
	requireReferenced := func(when string) {
		t.Helper()
		for _, key := range referenced {
			if !exists(key) {
				t.Fatalf("%s: referenced blob %s is gone", when, key)
			}
		}
	}
	// killedPass runs passes until the fault hook kills the process.
	killedPass := func(fault string) {
		t.Helper()
		awaitLeading(t, e.Gateway)
		for range 5 {
			if code, _, _ := sweepgateCmd(t, e.Gateway.AdminEndpoint, append([]string{"reclaim", "run", "--json"}, shardFlags(e.Gateway, bucket)...)...); code != 0 {
				break
			}
		}
		if err := e.Gateway.WaitExit(ctx, 10*time.Second); err != nil {
			t.Fatalf("the gateway did not die at %s: %v", fault, err)
		}
		requireReferenced("killed at " + fault)
	}

	killedPass(firstFault)
	for _, key := range unreferenced {
		if !exists(key) {
			t.Fatalf("blob %s deleted before any tombstone was recorded", key)
		}
	}
	e.Gateway.RestartWithEnv("SWEEPGATE_TEST_FAULT=digest.guarded")
	killedPass("digest.guarded")

	e.Gateway.RestartWithEnv()
	awaitLeading(t, e.Gateway)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mustSweepgate(t, 0, e.Gateway.AdminEndpoint, append([]string{"reclaim", "run", "--json"}, shardFlags(e.Gateway, bucket)...)...)
		requireReferenced("after the restart")
		gone := 0
		for _, key := range unreferenced {
			if !exists(key) {
				gone++
			}
		}
		if gone == len(unreferenced) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d unreferenced blobs deleted within 30s of the restart", gone, len(unreferenced))
		}
	}
	// The manifest still works through the gateway, and so do its blobs.
	for _, key := range referenced {
		if _, err := sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			t.Fatalf("HEAD %s through the gateway: %v", key, err)
		}
	}
}

// pushHalfReferenced pushes eight blobs into bucket's namespace and a
// manifest naming every other one, and returns the keys of the blobs it
// names and of the others.
func pushHalfReferenced(t *testing.T, sdk *s3.Client, bucket string) (referenced, unreferenced []string) {
	t.Helper()
	ctx := t.Context()
	var manifestLayers []string
	for i := range 8 {
		body := []byte(fmt.Sprintf("blob %d of %s", i, bucket))
		digest, key := casBlobKey(body)
		if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			referenced = append(referenced, key)
			manifestLayers = append(manifestLayers, fmt.Sprintf(`{"digest":%q}`, digest))
		} else {
			unreferenced = append(unreferenced, key)
		}
	}
	manifest := []byte(`{"layers":[` + strings.Join(manifestLayers, ",") + `]}`)
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/app/v1"), Body: bytes.NewReader(manifest)}); err != nil {
		t.Fatal(err)
	}
	return referenced, unreferenced
}
