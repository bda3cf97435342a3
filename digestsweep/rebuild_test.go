//go:build integration

package digestsweep_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// The registry-like layout of the rebuild tests.
const (
	registryBucket  = "registry"
	manifestsPrefix = "manifests/"
)

// readsBackend is the backend under the rebuild's S3 client, counting the
// object bodies read through it and running beforeGet and afterGet (when
// set) around each read.
type readsBackend struct {
	next                s3client.Backend
	gets                atomic.Int64
	beforeGet, afterGet func(key string)
}

func (b *readsBackend) NewRequest(ctx context.Context, method, bucket, key string, query url.Values) (*http.Request, error) {
	return b.next.NewRequest(ctx, method, bucket, key, query)
}

func (b *readsBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	// A GET with no query is an object read; listings carry list-type.
	_, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	if req.Method != http.MethodGet || req.URL.RawQuery != "" || key == "" {
		return b.next.RoundTrip(req)
	}
	b.gets.Add(1)
	if b.beforeGet != nil {
		b.beforeGet(key)
	}
	resp, err := b.next.RoundTrip(req)
	if b.afterGet != nil {
		b.afterGet(key)
	}
	return resp, err
}

// rebuildEnv is a test world with the registry bucket and a rebuilder over
// its manifests.
type rebuildEnv struct {
	*sweepEnv
	reads   *readsBackend
	backend *s3client.Client
	src     cas.Source
	logs    *bytes.Buffer
}

