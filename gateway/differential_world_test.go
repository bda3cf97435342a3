//go:build integration

package gateway

// The differential suite's world: the in-process gateway in front of MinIO,
// its buckets and protected targets, the log that attributes each backend
// call to a gateway request, and the sending of one request.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
)

// diffLogs keeps the gateway's "request" log lines by request id, and its
// warnings and errors for the mismatch report.
type diffLogs struct {
	mu    sync.Mutex
	ops   map[string]string
	notes map[string][]string
	// byRemote maps the "remote" of a request line (which diffFront sets
	// to name the generated request) to its id.
	byRemote map[string]string
}

type diffLogHandler struct {
	logs  *diffLogs
	attrs []slog.Attr
}

func (h *diffLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *diffLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &diffLogHandler{logs: h.logs, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h *diffLogHandler) WithGroup(string) slog.Handler { return h }

func (h *diffLogHandler) Handle(_ context.Context, r slog.Record) error {
	var id, op, remote string
	var text strings.Builder
	text.WriteString(r.Level.String() + " " + r.Message)
	visit := func(a slog.Attr) bool {
		switch a.Key {
		case "id":
			id = a.Value.String()
		case "op":
			op = a.Value.String()
		case "remote":
			remote = a.Value.String()
		}
		fmt.Fprintf(&text, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		visit(a)
	}
	r.Attrs(visit)
	if id == "" {
		return nil
	}
	h.logs.mu.Lock()
	defer h.logs.mu.Unlock()
	if r.Message == "request" {
		h.logs.ops[id] = op
		h.logs.byRemote[remote] = id
	} else if r.Level >= slog.LevelWarn {
		h.logs.notes[id] = append(h.logs.notes[id], text.String())
	}
	return nil
}

func (l *diffLogs) op(id string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	op, ok := l.ops[id]
	return op, ok
}

func (l *diffLogs) idOf(remote string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byRemote[remote]
}

func (l *diffLogs) notesOf(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.notes[id]
}

// diffFront sits in front of the gateway: it takes a generated request's
// number out of its header, puts it in the request's remote address (which
// the request log line carries, even for a request the gateway never
// answered) and notes the request id the gateway answered with.
type diffFront struct {
	g   http.Handler
	mu  sync.Mutex
	ids map[int]string
}

func diffRemote(n int) string { return "differential-request-" + strconv.Itoa(n) }

func (f *diffFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.Header.Get(diffNumberHeader))
	r.Header.Del(diffNumberHeader)
	if err == nil {
		r.RemoteAddr = diffRemote(n)
	}
	f.g.ServeHTTP(w, r)
	if id := w.Header().Get("X-Amz-Request-Id"); err == nil && id != "" {
		f.mu.Lock()
		f.ids[n] = id
		f.mu.Unlock()
	}
}

func (f *diffFront) id(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[n]
}

// diffProtected is a protected object: what it held before the run.
type diffProtected struct {
	name, bucket, key string
	body              []byte
	// writable: a well-formed write or delete of it by an ordinary
	// principal is legitimate, so the generator sends none (the manifest,
	// the guarded blob); otherwise the gateway must refuse them all.
	writable bool
}

// diffWorld is one run's world: MinIO, its trace, etcd, the gateway, and
// the fixtures the generated requests aim at.
type diffWorld struct {
	t      *testing.T
	minio  *harness.MinIO
	direct *minio.Client
	store  *etcdstore.Store
	gw     *Gateway
	logs   *diffLogs
	front  *diffFront
	url    string
	creds  map[string]sigv4.Credential
	client *http.Client

	refDigest, guardDigest string
	refBlob, guardBlob     *diffProtected
	freeBlobKey            string
	manifest               *diffProtected
	// witness is a record of sweepgate's own under the reserved prefix,
	// which no client may change.
	witness *diffProtected
	// uploadID is the owner's upload, in progress, and uploadParts the
	// parts it had before the run.
	uploadID    string
	uploadParts []minio.ObjectPart
	// mineID is mallory's own upload, so that multipart calls on it can
	// succeed.
	mineID string
}

func diffBlobKey(body []byte) (digest, key string) {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	return "sha256:" + h, diffBlobPrefix + h
}

// newDiffWorld starts MinIO, etcd and a gateway with ownership-enforced
// sessions and a verifying digest layout, and lays out the fixtures.
func newDiffWorld(t *testing.T) *diffWorld {
	t.Helper()
	w := &diffWorld{
		t:      t,
		logs:   &diffLogs{ops: map[string]string{}, notes: map[string][]string{}, byRemote: map[string]string{}},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	t.Cleanup(w.client.CloseIdleConnections)
	w.minio = harness.StartMinIO(t)
	var err error
	w.direct, err = harness.NewMinioGo(w.minio.Endpoint, w.minio.Region, w.minio.AccessKey, w.minio.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, b := range []string{diffPlainBucket, diffRegBucket} {
		if err := w.direct.MakeBucket(ctx, b, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.store = etcdtest.NewStore(t, "/differential/")
	ns, err := cas.NewNamespace("blobs", diffRegBucket, diffBlobPrefix, "", true)
	if err != nil {
		t.Fatal(err)
	}
	src, err := cas.NewSource("manifests", diffRegBucket, diffSourcePrefix, "", 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	w.creds = map[string]sigv4.Credential{
		diffMallory: {AccessKey: "mallorykey", SecretKey: "mallory-secret-0123456789", Principal: diffMallory},
		diffOwner:   {AccessKey: "ownerkey", SecretKey: "owner-secret-0123456789", Principal: diffOwner},
		diffAdmin:   {AccessKey: "diffadminkey", SecretKey: "diffadmin-secret-0123456789", Principal: diffAdmin},
	}
	g := newTestGateway(t, testParts{
		Endpoint: w.minio.Endpoint, Region: w.minio.Region, AccessKey: w.minio.AccessKey, SecretKey: w.minio.SecretKey,
		Sessions: &multipart.Config{Store: w.store, EnforceOwnership: true, AdminPrincipals: []string{diffAdmin}},
		Digests: &digests.ServiceConfig{
			Store: w.store, Layout: &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}},
			AdminPrincipals: []string{diffAdmin},
		},
	}, Config{
		Credentials:  []sigv4.Credential{w.creds[diffMallory], w.creds[diffOwner], w.creds[diffAdmin]},
		ReservedKeys: []string{diffReservedPrefix},
		Logger:       slog.New(&diffLogHandler{logs: w.logs}),
	})
	w.front = &diffFront{g: g, ids: map[int]string{}}
	w.gw = g
	srv := httptest.NewServer(w.front)
	t.Cleanup(srv.Close)
	w.url = srv.URL
	w.layOut()
	return w
}

// layOut makes the fixtures: plain objects, a referenced blob and the
// manifest naming it (written through the gateway, so the references are
// recorded), an unreferenced blob, a guarded blob, the owner's upload with
// two parts and mallory's own upload.
func (w *diffWorld) layOut() {
	t, ctx := w.t, w.t.Context()
	for _, k := range []string{"obj", "dir/obj", "ünï/cødé.txt", "a b+c"} {
		w.putDirect(diffPlainBucket, k, []byte("plain object "+k))
	}
	refBody := []byte("the referenced blob")
	var refKey string
	w.refDigest, refKey = diffBlobKey(refBody)
	w.refBlob = &diffProtected{name: "referenced blob", bucket: diffRegBucket, key: refKey, body: refBody}
	w.mustGateway(diffOwner, http.MethodPut, diffRegBucket, refKey, "", refBody, nil)

	manifest := fmt.Appendf(nil, `{"schemaVersion":2,"layers":[{"digest":%q}]}`, w.refDigest)
	w.manifest = &diffProtected{name: "manifest", bucket: diffRegBucket, key: diffSourcePrefix + "app/v1", body: manifest, writable: true}
	w.mustGateway(diffOwner, http.MethodPut, diffRegBucket, w.manifest.key, "", manifest, nil)
	if ok, err := w.store.Referenced(ctx, w.refDigest, time.Now()); err != nil || !ok {
		t.Fatalf("fixture: %s not referenced after the manifest was written (%v)", w.refDigest, err)
	}

	free := []byte("an unreferenced blob")
	_, w.freeBlobKey = diffBlobKey(free)
	w.putDirect(diffRegBucket, w.freeBlobKey, free)

	guardBody := []byte("a blob being reclaimed")
	var guardKey string
	w.guardDigest, guardKey = diffBlobKey(guardBody)
	w.putDirect(diffRegBucket, guardKey, guardBody)
	resp, err := w.store.Client().Put(ctx, w.store.Keys().Guard(w.guardDigest), `{"v":1}`)
	if err != nil {
		t.Fatal(err)
	}
	waitGuardsCaught(t, w.gw, resp.Header.Revision)
	w.guardBlob = &diffProtected{name: "guarded blob", bucket: diffRegBucket, key: guardKey, body: guardBody, writable: true}

	witness := []byte(`{"epoch":"differential","seq":7}`)
	w.witness = &diffProtected{name: "restore witness", bucket: diffPlainBucket, key: diffReservedPrefix + "differential", body: witness}
	w.putDirect(diffPlainBucket, w.witness.key, witness)

	w.uploadID = w.createUpload(diffOwner, diffRegBucket, diffUploadKey)
	for n := 1; n <= 2; n++ {
		q := fmt.Sprintf("partNumber=%d&uploadId=%s", n, url.QueryEscape(w.uploadID))
		w.mustGateway(diffOwner, http.MethodPut, diffRegBucket, diffUploadKey, q, bytes.Repeat([]byte{byte('a' + n)}, 1024), nil)
	}
	w.uploadParts = w.listParts(diffRegBucket, diffUploadKey, w.uploadID)
	if len(w.uploadParts) != 2 {
		t.Fatalf("fixture: the owner's upload has %d parts, want 2", len(w.uploadParts))
	}
	w.mineID = w.createUpload(diffMallory, diffPlainBucket, diffMineKey)
}

func (w *diffWorld) putDirect(bucket, key string, body []byte) {
	w.t.Helper()
	if _, err := w.direct.PutObject(w.t.Context(), bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		w.t.Fatalf("put %s/%s on MinIO: %v", bucket, key, err)
	}
}

// createUpload starts a multipart upload through the gateway as principal.
func (w *diffWorld) createUpload(principal, bucket, key string) string {
	w.t.Helper()
	body := w.mustGateway(principal, http.MethodPost, bucket, key, "uploads", nil, nil)
	m := regexp.MustCompile(`<UploadId>([^<]+)</UploadId>`).FindSubmatch(body)
	if m == nil {
		w.t.Fatalf("fixture: no upload id in %s", body)
	}
	return string(m[1])
}

func (w *diffWorld) listParts(bucket, key, uploadID string) []minio.ObjectPart {
	w.t.Helper()
	core := minio.Core{Client: w.direct}
	res, err := core.ListObjectParts(w.t.Context(), bucket, key, uploadID, 0, 1000)
	if err != nil {
		w.t.Fatalf("list parts of %s/%s %s on MinIO: %v", bucket, key, uploadID, err)
	}
	return res.ObjectParts
}

// mustGateway sends a fixture request through the gateway and requires a
// 2xx answer.
func (w *diffWorld) mustGateway(principal, method, bucket, key, rawQuery string, body []byte, header http.Header) []byte {
	w.t.Helper()
	p := "/" + bucket
	if key != "" {
		p += "/" + key
	}
	req := &diffRequest{method: method, path: p, rawPath: backend.EscapePath(p), rawQuery: rawQuery, header: header, body: body}
	resp, err := w.send(w.t.Context(), req, principal, -1)
	if err != nil {
		w.t.Fatalf("fixture %s %s?%s: %v", method, p, rawQuery, err)
	}
	if resp.status/100 != 2 {
		w.t.Fatalf("fixture %s %s?%s: %d %s", method, p, rawQuery, resp.status, resp.body)
	}
	return resp.body
}

// diffRequest is one generated request.
type diffRequest struct {
	n      int
	method string
	// path is the decoded path (what the gateway routes on), rawPath the
	// path as sent.
	path, rawPath string
	rawQuery      string
	header        http.Header
	body          []byte
	// what the request aims at, and how its key is shaped, for the report.
	target, shape string
	// badKey: the key has a leading "/", "//", or a "." or ".." segment;
	// badBodyKey: a DeleteObjects body names such a key; badCopySource:
	// the copy source is not /BUCKET/KEY[?versionId=ID] with a good key.
	badKey, badBodyKey, badCopySource bool
	// trick names the oddity the request carries besides its key shape
	// ("" for none); presign sends it as a presigned URL.
	trick   string
	presign bool
	// control names the parameters whose values hold a control
	// character; listing names the bucket listing the request is, sent
	// as S3 defines it (no tweak, no trick), or "".
	control []string
	listing string
}

func (q *diffRequest) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", q.n, q.method, q.rawPath)
	if q.rawQuery != "" {
		b.WriteString("?" + q.rawQuery)
	}
	fmt.Fprintf(&b, " [%s, key %s", q.target, q.shape)
	if q.trick != "" {
		fmt.Fprintf(&b, ", %s", q.trick)
	}
	b.WriteString("]")
	for _, h := range []string{"X-Amz-Copy-Source", "X-Amz-Meta-Snowball-Auto-Extract", "X-Amz-Write-Offset-Bytes", "X-Minio-Force-Delete", "Content-Type", "Connection"} {
		for _, v := range q.header.Values(h) {
			fmt.Fprintf(&b, " %s: %s", h, v)
		}
	}
	if len(q.body) > 0 {
		s := string(q.body)
		if len(s) > 160 {
			s = s[:160] + "..."
		}
		fmt.Fprintf(&b, " body %q", s)
	}
	return b.String()
}

type diffResponse struct {
	status int
	code   string
	body   []byte
}

var diffCodeRE = regexp.MustCompile(`<Code>([^<]*)</Code>`)

// send signs q as principal (SigV4, SHA-256 payload hash) and sends it.
// The signature covers the path as the gateway reads it: decoded once
// and encoded again byte by byte.
func (w *diffWorld) send(ctx context.Context, q *diffRequest, principal string, n int) (*diffResponse, error) {
	req, err := http.NewRequestWithContext(ctx, q.method, w.url+"/", bytes.NewReader(q.body))
	if err != nil {
		return nil, err
	}
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = q.path, q.rawPath, q.rawQuery
	for k, vs := range q.header {
		req.Header[k] = slices.Clone(vs)
	}
	if len(q.body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	sum := sha256.Sum256(q.body)
	signed := req.Clone(ctx)
	signed.URL.RawPath = backend.EscapePath(q.path)
	c := w.creds[principal]
	if q.presign {
		u, h, err := harness.PresignV4(ctx, signed, c.AccessKey, c.SecretKey, w.minio.Region, time.Now(), 10*time.Minute)
		if err != nil {
			return nil, err
		}
		pu, err := url.Parse(u)
		if err != nil {
			return nil, err
		}
		req.URL.RawQuery = pu.RawQuery
		for k, vs := range h {
			if k != "Host" {
				req.Header[k] = vs
			}
		}
	} else {
		if err := harness.SignV4(ctx, signed, c.AccessKey, c.SecretKey, w.minio.Region, hex.EncodeToString(sum[:]), time.Now()); err != nil {
			return nil, err
		}
		req.Header = signed.Header
	}
	if n >= 0 {
		req.Header.Set(diffNumberHeader, strconv.Itoa(n))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	out := &diffResponse{status: resp.StatusCode, body: body}
	if m := diffCodeRE.FindSubmatch(body); m != nil {
		out.code = string(m[1])
	}
	return out, err
}
