//go:build integration

package reclaim_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The registry-like layout of the digest sweep tests: blobs and manifests
// in one bucket.
const (
	dgBucket    = "cas"
	dgBlobs     = "blobs/sha256/"
	dgManifests = "manifests/"
	dgGrace     = 24 * time.Hour
	// dgSettle is the tests' digests.guard_settle.
	dgSettle = 3 * time.Minute
)

// digestBackend is the real backend client, counting the DeleteObjects
// requests sent through it, optionally losing or dropping them, and
// calling onUploads before each ListMultipartUploads; blobUploads counts
// those that ask about a key in the blobs' namespace (the digest sweep's).
type digestBackend struct {
	multipart.Backend
	deletes     atomic.Int64
	blobUploads atomic.Int64
	// loseDelete: the backend deletes, the answer is lost.
	loseDelete atomic.Bool
	// dropDelete: the request never reaches the backend, and the caller
	// gets no answer.
	dropDelete atomic.Bool
	// late, when set, holds the next DeleteObjects until its client gave
	// up, answers the client with that, and delivers the request to the
	// backend once late.release is closed (late.done gets the outcome).
	late        atomic.Pointer[lateDelete]
	mu          sync.Mutex
	onUploads   func()
	afterDelete func()
}

func (b *digestBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if req.Method == http.MethodPost && q.Has("delete") {
		b.deletes.Add(1)
		if l := b.late.Swap(nil); l != nil {
			return l.hold(b.Backend, req)
		}
		if b.dropDelete.Load() {
			return nil, errors.New("connection reset (request dropped by the test)")
		}
		resp, err := b.Backend.RoundTrip(req)
		b.mu.Lock()
		f := b.afterDelete
		b.mu.Unlock()
		if f != nil {
			f()
		}
		if err == nil && b.loseDelete.Load() {
			resp.Body.Close()
			return nil, errors.New("read tcp: i/o timeout (answer lost by the test)")
		}
		return resp, err
	}
	if req.Method == http.MethodGet && q.Has("uploads") {
		if strings.HasPrefix(q.Get("prefix"), dgBlobs) {
			b.blobUploads.Add(1)
		}
		b.mu.Lock()
		f := b.onUploads
		b.mu.Unlock()
		if f != nil {
			f()
		}
	}
	return b.Backend.RoundTrip(req)
}

// lateDelete is a DeleteObjects request the backend executes after its
// client gave up on it.
type lateDelete struct {
	release chan struct{}
	done    chan error
}

func newLateDelete() *lateDelete {
	return &lateDelete{release: make(chan struct{}), done: make(chan error, 1)}
}

// hold keeps req until its client gives up, then delivers it to next once
// l.release is closed.
func (l *lateDelete) hold(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	<-req.Context().Done()
	late := req.Clone(context.Background())
	late.Body = io.NopCloser(bytes.NewReader(body))
	go func() {
		<-l.release
		resp, err := next.RoundTrip(late)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("late delete answered %s", resp.Status)
			}
		}
		l.done <- err
	}()
	return nil, fmt.Errorf("client gave up on the request: %w", req.Context().Err())
}

func (b *digestBackend) setOnUploads(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onUploads = f
}

func (b *digestBackend) setAfterDelete(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.afterDelete = f
}

// digestEnv is a test world with the CAS bucket and a reclaimer
// configuration that sweeps it.
type digestEnv struct {
	*env
	be     *digestBackend
	layout *cas.Layout
	reg    *prometheus.Registry
	seq    atomic.Int64
	// blobs is the digest service of the gateway gatewayClient serves,
	// nil before.
	blobs *digests.Service
}

func newDigestEnv(t *testing.T) *digestEnv {
	t.Helper()
	e := newEnv(t)
	e.bucket(dgBucket)
	ns, err := cas.NewNamespace("blobs", dgBucket, dgBlobs, "", false)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", dgBucket, dgManifests, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return &digestEnv{
		env: e, be: &digestBackend{Backend: e.backend}, reg: prometheus.NewRegistry(),
		layout: &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}},
	}
}

