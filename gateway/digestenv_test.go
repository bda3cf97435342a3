//go:build integration

package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3op"
)

// The layout of the digest tests: a registry-like bucket with verified
// blobs and JSON manifests, and a source in a bucket that does not exist.
const (
	regBucket      = "registry"
	missingBucket  = "missing"
	blobPrefix     = "blobs/sha256/"
	sourcePrefix   = "manifests/"
	sourceLimit    = 16 << 10
	alicePrincipal = "alice"
	adminPrincipal = "admin"
)

// digestClock is the injected clock: time moves only when a test says so.
type digestClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *digestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// digestEnv is one test's world: a real MinIO behind a fault proxy, a real
// etcd, and a gateway with sessions and digest reclamation on.
type digestEnv struct {
	t      *testing.T
	minio  *harness.MinIO
	proxy  *harness.FaultProxy
	direct *minio.Client
	store  *etcdstore.Store
	reg    *prometheus.Registry
	g      *Gateway
	clock  *digestClock
	url    string
	// alice is an ordinary principal, admin an admin principal.
	alice, admin *s3.Client
	aliceMC      *minio.Client
	creds        map[string]sigv4.Credential
}

func newDigestEnv(t *testing.T) *digestEnv {
	t.Helper()
	return newDigestEnvWith(t, nil)
}

