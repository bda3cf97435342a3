//go:build integration

package gateway

import (
	"bytes"
	"context"

	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3client"
)

const identityBucket = "idt"

// bucketPolicy is an IAM policy allowing actions on bucket and its objects.
func bucketPolicy(bucket string, actions ...string) string {
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["` + strings.Join(actions, `","`) +
		`"],"Resource":["arn:aws:s3:::` + bucket + `","arn:aws:s3:::` + bucket + `/*"]}]}`
}

// identityWorld is a MinIO with a bucket, a reader and a writer user, and a
// gateway with sessions on whose client ro signs as reader and rw as
// writer, and whose background identity is a key MinIO does not know.
type identityWorld struct {
	m      *harness.MinIO
	g      *Gateway
	srv    *httptest.Server
	direct *minio.Client
	keys   keySpec
}

// keySpec is a Keys with its identities still as key material, for a test
// to edit before building it.
type keySpec struct {
	Clients    []sigv4.Credential
	Backend    map[string]backend.Key
	Background string
}

// build returns the Keys of ks, or fails t.
func (ks keySpec) build(t testing.TB) Keys {
	t.Helper()
	k, err := ks.try()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (ks keySpec) try() (Keys, error) {
	ids, err := backend.NewIdentities(ks.Backend, ks.Background, "", nil)
	return Keys{Clients: ks.Clients, Identities: ids}, err
}

func newIdentityWorld(t *testing.T) *identityWorld {
	t.Helper()
	m := harness.StartMinIO(t)
	direct, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := direct.MakeBucket(ctx, identityBucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.PutObject(ctx, identityBucket, "seed", strings.NewReader("seed"), 4, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.AddUser(ctx, "reader", "reader-secret-1", bucketPolicy(identityBucket, "s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation")); err != nil {
		t.Fatal(err)
	}
	if err := m.AddUser(ctx, "writer", "writer-secret-1", bucketPolicy(identityBucket, "s3:*")); err != nil {
		t.Fatal(err)
	}
	_, etcdClient := etcdtest.Start(t)
	ek, err := etcdstore.NewKeys("/identities-test/")
	if err != nil {
		t.Fatal(err)
	}
	w := &identityWorld{m: m, direct: direct, keys: keySpec{
		Clients: []sigv4.Credential{
			{AccessKey: "ro", SecretKey: "ro-secret-1", Principal: "ro", Backend: "reader"},
			{AccessKey: "rw", SecretKey: "rw-secret-1", Principal: "rw", Backend: "writer"},
		},
		Backend: map[string]backend.Key{
			backend.DefaultIdentity: {AccessKey: m.AccessKey, SecretKey: m.SecretKey},
			"reader":                {AccessKey: "reader", SecretKey: "reader-secret-1"},
			"writer":                {AccessKey: "writer", SecretKey: "writer-secret-1"},
			"nobody":                {AccessKey: "nobody", SecretKey: "not-a-minio-user"},
		},
		Background: "nobody",
	}}
	w.g = newTestGateway(t, testParts{
		Endpoint: m.Endpoint, Region: m.Region, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Identities: map[string]backend.Key{"reader": w.keys.Backend["reader"]},
		Sessions:   &multipart.Config{Store: etcdstore.NewStore(etcdClient, ek)},
	}, Config{Credentials: w.keys.Clients[:1]})
	if err := w.g.SetKeys(w.keys.build(t)); err != nil {
		t.Fatal(err)
	}
	w.srv = httptest.NewServer(w.g)
	t.Cleanup(w.srv.Close)
	return w
}

func (w *identityWorld) client(t *testing.T, ak, sk string) *minio.Client {
	t.Helper()
	c, err := harness.NewMinioGo(w.srv.URL, w.m.Region, ak, sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func s3Code(err error) string { return minio.ToErrorResponse(err).Code }

func put(ctx context.Context, c *minio.Client, key, body string) error {
	_, err := c.PutObject(ctx, identityBucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	return err
}

// TestRequestsSignedWithClientIdentity: every backend call made for a
// client request (the pass-through, the session service's multipart calls,
// the gateway's DeleteObjects) is signed with the identity the client's
// credential names, so MinIO's policy for that identity applies; none with
// the background identity (here a key MinIO does not know, so a call signed
// with it would fail), which only the readiness check and the reclaimer's
// client use.
func TestRequestsSignedWithClientIdentity(t *testing.T) {
	t.Parallel()
	w := newIdentityWorld(t)
	ctx := t.Context()
	ro, rw := w.client(t, "ro", "ro-secret-1"), w.client(t, "rw", "rw-secret-1")

	obj, err := ro.GetObject(ctx, identityBucket, "seed", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(obj); err != nil || string(b) != "seed" {
		t.Fatalf("ro GET = %q, %v", b, err)
	}
	if err := put(ctx, ro, "by-ro", "x"); s3Code(err) != "AccessDenied" {
		t.Errorf("ro PUT: %v, want AccessDenied from MinIO", err)
	}
	core := minio.Core{Client: ro}
	if _, err := core.NewMultipartUpload(ctx, identityBucket, "mp-ro", minio.PutObjectOptions{}); s3Code(err) != "AccessDenied" {
		t.Errorf("ro CreateMultipartUpload: %v, want AccessDenied from MinIO", err)
	}
	if _, err := w.direct.StatObject(ctx, identityBucket, "by-ro", minio.StatObjectOptions{}); s3Code(err) != "NoSuchKey" {
		t.Errorf("ro's PUT left an object: %v", err)
	}

	if err := put(ctx, rw, "by-rw", "y"); err != nil {
		t.Fatalf("rw PUT: %v", err)
	}
	rwCore := minio.Core{Client: rw}
	id, err := rwCore.NewMultipartUpload(ctx, identityBucket, "mp-rw", minio.PutObjectOptions{})
	if err != nil {
		t.Fatalf("rw CreateMultipartUpload: %v", err)
	}
	part, err := rwCore.PutObjectPart(ctx, identityBucket, "mp-rw", id, 1, bytes.NewReader([]byte("part")), 4, minio.PutObjectPartOptions{})
	if err != nil {
		t.Fatalf("rw UploadPart: %v", err)
	}
	if _, err := rwCore.CompleteMultipartUpload(ctx, identityBucket, "mp-rw", id, []minio.CompletePart{{PartNumber: 1, ETag: part.ETag}}, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("rw CompleteMultipartUpload: %v", err)
	}
	for e := range ro.RemoveObjects(ctx, identityBucket, objectsOf("by-rw"), minio.RemoveObjectsOptions{}) {
		if s3Code(e.Err) != "AccessDenied" {
			t.Errorf("ro DeleteObjects of %s: %v, want AccessDenied", e.ObjectName, e.Err)
		}
	}
	for e := range rw.RemoveObjects(ctx, identityBucket, objectsOf("by-rw", "mp-rw"), minio.RemoveObjectsOptions{}) {
		t.Errorf("rw DeleteObjects of %s: %v", e.ObjectName, e.Err)
	}

	// The background identity is a key MinIO refuses.
	if err := w.g.CheckBackend(ctx); err == nil {
		t.Error("CheckBackend passed with a background key MinIO does not know")
	}
	if _, err := s3client.New(w.g.backend, 0).ListUploads(ctx, identityBucket, "", "", 10); err == nil {
		t.Error("the reclaimer's backend listed with a background key MinIO does not know")
	}
	k := w.keys
	k.Background = "reader"
	if err := w.g.SetKeys(k.build(t)); err != nil {
		t.Fatal(err)
	}
	if err := w.g.CheckBackend(ctx); err != nil {
		t.Errorf("CheckBackend with reader as the background: %v", err)
	}
}

func objectsOf(keys ...string) <-chan minio.ObjectInfo {
	ch := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		ch <- minio.ObjectInfo{Key: k}
	}
	close(ch)
	return ch
}

// TestSetKeys rotates a client's secret and a backend identity's secret
// through SetKeys: the next request is judged and signed with the new
// ones; keys that name an unknown identity are refused and change nothing.
func TestSetKeys(t *testing.T) {
	t.Parallel()
	w := newIdentityWorld(t)
	ctx := t.Context()
	if err := put(ctx, w.client(t, "rw", "rw-secret-1"), "a", "1"); err != nil {
		t.Fatalf("rw PUT: %v", err)
	}

	// A client's secret rotated: the old one is refused, the new one works.
	k := w.keys
	k.Clients = []sigv4.Credential{w.keys.Clients[0], {AccessKey: "rw", SecretKey: "rw-secret-2", Principal: "rw", Backend: "writer"}}
	if err := w.g.SetKeys(k.build(t)); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, w.client(t, "rw", "rw-secret-1"), "b", "2"); s3Code(err) != "SignatureDoesNotMatch" {
		t.Errorf("PUT with the old client secret: %v, want SignatureDoesNotMatch", err)
	}
	rw := w.client(t, "rw", "rw-secret-2")
	if err := put(ctx, rw, "b", "2"); err != nil {
		t.Errorf("PUT with the new client secret: %v", err)
	}

	// The writer's secret changes on MinIO: the gateway's old one fails
	// until SetKeys installs the new one.
	if err := w.m.SetUserSecret(ctx, "writer", "writer-secret-2"); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, rw, "c", "3"); s3Code(err) != "SignatureDoesNotMatch" {
		t.Errorf("PUT signed with the writer's old secret: %v, want MinIO's SignatureDoesNotMatch", err)
	}
	bad := k
	bad.Clients = append([]sigv4.Credential{{AccessKey: "x", SecretKey: "x-secret", Backend: "nosuch"}}, k.Clients...)
	if err := w.g.SetKeys(bad.build(t)); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("SetKeys naming an unknown identity: %v", err)
	}
	k.Backend = map[string]backend.Key{}
	for name, bk := range w.keys.Backend {
		k.Backend[name] = bk
	}
	k.Backend["writer"] = backend.Key{AccessKey: "writer", SecretKey: "writer-secret-2"}
	if err := w.g.SetKeys(k.build(t)); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, rw, "c", "3"); err != nil {
		t.Errorf("PUT after the writer's new secret was installed: %v", err)
	}
	if _, err := w.direct.StatObject(ctx, identityBucket, "c", minio.StatObjectOptions{}); err != nil {
		t.Errorf("object c on MinIO: %v", err)
	}
	if _, err := (keySpec{Clients: k.Clients, Backend: map[string]backend.Key{"writer": k.Backend["writer"]}}).try(); err == nil {
		t.Error("identities without the default identity were accepted")
	}
}
