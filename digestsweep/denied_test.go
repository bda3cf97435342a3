//go:build integration

package digestsweep_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
	"github.com/sweepgate/sweepgate/s3client"
)

// digester is the MinIO user the digest sweep's denial tests sign with.
const digester = "digester"

// policyOn is the reclaimer's minimum policy on buckets
// (docs/architecture.md, "Backend identities").
func policyOn(buckets ...string) string {
	var bs, objs []string
	for _, b := range buckets {
		bs = append(bs, `"arn:aws:s3:::`+b+`"`)
		objs = append(objs, `"arn:aws:s3:::`+b+`/*"`)
	}
	return `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Action":["s3:ListBucket","s3:ListBucketMultipartUploads","s3:ListBucketVersions","s3:GetBucketVersioning"],"Resource":[` + strings.Join(bs, ",") + `]},` +
		`{"Effect":"Allow","Action":["s3:ListMultipartUploadParts","s3:AbortMultipartUpload","s3:GetObject","s3:GetObjectVersion","s3:DeleteObject"],"Resource":[` + strings.Join(objs, ",") + `]},` +
		// The restore witness stays readable and writable whatever the
		// test denies.
		`{"Effect":"Allow","Action":["s3:GetObject","s3:PutObject"],"Resource":["arn:aws:s3:::` + deniedWitness + `/*"]}]}`
}

// deniedWitness is the bucket of the restore witness of the denied tests,
// which no policy of theirs takes away.
const deniedWitness = "witness"

// deniedEnv is a digest test world whose reclaimer signs with the MinIO
// user digester, whose policy the test changes between passes.
type deniedEnv struct {
	*digestEnv
	s3 *s3client.Client
}

// newDeniedEnv makes the buckets, the user digester allowed all of them,
// and a reclaimer configuration signed as digester.
func newDeniedEnv(t *testing.T, buckets ...string) (*deniedEnv, reclaim.Config) {
	t.Helper()
	d := &deniedEnv{digestEnv: newDigestEnv(t)}
	for _, b := range append(buckets, deniedWitness) {
		d.Bucket(b)
	}
	if err := d.MinIO.AddUser(t.Context(), digester, digester+"-secret", policyOn(append(buckets, reclaimtest.CASBucket)...)); err != nil {
		t.Fatal(err)
	}
	be, err := backend.NewStatic(d.MinIO.Endpoint, d.MinIO.Region, digester, digester+"-secret")
	if err != nil {
		t.Fatal(err)
	}
	scoped := d.Scoped(be)
	d.s3 = s3client.New(scoped, 0)
	cfg := d.Config()
	cfg.Backend, cfg.WitnessBucket = scoped, deniedWitness
	return d, cfg
}

// allow sets digester's policy to buckets and waits until MinIO applies
// it: a listing of each of denied is refused, of each of buckets answered.
func (d *deniedEnv) allow(denied []string, buckets ...string) {
	d.T.Helper()
	if err := d.MinIO.SetUserPolicy(d.T.Context(), digester, policyOn(buckets...)); err != nil {
		d.T.Fatal(err)
	}
	reclaimtest.WaitFor(d.T, "MinIO applies the policy", func() bool {
		for _, b := range append(slices.Clone(denied), buckets...) {
			_, err := d.s3.ListObjects(d.T.Context(), b, "", "", 1)
			if errors.Is(err, s3client.ErrAccessDenied) != slices.Contains(denied, b) {
				return false
			}
		}
		return true
	})
}

// putBlobIn stores the blob called name directly on MinIO in bucket's
// namespace and returns its digest.
func (d *deniedEnv) putBlobIn(bucket, name string) string {
	d.T.Helper()
	body := reclaimtest.BlobContent(name)
	dg := reclaimtest.DigestOf(body)
	if _, err := d.Direct.Client.PutObject(d.T.Context(), bucket, reclaimtest.BlobKey(dg), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		d.T.Fatal(err)
	}
	return dg
}

