//go:build integration

package digestsweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// newContentEnv is a digest test world whose blob namespace has content:
// a blob that is an image manifest or an index keeps what it names while
// it is stored itself.
func newContentEnv(t *testing.T) *digestEnv {
	d := newDigestEnv(t)
	d.Layout.Namespaces[0].Content = cas.ContentManifests
	d.Layout.Namespaces[0].Verify = true
	if err := d.Layout.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

// imageManifest is an OCI image manifest naming config and layers.
func imageManifest(config string, layers ...string) []byte {
	desc := func(mt, dg string) map[string]any { return map[string]any{"mediaType": mt, "digest": dg, "size": 1} }
	ls := make([]map[string]any, len(layers))
	for i, l := range layers {
		ls[i] = desc("application/vnd.oci.image.layer.v1.tar", l)
	}
	b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", config), "layers": ls})
	return b
}

// imageIndex is an OCI image index naming child manifests.
func imageIndex(children ...string) []byte {
	ms := make([]map[string]any, len(children))
	for i, c := range children {
		ms[i] = map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": c, "size": 1}
	}
	b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": ms})
	return b
}

// putContent stores body as a blob and returns its digest. Through the
// gateway (recorded), what it names is recorded on the blob's key the way
// the gateway records it; otherwise it is written around the gateway, for
// the rebuild to find.
func (d *digestEnv) putContent(body []byte, recorded bool) string {
	d.T.Helper()
	ctx := context.Background()
	dg := reclaimtest.DigestOf(body)
	key := reclaimtest.BlobKey(dg)
	named, _, err := cas.ParseManifest(body)
	if err != nil {
		d.T.Fatal(err)
	}
	id := fmt.Sprint("content-", d.Seq.Add(1))
	if recorded {
		if err := d.Store.BeginRefWrite(ctx, reclaimtest.CASBucket, key, etcdstore.RefWrite{ID: id, Digests: named, At: d.Clock.Now()}); err != nil {
			d.T.Fatal(err)
		}
	}
	info, err := d.Direct.Client.PutObject(ctx, reclaimtest.CASBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	if err != nil {
		d.T.Fatal(err)
	}
	if recorded {
		if err := d.Store.EndRefWrite(ctx, reclaimtest.CASBucket, key, id, etcdstore.WriteCommitted, info.ETag, d.Clock.Now()); err != nil {
			d.T.Fatal(err)
		}
	}
	return dg
}

// converge runs passes until one deletes nothing and leaves nothing
// pending or ready (at most max), returning the pass in which each digest
// of watch was seen gone first.
func (d *digestEnv) converge(r *reclaim.Reclaimer, max int, watch ...string) map[string]int {
	d.T.Helper()
	gone := map[string]int{}
	for pass := 1; pass <= max; pass++ {
		rep := d.DigestPass(r)
		for i, ok := range d.Present(watch...) {
			if _, seen := gone[watch[i]]; !ok && !seen {
				gone[watch[i]] = pass
			}
		}
		if rep.Deleted == 0 && rep.Pending == 0 && rep.Ready == 0 && rep.Settling == 0 {
			return gone
		}
	}
	d.T.Fatalf("the digest sweep did not settle within %d passes", max)
	return nil
}

// TestDigestContentFollowsManifests deletes the tag of one of two images
// that share a layer: its manifest goes (nothing names it), then, once
// the manifest's bytes are gone, its config and private layer; the shared
// layer and the other image stay. One manifest is recorded as the gateway
// records it, the other written around the gateway for the rebuild.
func TestDigestContentFollowsManifests(t *testing.T) {
	t.Parallel()
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprint("recorded=", recorded), func(t *testing.T) {
			t.Parallel()
			d := newContentEnv(t)
			shared, private := d.PutBlob("shared layer"), d.PutBlob("private layer")
			c1, c2 := d.PutBlob("config one"), d.PutBlob("config two")
			m1 := d.putContent(imageManifest(c1, shared, private), recorded)
			m2 := d.putContent(imageManifest(c2, shared), true)
			d.PutManifest("one", m1)
			d.PutManifest("two", m2)
			d.AgeBlobs()
			r := d.Start(d.Config())

			rep := d.DigestPass(r)
			reclaimtest.WantCounts(t, "every image tagged", rep, 0, 0, 0, 0)
			d.DeleteManifest("one", d.Clock.Now())
			d.Clock.Advance(time.Minute)
			gone := d.converge(r, 12, m1, c1, private)

			d.WantPresent("after the tag's delete", false, m1, c1, private)
			d.WantPresent("after the tag's delete", true, m2, c2, shared)
			if gone[c1] <= gone[m1] || gone[private] <= gone[m1] {
				t.Errorf("passes that deleted: manifest %d, config %d, private layer %d; what a manifest names must outlive it", gone[m1], gone[c1], gone[private])
			}
			if n := d.Count(d.Store.Keys().RefSource(reclaimtest.CASBucket, reclaimtest.BlobKey(m1))); n != 0 {
				t.Errorf("the deleted manifest's record of what it named is still there")
			}
		})
	}
}

