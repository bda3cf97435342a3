//go:build integration

package s3client_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/s3client"
)

// countingBackend is the real signed backend, counting the requests sent
// through it and, when loseAnswers is set, losing every answer after the
// backend acted on the request, as a timed-out response would.
type countingBackend struct {
	s3client.Backend
	sent        atomic.Int64
	loseAnswers atomic.Bool
}

func (b *countingBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	b.sent.Add(1)
	resp, err := b.Backend.RoundTrip(req)
	if err == nil && b.loseAnswers.Load() {
		resp.Body.Close()
		return nil, errors.New("read tcp: i/o timeout (answer lost by the test)")
	}
	return resp, err
}

// minioEnv is a real MinIO, a client of it through the gateway's signing
// transport, and minio-go to set the scene directly.
type minioEnv struct {
	t       *testing.T
	backend *countingBackend
	client  *s3client.Client
	direct  minio.Core
}

func newMinioEnv(t *testing.T) *minioEnv {
	t.Helper()
	m := harness.StartMinIO(t)
	be, err := backend.NewStatic(m.Endpoint, m.Region, m.AccessKey, m.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &minioEnv{t: t, backend: &countingBackend{Backend: be}, direct: minio.Core{Client: mc}}
	e.client = s3client.New(e.backend, 30*time.Second)
	return e
}

func (e *minioEnv) bucket(name string) string {
	e.t.Helper()
	if err := e.direct.MakeBucket(e.t.Context(), name, minio.MakeBucketOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return name
}

func (e *minioEnv) put(bucket, key string, body []byte) {
	e.t.Helper()
	if _, err := e.direct.Client.PutObject(e.t.Context(), bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// upload starts a multipart upload of bucket/key with parts parts of size
// bytes each.
func (e *minioEnv) upload(bucket, key string, parts, size int) string {
	e.t.Helper()
	ctx := e.t.Context()
	id, err := e.direct.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for p := 1; p <= parts; p++ {
		data := bytes.Repeat([]byte{byte(p)}, size)
		if _, err := e.direct.PutObjectPart(ctx, bucket, key, id, p, bytes.NewReader(data), int64(size), minio.PutObjectPartOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}

func TestAgainstMinIO(t *testing.T) {
	e := newMinioEnv(t)
	t.Run("buckets", e.testBuckets)
	t.Run("uploads", e.testUploads)
	t.Run("objects", e.testObjects)
	t.Run("no blind retry", e.testNoRetry)
}

func (e *minioEnv) testBuckets(t *testing.T) {
	for _, b := range []string{"zeta", "alpha", "mid"} {
		e.bucket(b)
	}
	got, err := e.client.ListBuckets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alpha", "mid", "zeta"} {
		if !slices.Contains(got, want) {
			t.Errorf("ListBuckets = %v, lacks %s", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("ListBuckets = %v, not sorted", got)
	}
}

func (e *minioEnv) testUploads(t *testing.T) {
	ctx := t.Context()
	b := e.bucket("uploads")
	odd := "dir/odd key+&<>%?#é"
	idOdd := e.upload(b, odd, 2, 5<<20)
	idLonger := e.upload(b, odd+"-longer", 0, 0)
	idPlain := e.upload(b, "plain", 1, 100)

	sent := e.backend.sent.Load()
	page, err := e.client.ListUploads(ctx, b, "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.backend.sent.Load() - sent; n != 1 {
		t.Errorf("ListUploads sent %d requests; want 1 (MinIO's answer is decoded by the client's own decoder, not asked for again)", n)
	}
	ids := map[string]string{}
	for _, u := range page.Uploads {
		ids[u.UploadID] = u.Key
		if u.Initiated.IsZero() {
			t.Errorf("upload %s: no initiation time", u.UploadID)
		}
	}
	if !page.Done || ids[idOdd] != odd || ids[idLonger] != odd+"-longer" || ids[idPlain] != "plain" {
		t.Errorf("ListUploads = %+v; want the three uploads with their keys decoded", page)
	}

	for key, want := range map[string]bool{odd: true, "plain": true, "dir/odd": false, "absent": false} {
		got, err := e.client.UploadInFlight(ctx, b, key)
		if err != nil || got != want {
			t.Errorf("UploadInFlight(%q) = %v, %v; want %v", key, got, err, want)
		}
	}
	if got, err := e.client.UploadInFlight(ctx, "no-such-bucket", "k"); err != nil || got {
		t.Errorf("UploadInFlight in a missing bucket = %v, %v; want false", got, err)
	}

	parts, size, err := e.client.CountParts(ctx, b, odd, idOdd)
	if err != nil || parts != 2 || size != 10<<20 {
		t.Errorf("CountParts = %d, %d, %v; want 2 parts of 10 MiB", parts, size, err)
	}
	if ok, err := e.client.UploadExists(ctx, b, odd, idOdd); err != nil || !ok {
		t.Errorf("UploadExists = %v, %v; want true", ok, err)
	}
	e.testListParts(t, b, odd, idOdd)

	if err := e.client.Abort(ctx, b, odd, idOdd); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := e.client.Abort(ctx, b, odd, idOdd); err != nil {
		t.Errorf("second Abort = %v; want nil (NoSuchUpload is gone)", err)
	}
	if err := e.client.Abort(ctx, "no-such-bucket", "k", idOdd); err != nil {
		t.Errorf("Abort in a missing bucket = %v; want nil", err)
	}
	_, _, err = e.client.CountParts(ctx, b, odd, idOdd)
	var se *s3client.Error
	if !errors.Is(err, s3client.ErrNoSuchUpload) || !errors.As(err, &se) || se.Status != http.StatusNotFound || se.Code != "NoSuchUpload" {
		t.Errorf("CountParts of an aborted upload = %v; want a 404 NoSuchUpload", err)
	}
	if _, _, err := e.client.CountParts(ctx, "no-such-bucket", odd, idOdd); !errors.Is(err, s3client.ErrNoSuchBucket) {
		t.Errorf("CountParts in a missing bucket = %v; want ErrNoSuchBucket", err)
	}
	if ok, err := e.client.UploadExists(ctx, b, odd, idOdd); err != nil || ok {
		t.Errorf("UploadExists of an aborted upload = %v, %v; want false", ok, err)
	}
	if _, err := e.client.ListUploads(ctx, "no-such-bucket", "", "", 10); !errors.Is(err, s3client.ErrNoSuchBucket) {
		t.Errorf("ListUploads of a missing bucket = %v; want ErrNoSuchBucket", err)
	}
}

// testListParts checks that ListParts returns every part with the
// backend's time for it.
func (e *minioEnv) testListParts(t *testing.T, bucket, key, uploadID string) {
	before := time.Now().Add(-time.Minute)
	parts, err := e.client.ListParts(t.Context(), bucket, key, uploadID)
	if err != nil || len(parts) != 2 || parts[0].Number != 1 || parts[1].Number != 2 || parts[1].Size != 5<<20 || parts[0].ETag == "" {
		t.Fatalf("ListParts = %+v, %v; want parts 1 and 2 of 5 MiB with ETags", parts, err)
	}
	newest := s3client.NewestPart(parts)
	if newest.Before(before) || newest.After(time.Now().Add(time.Minute)) || newest.Before(parts[0].LastModified) {
		t.Errorf("NewestPart = %v; want the later part's time, about now", newest)
	}
	if _, err := e.client.ListParts(t.Context(), bucket, key, "no-such-upload"); !errors.Is(err, s3client.ErrNoSuchUpload) {
		t.Errorf("ListParts of an unknown upload = %v; want ErrNoSuchUpload", err)
	}
}

func (e *minioEnv) testObjects(t *testing.T) {
	ctx := t.Context()
	b := e.bucket("objects")
	keys := []string{"a/1", "a/2 +&é", "a/3", "b/1"}
	for _, k := range keys {
		e.put(b, k, []byte("body of "+k))
	}

	var listed []s3client.Object
	after := ""
	for pages := 0; ; pages++ {
		page, err := e.client.ListObjects(ctx, b, "a/", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, page.Objects...)
		if page.Done {
			break
		}
		if pages > 3 {
			t.Fatal("listing does not end")
		}
		after = page.Next
	}
	if len(listed) != 3 || listed[1].Key != "a/2 +&é" || listed[1].Size != int64(len("body of a/2 +&é")) || listed[1].Modified.IsZero() {
		t.Errorf("ListObjects under a/ = %+v", listed)
	}
	e.wantContinued(t, b, listed)
	sum := md5.Sum([]byte("body of a/1"))
	etag := hex.EncodeToString(sum[:])
	if listed[0].ETag != etag {
		t.Errorf("listed ETag = %q, want %q", listed[0].ETag, etag)
	}
	if _, err := e.client.ListObjects(ctx, "no-such-bucket", "", "", 10); !errors.Is(err, s3client.ErrNoSuchBucket) {
		t.Errorf("ListObjects of a missing bucket = %v; want ErrNoSuchBucket", err)
	}

	info, err := e.client.Head(ctx, b, "a/1")
	if err != nil || info.ETag != etag || info.Size != int64(len("body of a/1")) {
		t.Errorf("Head = %+v, %v", info, err)
	}
	for _, missing := range [][2]string{{b, "absent"}, {"no-such-bucket", "a/1"}} {
		if _, err := e.client.Head(ctx, missing[0], missing[1]); !errors.Is(err, s3client.ErrNoSuchKey) {
			t.Errorf("Head(%s) = %v; want ErrNoSuchKey", missing, err)
		}
	}

	body, got, err := e.client.Get(ctx, b, "a/1", s3client.GetOptions{}, int64(len("body of a/1")))
	if err != nil || string(body) != "body of a/1" || got != etag {
		t.Errorf("Get at its size = %q, %q, %v", body, got, err)
	}
	if _, _, err := e.client.Get(ctx, b, "a/1", s3client.GetOptions{IfMatch: etag}, 100); err != nil {
		t.Errorf("Get with its own ETag: %v", err)
	}
	if _, _, err := e.client.Get(ctx, b, "a/1", s3client.GetOptions{}, 5); !errors.Is(err, s3client.ErrTooLarge) {
		t.Errorf("Get past its limit = %v; want ErrTooLarge", err)
	}
	_, _, err = e.client.Get(ctx, b, "a/1", s3client.GetOptions{IfMatch: strings.Repeat("0", 32)}, 100)
	var se *s3client.Error
	if !errors.As(err, &se) || se.Status != http.StatusPreconditionFailed || se.Code != "PreconditionFailed" || len(se.Body) == 0 {
		t.Errorf("Get with another ETag = %v; want a 412 carrying its answer", err)
	}
	_, _, err = e.client.Get(ctx, b, "absent", s3client.GetOptions{}, 100)
	if !errors.Is(err, s3client.ErrNoSuchKey) || !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Errorf("Get of a missing object = %v; want ErrNoSuchKey with its 404", err)
	}
	if _, _, err := e.client.Get(ctx, b, "a/1", s3client.GetOptions{VersionID: "not-a-version"}, 100); err == nil {
		t.Error("Get of a version that does not exist succeeded")
	}

	failed, err := e.client.DeleteObjects(ctx, b, []string{"a/1", "a/2 +&é", "never-there"})
	if err != nil || len(failed) != 0 {
		t.Errorf("DeleteObjects = %v, %v; want every key gone", failed, err)
	}
	page, err := e.client.ListObjects(ctx, b, "", "", 100)
	if err != nil || len(page.Objects) != 2 || page.Objects[0].Key != "a/3" {
		t.Errorf("after the delete: %+v, %v", page, err)
	}
	if _, err := e.client.DeleteObjects(ctx, b, make([]string, 1001)); err == nil {
		t.Error("DeleteObjects of 1001 keys was sent")
	}
}

// testNoRetry loses the answers of an abort and of a delete that the
// backend carried out: each is sent exactly once, and the loss is the
// caller's error.

// wantContinued lists bucket b under a/ again, two objects a page,
// continuing each page's listing with MinIO's token, and wants the
// objects listed.
func (e *minioEnv) wantContinued(t *testing.T, b string, listed []s3client.Object) {
	ctx := t.Context()
	var continued []s3client.Object
	prev := s3client.ObjectPage{}
	for pages := 0; ; pages++ {
		var err error
		if pages == 0 {
			prev, err = e.client.ListObjects(ctx, b, "a/", "", 2)
		} else {
			prev, err = e.client.ListObjectsNext(ctx, b, "a/", prev, 2)
		}
		if err != nil {
			t.Fatal(err)
		}
		if pages == 0 && prev.Token == "" {
			t.Error("a truncated first page has no continuation token")
		}
		continued = append(continued, prev.Objects...)
		if prev.Done || pages > 3 {
			break
		}
	}
	if len(continued) != len(listed) || continued[0] != listed[0] || continued[1] != listed[1] || continued[2] != listed[2] {
		t.Errorf("ListObjectsNext under a/ = %+v; want %+v", continued, listed)
	}
}

func (e *minioEnv) testNoRetry(t *testing.T) {
	ctx := t.Context()
	b := e.bucket("noretry")
	id := e.upload(b, "k", 1, 10)
	e.put(b, "obj", []byte("x"))

	for name, call := range map[string]func(context.Context) error{
		"abort": func(ctx context.Context) error { return e.client.Abort(ctx, b, "k", id) },
		"delete": func(ctx context.Context) error {
			_, err := e.client.DeleteObjects(ctx, b, []string{"obj"})
			return err
		},
	} {
		e.backend.loseAnswers.Store(true)
		before := e.backend.sent.Load()
		err := call(ctx)
		sent := e.backend.sent.Load() - before
		e.backend.loseAnswers.Store(false)
		if err == nil || sent != 1 {
			t.Errorf("%s with its answer lost: err %v after %d requests; want an error after 1", name, err, sent)
		}
	}
	if ok, err := e.client.UploadExists(ctx, b, "k", id); err != nil || ok {
		t.Errorf("the abort whose answer was lost was not done: %v, %v", ok, err)
	}
	if _, err := e.client.Head(ctx, b, "obj"); !errors.Is(err, s3client.ErrNoSuchKey) {
		t.Errorf("the delete whose answer was lost was not done: %v", err)
	}
}
