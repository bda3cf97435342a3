//go:build integration

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

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digestsweep"
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
	w := newVersionedWorld(t)
	for step := range 80 {
		if what := w.step(step); what != "" {
			w.check(step, what)
		}
	}
	// Whatever the steps left, a version that is stored keeps what it
	// names through a rebuild.
	w.rebuild(-1, "final rebuild")
	w.check(-1, "final rebuild")
}

// versionedWorld is a source in a versioned bucket, written through the
// gateway, and a model of nothing but MinIO's own listing of versions.
type versionedWorld struct {
	t          *testing.T
	e          *digestEnv
	src        cas.Source
	rebuilder  *digestsweep.Rebuilder
	rng        *rand.Rand
	pool, keys []string
	versioning bool
}

func newVersionedWorld(t *testing.T) *versionedWorld {
	src, err := cas.NewSource("versioned", versionedBucket, sourcePrefix, "", sourceLimit)
	if err != nil {
		t.Fatal(err)
	}
	e := newDigestEnvWith(t, func(l *cas.Layout) { l.Sources = append(l.Sources, src) })
	if err := e.direct.MakeBucket(t.Context(), versionedBucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	signed, err := backend.NewStatic(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	w := &versionedWorld{
		t: t, e: e, src: src,
		// Two versions a listing page, so keys span pages.
		rebuilder: &digestsweep.Rebuilder{Backend: s3client.New(signed, 0), Store: e.store, Sources: []cas.Source{src}, Batch: 2, Now: e.clock.Now},
		rng:       rand.New(rand.NewPCG(seed, seed)),
		keys:      []string{sourcePrefix + "a", sourcePrefix + "b", sourcePrefix + "c"},
	}
	for i := range 8 {
		d, _ := blob(fmt.Sprintf("versioned layer %d", i))
		w.pool = append(w.pool, d)
	}
	w.setVersioning(true)
	return w
}

func (w *versionedWorld) setVersioning(on bool) {
	cfg := minio.BucketVersioningConfiguration{Status: "Suspended"}
	if on {
		cfg.Status = "Enabled"
	}
	if err := w.e.direct.SetBucketVersioning(w.t.Context(), versionedBucket, cfg); err != nil {
		w.t.Fatal(err)
	}
	w.versioning = on
}

// step makes one generated change and says what it was ("" for none).
func (w *versionedWorld) step(step int) string {
	ctx, e, t := w.t.Context(), w.e, w.t
	key := w.keys[w.rng.IntN(len(w.keys))]
	switch op := w.rng.IntN(10); {
	case op < 4:
		named := []string{w.pick(), w.pick()}
		e.mustPut(e.alice, versionedBucket, key, manifest(named...))
		return fmt.Sprintf("put %s naming %v", key, named)
	case op < 5:
		if _, err := e.alice.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(versionedBucket), Key: aws.String(key)}); err != nil {
			t.Fatalf("step %d (delete %s): %v", step, key, err)
		}
		return "delete " + key
	case op < 8:
		versions, _ := w.stored(key)
		if len(versions) == 0 {
			return ""
		}
		v := versions[w.rng.IntN(len(versions))].VersionID
		what := fmt.Sprintf("delete %s version %s", key, v)
		if w.rng.IntN(2) == 0 {
			if _, err := e.alice.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(versionedBucket), Key: aws.String(key), VersionId: aws.String(v)}); err != nil {
				t.Fatalf("step %d (%s): %v", step, what, err)
			}
			return what
		}
		what += " (DeleteObjects)"
		out, err := e.alice.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(versionedBucket), Delete: &types.Delete{
			Objects: []types.ObjectIdentifier{{Key: aws.String(key), VersionId: aws.String(v)}},
		}})
		if err != nil || len(out.Errors) > 0 {
			t.Fatalf("step %d (%s): %v %+v", step, what, err, out)
		}
		return what
	case op < 9 && w.versioning && w.rng.IntN(2) == 0:
		// A producer around the gateway adds a version; the rebuild finds
		// what it names.
		named := w.pick()
		body := manifest(named)
		if _, err := e.direct.PutObject(ctx, versionedBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("put %s naming %s around the gateway, then rebuild", key, named)
		w.rebuild(step, what)
		return what
	case op < 9 && w.rng.IntN(2) == 0:
		// A write of unknown outcome leaves the record dirty; the rebuild
		// settles it to what every stored version names.
		if err := e.store.MarkDirty(ctx, versionedBucket, key, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		what := "record of " + key + " dirty, then rebuild"
		w.rebuild(step, what)
		return what
	case op < 9:
		w.setVersioning(!w.versioning)
		return fmt.Sprintf("versioning on %v", w.versioning)
	default:
		w.rebuild(step, "rebuild")
		return "rebuild"
	}
}

func (w *versionedWorld) pick() string { return w.pool[w.rng.IntN(len(w.pool))] }

func (w *versionedWorld) rebuild(step int, what string) {
	if _, err := w.rebuilder.Run(w.t.Context(), digestsweep.RebuildPos{}, digestsweep.RebuildResult{}, nil); err != nil {
		w.t.Fatalf("step %d (%s): %v", step, what, err)
	}
}

// stored reads MinIO's stored versions of key and what they name.
func (w *versionedWorld) stored(key string) (versions []minio.ObjectInfo, names []string) {
	ctx, t := w.t.Context(), w.t
	for o := range w.e.direct.ListObjects(ctx, versionedBucket, minio.ListObjectsOptions{Prefix: key, WithVersions: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if o.Key != key || o.IsDeleteMarker {
			continue
		}
		versions = append(versions, o)
		r, err := w.e.direct.GetObject(ctx, versionedBucket, key, minio.GetObjectOptions{VersionID: o.VersionID})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		d, err := w.src.Extract(body)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, d...)
	}
	return versions, slices.Compact(slices.Sorted(slices.Values(names)))
}

// check compares every key's record with what its stored versions name.
func (w *versionedWorld) check(step int, what string) {
	w.t.Helper()
	for _, key := range w.keys {
		versions, names := w.stored(key)
		rec := w.e.record(versionedBucket, key)
		switch {
		case len(versions) == 0 && rec != nil && len(rec.Digests) > 0:
			w.t.Fatalf("step %d (%s): %s has no stored version but records %v", step, what, key, rec.Digests)
		case len(versions) > 0 && len(names) > 0 && rec == nil:
			w.t.Fatalf("step %d (%s): %s has %d stored versions naming %v but no record", step, what, key, len(versions), names)
		case rec != nil && (!slices.Equal(rec.Digests, names) || rec.Pending != nil || rec.Dirty):
			w.t.Fatalf("step %d (%s): %s records %v (pending %v, dirty %v); its %d stored versions name %v", step, what, key, rec.Digests, rec.Pending, rec.Dirty, len(versions), names)
		}
	}
}