// TestDigestContentIndexKeepsChildren deletes the tag of a multi-platform
// index: the index goes, then both child manifests, then their layers;
// while the index is tagged, children no tag names are kept through it.
func TestDigestContentIndexKeepsChildren(t *testing.T) {
	t.Parallel()
	d := newContentEnv(t)
	l1, l2, c := d.PutBlob("amd64 layer"), d.PutBlob("arm64 layer"), d.PutBlob("config")
	a := d.putContent(imageManifest(c, l1), true)
	b := d.putContent(imageManifest(c, l2), true)
	idx := d.putContent(imageIndex(a, b), true)
	d.PutManifest("multi", idx)
	d.AgeBlobs()
	cfg := d.Config()
	cfg.Digests.MaxDeleteFraction = 1 // the last level is every blob left
	r := d.Start(cfg)

	for range 3 {
		reclaimtest.WantCounts(t, "the index tagged", d.DigestPass(r), 0, 0, 0, 0)
	}
	d.DeleteManifest("multi", d.Clock.Now())
	d.Clock.Advance(time.Minute)
	gone := d.converge(r, 16, idx, a, b, l1, l2, c)
	d.WantPresent("after the index's tag is deleted", false, idx, a, b, l1, l2, c)
	if !(gone[idx] < gone[a] && gone[a] < gone[l1] && gone[b] < gone[l2]) {
		t.Errorf("passes that deleted: index %d, children %d %d, layers %d %d; each level must outlive the one naming it", gone[idx], gone[a], gone[b], gone[l1], gone[l2])
	}
}

// TestDigestContentPushDuringSweep pushes a new image naming a layer whose
// only manifest was just deleted, while the layer's tombstone is pending:
// the new manifest's record keeps the layer, and it is never deleted.
func TestDigestContentPushDuringSweep(t *testing.T) {
	t.Parallel()
	d := newContentEnv(t)
	layer, c := d.PutBlob("reused layer"), d.PutBlob("old config")
	old := d.putContent(imageManifest(c, layer), true)
	d.PutManifest("old", old)
	d.AgeBlobs()
	r := d.Start(d.Config())
	d.DigestPass(r)
	d.DeleteManifest("old", d.Clock.Now())
	d.Clock.Advance(time.Minute)

	// Until the layer's tombstone is pending: the old manifest is gone.
	for pass := 0; ; pass++ {
		if pass == 10 {
			t.Fatal("the layer's tombstone never became pending")
		}
		d.DigestPass(r)
		if tomb, _, ok := d.Tombstone(layer); ok && tomb.State == etcdstore.TombstonePending {
			break
		}
	}
	d.WantPresent("the old manifest", false, old)
	c2 := d.PutBlob("new config")
	fresh := d.putContent(imageManifest(c2, layer), true)
	d.PutManifest("new", fresh)
	for range 6 {
		d.DigestPass(r)
	}
	d.WantPresent("pushed during the sweep", true, layer, fresh, c2)
	d.WantStates("the reused layer", etcdstore.TombstoneSkipped, layer)
}
