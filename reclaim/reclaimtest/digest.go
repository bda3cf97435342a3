//go:build integration

package reclaimtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The registry-like layout of the digest sweep tests: blobs and manifests
// in one bucket.
const (
	CASBucket      = "cas"
	BlobPrefix     = "blobs/sha256/"
	ManifestPrefix = "manifests/"
	// PlacementGrace is the tests' digests.placement_grace.
	PlacementGrace = 24 * time.Hour
	// GuardSettle is the tests' digests.guard_settle.
	GuardSettle = 3 * time.Minute
)

// DigestEnv is a test world with the CAS bucket and a reclaimer
// configuration that sweeps it.
type DigestEnv struct {
	*Env
	// Be is the backend of Config: Env.Backend, with its DeleteObjects
	// counted and faulted.
	Be *DigestBackend
	// Layout is the sweep's layout: namespace "blobs" (BlobPrefix) and
	// source "manifests" (ManifestPrefix), both in CASBucket.
	Layout *cas.Layout
	// Reg is the registry of Config's metrics.
	Reg *prometheus.Registry
	// Seq numbers the writes the world records, for their ids.
	Seq atomic.Int64
}

// NewDigestEnv starts an Env for t and makes CASBucket in it.
func NewDigestEnv(t *testing.T) *DigestEnv {
	t.Helper()
	e := NewEnv(t)
	e.Bucket(CASBucket)
	ns, err := cas.NewNamespace("blobs", CASBucket, BlobPrefix, "", false)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", CASBucket, ManifestPrefix, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return &DigestEnv{
		Env: e, Be: &DigestBackend{Backend: e.Backend}, Reg: prometheus.NewRegistry(),
		Layout: &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}},
	}
}

// Config is a reclaimer configuration with the digest sweep on: a day of
// placement grace, no planes, a rebuild before every pass.
func (d *DigestEnv) Config() reclaim.Config {
	cfg := d.Env.Config()
	cfg.Backend = d.Be
	cfg.Metrics = d.Reg
	cfg.Digests = &digestsweep.SweepConfig{Layout: d.Layout, PlacementGrace: PlacementGrace, MaxDelete: 1000, MaxDeleteFraction: 0.5,
		MaxMarkFraction: 1, GuardSettle: GuardSettle}
	return cfg
}

// Settle moves the injected clock past the time when a delete attempt
// sent before the call can no longer be executed: its deadline (the
// backend timeout) plus the guard settle time plus the clock skew of
// Config.
func (d *DigestEnv) Settle() {
	d.Clock.Advance(reclaim.DefaultBackendTimeout + GuardSettle + d.Env.Config().ClockSkew + time.Second)
}

// BlobContent is the content of the test blob called name.
func BlobContent(name string) []byte { return []byte("content of blob " + name) }

// DigestOf is the digest of content.
func DigestOf(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// BlobKey is the key of digest's blob.
func BlobKey(digest string) string { return BlobPrefix + digest[len("sha256:"):] }

// PutBlob stores the blob called name directly on MinIO and returns its
// digest.
func (d *DigestEnv) PutBlob(name string) string {
	d.T.Helper()
	body := BlobContent(name)
	dg := DigestOf(body)
	if _, err := d.Direct.Client.PutObject(d.T.Context(), CASBucket, BlobKey(dg), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		d.T.Fatal(err)
	}
	return dg
}

// PutBlobs stores the blobs called prefix0..prefix(n-1).
func (d *DigestEnv) PutBlobs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = d.PutBlob(fmt.Sprint(prefix, i))
	}
	return out
}

// Present reports which of digests' blobs are on MinIO.
func (d *DigestEnv) Present(digests ...string) []bool {
	d.T.Helper()
	out := make([]bool, len(digests))
	for i, dg := range digests {
		_, err := d.Direct.Client.StatObject(d.T.Context(), CASBucket, BlobKey(dg), minio.StatObjectOptions{})
		switch {
		case err == nil:
			out[i] = true
		case minio.ToErrorResponse(err).Code == "NoSuchKey":
		default:
			d.T.Fatal(err)
		}
	}
	return out
}

// WantPresent fails unless each of digests' blobs is on MinIO exactly
// when want says so.
func (d *DigestEnv) WantPresent(what string, want bool, digests ...string) {
	d.T.Helper()
	for i, ok := range d.Present(digests...) {
		if ok != want {
			d.T.Errorf("%s: blob %d (%s) present = %v, want %v", what, i, digests[i][:15], ok, want)
		}
	}
}

// Modified returns the LastModified of every blob, as the backend lists
// them (to the millisecond).
func (d *DigestEnv) Modified() map[string]time.Time {
	d.T.Helper()
	out := map[string]time.Time{}
	for o := range d.Direct.Client.ListObjects(d.T.Context(), CASBucket, minio.ListObjectsOptions{Prefix: BlobPrefix, Recursive: true}) {
		if o.Err != nil {
			d.T.Fatal(o.Err)
		}
		out[o.Key] = o.LastModified
	}
	return out
}

// AgeBlobs moves the clock to an hour past the placement grace of the
// newest blob, so that every blob stored so far is old.
func (d *DigestEnv) AgeBlobs() {
	d.T.Helper()
	d.Clock.Set(Newest(d.Modified()).Add(PlacementGrace + time.Hour))
}