func newRebuildEnv(t *testing.T, maxBody int64) *rebuildEnv {
	t.Helper()
	e := newSweepEnv(t)
	e.bucket(registryBucket)
	src, err := cas.NewSource("manifests", registryBucket, manifestsPrefix, "", maxBody)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := backend.NewStatic(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	reads := &readsBackend{next: signed}
	return &rebuildEnv{sweepEnv: e, reads: reads, backend: s3client.New(reads, 0), src: src, logs: new(bytes.Buffer)}
}

// newRebuilder returns a rebuilder of sources over the test backend,
// listing batch keys a page, with a stale limit of an hour.
func (r *rebuildEnv) newRebuilder(sources []cas.Source, batch int, log *slog.Logger) *digestsweep.Rebuilder {
	return &digestsweep.Rebuilder{
		Backend: r.backend, Store: r.store, Sources: sources, Batch: batch, Stale: time.Hour, Logger: log, Now: r.clock.Now,
	}
}

// rebuilder returns a rebuilder listing batch keys a page; its warnings go
// to r.logs.
func (r *rebuildEnv) rebuilder(batch int) *digestsweep.Rebuilder {
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return r.newRebuilder([]cas.Source{r.src}, batch, log)
}

// rebuild runs one whole rebuild, which must succeed.
func (r *rebuildEnv) rebuild(batch int) digestsweep.RebuildResult {
	r.t.Helper()
	res, err := r.rebuilder(batch).Run(r.ctx(), digestsweep.RebuildPos{}, digestsweep.RebuildResult{}, nil)
	if err != nil {
		r.t.Fatalf("rebuild: %v (result %+v)", err, res)
	}
	return res
}

func (r *rebuildEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(r.t.Context(), 2*time.Minute)
	r.t.Cleanup(cancel)
	return ctx
}

// blobDigest is the digest of the i-th test blob.
func blobDigest(i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "blob %d", i))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// manifestBody is a registry manifest naming digests.
func manifestBody(digests []string) []byte {
	type layer struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	}
	m := struct {
		SchemaVersion int     `json:"schemaVersion"`
		Layers        []layer `json:"layers"`
	}{SchemaVersion: 2}
	for _, d := range digests {
		m.Layers = append(m.Layers, layer{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: d})
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// put writes body directly to MinIO, around the gateway, and returns its
// ETag.
func (r *rebuildEnv) put(key string, body []byte) string {
	r.t.Helper()
	info, err := r.direct.Client.PutObject(r.t.Context(), registryBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{ContentType: "application/json"})
	if err != nil {
		r.t.Fatalf("put %s: %v", key, err)
	}
	return info.ETag
}

// putManifests writes n manifests naming one to three overlapping
// digests each directly to MinIO, and returns the digests of each key.
func (r *rebuildEnv) putManifests(n int) map[string][]string {
	r.t.Helper()
	out := make(map[string][]string, n)
	for i := range n {
		var ds []string
		for j := range 1 + i%3 {
			ds = append(ds, blobDigest((i+j*37)%(n+n/5)))
		}
		out[fmt.Sprintf("%sm%04d.json", manifestsPrefix, i)] = ds
	}
	keys := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 16 {
		wg.Go(func() {
			for k := range keys {
				body := manifestBody(out[k])
				if _, err := r.direct.Client.PutObject(r.t.Context(), registryBucket, k, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
					errs <- fmt.Errorf("put %s: %w", k, err)
				}
			}
		})
	}
	for k := range out {
		keys <- k
	}
	close(keys)
	wg.Wait()
	close(errs)
	for err := range errs {
		r.t.Fatal(err)
	}
	return out
}

// refKeys returns every recorded reference key.
func (r *rebuildEnv) refKeys() map[string]bool {
	r.t.Helper()
	resp, err := r.cli.Get(r.t.Context(), r.store.Keys().AllRefs(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		r.t.Fatal(err)
	}
	out := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = true
	}
	return out
}

// wantRefs checks that the recorded references are exactly those of want
// (key to digests).
func (r *rebuildEnv) wantRefs(want map[string][]string) {
	r.t.Helper()
	got := r.refKeys()
	n := 0
	for key, ds := range want {
		for _, d := range ds {
			n++
			if !got[r.store.Keys().Ref(d, registryBucket, key)] {
				r.t.Errorf("no reference recorded from %s to %s", key, d)
			}
		}
	}
	if len(got) != n {
		r.t.Errorf("%d references recorded, want %d", len(got), n)
	}
}

func (r *rebuildEnv) record(key string) etcdstore.RefSource {
	r.t.Helper()
	v, err := r.store.GetRefSource(r.t.Context(), registryBucket, key)
	if err != nil {
		r.t.Fatalf("record of %s: %v", key, err)
	}
	return v.Value
}

func wantResult(t *testing.T, got, want digestsweep.RebuildResult) {
	t.Helper()
	if got != want {
		t.Errorf("rebuild result = %+v, want %+v", got, want)
	}
}

// Five hundred manifests written around the gateway: the rebuild records
// every reference they name, counts and logs each manifest, and a second
// rebuild reads nothing.
func TestRebuildRecordsReferencesWrittenAroundTheGateway(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	manifests := r.putManifests(500)
	refs := int64(0)
	for _, ds := range manifests {
		refs += int64(len(ds))
	}

	var saved []digestsweep.RebuildPos
	res, err := r.rebuilder(100).Run(r.ctx(), digestsweep.RebuildPos{}, digestsweep.RebuildResult{}, func(p digestsweep.RebuildPos, _ digestsweep.RebuildResult) error {
		saved = append(saved, p)
		return nil
	})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	wantResult(t, res, digestsweep.RebuildResult{Objects: 500, Read: 500, Unknown: 500, UnknownRefs: refs})
	r.wantRefs(manifests)
	if rec := r.record(manifestsPrefix + "m0042.json"); !rec.Unknown || !slices.Equal(rec.Digests, slices.Sorted(slices.Values(manifests[manifestsPrefix+"m0042.json"]))) {
		t.Errorf("record of m0042 = %+v, want unknown with the body's digests", rec)
	}
	if n := strings.Count(r.logs.String(), "references written around the gateway"); n != 500 {
		t.Errorf("%d warnings logged, want 500", n)
	}
	wantSaved := []digestsweep.RebuildPos{
		{After: manifestsPrefix + "m0099.json"}, {After: manifestsPrefix + "m0199.json"}, {After: manifestsPrefix + "m0299.json"},
		{After: manifestsPrefix + "m0399.json"}, {Source: 1},
	}
	// A listing continued with MinIO's tokens may call its last full
	// page truncated and end with an empty one.
	if n := len(saved); n == len(wantSaved)+1 && saved[n-2] == (digestsweep.RebuildPos{After: manifestsPrefix + "m0499.json"}) {
		saved = slices.Delete(saved, n-2, n-1)
	}
	if !slices.Equal(saved, wantSaved) {
		t.Errorf("saved positions %+v, want %+v", saved, wantSaved)
	}

	gets := r.reads.gets.Load()
	wantResult(t, r.rebuild(100), digestsweep.RebuildResult{Objects: 500})
	if n := r.reads.gets.Load() - gets; n != 0 {
		t.Errorf("second rebuild read %d bodies, want 0", n)
	}
	r.wantRefs(manifests)
}

// A record the gateway wrote is not read again; an object overwritten
// around the gateway afterwards is, and its new references are added.
func TestRebuildReadsOnlyChangedObjects(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	ctx, now := r.ctx(), r.clock.Now()
	key := manifestsPrefix + "through-gateway.json"
	ds := []string{blobDigest(1), blobDigest(2)}
	if err := r.store.BeginRefWrite(ctx, registryBucket, key, etcdstore.RefWrite{ID: "w1", Digests: ds, At: now}); err != nil {
		t.Fatal(err)
	}
	etag := r.put(key, manifestBody(ds))
	if err := r.store.EndRefWrite(ctx, registryBucket, key, "w1", etcdstore.WriteCommitted, etag, now); err != nil {
		t.Fatal(err)
	}

	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1})
	if n := r.reads.gets.Load(); n != 0 {
		t.Errorf("rebuild read %d bodies of a recorded object, want 0", n)
	}
	r.wantRefs(map[string][]string{key: ds})

	around := append(slices.Clone(ds), blobDigest(3))
	etag2 := r.put(key, manifestBody(around))
	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1, Read: 1, Unknown: 1, UnknownRefs: 1})
	r.wantRefs(map[string][]string{key: around})
	if rec := r.record(key); rec.ETag != etag2 || !rec.Unknown {
		t.Errorf("record = %+v, want ETag %s and unknown", rec, etag2)
	}
	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1})
}

