//go:build integration

package digestsweep_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/s3client"
)

// TestRebuildDeniedSource runs the rebuild with a MinIO user denied the
// listing of one source's bucket and the reads of another's, both before
// a source it may read. Without a Denied handler a denial is an error, as
// any other failure; with one, the handler is told of each denied source
// and the rebuild goes on to record the references of the readable one.
func TestRebuildDeniedSource(t *testing.T) {
	t.Parallel()
	r := newRebuildEnv(t, 0)
	for _, b := range []string{"sealed", "unread"} {
		r.bucket(b)
		body := manifestBody([]string{blobDigest(9)})
		if _, err := r.direct.Client.PutObject(t.Context(), b, manifestsPrefix+"m.json", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r.put(manifestsPrefix+"m.json", manifestBody([]string{blobDigest(1), blobDigest(2)}))
	policy := `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Action":["s3:ListBucket","s3:GetBucketVersioning"],"Resource":["arn:aws:s3:::registry","arn:aws:s3:::unread"]},` +
		`{"Effect":"Allow","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::registry/*"]}]}`
	if err := r.minio.AddUser(t.Context(), "narrow", "narrow-secret", policy); err != nil {
		t.Fatal(err)
	}
	signed, err := backend.NewStatic(r.minio.Endpoint, r.minio.Region, "narrow", "narrow-secret")
	if err != nil {
		t.Fatal(err)
	}
	r.backend = s3client.New(signed, 0)
	var sources []cas.Source
	for _, b := range []string{"sealed", "unread"} {
		src, err := cas.NewSource(b, b, manifestsPrefix, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, src)
	}
	sources = append(sources, r.src)

	b := r.newRebuilder(sources, 10, nil)
	if _, err := b.Run(r.ctx(), digestsweep.RebuildPos{}, digestsweep.RebuildResult{}, nil); !errors.Is(err, s3client.ErrAccessDenied) {
		t.Fatalf("rebuild without a Denied handler: %v, want AccessDenied", err)
	}
	var denied []string
	b.Denied = func(src *cas.Source, err error) {
		if !errors.Is(err, s3client.ErrAccessDenied) {
			t.Errorf("source %s denied with %v", src.Name, err)
		}
		denied = append(denied, src.Name)
	}
	res, err := b.Run(r.ctx(), digestsweep.RebuildPos{}, digestsweep.RebuildResult{}, nil)
	if err != nil {
		t.Fatalf("rebuild with a Denied handler: %v", err)
	}
	if !slices.Equal(denied, []string{"sealed", "unread"}) {
		t.Errorf("denied sources %q, want [sealed unread]", denied)
	}
	wantResult(t, res, digestsweep.RebuildResult{Objects: 1, Read: 1, Unknown: 1, UnknownRefs: 2})
}
