//go:build integration

package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestDigestsConfirmBlobs writes manifests into a source that confirms
// the blobs it names. Over generated manifests, each naming stored and
// missing blobs in some mix, the write succeeds exactly when every named
// blob is stored (the model), and a refused one is BlobNotStored naming a
// missing blob, with nothing stored on MinIO and no references recorded.
// A blob deleted through the gateway counts as missing afterwards, and
// uploading it again lets the same manifest through.
func TestDigestsConfirmBlobs(t *testing.T) {
	e := newDigestEnvWith(t, func(l *cas.Layout) { l.Sources[0].ConfirmBlobs = true })
	stored := map[string]bool{}
	var all []string
	for i := range 6 {
		content := strings.Repeat(string(rune('a'+i)), 10+i)
		d, key := blob(content)
		all = append(all, d)
		if i%2 == 0 {
			e.mustPut(e.alice, regBucket, key, []byte(content))
			stored[d] = true
		}
	}
	// Every subset of the six digests, as a manifest.
	for mask := 1; mask < 1<<len(all); mask += 3 {
		var named []string
		want := true
		for i, d := range all {
			if mask&(1<<i) != 0 {
				named = append(named, d)
				want = want && stored[d]
			}
		}
		key := sourcePrefix + "confirm/" + strconv.Itoa(mask)
		_, err := e.put(e.alice, regBucket, key, manifest(named...))
		if want {
			if err != nil {
				t.Fatalf("manifest naming stored blobs %v: %v", named, err)
			}
			continue
		}
		requireCode(t, err, http.StatusConflict, "BlobNotStored")
		if !strings.Contains(err.Error(), "upload that blob again") {
			t.Fatalf("refusal %v does not say what to do", err)
		}
		if e.onMinIO(regBucket, key) {
			t.Fatalf("refused manifest %s stored", key)
		}
		if _, err := e.store.GetRefSource(t.Context(), regBucket, key); !errors.Is(err, etcdstore.ErrNotFound) {
			t.Fatalf("refused manifest %s left a reference record (%v)", key, err)
		}
	}

	// A blob deleted through the gateway is missing afterwards.
	content := "deleted then named"
	d, key := blob(content)
	e.mustPut(e.alice, regBucket, key, []byte(content))
	e.raw(http.MethodDelete, "/"+regBucket+"/"+key, nil)
	_, err := e.put(e.alice, regBucket, sourcePrefix+"after-delete", manifest(d))
	requireCode(t, err, http.StatusConflict, "BlobNotStored")
	e.mustPut(e.alice, regBucket, key, []byte(content))
	e.mustPut(e.alice, regBucket, sourcePrefix+"after-delete", manifest(d))
}