// A write of unknown outcome leaves both bodies' digests; the rebuild
// reads the body the backend holds and keeps exactly its digests.
func TestRebuildSettlesDirtyRecord(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	ctx, now := r.ctx(), r.clock.Now()
	key := manifestsPrefix + "dirty.json"
	a := []string{blobDigest(1), blobDigest(2)}
	b := []string{blobDigest(2), blobDigest(3)}
	if err := r.store.BeginRefWrite(ctx, registryBucket, key, etcdstore.RefWrite{ID: "w1", Digests: a, At: now}); err != nil {
		t.Fatal(err)
	}
	etagA := r.put(key, manifestBody(a))
	if err := r.store.EndRefWrite(ctx, registryBucket, key, "w1", etcdstore.WriteCommitted, etagA, now); err != nil {
		t.Fatal(err)
	}
	if err := r.store.BeginRefWrite(ctx, registryBucket, key, etcdstore.RefWrite{ID: "w2", Digests: b, At: now}); err != nil {
		t.Fatal(err)
	}
	etagB := r.put(key, manifestBody(b)) // the write landed, but its answer was lost
	if err := r.store.EndRefWrite(ctx, registryBucket, key, "w2", etcdstore.WriteUnknown, "", now); err != nil {
		t.Fatal(err)
	}
	if rec := r.record(key); !rec.Dirty || len(rec.Digests) != 3 {
		t.Fatalf("record before the rebuild = %+v, want dirty with 3 digests", rec)
	}

	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1, Read: 1, Settled: 1})
	rec := r.record(key)
	if rec.Dirty || rec.ETag != etagB || !slices.Equal(rec.Digests, slices.Sorted(slices.Values(b))) {
		t.Errorf("settled record = %+v, want clean with ETag %s and digests %v", rec, etagB, b)
	}
	r.wantRefs(map[string][]string{key: b})
	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1})
}