// config is a reclaimer configuration with the digest sweep on: a day of
// placement grace, no planes, a rebuild before every pass.
func (d *digestEnv) config() reclaim.Config {
	cfg := d.env.config()
	cfg.Backend = d.be
	cfg.Metrics = d.reg
	cfg.Digests = &digestsweep.SweepConfig{Layout: d.layout, PlacementGrace: dgGrace, MaxDelete: 1000, MaxDeleteFraction: 0.5,
		MaxMarkFraction: 1, GuardSettle: dgSettle}
	return cfg
}

// settle moves the injected clock past the time when a delete attempt
// sent before the call can no longer be executed: its deadline (the
// backend timeout) plus the guard settle time plus the clock skew of
// config.
func (d *digestEnv) settle() {
	d.clock.Advance(reclaim.DefaultBackendTimeout + dgSettle + d.env.config().ClockSkew + time.Second)
}

// setClock sets the injected clock.
func (d *digestEnv) setClock(t time.Time) {
	d.clock.mu.Lock()
	defer d.clock.mu.Unlock()
	if t.After(d.clock.now) {
		d.clock.mono += t.Sub(d.clock.now)
	}
	d.clock.now = t
}

// blobContent is the content of the test blob called name.
func blobContent(name string) []byte { return []byte("content of blob " + name) }

// digestOf is the digest of content.
func digestOf(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// blobKey is the key of digest's blob.
func blobKey(digest string) string { return dgBlobs + digest[len("sha256:"):] }

// putBlob stores the blob called name directly on MinIO and returns its
// digest.
func (d *digestEnv) putBlob(name string) string {
	d.t.Helper()
	body := blobContent(name)
	dg := digestOf(body)
	if _, err := d.direct.Client.PutObject(d.t.Context(), dgBucket, blobKey(dg), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		d.t.Fatal(err)
	}
	return dg
}

// putBlobs stores the blobs called prefix0..prefix(n-1).
func (d *digestEnv) putBlobs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = d.putBlob(fmt.Sprint(prefix, i))
	}
	return out
}

// present reports which of digests' blobs are on MinIO.
func (d *digestEnv) present(digests ...string) []bool {
	d.t.Helper()
	out := make([]bool, len(digests))
	for i, dg := range digests {
		_, err := d.direct.Client.StatObject(d.t.Context(), dgBucket, blobKey(dg), minio.StatObjectOptions{})
		switch {
		case err == nil:
			out[i] = true
		case minio.ToErrorResponse(err).Code == "NoSuchKey":
		default:
			d.t.Fatal(err)
		}
	}
	return out
}

// wantPresent fails unless exactly the blobs of want are on MinIO.
func (d *digestEnv) wantPresent(what string, want bool, digests ...string) {
	d.t.Helper()
	for i, ok := range d.present(digests...) {
		if ok != want {
			d.t.Errorf("%s: blob %d (%s) present = %v, want %v", what, i, digests[i][:15], ok, want)
		}
	}
}

// modified returns the LastModified of every blob, as the backend lists
// them (to the millisecond).
func (d *digestEnv) modified() map[string]time.Time {
	d.t.Helper()
	out := map[string]time.Time{}
	for o := range d.direct.Client.ListObjects(d.t.Context(), dgBucket, minio.ListObjectsOptions{Prefix: dgBlobs, Recursive: true}) {
		if o.Err != nil {
			d.t.Fatal(o.Err)
		}
		out[o.Key] = o.LastModified
	}
	return out
}

// ageBlobs moves the clock to an hour past the placement grace of the
// newest blob, so that every blob stored so far is old.
func (d *digestEnv) ageBlobs() {
	d.t.Helper()
	d.setClock(newest(d.modified()).Add(dgGrace + time.Hour))
}

// newest returns the latest of times.
func newest(times map[string]time.Time) time.Time {
	var n time.Time
	for _, t := range times {
		if t.After(n) {
			n = t
		}
	}
	return n
}

// dgManifest is a registry manifest naming digests.
func dgManifest(digests []string) []byte {
	layers := make([]map[string]string, len(digests))
	for i, dg := range digests {
		layers[i] = map[string]string{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": dg}
	}
	b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "layers": layers})
	return b
}

// putManifest writes a manifest the way the gateway does: its references
// are recorded, the body goes to MinIO, and the write's end is recorded.
func (d *digestEnv) putManifest(key string, digests ...string) {
	d.t.Helper()
	if err := d.writeManifest(key, digests...); err != nil {
		d.t.Fatal(err)
	}
}