// presentIn reports whether digest's blob is on MinIO in bucket.
func (d *deniedEnv) presentIn(bucket, digest string) bool {
	d.T.Helper()
	_, err := d.Direct.Client.StatObject(d.T.Context(), bucket, reclaimtest.BlobKey(digest), minio.StatObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != "NoSuchKey" {
		d.T.Fatal(err)
	}
	return err == nil
}

// records returns every key under prefix with its value and mod revision.
func (d *deniedEnv) records(prefix string) map[string]string {
	d.T.Helper()
	resp, err := d.Cli.Get(d.T.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		d.T.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%d %s", kv.ModRevision, kv.Value)
	}
	return out
}

// wantDenied fails unless rep is a pass that went on, whose digest sweep
// names exactly buckets as denied.
func wantDenied(t *testing.T, what string, rep reclaim.Report, buckets ...string) digestsweep.Report {
	t.Helper()
	if rep.Stopped != "" || rep.Refused != "" || rep.Digests == nil {
		t.Fatalf("%s: stopped %q, refused %q, digests %v", what, rep.Stopped, rep.Refused, rep.Digests)
	}
	if !slices.Equal(rep.Digests.DeniedBuckets, buckets) {
		t.Errorf("%s: digests.denied_buckets = %q, want %q", what, rep.Digests.DeniedBuckets, buckets)
	}
	if rep.Digests.Rebuild.Failed != "" {
		t.Errorf("%s: rebuild failed: %s", what, rep.Digests.Rebuild.Failed)
	}
	return *rep.Digests
}

// TestDigestDeniedNamespace runs the digest sweep over two namespaces with
// a key MinIO allows first both, then one (the first in the layout), then
// both again. While one is denied its blobs' tombstones stay as they are,
// byte for byte, and nothing in it is deleted, while the other
// namespace's unreferenced blobs are reclaimed; the pass is not stopped,
// and names and counts the denied bucket. Allowed again, its blobs are
// reclaimed as usual.
func TestDigestDeniedNamespace(t *testing.T) {
	t.Parallel()
	d, cfg := newDeniedEnv(t, "closed")
	ns, err := cas.NewNamespace("closed-blobs", "closed", reclaimtest.BlobPrefix, "", false)
	if err != nil {
		t.Fatal(err)
	}
	d.Layout.Namespaces = append([]cas.Namespace{ns}, d.Layout.Namespaces...)
	cfg.Digests.MaxDeleteFraction = 1
	refd := d.PutBlobs("ref", 2)
	d.PutManifest("app/v1", refd...)
	open := d.PutBlobs("open", 2)
	closed := []string{d.putBlobIn("closed", "closed0"), d.putBlobIn("closed", "closed1")}
	d.AgeBlobs()
	r := d.Start(cfg)

	one := d.DigestPass(r)
	reclaimtest.WantCounts(t, "pass one", one, 4, 0, 0, 0)
	d.WantStates("after pass one", etcdstore.TombstonePending, open...)
	d.WantStates("after pass one", etcdstore.TombstonePending, closed...)

	d.allow([]string{"closed"}, reclaimtest.CASBucket)
	tombs := func() map[string]string {
		out := map[string]string{}
		for _, dg := range closed {
			maps.Copy(out, d.records(d.Store.Keys().Tombstone(dg)))
		}
		return out
	}
	before, guards := tombs(), d.records(d.Store.Keys().Guards())
	for i := range 3 {
		what := fmt.Sprintf("denied pass %d", i+1)
		rep := wantDenied(t, what, d.MustPass(r), "closed")
		// The open namespace's unreferenced blobs go in the first.
		stored := int64(4)
		if i > 0 {
			stored = 2
		}
		if rep.Kept != "" || rep.Stored != stored {
			t.Errorf("%s: kept %q, stored %d; want the open namespace judged (%d blobs)", what, rep.Kept, rep.Stored, stored)
		}
		if after := tombs(); !maps.Equal(before, after) {
			t.Errorf("%s: the denied namespace's tombstones changed:\n%v\nwant\n%v", what, after, before)
		}
		if g := d.records(d.Store.Keys().Guards()); !maps.Equal(guards, g) {
			t.Errorf("%s: guards changed: %v", what, g)
		}
		for _, dg := range closed {
			if !d.presentIn("closed", dg) {
				t.Errorf("%s: blob %s of the denied namespace was deleted", what, dg[:15])
			}
		}
	}
	d.WantPresent("after the denied passes", false, open...)
	d.WantPresent("after the denied passes", true, refd...)
	d.WantStates("after the denied passes", etcdstore.TombstoneDeleted, open...)
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_denied_buckets_total", "sweep", "digests"); got != 3 {
		t.Errorf("sweepgate_reclaim_denied_buckets_total{sweep=digests} = %v, want 3", got)
	}

	d.allow(nil, reclaimtest.CASBucket, "closed")
	rep := wantDenied(t, "allowed again", d.MustPass(r))
	reclaimtest.WantCounts(t, "allowed again", rep, 0, 2, 0, 2)
	for _, dg := range closed {
		if d.presentIn("closed", dg) {
			t.Errorf("allowed again: blob %s of the namespace allowed again is still there", dg[:15])
		}
	}
	d.WantPresent("allowed again", true, refd...)
}

