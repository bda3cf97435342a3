package gateway

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/s3client"
)

const versionedBucket = "versioned"

// TestDigestsVersionedSource runs generated writes and deletes of the
// reference objects of a source in a versioned bucket through the gateway
// (overwrites, delete markers, deletes of one version, DeleteObjects,
// versioning suspended and enabled again) and checks each step against
// MinIO's own record of what it stores: after every step the record of a
// key names exactly what its stored versions name (none is lost while its
// version is stored, none is kept after), and a key with no stored version
// has no record (its references are in the trash). A rebuild run at random
// changes nothing, and one run after a version written around the gateway
// adds what that version names; a dirty record is settled by the rebuild
// to what every stored version names.
func TestDigestsVersionedSource(t *testing.T) {
	e := newDigestEnvWith(t, func(l *cas.Layout) {
		src, err := cas.NewSource("versioned", versionedBucket, sourcePrefix, "", sourceLimit)
		if err != nil {
			t.Fatal(err)
		}
		l.Sources = append(l.Sources, src)
	})
	ctx := t.Context()
	if err := e.direct.MakeBucket(ctx, versionedBucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	setVersioning := func(on bool) {
		cfg := minio.BucketVersioningConfiguration{Status: "Suspended"}
		if on {
			cfg.Status = "Enabled"
		}
		if err := e.direct.SetBucketVersioning(ctx, versionedBucket, cfg); err != nil {
			t.Fatal(err)
		}
	}
	setVersioning(true)
	layout := &cas.Layout{}
	src, _ := cas.NewSource("versioned", versionedBucket, sourcePrefix, "", sourceLimit)
	layout.Sources = []cas.Source{src}
	signed, err := NewBackendClient(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	rebuilder := &digests.Rebuilder{Backend: s3client.New(signed, 0), Store: e.store, Sources: layout.Sources, Batch: 2, Now: e.clock.Now}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	pool := make([]string, 8)
	for i := range pool {
		pool[i], _ = blob(fmt.Sprintf("versioned layer %d", i))
	}
	keys := []string{sourcePrefix + "a", sourcePrefix + "b", sourcePrefix + "c"}

	// stored reads MinIO's versions of key and what each stored one names.
	stored := func(key string) (versions []minio.ObjectInfo, names []string) {
		for o := range e.direct.ListObjects(ctx, versionedBucket, minio.ListObjectsOptions{Prefix: key, WithVersions: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			if o.Key != key || o.IsDeleteMarker {
				continue
			}
			versions = append(versions, o)
			r, err := e.direct.GetObject(ctx, versionedBucket, key, minio.GetObjectOptions{VersionID: o.VersionID})
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			d, err := src.Extract(body)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, d...)
		}
		return versions, slices.Compact(slices.Sorted(slices.Values(names)))
	}
	check := func(step int, what string) {
		t.Helper()
		for _, key := range keys {
			versions, names := stored(key)
			rec := e.record(versionedBucket, key)
			switch {
			case len(versions) == 0 && rec != nil && len(rec.Digests) > 0:
				t.Fatalf("step %d (%s): %s has no stored version but records %v", step, what, key, rec.Digests)
			case len(versions) > 0 && len(names) > 0 && rec == nil:
				t.Fatalf("step %d (%s): %s has %d stored versions naming %v but no record", step, what, key, len(versions), names)
			case rec != nil && (!slices.Equal(rec.Digests, names) || rec.Pending != nil || rec.Dirty):
				t.Fatalf("step %d (%s): %s records %v (pending %v, dirty %v); its %d stored versions name %v", step, what, key, rec.Digests, rec.Pending, rec.Dirty, len(versions), names)
			}
		}
	}
	versioning := true
	for step := range 80 {
		key := keys[rng.IntN(len(keys))]
		var what string
		switch op := rng.IntN(10); {
		case op < 4:
			named := []string{pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]}
			what = fmt.Sprintf("put %s naming %v", key, named)
			e.mustPut(e.alice, versionedBucket, key, manifest(named...))
		case op < 5:
			what = "delete " + key
			if _, err := e.alice.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(versionedBucket), Key: aws.String(key)}); err != nil {
				t.Fatalf("step %d (%s): %v", step, what, err)
			}
		case op < 8:
			versions, _ := stored(key)
			if len(versions) == 0 {
				continue
			}
			v := versions[rng.IntN(len(versions))].VersionID
			what = fmt.Sprintf("delete %s version %s", key, v)
			if rng.IntN(2) == 0 {
				if _, err := e.alice.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(versionedBucket), Key: aws.String(key), VersionId: aws.String(v)}); err != nil {
					t.Fatalf("step %d (%s): %v", step, what, err)
				}
				break
			}
			what += " (DeleteObjects)"
			out, err := e.alice.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(versionedBucket), Delete: &types.Delete{
				Objects: []types.ObjectIdentifier{{Key: aws.String(key), VersionId: aws.String(v)}},
			}})
			if err != nil || len(out.Errors) > 0 {
				t.Fatalf("step %d (%s): %v %+v", step, what, err, out)
			}
		case op < 9 && versioning && rng.IntN(2) == 0:
			// A producer around the gateway adds a version; the rebuild,
			// listing versions two to a page, finds what it names.
			named := []string{pool[rng.IntN(len(pool))]}
			what = fmt.Sprintf("put %s naming %v around the gateway, then rebuild", key, named)
			body := manifest(named...)
			if _, err := e.direct.PutObject(ctx, versionedBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := rebuilder.Run(ctx, digests.RebuildPos{}, digests.RebuildResult{}, nil); err != nil {
				t.Fatalf("step %d (%s): %v", step, what, err)
			}
		case op < 9 && rng.IntN(2) == 0:
			// A write of unknown outcome leaves the record dirty; the
			// rebuild settles it to what every stored version names.
			what = "record of " + key + " dirty, then rebuild"
			if err := e.store.MarkDirty(ctx, versionedBucket, key, e.clock.Now()); err != nil {
				t.Fatal(err)
			}
			if _, err := rebuilder.Run(ctx, digests.RebuildPos{}, digests.RebuildResult{}, nil); err != nil {
				t.Fatalf("step %d (%s): %v", step, what, err)
			}
		case op < 9:
			versioning = !versioning
			what = fmt.Sprintf("versioning on %v", versioning)
			setVersioning(versioning)
		default:
			what = "rebuild"
			if _, err := rebuilder.Run(ctx, digests.RebuildPos{}, digests.RebuildResult{}, nil); err != nil {
				t.Fatalf("step %d (%s): %v", step, what, err)
			}
		}
		check(step, what)
	}
	// Whatever the steps left, a version that is stored keeps what it
	// names through a rebuild.
	if _, err := rebuilder.Run(ctx, digests.RebuildPos{}, digests.RebuildResult{}, nil); err != nil {
		t.Fatal(err)
	}
	check(-1, "final rebuild")
}
