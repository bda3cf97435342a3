//go:build integration

package digestsweep_test

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// heldDeletes holds each DeleteObjects request until want of them are in
// flight at once (or a deadline passes), and drops the one addressed to
// drop: it never reaches the backend and its sender gets no answer.
type heldDeletes struct {
	multipart.Backend
	want int

	mu       sync.Mutex
	drop     string
	arrived  int
	inFlight int
	most     int
	all      chan struct{}
}

func (h *heldDeletes) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !req.URL.Query().Has("delete") {
		return h.Backend.RoundTrip(req)
	}
	h.mu.Lock()
	h.arrived++
	h.inFlight++
	h.most = max(h.most, h.inFlight)
	if h.arrived == h.want {
		close(h.all)
	}
	drop := h.drop
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	select {
	case <-h.all:
	case <-time.After(20 * time.Second):
	}
	if bucket, _, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/"); bucket == drop {
		return nil, errors.New("connection reset (request dropped by the test)")
	}
	return h.Backend.RoundTrip(req)
}

// TestDigestParallelDeletes collects blobs of three buckets, one request
// each, all three in flight at once, and drops the request of one bucket:
// only that request's guards stay armed (its blobs stay, ready), the other
// requests' blobs are deleted and their guards released; once the dropped
// request is settled a later pass deletes its blobs.
func TestDigestParallelDeletes(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	buckets := []string{"cas-b", "cas-c"}
	layout := &cas.Layout{Namespaces: slices.Clone(d.Layout.Namespaces), Sources: d.Layout.Sources}
	unref := map[string][]string{}
	for _, b := range buckets {
		d.Bucket(b)
		ns, err := cas.NewNamespace("blobs-"+b, b, reclaimtest.BlobPrefix, "", false)
		if err != nil {
			t.Fatal(err)
		}
		layout.Namespaces = append(layout.Namespaces, ns)
		for i := range 2 {
			body := reclaimtest.BlobContent(b + string(rune('0'+i)))
			dg := reclaimtest.DigestOf(body)
			if _, err := d.Direct.Client.PutObject(t.Context(), b, reclaimtest.BlobKey(dg), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			unref[b] = append(unref[b], dg)
		}
	}
	refd := d.PutBlobs("r", 4)
	d.PutManifest("m", refd...)
	unref[reclaimtest.CASBucket] = d.PutBlobs("u", 2)
	d.AgeBlobs()

	be := &heldDeletes{Backend: d.Be, want: 3, drop: "cas-b", all: make(chan struct{})}
	cfg := d.Config()
	cfg.Backend = be
	cfg.BatchSize = 1000
	cfg.Digests.Layout = layout
	cfg.Digests.MaxDeleteFraction = 1
	cfg.Digests.DeleteParallel = 3
	r := d.Start(cfg)
	d.DigestPass(r)

	rep := d.DigestPass(r)
	if be.arrived != 3 || be.most != 3 {
		t.Errorf("%d DeleteObjects requests, at most %d in flight at once; want 3, all at once", be.arrived, be.most)
	}
	if rep.Deleted != 4 || rep.Settling != 2 || rep.Failed != 0 {
		t.Errorf("deleted %d settling %d failed %d; want 4, 2, 0 (report %+v)", rep.Deleted, rep.Settling, rep.Failed, rep)
	}
	if got, want := d.guardDigests(), slices.Sorted(slices.Values(unref["cas-b"])); !slices.Equal(got, want) {
		t.Errorf("guards armed after the pass: %v, want only the dropped request's %v", got, want)
	}
	for _, b := range []string{reclaimtest.CASBucket, "cas-c"} {
		d.wantIn(b, false, unref[b]...)
		d.WantStates("deleted "+b, etcdstore.TombstoneDeleted, unref[b]...)
	}
	d.wantIn("cas-b", true, unref["cas-b"]...)
	d.WantStates("dropped", etcdstore.TombstoneReady, unref["cas-b"]...)
	d.WantPresent("referenced", true, refd...)

	be.mu.Lock()
	be.drop = ""
	be.mu.Unlock()
	d.Settle()
	rep = d.DigestPass(r)
	if rep.Deleted != 2 || d.Count(d.Store.Keys().Guards()) != 0 {
		t.Errorf("after the settle time: deleted %d, %d guards left; want 2 and none", rep.Deleted, d.Count(d.Store.Keys().Guards()))
	}
	d.wantIn("cas-b", false, unref["cas-b"]...)
	d.WantStates("settled", etcdstore.TombstoneDeleted, unref["cas-b"]...)
	d.WantPresent("referenced", true, refd...)
}

// guardDigests returns the digests whose guard is armed, sorted.
func (d *digestEnv) guardDigests() []string {
	d.T.Helper()
	resp, err := d.Cli.Get(d.T.Context(), d.Store.Keys().Guards(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		d.T.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		dg, _ := etcdstore.LastSegment(string(kv.Key))
		out = append(out, dg)
	}
	slices.Sort(out)
	return out
}

// wantIn fails unless each of digests' blobs is in bucket exactly when
// want says so.
func (d *digestEnv) wantIn(bucket string, want bool, digests ...string) {
	d.T.Helper()
	for _, dg := range digests {
		_, err := d.Direct.Client.StatObject(d.T.Context(), bucket, reclaimtest.BlobKey(dg), minio.StatObjectOptions{})
		switch {
		case err == nil && !want:
			d.T.Errorf("%s: blob %s is there, want it gone", bucket, dg[:15])
		case err != nil && minio.ToErrorResponse(err).Code != "NoSuchKey":
			d.T.Fatal(err)
		case err != nil && want:
			d.T.Errorf("%s: blob %s is gone, want it there", bucket, dg[:15])
		}
	}
}
