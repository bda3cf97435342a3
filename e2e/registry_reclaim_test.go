//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The registry reclaim tests run the CNCF distribution registry with its S3
// storage in a bucket behind sweepgate, configured with the distribution
// preset, and compare what the digest sweep deletes with what distribution's
// own garbage-collect --dry-run, run on MinIO directly before the passes,
// finds eligible: the two sets must be equal, nothing more and nothing less,
// and every tag that remains must pull intact.

// The registry tests' grace periods: a blob younger than
// registryPlacementGrace is never reclaimed, a deleted link's digests stay
// retained for registryTrashWindow.
const (
	registryPlacementGrace = 2 * time.Second
	registryTrashWindow    = 4 * time.Second
	// registryConvergeTimeout bounds the passes after the windows.
	registryConvergeTimeout = 90 * time.Second
)

// registryUnderTest is a distribution registry writing through a sweepgate
// with the distribution preset, and the means to look at its storage on
// MinIO directly.
type registryUnderTest struct {
	t     *testing.T
	e     *harness.Env
	reg   *harness.Registry
	crane *harness.Crane
	// direct talks to MinIO; oracle is the registry's storage there, where
	// garbage-collect runs.
	direct *s3.Client
	oracle harness.RegistryStorage
	layers string
}

// startRegistryUnderTest starts MinIO, a sweepgate configured with
// `digests.preset: distribution` for the registry's bucket (and root
// directory, if any), and a registry whose S3 endpoint is that sweepgate.
func startRegistryUnderTest(t *testing.T, rootDirectory string) *registryUnderTest {
	t.Helper()
	return startRegistryUnderTestWith(t, rootDirectory, false)
}

// startRegistryUnderTestWith is startRegistryUnderTest with the registry's
// blob descriptor cache on or off.
func startRegistryUnderTestWith(t *testing.T, rootDirectory string, descriptorCache bool) *registryUnderTest {
	t.Helper()
	bucket := harness.BucketName(t)
	presetStorage := bucket
	if rootDirectory != "" {
		presetStorage += "/" + rootDirectory
	}
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"preset":          "distribution",
			"preset_storage":  presetStorage,
			"placement_grace": registryPlacementGrace.String(),
			"trash_window":    registryTrashWindow.String(),
			// A handful of blobs go at once: above the default breaker.
			"max_delete_fraction": 1,
			"max_mark_fraction":   1,
		},
		"reclaim": map[string]any{"interval": "1h",
			"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1},
	}})
	e.RequireGateway(t)
	awaitLeading(t, e.Gateway)
	if _, err := e.SDK(t).CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	m := e.MinIO
	r := &registryUnderTest{
		t: t, e: e, crane: harness.NewCrane(t), layers: t.TempDir(),
		direct: harness.NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true),
		oracle: harness.RegistryStorage{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
			Bucket: bucket, RootDirectory: rootDirectory},
	}
	r.reg = harness.StartRegistry(t, r.storage(descriptorCache))
	return r
}

// storage is the registry's storage: the bucket behind sweepgate.
func (r *registryUnderTest) storage(descriptorCache bool) harness.RegistryStorage {
	return harness.RegistryStorage{Endpoint: r.e.Gateway.Endpoint, AccessKey: r.e.AccessKey,
		SecretKey: r.e.SecretKey, Bucket: r.oracle.Bucket, RootDirectory: r.oracle.RootDirectory,
		DescriptorCache: descriptorCache}
}

// layer returns the tarball of a layer of size pseudo-random bytes for seed.
func (r *registryUnderTest) layer(seed uint64, size int64) string {
	return harness.WriteLayerTar(r.t, r.layers, seed, size)
}

// push pushes an image of the layers to app:TAG.
func (r *registryUnderTest) push(tag string, oci bool, layers ...string) harness.Pushed {
	r.t.Helper()
	return r.crane.PushImage(r.reg.Ref("app", ":"+tag), oci, layers...)
}

