package digests

import (
	"testing"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/s3op"
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
		op          s3op.Operation
		bucket, key string
		want        bool
	}{
		{s3op.PutObject, "registry", "manifests/app", true},
		{s3op.CopyObject, "registry", "manifests/app", true},
		{s3op.CompleteMultipartUpload, "registry", "manifests/app", true},
		{s3op.DeleteObject, "registry", "manifests/app", true},
		{s3op.GetObject, "registry", "manifests/app", false},
		{s3op.HeadObject, "registry", "manifests/app", false},
		{s3op.PutObject, "registry", blob, true},
		{s3op.CopyObject, "registry", blob, true},
		{s3op.CompleteMultipartUpload, "registry", blob, true},
		{s3op.GetObject, "registry", blob, true},
		{s3op.HeadObject, "registry", blob, true},
		{s3op.DeleteObject, "registry", blob, true},
		{s3op.PutObject, "registry", "blobs/sha256/not-a-digest", false},
		{s3op.PutObject, "registry", "plain/key", false},
		{s3op.PutObject, "other", "manifests/app", false},
		{s3op.DeleteObjects, "registry", "", true},
		{s3op.DeleteObjects, "other", "", false},
		{s3op.UploadPart, "registry", blob, false},
		{s3op.PutObject, "", "", false},
	} {
		if got := s.Serves(tc.op, tc.bucket, tc.key); got != tc.want {
			t.Errorf("Serves(%s, %s, %s) = %v, want %v", tc.op, tc.bucket, tc.key, got, tc.want)
		}
	}
	var off *Service
	if off.Serves(s3op.PutObject, "registry", "manifests/app") {
		t.Error("a nil Service serves a request")
	}
}