// writeManifest is putManifest for any goroutine: it returns what failed
// (etcdstore.ErrGuarded when a digest is being reclaimed, with nothing
// recorded and nothing written).
func (d *digestEnv) writeManifest(key string, digests ...string) error {
	ctx := context.Background()
	id := fmt.Sprint("write-", d.seq.Add(1))
	now := d.clock.Now()
	if err := d.store.BeginRefWrite(ctx, dgBucket, dgManifests+key, etcdstore.RefWrite{ID: id, Digests: digests, At: now}); err != nil {
		return fmt.Errorf("record references of %s: %w", key, err)
	}
	body := dgManifest(digests)
	info, err := d.direct.Client.PutObject(ctx, dgBucket, dgManifests+key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{ContentType: "application/json"})
	outcome := etcdstore.WriteCommitted
	if err != nil {
		outcome = etcdstore.WriteFailed
	}
	if eerr := d.store.EndRefWrite(ctx, dgBucket, dgManifests+key, id, outcome, info.ETag, now); eerr != nil || err != nil {
		return fmt.Errorf("write manifest %s: %v, %v", key, err, eerr)
	}
	return nil
}

// deleteManifest deletes a manifest the way the gateway does: its
// references go to the trash until expires, then the object goes.
func (d *digestEnv) deleteManifest(key string, expires time.Time) etcdstore.TrashRecord {
	d.t.Helper()
	tr, ok, err := d.store.TrashRefSource(d.t.Context(), dgBucket, dgManifests+key, "alice", d.clock.Now(), expires)
	if err != nil || !ok {
		d.t.Fatalf("trash %s: %v (recorded %v)", key, err, ok)
	}
	if err := d.direct.Client.RemoveObject(d.t.Context(), dgBucket, dgManifests+key, minio.RemoveObjectOptions{}); err != nil {
		d.t.Fatal(err)
	}
	return tr
}

// tombstone reads digest's tombstone.
func (d *digestEnv) tombstone(digest string) (etcdstore.Tombstone, int64, bool) {
	d.t.Helper()
	resp, err := d.cli.Get(d.t.Context(), d.store.Keys().Tombstone(digest))
	if err != nil {
		d.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return etcdstore.Tombstone{}, 0, false
	}
	var t etcdstore.Tombstone
	if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		d.t.Fatal(err)
	}
	return t, resp.Kvs[0].ModRevision, true
}

// wantStates fails unless each digest's tombstone is in state ("" for
// none).
func (d *digestEnv) wantStates(what string, state etcdstore.TombstoneState, digests ...string) {
	d.t.Helper()
	for i, dg := range digests {
		t, _, ok := d.tombstone(dg)
		if !ok && state != "" || ok && t.State != state {
			d.t.Errorf("%s: tombstone of blob %d = %+v (exists %v), want state %q", what, i, t, ok, state)
		}
	}
}

// count reads how many keys lie under prefix.
func (d *digestEnv) count(prefix string) int64 {
	d.t.Helper()
	resp, err := d.cli.Get(d.t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		d.t.Fatal(err)
	}
	return resp.Count
}

// digestPass runs one pass and returns its digest report, which must be
// there.
func (d *digestEnv) digestPass(r *reclaim.Reclaimer) digestsweep.Report {
	d.t.Helper()
	rep := d.mustPass(r)
	if rep.Digests == nil {
		d.t.Fatalf("pass %d has no digest report", rep.Pass)
	}
	return *rep.Digests
}

// wantCounts compares the headline counts of a digest report.
func wantCounts(t *testing.T, what string, got digestsweep.Report, pending, ready, skipped, deleted int64) {
	t.Helper()
	if got.Pending != pending || got.Ready != ready || got.Skipped != skipped || got.Deleted != deleted {
		t.Errorf("%s: pending %d ready %d skipped %d deleted %d; want %d %d %d %d (report %+v)",
			what, got.Pending, got.Ready, got.Skipped, got.Deleted, pending, ready, skipped, deleted, got)
	}
}

// sizes is the total size of the named blobs' contents.
func sizes(names ...string) int64 {
	var n int64
	for _, name := range names {
		n += int64(len(blobContent(name)))
	}
	return n
}

// names returns prefix0..prefix(n-1).
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}