// garbage runs garbage-collect --dry-run on MinIO directly and checks that
// it finds eligible exactly what the test expects (model), so that the
// scenario is the one the test means; it returns garbage-collect's set.
func (r *registryUnderTest) garbage(model map[string]bool) map[string]bool {
	r.t.Helper()
	gc := harness.GarbageCollect(r.t, r.oracle, true).Eligible
	requireDigests(r.t, "garbage-collect --dry-run before the passes (against the test's model)", gc, model)
	return gc
}

// pass runs one reclaimer pass and returns its digests section.
func (r *registryUnderTest) pass() digestReport {
	r.t.Helper()
	return digestPassReport(r.t, r.e.Gateway.AdminEndpoint)
}

// waitWindows runs a pass (which stamps the trash entries of the deletes
// with its elapsed clock) and waits out the trash window and the placement
// grace.
func (r *registryUnderTest) waitWindows() {
	r.t.Helper()
	r.pass()
	time.Sleep(max(registryTrashWindow, registryPlacementGrace) + 500*time.Millisecond)
}

// passesInBackground runs passes back to back until the returned function
// is called, which waits for the last one and fails the test if a pass
// failed: exit 0 and exit 4 (a pass that stopped or was refused, which the
// passes after it make up for) are fine.
func (r *registryUnderTest) passesInBackground() (stop func()) {
	admin := r.e.Gateway.AdminEndpoint
	bin := harness.BuildSweepgate(r.t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWEEPGATE_") {
			env = append(env, kv)
		}
	}
	env = append(env, adminTokenEnv(admin)...)
	done, finished := make(chan struct{}), make(chan string, 1)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-done:
				finished <- ""
				return
			default:
			}
			cmd := exec.Command(bin, "reclaim", "run", "--json", "--admin", admin)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 4) {
				finished <- fmt.Sprintf("background pass %d: %v\n%s", n, err, out)
				return
			}
		}
	}()
	return func() {
		r.t.Helper()
		close(done)
		if msg := <-finished; msg != "" {
			r.t.Fatal(msg)
		}
	}
}