// TestDigestDeniedSource runs the digest sweep with a key MinIO denies
// the bucket of a reference source, which holds a manifest written around
// the gateway after the blobs it names were made pending. While the
// source is denied no blob is judged: no tombstone is written or
// advanced, none deleted, though the allowed namespace holds unreferenced
// blobs, and the pass names and counts the bucket without stopping or
// failing. Allowed again, the rebuild reads the manifest, which keeps
// what it names, and the unreferenced blobs go.
func TestDigestDeniedSource(t *testing.T) {
	t.Parallel()
	d, cfg := newDeniedEnv(t, "sealed")
	src, err := cas.NewSource("sealed-manifests", "sealed", reclaimtest.ManifestPrefix, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	d.Layout.Sources = append(d.Layout.Sources, src)
	cfg.Digests.MaxDeleteFraction = 1
	named := d.PutBlob("named")
	unref := d.PutBlob("unref")
	d.AgeBlobs()
	r := d.Start(cfg)

	one := wantDenied(t, "pass one", d.MustPass(r))
	reclaimtest.WantCounts(t, "pass one", one, 2, 0, 0, 0)

	// A manifest naming one of the pending blobs, written around the
	// gateway into the source the key is then denied.
	body := reclaimtest.ManifestBody([]string{named})
	if _, err := d.Direct.Client.PutObject(t.Context(), "sealed", reclaimtest.ManifestPrefix+"app/v1", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := d.PutBlob("fresh")
	d.AgeBlobs()
	d.allow([]string{"sealed"}, reclaimtest.CASBucket)
	before := d.records(d.Store.Keys().Tombstones())
	guards := d.records(d.Store.Keys().Guards())
	for i := range 3 {
		what := fmt.Sprintf("denied pass %d", i+1)
		rep := wantDenied(t, what, d.MustPass(r), "sealed")
		reclaimtest.WantCounts(t, what, rep, 0, 0, 0, 0)
		if !strings.Contains(rep.Kept, "sealed-manifests") {
			t.Errorf("%s: kept = %q, want the denied source named", what, rep.Kept)
		}
		if after := d.records(d.Store.Keys().Tombstones()); !maps.Equal(before, after) {
			t.Errorf("%s: tombstones changed:\n%v\nwant\n%v", what, after, before)
		}
		if g := d.records(d.Store.Keys().Guards()); !maps.Equal(guards, g) {
			t.Errorf("%s: guards changed: %v", what, g)
		}
		d.WantPresent(what, true, named, unref, fresh)
	}
	if got := reclaimtest.Metric(t, d.Reg, "sweepgate_reclaim_denied_buckets_total", "sweep", "digests"); got != 3 {
		t.Errorf("sweepgate_reclaim_denied_buckets_total{sweep=digests} = %v, want 3", got)
	}

	d.allow(nil, reclaimtest.CASBucket, "sealed")
	rep := wantDenied(t, "allowed again", d.MustPass(r))
	if rep.Rebuild.Result == nil || rep.Rebuild.Result.UnknownRefs != 1 {
		t.Errorf("allowed again: rebuild %+v, want the manifest's reference found", rep.Rebuild)
	}
	reclaimtest.WantCounts(t, "allowed again", rep, 1, 1, 1, 1)
	d.WantPresent("allowed again", false, unref)
	d.WantPresent("allowed again", true, named, fresh)
	d.WantStates("allowed again", etcdstore.TombstoneSkipped, named)
}

// TestDigestDeniedSliceKeepsCoverage runs bounded digest passes whose
// slice takes in a namespace the key is denied: the coverage record does
// not move while it is denied, so the next pass lists the same slice, and
// moves again once it is allowed.
func TestDigestDeniedSliceKeepsCoverage(t *testing.T) {
	t.Parallel()
	d, cfg := newDeniedEnv(t, "closed")
	ns, err := cas.NewNamespace("closed-blobs", "closed", reclaimtest.BlobPrefix, "", false)
	if err != nil {
		t.Fatal(err)
	}
	d.Layout.Namespaces = append(d.Layout.Namespaces, ns)
	cfg.Digests.PassBlobs = 8
	d.PutManifest("app/v1", d.PutBlobs("ref", 2)...)
	d.putBlobIn("closed", "closed0")
	d.AgeBlobs()
	r := d.Start(cfg)
	coverage := func() string {
		return fmt.Sprint(d.records(d.Store.Keys().Coverage(digestsweep.CursorName)))
	}
	rep := wantDenied(t, "pass one", d.MustPass(r))
	if rep.Slice == nil || !rep.Slice.Advanced {
		t.Fatalf("pass one slice %+v, want it advanced", rep.Slice)
	}

	d.allow([]string{"closed"}, reclaimtest.CASBucket)
	before := coverage()
	for i := range 2 {
		what := fmt.Sprintf("denied pass %d", i+1)
		rep := wantDenied(t, what, d.MustPass(r), "closed")
		if rep.Slice == nil || rep.Slice.Advanced {
			t.Errorf("%s: slice %+v advanced past a denied namespace", what, rep.Slice)
		}
		if after := coverage(); after != before {
			t.Errorf("%s: coverage record moved:\n%s\nwant\n%s", what, after, before)
		}
	}

	d.allow(nil, reclaimtest.CASBucket, "closed")
	rep = wantDenied(t, "allowed again", d.MustPass(r))
	if rep.Slice == nil || !rep.Slice.Advanced || coverage() == before {
		t.Errorf("allowed again: slice %+v, want the coverage record moved", rep.Slice)
	}
}