// A pending write is left to its gateway until it is older than the stale
// limit; then it is made dirty, and the next rebuild settles it.
func TestRebuildStalePendingWrite(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	ctx := r.ctx()
	key := manifestsPrefix + "pending.json"
	ds := []string{blobDigest(7), blobDigest(8)}
	if err := r.store.BeginRefWrite(ctx, registryBucket, key, etcdstore.RefWrite{ID: "w1", Digests: ds, At: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	etag := r.put(key, manifestBody(ds)) // and then the gateway died

	r.clock.Advance(10 * time.Minute)
	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1})
	if rec := r.record(key); rec.Pending == nil {
		t.Fatalf("a young pending write was ended: %+v", rec)
	}

	r.clock.Advance(time.Hour)
	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1, Stale: 1})
	if rec := r.record(key); rec.Pending != nil || !rec.Dirty {
		t.Fatalf("record after the stale limit = %+v, want dirty and not pending", rec)
	}
	r.wantRefs(map[string][]string{key: ds})

	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1, Read: 1, Settled: 1})
	if rec := r.record(key); rec.Dirty || rec.ETag != etag || !slices.Equal(rec.Digests, slices.Sorted(slices.Values(ds))) {
		t.Errorf("settled record = %+v, want clean with ETag %s and digests %v", rec, etag, ds)
	}
	r.wantRefs(map[string][]string{key: ds})
}

// An object whose references cannot be known fails the rebuild.
func TestRebuildFailsOnUnreadableObject(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 8<<10)
	var many []string
	for i := range cas.MaxDigestsPerObject + 1 {
		many = append(many, blobDigest(i))
	}
	for _, tc := range []struct {
		name string
		body []byte
		is   error
	}{
		{name: "over the parse limit", body: bytes.Repeat([]byte(blobDigest(1)+" "), 150)},
		{name: "too many digests", body: []byte(strings.Join(many, "\n")), is: cas.ErrTooManyDigests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The prefix is the source's, so the rebuild lists only this
			// case's object.
			src := r.src
			src.Prefix = manifestsPrefix + strings.ReplaceAll(tc.name, " ", "-") + "/"
			key := src.Prefix + "bad.json"
			r.put(key, tc.body)
			rb := r.newRebuilder([]cas.Source{src}, 10, nil)
			saves := 0
			res, err := rb.Run(r.ctx(), digestsweep.RebuildPos{}, digestsweep.RebuildResult{}, func(digestsweep.RebuildPos, digestsweep.RebuildResult) error {
				saves++
				return nil
			})
			if err == nil {
				t.Fatalf("rebuild succeeded (%+v), want it to fail", res)
			}
			if !strings.Contains(err.Error(), key) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q, want one naming %s (and %v)", err, key, tc.is)
			}
			if saves != 0 {
				t.Errorf("a failed page saved its position %d times", saves)
			}
			if _, err := r.store.GetRefSource(t.Context(), registryBucket, key); !errors.Is(err, etcdstore.ErrNotFound) {
				t.Errorf("record of the unreadable object: %v, want none", err)
			}
		})
	}
}

// An object deleted between the listing and the read is skipped.
func TestRebuildSkipsVanishedObject(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	key := manifestsPrefix + "vanishing.json"
	r.put(key, manifestBody([]string{blobDigest(1)}))
	r.reads.beforeGet = func(k string) {
		if err := r.direct.RemoveObject(context.Background(), registryBucket, k, minio.RemoveObjectOptions{}); err != nil {
			t.Errorf("remove %s: %v", k, err)
		}
	}
	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1})
	if _, err := r.store.GetRefSource(t.Context(), registryBucket, key); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Errorf("record of the vanished object: %v, want none", err)
	}
}

