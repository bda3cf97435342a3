//go:build integration

package digestsweep_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// gatewayClient serves a real gateway over the test's store and layout and
// returns an aws-sdk-go-v2 client of it that does not retry, so a
// retryable refusal reaches the test as it was answered.
func (d *digestEnv) gatewayClient() *s3.Client {
	d.T.Helper()
	m := d.MinIO
	be, err := backend.NewStatic(m.Endpoint, m.Region, m.AccessKey, m.SecretKey)
	if err != nil {
		d.T.Fatal(err)
	}
	sessions, err := multipart.New(multipart.Config{Store: d.Store, Backend: be})
	if err != nil {
		d.T.Fatal(err)
	}
	d.blobs, err = digests.NewService(digests.ServiceConfig{Store: d.Store, Layout: d.Layout, Parts: d.Store, Sessions: sessions, Backend: be})
	if err != nil {
		d.T.Fatal(err)
	}
	go d.blobs.Run(d.T.Context())
	gw, err := gateway.New(gateway.Config{
		Backend:     be,
		Credentials: []sigv4.Credential{{AccessKey: m.AccessKey, SecretKey: m.SecretKey, Principal: "producer"}},
		Sessions:    sessions,
		Digests:     d.blobs,
	})
	if err != nil {
		d.T.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	d.T.Cleanup(srv.Close)
	return harness.NewS3Client(srv.URL, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
}

// syncGuards waits until the gateway's local copy of the guards, which
// its blob reads ask, holds every guard armed in etcd now: until it is as
// of the newest guard's revision.
func (d *digestEnv) syncGuards() {
	d.T.Helper()
	resp, err := d.Store.Client().Get(d.T.Context(), d.Store.Keys().Guards(), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1), clientv3.WithKeysOnly())
	if err != nil {
		d.T.Fatal(err)
	}
	var rev int64
	if len(resp.Kvs) > 0 {
		rev = resp.Kvs[0].ModRevision
	}
	deadline := time.Now().Add(10 * time.Second)
	for !d.blobs.Guards().Caught(rev) {
		if time.Now().After(deadline) {
			d.T.Fatalf("the gateway's copy of the guards did not reach etcd revision %d", rev)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// TestDigestGuardRefusesProducers pushes a manifest through the gateway
// while the collector has armed the guard of a blob it names: the push is
// refused with a retryable SlowDown and records nothing, and the blob
// reads as missing. Once the collector is done, the producer does what a
// registry client does on that answer: it uploads the blob again and
// pushes the manifest, which now succeeds, and the blob stays.
func TestDigestGuardRefusesProducers(t *testing.T) {
	t.Parallel()
	d := newDigestEnv(t)
	client := d.gatewayClient()
	ctx := context.Background()
	blob := d.PutBlob("reused")
	d.AgeBlobs()

	var armed atomic.Bool
	var pushErr, headErr error
	cfg := d.Config()
	cfg.Digests.MaxDeleteFraction = 1 // the one blob stored is the one to go
	cfg.Fault = func(point string) {
		if point != digestsweep.FaultGuarded || !armed.CompareAndSwap(false, true) {
			return
		}
		_, pushErr = client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.ManifestPrefix + "app/v1"), Body: bytes.NewReader(reclaimtest.ManifestBody([]string{blob})),
		})
		d.syncGuards()
		_, headErr = client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.BlobKey(blob))})
	}
	r := d.Start(cfg)
	reclaimtest.WantCounts(t, "first pass", d.DigestPass(r), 1, 0, 0, 0)
	rep := d.DigestPass(r)
	if !armed.Load() {
		t.Fatalf("the collector never armed a guard (report %+v)", rep)
	}
	if code := errorCode(pushErr); code != "SlowDown" {
		t.Fatalf("manifest push while the guard was armed: %v (code %q), want SlowDown", pushErr, code)
	}
	var nf interface{ ErrorCode() string }
	if !errors.As(headErr, &nf) || nf.ErrorCode() != "NotFound" && nf.ErrorCode() != "NoSuchKey" {
		t.Fatalf("HEAD of the guarded blob: %v, want 404", headErr)
	}
	if _, err := d.Store.GetRefSource(ctx, reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"app/v1"); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Fatalf("the refused push recorded references: %v", err)
	}
	if n := d.Count(d.Store.Keys().Refs(blob)); n != 0 {
		t.Fatalf("the refused push left %d references", n)
	}
	reclaimtest.WantCounts(t, "collecting pass", rep, 0, 1, 0, 1)
	d.WantPresent("collected", false, blob)
	if n := d.Count(d.Store.Keys().Guards()); n != 0 {
		t.Fatalf("%d guards still armed after the pass", n)
	}
	if _, err := d.Direct.Client.StatObject(ctx, reclaimtest.CASBucket, reclaimtest.ManifestPrefix+"app/v1", minio.StatObjectOptions{}); err == nil {
		t.Fatal("the refused manifest reached MinIO")
	}

	// The producer re-uploads the blob and pushes the manifest again.
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.BlobKey(blob)), Body: bytes.NewReader(reclaimtest.BlobContent("reused")),
	}); err != nil {
		t.Fatalf("re-upload: %v", err)
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.ManifestPrefix + "app/v1"), Body: bytes.NewReader(reclaimtest.ManifestBody([]string{blob})),
	}); err != nil {
		t.Fatalf("manifest push after the collector: %v", err)
	}
	d.AgeBlobs()
	for range 3 {
		d.DigestPass(r)
	}
	d.WantPresent("referenced again", true, blob)
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.BlobKey(blob))})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	if got, _ := io.ReadAll(out.Body); !bytes.Equal(got, reclaimtest.BlobContent("reused")) {
		t.Fatal("the re-uploaded blob reads back wrong")
	}
}

// wantGuardHolds checks that blob's guard holds producers off: a manifest
// naming it pushed through the gateway is refused with the retryable
// SlowDown and records nothing, and a HEAD of the blob answers 404.
func (d *digestEnv) wantGuardHolds(t *testing.T, client *s3.Client, what, blob string) {
	t.Helper()
	ctx := context.Background()
	key := reclaimtest.ManifestPrefix + "held/" + blob[len("sha256:"):][:12]
	_, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(key), Body: bytes.NewReader(reclaimtest.ManifestBody([]string{blob})),
	})
	if code := errorCode(err); code != "SlowDown" {
		t.Errorf("%s: manifest push naming a guarded blob: %v (code %q), want SlowDown", what, err, code)
	}
	if _, err := d.Store.GetRefSource(ctx, reclaimtest.CASBucket, key); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Errorf("%s: the refused push recorded references: %v", what, err)
	}
	d.syncGuards()
	_, err = client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(reclaimtest.CASBucket), Key: aws.String(reclaimtest.BlobKey(blob))})
	var nf interface{ ErrorCode() string }
	if !errors.As(err, &nf) || nf.ErrorCode() != "NotFound" && nf.ErrorCode() != "NoSuchKey" {
		t.Errorf("%s: HEAD of the guarded blob: %v, want 404", what, err)
	}
}