// Newest returns the latest of times.
func Newest(times map[string]time.Time) time.Time {
	var n time.Time
	for _, t := range times {
		if t.After(n) {
			n = t
		}
	}
	return n
}

// ManifestBody is a registry manifest naming digests.
func ManifestBody(digests []string) []byte {
	layers := make([]map[string]string, len(digests))
	for i, dg := range digests {
		layers[i] = map[string]string{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": dg}
	}
	b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "layers": layers})
	return b
}

// PutManifest writes a manifest the way the gateway does: its references
// are recorded, the body goes to MinIO, and the write's end is recorded.
func (d *DigestEnv) PutManifest(key string, digests ...string) {
	d.T.Helper()
	if err := d.WriteManifest(key, digests...); err != nil {
		d.T.Fatal(err)
	}
}

// WriteManifest is PutManifest for any goroutine: it returns what failed
// (etcdstore.ErrGuarded when a digest is being reclaimed, with nothing
// recorded and nothing written).
func (d *DigestEnv) WriteManifest(key string, digests ...string) error {
	ctx := context.Background()
	id := fmt.Sprint("write-", d.Seq.Add(1))
	now := d.Clock.Now()
	if err := d.Store.BeginRefWrite(ctx, CASBucket, ManifestPrefix+key, etcdstore.RefWrite{ID: id, Digests: digests, At: now}); err != nil {
		return fmt.Errorf("record references of %s: %w", key, err)
	}
	body := ManifestBody(digests)
	info, err := d.Direct.Client.PutObject(ctx, CASBucket, ManifestPrefix+key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{ContentType: "application/json"})
	outcome := etcdstore.WriteCommitted
	if err != nil {
		outcome = etcdstore.WriteFailed
	}
	if eerr := d.Store.EndRefWrite(ctx, CASBucket, ManifestPrefix+key, id, outcome, info.ETag, now); eerr != nil || err != nil {
		return fmt.Errorf("write manifest %s: %v, %v", key, err, eerr)
	}
	return nil
}

// DeleteManifest deletes a manifest the way the gateway does: its
// references go to the trash until expires, then the object goes.
func (d *DigestEnv) DeleteManifest(key string, expires time.Time) etcdstore.TrashRecord {
	d.T.Helper()
	tr, ok, err := d.Store.TrashRefSource(d.T.Context(), CASBucket, ManifestPrefix+key, "alice", d.Clock.Now(), expires)
	if err != nil || !ok {
		d.T.Fatalf("trash %s: %v (recorded %v)", key, err, ok)
	}
	if err := d.Direct.Client.RemoveObject(d.T.Context(), CASBucket, ManifestPrefix+key, minio.RemoveObjectOptions{}); err != nil {
		d.T.Fatal(err)
	}
	return tr
}

// Tombstone reads digest's tombstone, its mod revision, and whether there
// is one.
func (d *DigestEnv) Tombstone(digest string) (etcdstore.Tombstone, int64, bool) {
	d.T.Helper()
	resp, err := d.Cli.Get(d.T.Context(), d.Store.Keys().Tombstone(digest))
	if err != nil {
		d.T.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return etcdstore.Tombstone{}, 0, false
	}
	var t etcdstore.Tombstone
	if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		d.T.Fatal(err)
	}
	return t, resp.Kvs[0].ModRevision, true
}

// WantStates fails unless each digest's tombstone is in state ("" for
// none).
func (d *DigestEnv) WantStates(what string, state etcdstore.TombstoneState, digests ...string) {
	d.T.Helper()
	for i, dg := range digests {
		t, _, ok := d.Tombstone(dg)
		if !ok && state != "" || ok && t.State != state {
			d.T.Errorf("%s: tombstone of blob %d = %+v (exists %v), want state %q", what, i, t, ok, state)
		}
	}
}

// Count reads how many keys lie under prefix.
func (d *DigestEnv) Count(prefix string) int64 {
	d.T.Helper()
	resp, err := d.Cli.Get(d.T.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		d.T.Fatal(err)
	}
	return resp.Count
}

// DigestPass runs one pass and returns its digest report, failing the
// test if the pass failed or has none.
func (d *DigestEnv) DigestPass(r *reclaim.Reclaimer) digestsweep.Report {
	d.T.Helper()
	rep := d.MustPass(r)
	if rep.Digests == nil {
		d.T.Fatalf("pass %d has no digest report", rep.Pass)
	}
	return *rep.Digests
}

// WantCounts compares the headline counts of a digest report.
func WantCounts(t *testing.T, what string, got digestsweep.Report, pending, ready, skipped, deleted int64) {
	t.Helper()
	if got.Pending != pending || got.Ready != ready || got.Skipped != skipped || got.Deleted != deleted {
		t.Errorf("%s: pending %d ready %d skipped %d deleted %d; want %d %d %d %d (report %+v)",
			what, got.Pending, got.Ready, got.Skipped, got.Deleted, pending, ready, skipped, deleted, got)
	}
}

// Sizes is the total size of the named blobs' contents.
func Sizes(names ...string) int64 {
	var n int64
	for _, name := range names {
		n += int64(len(BlobContent(name)))
	}
	return n
}

// Names returns prefix0..prefix(n-1).
func Names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}