// newDigestEnvWith is newDigestEnv with the layout changed by edit first.
func newDigestEnvWith(t *testing.T, edit func(*cas.Layout)) *digestEnv {
	t.Helper()
	e := &digestEnv{t: t, clock: &digestClock{now: time.Now().UTC().Truncate(time.Second)}, reg: prometheus.NewRegistry()}
	e.minio = harness.StartMinIO(t)
	e.proxy = harness.StartFaultProxy(t, e.minio.Endpoint)
	var err error
	e.direct, err = harness.NewMinioGo(e.minio.Endpoint, e.minio.Region, e.minio.AccessKey, e.minio.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.direct.MakeBucket(t.Context(), regBucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	e.store = etcdtest.NewStore(t, "/digest-test/")

	ns, err := cas.NewNamespace("blobs", regBucket, blobPrefix, "", true)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", regBucket, sourcePrefix, "", sourceLimit)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := cas.NewSource("missing", missingBucket, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	layout := &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src, missing}}
	if edit != nil {
		edit(layout)
	}

	e.creds = map[string]sigv4.Credential{
		alicePrincipal: {AccessKey: "alicekey", SecretKey: "alice-secret-0123456789", Principal: alicePrincipal},
		adminPrincipal: {AccessKey: "adminkey", SecretKey: "admin-secret-0123456789", Principal: adminPrincipal},
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	g := newTestGateway(t, testParts{
		Endpoint: e.proxy.URL, Region: e.minio.Region, AccessKey: e.minio.AccessKey, SecretKey: e.minio.SecretKey,
		Sessions: &multipart.Config{Store: e.store},
		Digests: &digests.ServiceConfig{
			Store: e.store, Layout: layout, TrashWindow: 24 * time.Hour,
			AdminPrincipals: []string{adminPrincipal}, HoldTTL: 10 * time.Second,
		},
	}, Config{
		Credentials: []sigv4.Credential{e.creds[alicePrincipal], e.creds[adminPrincipal]},
		Logger:      logger, Metrics: e.reg, Now: e.clock.Now,
	})
	e.g = g
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.alice = e.sdk(alicePrincipal)
	e.admin = e.sdk(adminPrincipal)
	c := e.creds[alicePrincipal]
	e.aliceMC, err = harness.NewMinioGo(e.url, e.minio.Region, c.AccessKey, c.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *digestEnv) sdk(principal string) *s3.Client {
	c := e.creds[principal]
	tr := &http.Transport{}
	e.t.Cleanup(tr.CloseIdleConnections)
	return harness.NewS3Client(e.url, e.minio.Region, c.AccessKey, c.SecretKey, tr, true)
}

// blob returns the digest of content and the key of its blob.
func blob(content string) (digest, key string) {
	sum := sha256.Sum256([]byte(content))
	h := hex.EncodeToString(sum[:])
	return "sha256:" + h, blobPrefix + h
}

// manifest returns a JSON manifest naming digests.
func manifest(digests ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"schemaVersion":2,"layers":[`)
	for i, d := range digests {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"mediaType":"application/octet-stream","digest":%q}`, d)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func (e *digestEnv) put(c *s3.Client, bucket, key string, body []byte) (*s3.PutObjectOutput, error) {
	return c.PutObject(e.t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
}

func (e *digestEnv) mustPut(c *s3.Client, bucket, key string, body []byte) string {
	e.t.Helper()
	out, err := e.put(c, bucket, key, body)
	if err != nil {
		e.t.Fatalf("PUT %s/%s: %v", bucket, key, err)
	}
	return strings.Trim(aws.ToString(out.ETag), `"`)
}

// putDirect writes an object on MinIO, around the gateway.
func (e *digestEnv) putDirect(key string, body []byte) {
	e.t.Helper()
	if _, err := e.direct.PutObject(e.t.Context(), regBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// onMinIO reports whether bucket/key exists on MinIO.
func (e *digestEnv) onMinIO(bucket, key string) bool {
	e.t.Helper()
	_, err := e.direct.StatObject(e.t.Context(), bucket, key, minio.StatObjectOptions{})
	if err == nil {
		return true
	}
	if code := minio.ToErrorResponse(err).Code; code == "NoSuchKey" || code == "NoSuchBucket" {
		return false
	}
	e.t.Fatalf("stat %s/%s on MinIO: %v", bucket, key, err)
	return false
}

// record returns the reference record of bucket/key, or nil.
func (e *digestEnv) record(bucket, key string) *etcdstore.RefSource {
	e.t.Helper()
	v, err := e.store.GetRefSource(e.t.Context(), bucket, key)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return &v.Value
}

// count returns how many etcd keys lie under prefix.
func (e *digestEnv) count(prefix string) int64 {
	e.t.Helper()
	resp, err := e.store.Client().Get(e.t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Count
}

// requireRecord checks that bucket/key records exactly digests (sorted),
// with no write pending.
func (e *digestEnv) requireRecord(bucket, key string, digests ...string) *etcdstore.RefSource {
	e.t.Helper()
	rec := e.record(bucket, key)
	if rec == nil {
		e.t.Fatalf("no reference record for %s/%s; want %v", bucket, key, digests)
	}
	slices.Sort(digests)
	if !slices.Equal(rec.Digests, digests) || rec.Pending != nil {
		e.t.Fatalf("record of %s/%s = digests %v, pending %+v; want %v, none pending", bucket, key, rec.Digests, rec.Pending, digests)
	}
	keys := e.store.Keys()
	for _, d := range digests {
		if n := e.count(keys.Ref(d, bucket, key)); n != 1 {
			e.t.Fatalf("reference key of %s from %s/%s: %d keys, want 1", d, bucket, key, n)
		}
	}
	return rec
}

// guard arms digest's guard in etcd, as the collector does, and waits
// until the gateway's local copy of the guards has it.
func (e *digestEnv) guard(digest string) {
	e.t.Helper()
	resp, err := e.store.Client().Put(e.t.Context(), e.store.Keys().Guard(digest), `{"v":1}`)
	if err != nil {
		e.t.Fatal(err)
	}
	waitGuardsCaught(e.t, e.g, resp.Header.Revision)
}

// unguard removes digest's guard and waits until the local copy has.
func (e *digestEnv) unguard(digest string) {
	e.t.Helper()
	resp, err := e.store.Client().Delete(e.t.Context(), e.store.Keys().Guard(digest))
	if err != nil {
		e.t.Fatal(err)
	}
	waitGuardsCaught(e.t, e.g, resp.Header.Revision)
}

// waitGuardsCaught waits until g's copy of the guards is as of etcd
// revision rev.
func waitGuardsCaught(t testing.TB, g *Gateway, rev int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !g.shards[0].Digests.Guards().Caught(rev) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's copy of the guards did not reach etcd revision %d", rev)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// guardRefusals reads the guard refusal counter of op.
func (e *digestEnv) guardRefusals(op s3op.Operation) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sweepgate_gateway_guard_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == "op" && m.GetLabel()[0].GetValue() == string(op) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// requireCode checks that err is an S3 API error with code and status.
func requireCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("error %v; want code %s", err, code)
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() != status {
		t.Fatalf("error %v: status %d, want %d", err, re.HTTPStatusCode(), status)
	}
}

// raw sends a request signed by alice with a SHA-256 payload hash;
// header holds name, value pairs.
func (e *digestEnv) raw(method, target string, body []byte, header ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+target, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	c := e.creds[alicePrincipal]
	creds := aws.Credentials{AccessKeyID: c.AccessKey, SecretAccessKey: c.SecretKey}
	if err := v4.NewSigner().SignHTTP(e.t.Context(), creds, req, payload, "s3", e.minio.Region, time.Now()); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}
