package digests

import (
	"testing"

	"github.com/sweepgate/sweepgate/cas"
)

// TestServes checks which requests the service takes from the gateway:
// writes and deletes of reference objects, writes, reads and deletes of
// blobs whose key carries a digest, and DeleteObjects in a layout bucket.
func TestServes(t *testing.T) {
	ns, err := cas.NewNamespace("blobs", "registry", "blobs/sha256/", "", true)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", "registry", "manifests/", "", 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{layout: &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}}}
	blob := "blobs/sha256/" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		op          Op
		bucket, key string
		want        bool
	}{
		{OpPutObject, "registry", "manifests/app", true},
		{OpCopyObject, "registry", "manifests/app", true},
		{OpCompleteMultipartUpload, "registry", "manifests/app", true},
		{OpDeleteObject, "registry", "manifests/app", true},
		{OpGetObject, "registry", "manifests/app", false},
		{OpHeadObject, "registry", "manifests/app", false},
		{OpPutObject, "registry", blob, true},
		{OpCopyObject, "registry", blob, true},
		{OpCompleteMultipartUpload, "registry", blob, true},
		{OpGetObject, "registry", blob, true},
		{OpHeadObject, "registry", blob, true},
		{OpDeleteObject, "registry", blob, true},
		{OpPutObject, "registry", "blobs/sha256/not-a-digest", false},
		{OpPutObject, "registry", "plain/key", false},
		{OpPutObject, "other", "manifests/app", false},
		{OpDeleteObjects, "registry", "", true},
		{OpDeleteObjects, "other", "", false},
		{Op("UploadPart"), "registry", blob, false},
		{OpPutObject, "", "", false},
	} {
		if got := s.Serves(tc.op, tc.bucket, tc.key); got != tc.want {
			t.Errorf("Serves(%s, %s, %s) = %v, want %v", tc.op, tc.bucket, tc.key, got, tc.want)
		}
	}
	var off *Service
	if off.Serves(OpPutObject, "registry", "manifests/app") {
		t.Error("a nil Service serves a request")
	}
}