// A gateway write that ends with an unknown outcome after the rebuild read
// an older body must not be settled to that older body: the rebuild sees
// the record change and reads again.
func TestRebuildLooksAgainWhenRecordChangesDuringRead(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	ctx, now := r.ctx(), r.clock.Now()
	key := manifestsPrefix + "racing.json"
	a := []string{blobDigest(1)}
	c := []string{blobDigest(3)}
	d := []string{blobDigest(4)}
	if err := r.store.BeginRefWrite(ctx, registryBucket, key, etcdstore.RefWrite{ID: "w1", Digests: a, At: now}); err != nil {
		t.Fatal(err)
	}
	etagA := r.put(key, manifestBody(a))
	if err := r.store.EndRefWrite(ctx, registryBucket, key, "w1", etcdstore.WriteCommitted, etagA, now); err != nil {
		t.Fatal(err)
	}
	r.put(key, manifestBody(c)) // around the gateway: the ETag no longer matches
	var etagD string
	var once sync.Once
	r.reads.afterGet = func(string) {
		// Body C is read; now a gateway writes D, whose answer is lost.
		once.Do(func() {
			if err := r.store.BeginRefWrite(ctx, registryBucket, key, etcdstore.RefWrite{ID: "w2", Digests: d, At: now}); err != nil {
				t.Error(err)
			}
			etagD = r.put(key, manifestBody(d))
			if err := r.store.EndRefWrite(ctx, registryBucket, key, "w2", etcdstore.WriteUnknown, "", now); err != nil {
				t.Error(err)
			}
		})
	}

	wantResult(t, r.rebuild(10), digestsweep.RebuildResult{Objects: 1, Read: 2, Settled: 1})
	if rec := r.record(key); rec.Dirty || rec.ETag != etagD || !slices.Equal(rec.Digests, d) {
		t.Errorf("record = %+v, want clean with ETag %s and digests %v", rec, etagD, d)
	}
	r.wantRefs(map[string][]string{key: d})
}

// A rebuild killed after its first page resumes from the saved position:
// every manifest is read and recorded once.
func TestRebuildResumesFromSavedPosition(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	manifests := r.putManifests(500)
	killed := errors.New("killed after the first page")

	var savedPos digestsweep.RebuildPos
	var savedRes digestsweep.RebuildResult
	_, err := r.rebuilder(100).Run(r.ctx(), digestsweep.RebuildPos{}, digestsweep.RebuildResult{}, func(p digestsweep.RebuildPos, res digestsweep.RebuildResult) error {
		savedPos, savedRes = p, res
		return killed
	})
	if !errors.Is(err, killed) {
		t.Fatalf("first run: %v, want the save's error", err)
	}
	if want := (digestsweep.RebuildPos{After: manifestsPrefix + "m0099.json"}); savedPos != want {
		t.Fatalf("saved position %+v, want %+v", savedPos, want)
	}
	if savedRes.Unknown != 100 || savedRes.Read != 100 {
		t.Errorf("saved result %+v, want 100 read and unknown", savedRes)
	}

	var last digestsweep.RebuildPos
	res, err := r.rebuilder(100).Run(r.ctx(), savedPos, savedRes, func(p digestsweep.RebuildPos, _ digestsweep.RebuildResult) error {
		last = p
		return nil
	})
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	refs := int64(0)
	for _, ds := range manifests {
		refs += int64(len(ds))
	}
	wantResult(t, res, digestsweep.RebuildResult{Objects: 500, Read: 500, Unknown: 500, UnknownRefs: refs})
	if last != (digestsweep.RebuildPos{Source: 1}) {
		t.Errorf("last saved position %+v, want the end", last)
	}
	if n := r.reads.gets.Load(); n != 500 {
		t.Errorf("%d bodies read across both runs, want 500", n)
	}
	r.wantRefs(manifests)
}