// converge runs passes until two in a row delete nothing and leave nothing
// pending or ready.
func (r *registryUnderTest) converge() {
	r.t.Helper()
	deadline := time.Now().Add(registryConvergeTimeout)
	var last digestReport
	for quiet, n := 0, 0; quiet < 2; n++ {
		if time.Now().After(deadline) {
			b, _ := json.Marshal(last)
			r.t.Fatalf("the digest sweep did not settle within %v (%d passes); last report: %s", registryConvergeTimeout, n, b)
		}
		last = r.pass()
		if d := last.Digests; d.Deleted == 0 && d.Pending == 0 && d.Ready == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// requireReclaimed waits out the windows, runs passes until they settle,
// and checks that the blobs deleted from MinIO's blob store are exactly
// gc, that garbage-collect then finds nothing more, and that every image
// in remaining pulls intact through the registry.
func (r *registryUnderTest) requireReclaimed(gc map[string]bool, remaining ...harness.Pushed) {
	r.t.Helper()
	before := registryBlobs(r.t, r.direct, r.oracle)
	r.waitWindows()
	r.converge()
	r.requireDeleted(before, gc, remaining...)
}

// requireDeleted checks the blob store against before: the blobs gone are
// exactly gc, garbage-collect finds nothing eligible, and every image in
// remaining pulls intact.
func (r *registryUnderTest) requireDeleted(before, gc map[string]bool, remaining ...harness.Pushed) {
	r.t.Helper()
	after := registryBlobs(r.t, r.direct, r.oracle)
	requireDigests(r.t, "blobs sweepgate deleted, against garbage-collect --dry-run", minus(before, after), gc)
	requireDigests(r.t, "garbage-collect --dry-run after the passes", harness.GarbageCollect(r.t, r.oracle, true).Eligible, nil)
	for _, p := range remaining {
		r.crane.RequirePullIntact(p)
	}
}

// TestRegistryReclaimPrivateLayer: two tags share a base layer, one tag's
// manifest is deleted through the registry API. While the trash window
// lasts, passes delete nothing; then sweepgate deletes what garbage-collect
// finds: that manifest, its config and its private layer (the registry's
// _layers link to it notwithstanding).
func TestRegistryReclaimPrivateLayer(t *testing.T) {
	t.Parallel()
	r := startRegistryUnderTest(t, "")
	base := r.layer(1, 300<<10)
	a := r.push("a", false, base, r.layer(2, 200<<10))
	b := r.push("b", false, base, r.layer(3, 100<<10))
	time.Sleep(registryPlacementGrace)
	r.crane.Delete(a.ByDigest())
	gc := r.garbage(minus(a.Digests(), b.Digests()))
	if len(gc) != 3 {
		t.Fatalf("garbage-collect finds %d blobs, want a's manifest, config and private layer", len(gc))
	}
	// Past the placement grace, within the trash window: the deleted
	// manifest's links are in the trash, which keeps everything.
	before := registryBlobs(t, r.direct, r.oracle)
	r.pass()
	requireDigests(t, "blobs after a pass within the trash window", registryBlobs(t, r.direct, r.oracle), before)
	out := mustSweepgate(t, 0, r.e.Gateway.AdminEndpoint, "trash", "list", "--bucket", r.oracle.Bucket, "--json")
	if !strings.Contains(out, strings.TrimPrefix(a.Digest, "sha256:")) {
		t.Fatalf("trash list does not name the deleted manifest %s:\n%s", a.Digest, out)
	}
	r.requireReclaimed(gc, b)
}

// TestRegistryReclaimSharedLayers: a deleted tag whose layers are all
// shared with another loses its manifest and config only; a tag removed
// alone (untagged, its manifest still linked as a revision) loses nothing,
// as in garbage-collect.
func TestRegistryReclaimSharedLayers(t *testing.T) {
	t.Parallel()
	r := startRegistryUnderTest(t, "")
	base, mid := r.layer(11, 300<<10), r.layer(12, 150<<10)
	a := r.push("a", false, base, mid)
	b := r.push("b", false, base, mid, r.layer(13, 100<<10))
	c := r.push("c", true, base, r.layer(14, 120<<10))
	r.crane.Delete(a.ByDigest())
	r.crane.Delete(c.Ref) // the tag alone
	gc := r.garbage(minus(a.Digests(), b.Digests()))
	if len(gc) != 2 {
		t.Fatalf("garbage-collect finds %d blobs, want a's manifest and config", len(gc))
	}
	c.Ref = c.ByDigest()
	r.requireReclaimed(gc, b, c)
}

// TestRegistryReclaimMovedTag: a tag pushed again points to a new manifest;
// the registry keeps the old one as a revision and in the tag's index (its
// history). Once the old manifest is deleted by digest, its revision link
// is gone but the tag's index link to it stays: garbage-collect, whose
// roots are the revisions, finds the old manifest, its config and its
// private layer eligible, and so must sweepgate.
func TestRegistryReclaimMovedTag(t *testing.T) {
	t.Parallel()
	r := startRegistryUnderTest(t, "")
	base := r.layer(41, 300<<10)
	old := r.push("app", false, base, r.layer(42, 200<<10))
	current := r.push("app", false, base, r.layer(43, 100<<10))
	if old.Digest == current.Digest {
		t.Fatal("the two pushes of the tag made one manifest")
	}
	r.crane.Delete(old.ByDigest())
	gc := r.garbage(minus(old.Digests(), current.Digests()))
	if len(gc) != 3 {
		t.Fatalf("garbage-collect finds %d blobs, want the old manifest, its config and its private layer", len(gc))
	}
	r.requireReclaimed(gc, current)
}

// TestRegistryReclaimIndex: a multi-platform index is deleted with the
// child that only it named (pushed under a tag that was then removed); the
// child tagged elsewhere, and every layer another image shares, stay. The
// registry keeps its tree under a root directory in the bucket.
func TestRegistryReclaimIndex(t *testing.T) {
	t.Parallel()
	r := startRegistryUnderTest(t, "registry-root")
	base := r.layer(21, 300<<10)
	x := r.push("x", true, base, r.layer(22, 200<<10))
	y := r.push("y-build", true, base, r.layer(23, 250<<10))
	r.crane.Delete(y.Ref)
	keep := r.push("keep", false, base, r.layer(24, 100<<10))
	index := r.crane.PushIndex(r.reg.Ref("app", ":multi"), x, y)
	// A live index keeps both children (and y, which no tag names) through
	// passes, as garbage-collect does.
	r.requireReclaimed(r.garbage(nil), index, x, keep)

	r.crane.Delete(index.ByDigest())
	r.crane.Delete(y.ByDigest())
	gc := r.garbage(minus(index.Digests(), x.Digests(), keep.Digests()))
	if len(gc) != 4 {
		t.Fatalf("garbage-collect finds %d blobs, want the index and y's manifest, config and private layer", len(gc))
	}
	r.requireReclaimed(gc, x, keep)
}

// TestRegistryReclaimPushDuringPass: after a deleted image's private layer
// is pending deletion, a new tag reusing that layer is pushed into the same
// repository (crane finds the layer there and uploads only the new one and
// the manifest) while passes run back to back. Further passes keep the layer; they delete the rest of
// what garbage-collect found before the push, and the new tag pulls intact.
func TestRegistryReclaimPushDuringPass(t *testing.T) {
	t.Parallel()
	r := startRegistryUnderTest(t, "root")
	base, private := r.layer(31, 300<<10), r.layer(32, 400<<10)
	a := r.push("a", false, base, private)
	b := r.push("b", false, base, r.layer(33, 100<<10))
	r.crane.Delete(a.ByDigest())
	gc := r.garbage(minus(a.Digests(), b.Digests()))
	before := registryBlobs(t, r.direct, r.oracle)

	r.waitWindows()
	privateDigest := layerDigest(t, a, private)
	deadline := time.Now().Add(registryConvergeTimeout)
	for r.pass().Digests.Pending == 0 {
		if !registryBlobs(t, r.direct, r.oracle)[privateDigest] {
			t.Fatalf("the private layer %s was deleted before any pass reported it pending", privateDigest)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no blob pending within %v", registryConvergeTimeout)
		}
	}
	if !registryBlobs(t, r.direct, r.oracle)[privateDigest] {
		t.Fatalf("the private layer %s was deleted before the push that reuses it", privateDigest)
	}
	// Passes run back to back while c is pushed.
	stop := r.passesInBackground()
	c := r.pushRacingDeletion("c", private, r.layer(34, 50<<10))
	stop()
	r.converge()
	if !gc[privateDigest] {
		t.Fatalf("garbage-collect before the push did not find the private layer %s", privateDigest)
	}
	r.requireDeleted(before, minus(gc, c.Digests()), b, c)
}

// pushRacingDeletion pushes an image of the layers to app:TAG. crane finds
// a layer the repository links to and does not upload it; if a pass deleted
// it before the manifest arrived, the registry refuses the manifest
// (MANIFEST_BLOB_UNKNOWN) and the push is repeated, as a client would,
// uploading the layer again. Either way nothing is lost: the manifest was
// not stored.
func (r *registryUnderTest) pushRacingDeletion(tag string, layers ...string) harness.Pushed {
	r.t.Helper()
	deadline := time.Now().Add(registryConvergeTimeout)
	for {
		p, err := r.crane.TryPushImage(r.reg.Ref("app", ":"+tag), false, layers...)
		if err == nil {
			return p
		}
		if !strings.Contains(err.Error(), "BLOB_UNKNOWN") || time.Now().After(deadline) {
			r.t.Fatalf("push %s: %v", tag, err)
		}
		r.t.Logf("push %s raced with a deletion, pushing again: %v", tag, err)
	}
}

// layerDigest returns the digest of the layer p pushed from tarball.
func layerDigest(t *testing.T, p harness.Pushed, tarball string) string {
	t.Helper()
	for d, blob := range p.Blobs {
		if blob.LayerTar == tarball {
			return d
		}
	}
	t.Fatalf("%s has no layer from %s", p.Ref, tarball)
	return ""
}
