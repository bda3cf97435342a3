package gateway

// The differential suite: generated requests go through an in-process
// gateway to a real MinIO, and MinIO's own trace of the S3 API calls it
// executed (attributed to gateway requests by the X-Sweepgate-Request-Id
// header on every backend request) is compared with the operation the
// gateway classified each request as. It proves "one meaning per request":
// the backend executes the operation the gateway decided on (plus the
// gateway's own listed helper calls), and a refused request reaches the
// backend not at all. After the run, the protected targets (another
// principal's upload, a referenced blob, the manifest naming it, a guarded
// blob) are checked directly on MinIO and in etcd.
//
// SWEEPGATE_DIFFERENTIAL_REQUESTS sets the number of generated requests
// (default 2000), SWEEPGATE_DIFFERENTIAL_SEED the seed (default: the
// clock; it is printed either way).

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

const (
	diffPlainBucket   = "diff-plain"
	diffRegBucket     = "diff-reg"
	diffMissingBucket = "diff-missing"
	diffBlobPrefix    = "blobs/sha256/"
	diffSourcePrefix  = "manifests/"
	// diffUploadKey is where the owner's protected upload is in progress.
	diffUploadKey = "uploads/protected"
	// diffMineKey is where mallory's own upload is in progress.
	diffMineKey = "mp/mine"

	diffMallory = "mallory" // the ordinary principal every generated request is signed by
	diffOwner   = "owner"   // the principal whose upload is protected
	diffAdmin   = "diffadmin"

	// diffTimeout bounds each generated request: no S3 call on these small
	// objects takes nearly as long.
	diffTimeout = 5 * time.Second

	diffRequestsEnv = "SWEEPGATE_DIFFERENTIAL_REQUESTS"
	diffSeedEnv     = "SWEEPGATE_DIFFERENTIAL_SEED"
	diffDefaultRuns = 2000
	// diffNumberHeader carries a generated request's number from the client
	// to diffFront, which removes it before the gateway sees the request.
	diffNumberHeader = "X-Differential-Request"
)

// diffOpCalls maps a gateway operation (by its name) to the MinIO
// handler(s) that execute that S3 API, as MinIO's cmd/api-router.go names
// them in its trace ("s3." + handler name without "Handler"). Operations
// not listed map to "s3." + their own name (compared without regard to
// case, so OpGetObjectAcl matches s3.GetObjectACL).
var diffOpCalls = map[string][]string{
	"CreateBucket":                       {"s3.PutBucket"},
	"ListObjects":                        {"s3.ListObjectsV1"},
	"DeleteObjects":                      {"s3.DeleteMultipleObjects"},
	"CreateMultipartUpload":              {"s3.NewMultipartUpload"},
	"UploadPart":                         {"s3.PutObjectPart"},
	"UploadPartCopy":                     {"s3.CopyObjectPart"},
	"ListParts":                          {"s3.ListObjectParts"},
	"RestoreObject":                      {"s3.PostRestoreObject"},
	"GetObjectLockConfiguration":         {"s3.GetBucketObjectLockConfig"},
	"PutObjectLockConfiguration":         {"s3.PutBucketObjectLockConfig"},
	"GetBucketObjectLockConfiguration":   {"s3.GetBucketObjectLockConfig"},
	"PutBucketObjectLockConfiguration":   {"s3.PutBucketObjectLockConfig"},
	"GetBucketReplication":               {"s3.GetBucketReplicationConfig"},
	"PutBucketReplication":               {"s3.PutBucketReplicationConfig"},
	"DeleteBucketReplication":            {"s3.DeleteBucketReplicationConfig"},
	"GetBucketNotificationConfiguration": {"s3.GetBucketNotification"},
	"PutBucketNotificationConfiguration": {"s3.PutBucketNotification"},
	"GetBucketLifecycleConfiguration":    {"s3.GetBucketLifecycle"},
	"PutBucketLifecycleConfiguration":    {"s3.PutBucketLifecycle"},
	"GetBucketAccelerateConfiguration":   {"s3.GetBucketAccelerate"},
	"ListenBucketNotification":           {"s3.ListenNotification"},
}

// diffHelperCalls are the backend calls the gateway itself makes while
// serving an operation, besides the operation's own call (read from
// gateway/digest*.go and multipart/*.go):
//
//   - PutObject into a reference source: a HEAD settles an unclear
//     outcome (writeOutcome).
//   - CopyObject into a reference source: a GET reads the copy source
//     (copyRef), a HEAD settles an unclear outcome. Onto a blob's key in a
//     verifying namespace: a GET reads and hashes the copy source before
//     the copy is sent (copyBlob).
//   - CompleteMultipartUpload into a reference source: ListParts sizes
//     the upload (listedPartsSize), a GET and a HEAD record the completed
//     object's references (recordCompleted). Onto a blob's key in a
//     verifying namespace: a GET hashes what the complete made or what the
//     key already holds, and a HEAD and a DeleteObject remove a completed
//     object that does not hash to its digest (removeCompleted); when the
//     key holds the blob already, an AbortMultipartUpload ends the
//     request's own upload (abortStored).
//   - DeleteObject of a reference object and DeleteObjects naming one: a
//     HEAD says whether the object is still there (stillThere).
//   - CreateMultipartUpload: an AbortMultipartUpload of the upload this
//     request created, when its session could not be recorded.
//
// A mutating helper call (diffMutating) must act on the request's own
// object, and on its own upload when it names one.
var diffHelperCalls = map[string][]string{
	"PutObject":               {"s3.HeadObject"},
	"CopyObject":              {"s3.GetObject", "s3.HeadObject"},
	"CompleteMultipartUpload": {"s3.ListObjectParts", "s3.GetObject", "s3.HeadObject", "s3.DeleteObject", "s3.AbortMultipartUpload"},
	"DeleteObject":            {"s3.HeadObject"},
	"DeleteObjects":           {"s3.HeadObject"},
	"CreateMultipartUpload":   {"s3.AbortMultipartUpload"},
}

// diffMutating are the MinIO handlers that change stored data or
// configuration.
var diffMutating = map[string]bool{}

func init() {
	for _, f := range []string{
		"PutBucket", "DeleteBucket", "DeleteMultipleObjects", "PutObject", "CopyObject",
		"DeleteObject", "NewMultipartUpload", "PutObjectPart", "CopyObjectPart",
		"CompleteMultipartUpload", "AbortMultipartUpload", "PutObjectACL", "PutObjectTagging",
		"DeleteObjectTagging", "PutObjectRetention", "PutObjectLegalHold", "PostRestoreObject",
		"PutObjectExtract", "PostPolicyBucket", "PutBucketACL", "PutBucketCors", "DeleteBucketCors",
		"DeleteBucketWebsite", "DeleteBucketTagging", "PutBucketLifecycle", "PutBucketReplicationConfig",
		"PutBucketEncryption", "PutBucketPolicy", "PutBucketObjectLockConfig", "PutBucketTagging",
		"PutBucketVersioning", "PutBucketNotification", "ResetBucketReplicationStart",
		"DeleteBucketPolicy", "DeleteBucketReplicationConfig", "DeleteBucketLifecycle",
		"DeleteBucketEncryption", "ResetBucketReplicationStatus",
	} {
		diffMutating["s3."+f] = true
	}
}

// diffOwnCalls returns the MinIO handlers that execute op itself.
func diffOwnCalls(op string) []string {
	if calls, ok := diffOpCalls[op]; ok {
		return calls
	}
	return []string{"s3." + op}
}

// diffRefused is the operation of a request the gateway refuses before
// the backend sees it.
const diffRefused = "Unsupported"

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
	logs   *diffLogs
	front  *diffFront
	url    string
	creds  map[string]sigv4.Credential
	client *http.Client

	refDigest, guardDigest string
	refBlob, guardBlob     *diffProtected
	freeBlobKey            string
	manifest               *diffProtected
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
	g, err := New(Config{
		BackendEndpoint: w.minio.Endpoint, BackendRegion: w.minio.Region,
		BackendAccessKey: w.minio.AccessKey, BackendSecretKey: w.minio.SecretKey,
		Credentials: []sigv4.Credential{w.creds[diffMallory], w.creds[diffOwner], w.creds[diffAdmin]},
		Logger:      slog.New(&diffLogHandler{logs: w.logs}),
		Sessions:    &SessionsConfig{Store: w.store, EnforceOwnership: true, AdminPrincipals: []string{diffAdmin}},
		Digests: &DigestsConfig{
			Store: w.store, Layout: &cas.Layout{Namespaces: []cas.Namespace{ns}, Sources: []cas.Source{src}},
			AdminPrincipals: []string{diffAdmin},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.front = &diffFront{g: g, ids: map[int]string{}}
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
	if _, err := w.store.Client().Put(ctx, w.store.Keys().Guard(w.guardDigest), `{"v":1}`); err != nil {
		t.Fatal(err)
	}
	w.guardBlob = &diffProtected{name: "guarded blob", bucket: diffRegBucket, key: guardKey, body: guardBody, writable: true}

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
	req := &diffRequest{method: method, path: p, rawPath: escapePath(p), rawQuery: rawQuery, header: header, body: body}
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
	signed.URL.RawPath = escapePath(q.path)
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

// diffParam is a query parameter the generator may send, with the values
// it picks from ("" sends the bare name). "@upload" and "@mine" stand for
// the owner's and mallory's upload ids.
type diffParam struct {
	name   string
	values []string
}

// diffParams: every sub-resource and multipart parameter S3 defines (and
// MinIO's extensions), then the ordinary parameters of listings and reads.
var diffParams = []diffParam{
	{"acl", nil}, {"attributes", nil}, {"legal-hold", nil}, {"restore", nil}, {"retention", nil},
	{"select", nil}, {"select-type", []string{"2"}}, {"tagging", nil}, {"torrent", nil},
	{"uploads", nil}, {"uploadId", []string{"@upload", "@mine", "bogus-upload-id", ""}},
	{"partNumber", []string{"1", "2", "0", ""}}, {"versionId", []string{"null", "3f1c9a6e-0d6b-4c1e-9a53-1b2b8f1e2c3d"}},
	{"versions", nil}, {"list-type", []string{"2", "1", "02"}}, {"delete", nil}, {"location", nil},
	{"policy", nil}, {"policyStatus", nil}, {"lifecycle", nil}, {"cors", nil}, {"encryption", nil},
	{"object-lock", nil}, {"replication", nil}, {"versioning", nil}, {"notification", nil},
	{"website", nil}, {"accelerate", nil}, {"requestPayment", nil}, {"logging", nil},
	{"metrics", nil}, {"analytics", nil}, {"inventory", nil}, {"intelligent-tiering", nil},
	{"ownershipControls", nil}, {"publicAccessBlock", nil}, {"events", []string{"s3:ObjectCreated:*"}},
	{"lambdaArn", []string{"arn:minio:s3-object-lambda::fn:webhook"}}, {"replication-metrics", []string{"2", ""}},
	{"metadata", []string{"true"}}, {"replication-reset-status", nil}, {"replication-reset", nil},
	{"replication-check", nil},
	// Headers a presigning SDK may hoist into the query: the backend must
	// not read them from there when the gateway does not.
	{"X-Amz-Copy-Source", []string{"/" + diffPlainBucket + "/obj"}}, {"X-Amz-Checksum-Mode", []string{"ENABLED"}},
	{"X-Amz-Meta-Snowball-Auto-Extract", []string{"true"}}, {"X-Amz-Write-Offset-Bytes", []string{"0"}},
	{"X-Amz-Tagging", []string{"k=v"}},
}

var diffOrdinaryParams = []diffParam{
	{"prefix", []string{"dir/", "blobs/", ""}}, {"delimiter", []string{"/"}}, {"max-keys", []string{"2"}},
	{"marker", []string{"a"}}, {"continuation-token", []string{"x"}}, {"start-after", []string{"a"}},
	{"fetch-owner", []string{"true"}}, {"encoding-type", []string{"url"}}, {"key-marker", []string{"a"}},
	{"max-uploads", []string{"5"}}, {"max-parts", []string{"5"}}, {"part-number-marker", []string{"1"}},
	{"response-content-type", []string{"text/plain"}}, {"x-id", []string{"GetObject", "PutObject", "DeleteObject"}},
	{"max-buckets", []string{"5"}}, {"version-id-marker", []string{"null"}}, {"upload-id-marker", []string{"x"}},
	{"response-cache-control", []string{"no-cache"}}, {"id", []string{"config1"}},
}

// diffMultipartParams are drawn more often: their mix-ups with
// sub-resources are where one request has two meanings.
var diffMultipartParams = []string{"uploadId", "partNumber", "uploads", "versionId"}

func diffParamNamed(name string) diffParam {
	for _, p := range append(slices.Clip(diffParams), diffOrdinaryParams...) {
		if p.name == name {
			return p
		}
	}
	return diffParam{name, []string{"x"}}
}

// diffGen generates requests from a seeded source.
type diffGen struct {
	w    *diffWorld
	rng  *rand.Rand
	n    int
	apis []diffAPI
}

func diffPick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// diffTarget is a key the generator aims at.
type diffTarget struct {
	name, bucket, key string
	protected         *diffProtected
	blob              bool
	content           []byte // a body it may be written with
}

func (g *diffGen) targets() []diffTarget {
	w := g.w
	return []diffTarget{
		{name: "plain", bucket: diffPlainBucket, key: "obj"},
		{name: "plain", bucket: diffPlainBucket, key: "dir/obj"},
		{name: "plain", bucket: diffPlainBucket, key: "ünï/cødé.txt"},
		{name: "plain-new", bucket: diffPlainBucket, key: "gen/new"},
		{name: "own-upload", bucket: diffPlainBucket, key: diffMineKey},
		{name: "protected-upload", bucket: diffRegBucket, key: diffUploadKey},
		{name: "protected-upload", bucket: diffRegBucket, key: diffUploadKey},
		{name: "referenced-blob", bucket: diffRegBucket, key: w.refBlob.key, protected: w.refBlob, blob: true, content: w.refBlob.body},
		{name: "referenced-blob", bucket: diffRegBucket, key: w.refBlob.key, protected: w.refBlob, blob: true, content: w.refBlob.body},
		{name: "guarded-blob", bucket: diffRegBucket, key: w.guardBlob.key, protected: w.guardBlob, blob: true, content: w.guardBlob.body},
		{name: "free-blob", bucket: diffRegBucket, key: w.freeBlobKey, blob: true},
		{name: "manifest", bucket: diffRegBucket, key: w.manifest.key, protected: w.manifest, content: w.manifest.body},
		{name: "manifest", bucket: diffRegBucket, key: w.manifest.key, protected: w.manifest, content: w.manifest.body},
		{name: "manifest-new", bucket: diffRegBucket, key: diffSourcePrefix + "gen/new"},
		{name: "missing-bucket", bucket: diffMissingBucket, key: "obj"},
		// Prefixes of the protected keys, for what would act on a whole
		// prefix (x-minio-force-delete).
		{name: "prefix", bucket: diffRegBucket, key: "blobs/sha256"},
		{name: "prefix", bucket: diffRegBucket, key: "manifests"},
	}
}

// shapeKey writes the target's key in one of the shapes clients and
// attackers use, and returns the shape's name, the decoded key and the key
// as sent.
func (g *diffGen) shapeKey(t diffTarget) (shape, key, raw string) {
	k := t.key
	switch shape = diffPick(g.rng, []string{
		"canonical", "canonical", "canonical", "canonical", "canonical", "canonical",
		"leading-slash", "double-slash", "dot", "dot-dot", "encoded-dot-dot", "encoded-slash",
		"upper-hex", "unicode", "trailing-slash", "backslash-dot-dot", "nul",
	}); shape {
	case "canonical":
		return shape, k, escapePath(k)
	case "leading-slash":
		k = "/" + k
	case "double-slash":
		if i := strings.LastIndex(k, "/"); i >= 0 {
			k = k[:i] + "/" + k[i:]
		} else {
			k = "x//" + k
		}
	case "dot":
		if i := strings.LastIndex(k, "/"); i >= 0 {
			k = k[:i] + "/." + k[i:]
		} else {
			k = "./" + k
		}
	case "dot-dot", "encoded-dot-dot":
		i := strings.LastIndex(k, "/")
		k = k[:i+1] + "x/../" + k[i+1:]
		if shape == "encoded-dot-dot" {
			return shape, k, strings.ReplaceAll(escapePath(k), "/../", "/%2E%2E/")
		}
	case "encoded-slash":
		return shape, k, strings.ReplaceAll(escapePath(k), "/", "%2F")
	case "upper-hex":
		if !t.blob {
			return "canonical", k, escapePath(k)
		}
		k = diffBlobPrefix + strings.ToUpper(strings.TrimPrefix(k, diffBlobPrefix))
	case "unicode":
		k += "-é"
	case "trailing-slash":
		k += "/"
	case "nul":
		k += "\x00x"
	case "backslash-dot-dot":
		i := strings.LastIndex(k, "/")
		k = k[:i+1] + `x\..\` + k[i+1:]
	}
	return shape, k, escapePath(k)
}

func diffBadKey(key string) bool {
	if strings.HasPrefix(key, "/") || strings.Contains(key, "//") {
		return true
	}
	for _, s := range strings.FieldsFunc(key, func(r rune) bool { return r == '/' || r == '\\' }) {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// diffBadCopySource reports whether an x-amz-copy-source is not of the
// form /BUCKET/KEY[?versionId=ID] (the leading "/" optional) with a key
// diffBadKey accepts.
func diffBadCopySource(src string) bool {
	if strings.HasPrefix(src, "//") {
		return true
	}
	p, rawQuery, _ := strings.Cut(strings.TrimPrefix(src, "/"), "?")
	bucket, key, ok := strings.Cut(p, "/")
	dec, err := url.PathUnescape(key)
	if !ok || bucket == "" || key == "" || err != nil || diffBadKey(dec) {
		return true
	}
	if rawQuery == "" {
		return false
	}
	q, err := url.ParseQuery(rawQuery)
	return err != nil || len(q) != 1 || !q.Has("versionId")
}

// diffWellFormedWrite reports whether a request is an ordinary write or
// delete of its object (PutObject, CopyObject, DeleteObject, or the
// complete of an upload): legitimate for ordinary principals, so never
// sent to a writable protected object.
func diffWellFormedWrite(method string, names []string) bool {
	// x-id and the x-amz-* headers a presigning SDK hoists into the query
	// leave a write a write.
	rest := slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		return n == "versionId" || n == "x-id" || strings.HasPrefix(strings.ToLower(n), "x-amz-")
	})
	switch method {
	case http.MethodPut, http.MethodDelete:
		return len(rest) == 0
	case http.MethodPost:
		return len(rest) == 1 && rest[0] == "uploadId"
	}
	return false
}

// diffAPI is the shape of one S3 API request, as the S3 documentation
// (and MinIO's extensions) define it, whether or not the gateway serves
// it: method, target, the query parameters that select it ("name" or
// "name=value") and those it may carry.
type diffAPI struct {
	method   string
	target   string // "service", "bucket" or "object"
	selector []string
	optional []string
	copy     bool
}

func diffAPIs() []diffAPI {
	var apis []diffAPI
	add := func(method, target string, selector []string, optional ...string) {
		apis = append(apis, diffAPI{method: method, target: target, selector: selector, optional: optional})
	}
	get, put, del, head, post := http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodPost
	add(get, "service", nil, "max-buckets", "prefix", "continuation-token")
	add(get, "service", []string{"events"})
	add(put, "bucket", nil)
	add(head, "bucket", nil)
	add(del, "bucket", nil)
	add(get, "bucket", nil, "prefix", "delimiter", "marker", "max-keys", "encoding-type")
	add(get, "bucket", []string{"list-type=2"}, "prefix", "delimiter", "continuation-token", "start-after", "fetch-owner", "max-keys", "encoding-type")
	add(get, "bucket", []string{"list-type=2", "metadata=true"}, "prefix")
	add(get, "bucket", []string{"versions"}, "prefix", "delimiter", "key-marker", "version-id-marker", "max-keys", "encoding-type")
	add(get, "bucket", []string{"versions", "metadata=true"})
	add(get, "bucket", []string{"uploads"}, "prefix", "delimiter", "key-marker", "upload-id-marker", "max-uploads", "encoding-type")
	add(get, "bucket", []string{"location"})
	add(post, "bucket", []string{"delete"})
	add(get, "bucket", []string{"policyStatus"})
	add(get, "bucket", []string{"replication-metrics=2"})
	add(get, "bucket", []string{"events"}, "prefix")
	for _, sub := range []string{"policy", "lifecycle", "encryption", "replication", "tagging", "cors", "website",
		"ownershipControls", "publicAccessBlock"} {
		add(get, "bucket", []string{sub})
		add(put, "bucket", []string{sub})
		add(del, "bucket", []string{sub})
	}
	for _, sub := range []string{"versioning", "notification", "object-lock", "acl", "accelerate", "requestPayment", "logging"} {
		add(get, "bucket", []string{sub})
		add(put, "bucket", []string{sub})
	}
	for _, sub := range []string{"intelligent-tiering", "analytics", "inventory", "metrics"} {
		add(get, "bucket", []string{sub}, "id")
		add(put, "bucket", []string{sub, "id"})
		add(del, "bucket", []string{sub, "id"})
	}
	read := []string{"versionId", "partNumber", "response-content-type", "response-cache-control"}
	add(get, "object", nil, read...)
	add(head, "object", nil, read...)
	add(put, "object", nil)
	add(del, "object", nil, "versionId")
	apis = append(apis, diffAPI{method: put, target: "object", copy: true})
	add(post, "object", []string{"uploads"})
	add(put, "object", []string{"partNumber", "uploadId"})
	apis = append(apis, diffAPI{method: put, target: "object", selector: []string{"partNumber", "uploadId"}, copy: true})
	add(get, "object", []string{"uploadId"}, "max-parts", "part-number-marker", "encoding-type")
	add(post, "object", []string{"uploadId"})
	add(del, "object", []string{"uploadId"})
	for _, sub := range []string{"tagging", "acl", "retention", "legal-hold"} {
		add(get, "object", []string{sub}, "versionId")
		add(put, "object", []string{sub}, "versionId")
	}
	add(del, "object", []string{"tagging"}, "versionId")
	add(get, "object", []string{"attributes"}, "versionId")
	add(post, "object", []string{"restore"}, "versionId")
	add(post, "object", []string{"select", "select-type=2"})
	add(get, "object", []string{"torrent"})
	add(get, "object", []string{"lambdaArn"})
	return apis
}

// next generates one request: three times in five an S3 API request as
// the documentation defines it, perhaps with one thing changed (a
// parameter added, a copy source added, the key reshaped, the method
// swapped), otherwise a method, target and parameters drawn at random.
func (g *diffGen) next() *diffRequest {
	rng := g.rng
	g.n++
	q := &diffRequest{n: g.n, header: http.Header{}}
	var api *diffAPI
	var tweak string
	if rng.IntN(5) < 3 {
		a := diffPick(rng, g.apis)
		api = &a
		q.method = api.method
		if rng.IntN(4) == 0 {
			tweak = diffPick(rng, []string{"param", "param", "copy", "shape", "method", "trick"})
		}
		if tweak == "method" {
			q.method = diffPick(rng, []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete})
		}
	} else {
		q.method = diffPick(rng, []string{
			http.MethodGet, http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPut, http.MethodPut,
			http.MethodPost, http.MethodPost, http.MethodDelete, http.MethodDelete, http.MethodDelete,
			http.MethodOptions, http.MethodPatch,
		})
	}
	var t diffTarget
	kind := "object"
	switch r := rng.IntN(100); {
	case api != nil:
		kind = api.target
	case r < 5:
		kind = "service"
	case r < 30:
		kind = "bucket"
	}
	switch kind {
	case "service":
		q.target, q.shape, q.path, q.rawPath = "service", "-", "/", "/"
	case "bucket":
		b := diffPick(rng, []string{diffPlainBucket, diffRegBucket, diffRegBucket, diffMissingBucket})
		q.target, q.shape, q.path = "bucket "+b, "-", "/"+b
		if rng.IntN(10) == 0 {
			q.path += "/"
			q.shape = "trailing-slash"
		}
		q.rawPath = q.path
	default:
		t = diffPick(rng, g.targets())
		shape, key, raw := "canonical", t.key, escapePath(t.key)
		if api == nil || tweak == "shape" {
			shape, key, raw = g.shapeKey(t)
		}
		q.target, q.shape = t.name, shape
		q.path, q.rawPath = "/"+t.bucket+"/"+key, "/"+t.bucket+"/"+raw
		q.badKey = diffBadKey(key)
	}

	var names []string
	var query []string
	addValue := func(name, v string) {
		if slices.Contains(names, name) {
			return
		}
		names = append(names, name)
		switch v {
		case "@upload":
			v = g.w.uploadID
			if t.name == "own-upload" {
				v = g.w.mineID
			}
		case "@mine":
			v = g.w.mineID
		}
		if v == "" && rng.IntN(2) == 0 {
			query = append(query, url.QueryEscape(name))
		} else {
			query = append(query, url.QueryEscape(name)+"="+url.QueryEscape(v))
		}
	}
	add := func(p diffParam) {
		v := ""
		if len(p.values) > 0 {
			v = diffPick(rng, p.values)
		}
		addValue(p.name, v)
	}
	randomParam := func() {
		switch r := rng.IntN(10); {
		case r < 3:
			add(diffParamNamed(diffPick(rng, diffMultipartParams)))
		case r < 8:
			add(diffPick(rng, diffParams))
		default:
			add(diffPick(rng, diffOrdinaryParams))
		}
	}
	if api != nil {
		for _, s := range api.selector {
			if name, v, ok := strings.Cut(s, "="); ok {
				addValue(name, v)
			} else {
				add(diffParamNamed(s))
			}
		}
		for _, o := range api.optional {
			if rng.IntN(4) == 0 {
				add(diffParamNamed(o))
			}
		}
		if tweak == "param" {
			randomParam()
		}
	} else {
		for range diffPick(rng, []int{0, 0, 1, 1, 1, 1, 2, 2, 2, 3}) {
			randomParam()
		}
		if t.name == "protected-upload" && rng.IntN(2) == 0 {
			// Most requests at the protected upload name it.
			add(diffParamNamed("uploadId"))
		}
	}
	q.rawQuery = strings.Join(query, "&")
	if api == nil && rng.IntN(5) == 0 || tweak == "trick" {
		g.trick(q, query)
	}

	// A copy source: where the API takes one, on a third of the other PUTs
	// drawn at random, and now and then anywhere.
	if (api != nil && (api.copy || tweak == "copy")) || (api == nil && (q.method == http.MethodPut && rng.IntN(3) == 0 || rng.IntN(25) == 0)) {
		sources := []string{
			"/" + diffPlainBucket + "/obj", diffPlainBucket + "/dir/obj", "/" + diffPlainBucket + "/dir%2Fobj",
			"/" + diffRegBucket + "/" + g.w.freeBlobKey, "/" + diffRegBucket + "/" + g.w.manifest.key,
			"/" + diffRegBucket + "/" + g.w.refBlob.key, "/" + diffPlainBucket + "/obj?versionId=null",
		}
		if api == nil || rng.IntN(3) == 0 {
			sources = append(sources,
				"/"+diffPlainBucket+"/obj?versionId=null&x-id=CopyObject", "//"+diffPlainBucket+"/obj",
				diffPlainBucket+"obj", "/"+diffPlainBucket+"//obj", "/"+diffPlainBucket+"/./obj",
				"/"+diffPlainBucket+"/x/../obj", "/"+diffPlainBucket, "/"+diffPlainBucket+"/obj#x")
		}
		src := diffPick(rng, sources)
		q.header.Set("X-Amz-Copy-Source", src)
		q.badCopySource = diffBadCopySource(src)
	}
	switch q.trick {
	case "connection":
		q.header.Set("Connection", diffPick(rng, []string{"X-Amz-Copy-Source", "keep-alive, X-Amz-Copy-Source",
			"X-Amz-Content-Sha256", "Authorization", "Content-Md5", "close", "keep-alive"}))
	case "two-copy-sources":
		q.header.Add("X-Amz-Copy-Source", "/"+diffRegBucket+"/"+g.w.refBlob.key)
		q.header.Add("X-Amz-Copy-Source", "/"+diffPlainBucket+"/obj")
		q.badCopySource = true
	}
	if api == nil {
		switch r := rng.IntN(100); {
		case r < 3:
			q.header.Set("X-Amz-Meta-Snowball-Auto-Extract", "true")
		case r < 5:
			q.header.Set("X-Amz-Write-Offset-Bytes", "0")
		case r < 7 && q.method == http.MethodPost:
			q.header.Set("Content-Type", "multipart/form-data; boundary=xyz")
		case r < 9:
			q.header.Set("X-Minio-Force-Delete", "true")
		}
	}

	q.body = g.body(q, t, names)
	if len(q.body) > 0 && (slices.Contains(names, "delete") || rng.IntN(3) == 0) {
		sum := md5.Sum(q.body)
		q.header.Set("Content-Md5", base64.StdEncoding.EncodeToString(sum[:]))
	}

	// A writable protected object gets no well-formed write in a shape
	// that names it.
	if t.protected != nil && t.protected.writable && (q.shape == "canonical" || q.shape == "encoded-slash") && diffWellFormedWrite(q.method, names) {
		g.n--
		return g.next()
	}
	return q
}

// trick gives q one of the oddities by which a request could mean one
// thing to the gateway and another to the backend: a repeated, encoded,
// miscased or ';'-separated query parameter, a lower-case method, a
// Connection header naming another header, two copy sources, or a
// presigned URL instead of a signed header.
func (g *diffGen) trick(q *diffRequest, query []string) {
	rng := g.rng
	q.trick = diffPick(rng, []string{"repeat-param", "encoded-name", "semicolon", "case-name", "lower-method",
		"connection", "two-copy-sources", "presigned", "presigned"})
	switch q.trick {
	case "repeat-param":
		if len(query) == 0 {
			query = []string{"uploadId=" + url.QueryEscape(g.w.mineID)}
		}
		name, _, _ := strings.Cut(query[0], "=")
		query = append(query, name+"="+diffPick(rng, []string{"", "bogus", url.QueryEscape(g.w.uploadID)}))
		q.rawQuery = strings.Join(query, "&")
	case "encoded-name":
		if len(query) == 0 {
			query = []string{"uploadId=" + url.QueryEscape(g.w.uploadID)}
		}
		i := rng.IntN(len(query))
		query[i] = fmt.Sprintf("%%%02X", query[i][0]) + query[i][1:]
		q.rawQuery = strings.Join(query, "&")
	case "semicolon":
		if len(query) < 2 {
			query = append(query, "uploadId="+url.QueryEscape(g.w.uploadID))
		}
		q.rawQuery = strings.Join(query, ";")
	case "case-name":
		if len(query) == 0 {
			query = []string{"UploadId=" + url.QueryEscape(g.w.uploadID)}
		} else {
			i := rng.IntN(len(query))
			query[i] = strings.ToUpper(query[i][:1]) + query[i][1:]
		}
		q.rawQuery = strings.Join(query, "&")
	case "lower-method":
		q.method = strings.ToLower(q.method)
	case "presigned":
		q.presign = true
	}
}

// body returns a small body that fits the request.
func (g *diffGen) body(q *diffRequest, t diffTarget, names []string) []byte {
	rng := g.rng
	has := func(n string) bool { return slices.Contains(names, n) }
	switch {
	case q.method == http.MethodPost && has("delete"):
		body, bad := g.deleteBody()
		q.badBodyKey = bad
		return body
	case q.method == http.MethodPost && has("uploadId"):
		return []byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag></Part></CompleteMultipartUpload>`)
	case q.method == http.MethodPut && has("tagging"):
		return []byte(`<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>`)
	case q.method == http.MethodPost && has("select"):
		return []byte(`<SelectObjectContentRequest><Expression>select * from s3object</Expression><ExpressionType>SQL</ExpressionType><InputSerialization><CSV/></InputSerialization><OutputSerialization><CSV/></OutputSerialization></SelectObjectContentRequest>`)
	case q.method == http.MethodPut && q.header.Get("X-Amz-Copy-Source") == "" && len(names) == 0 || q.method == http.MethodPut && has("partNumber"):
		switch {
		case t.content != nil && rng.IntN(2) == 0:
			return t.content
		case strings.HasPrefix(t.key, diffSourcePrefix) || t.name == "manifest-new":
			d := g.w.refDigest
			if rng.IntN(2) == 0 {
				d = g.w.guardDigest
			}
			return fmt.Appendf(nil, `{"layers":[{"digest":%q}]}`, d)
		}
		return fmt.Appendf(nil, "generated body %d", rng.IntN(1000))
	case q.method == http.MethodPut || q.method == http.MethodPost:
		if rng.IntN(2) == 0 {
			return []byte(`<Configuration><Status>Enabled</Status></Configuration>`)
		}
	}
	return nil
}

// deleteBody is a DeleteObjects document naming protected keys in
// variant forms and ordinary keys; bad reports whether a key is one
// diffBadKey refuses.
func (g *diffGen) deleteBody() (body []byte, bad bool) {
	w, rng := g.w, g.rng
	ref, guard, man := w.refBlob.key, w.guardBlob.key, w.manifest.key
	variants := []string{
		ref, ref, "/" + ref, strings.Replace(ref, "/sha256/", "//sha256/", 1), strings.Replace(ref, "/sha256/", "/./sha256/", 1),
		strings.Replace(ref, "/sha256/", "/x/../sha256/", 1), diffBlobPrefix + strings.ToUpper(strings.TrimPrefix(ref, diffBlobPrefix)),
		ref + "/", "/" + man, strings.Replace(man, "/app/", "//app/", 1), strings.Replace(man, "/app/", "/./app/", 1),
		strings.Replace(man, "/app/", "/x/../app/", 1), "/" + guard, strings.Replace(guard, "/sha256/", "/./sha256/", 1),
		diffUploadKey, "gen/new", "obj", w.freeBlobKey,
	}
	var b strings.Builder
	b.WriteString("<Delete>")
	if rng.IntN(2) == 0 {
		b.WriteString("<Quiet>true</Quiet>")
	}
	for range 1 + rng.IntN(4) {
		k := diffPick(rng, variants)
		bad = bad || diffBadKey(k)
		var esc bytes.Buffer
		_ = diffXMLEscape(&esc, k)
		fmt.Fprintf(&b, "<Object><Key>%s</Key></Object>", esc.String())
	}
	b.WriteString("</Delete>")
	return []byte(b.String()), bad
}

func diffXMLEscape(w io.Writer, s string) error {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	_, err := r.WriteString(w, s)
	return err
}

// diffOutcome is what became of one generated request.
type diffOutcome struct {
	req   *diffRequest
	id    string // the gateway's request id
	op    string // the operation the gateway classified it as
	resp  *diffResponse
	err   error
	calls []harness.TraceEntry // what MinIO executed for it
	bad   []string             // the mismatches found in it
}

// diffReport is a run's result.
type diffReport struct {
	seed       uint64
	requests   int
	forwarded  int // requests MinIO saw at least one call for
	refused    int // requests the gateway classified Unsupported
	calls      int
	mismatches []string
	// routedAway counts forwarded requests that MinIO refused before any
	// S3 API ran (NotImplemented, MethodNotAllowed), by operation.
	routedAway map[string]int
	ops        map[string]int
	// refusals counts the gateway's refusals by error code.
	refusals map[string]int
	// damage lists the protected targets that changed.
	damage   []string
	duration time.Duration
	outcomes []*diffOutcome
}

// diffCheckOutcome compares what the gateway classified with what MinIO
// executed for one request, and returns the mismatches.
func diffCheckOutcome(o *diffOutcome, routedAway map[string]int) []string {
	var bad []string
	q := o.req
	fail := func(format string, args ...any) {
		bad = append(bad, fmt.Sprintf("%s\n    gateway: id %s op %s -> %s\n    %s", q, o.id, o.op, o.respString(), fmt.Sprintf(format, args...)))
	}
	switch {
	case o.err != nil && o.id == "":
		fail("no answer and no gateway request id: %v", o.err)
		return bad
	case o.err != nil && !strings.Contains(q.rawQuery, "events"):
		fail("no answer: %v", o.err)
	case o.id == "":
		fail("the answer carries no gateway request id")
		return bad
	case o.op == "":
		fail("no request log line for the gateway's request id")
		return bad
	}
	var names []string
	for _, c := range o.calls {
		names = append(names, c.String())
	}
	if o.op == diffRefused {
		if len(o.calls) > 0 {
			fail("refused by the gateway, yet MinIO executed %v", names)
		}
		return bad
	}
	if len(o.calls) > 0 && q.badKey {
		fail("the key has a leading \"/\", \"//\", or a \".\" or \"..\" segment, yet MinIO executed %v", names)
	}
	if len(o.calls) > 0 && q.badBodyKey && o.op == string(OpDeleteObjects) {
		fail("the body names a key with a leading \"/\", \"//\", or a \".\" or \"..\" segment, yet MinIO executed %v", names)
	}
	if len(o.calls) > 0 && q.badCopySource {
		fail("malformed or repeated copy source, yet MinIO executed %v", names)
	}
	own := map[string]bool{}
	for _, c := range diffOwnCalls(o.op) {
		own[strings.ToLower(c)] = true
	}
	helpers := map[string]bool{}
	for _, c := range diffHelperCalls[o.op] {
		helpers[strings.ToLower(c)] = true
	}
	for _, c := range o.calls {
		f := strings.ToLower(c.FuncName)
		switch {
		case !c.IsS3():
			// MinIO refused it before any S3 API ran: nothing executed.
			routedAway[o.op]++
		case own[f]:
		case helpers[f]:
			if diffMutating[c.FuncName] && !diffSameTarget(c, q) {
				fail("helper call %s acts on another object or upload than the request's", c)
			}
		default:
			fail("MinIO executed %s, which is neither %v nor a helper call of it", c, diffOwnCalls(o.op))
		}
	}
	return bad
}

// diffSameTarget reports whether a traced call acts on q's object, and on
// q's upload when both name one.
func diffSameTarget(c harness.TraceEntry, q *diffRequest) bool {
	path, err := url.PathUnescape(c.Path)
	if err != nil || path != q.path {
		return false
	}
	cq, err1 := url.ParseQuery(c.RawQuery)
	rq, err2 := url.ParseQuery(q.rawQuery)
	if err1 != nil || err2 != nil {
		return false
	}
	return !cq.Has("uploadId") || !rq.Has("uploadId") || cq.Get("uploadId") == rq.Get("uploadId")
}

func (o *diffOutcome) respString() string {
	switch {
	case o.resp == nil:
		return fmt.Sprintf("no answer (%v)", o.err)
	case o.resp.code != "":
		return fmt.Sprintf("%d %s", o.resp.status, o.resp.code)
	}
	return strconv.Itoa(o.resp.status)
}

// diffRuns returns the number of requests to generate.
func diffRuns(t *testing.T) int {
	if s := os.Getenv(diffRequestsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number", diffRequestsEnv, s)
		}
		return n
	}
	return diffDefaultRuns
}

func diffSeed(t *testing.T) uint64 {
	if s := os.Getenv(diffSeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", diffSeedEnv, s)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// run sends n generated requests from seed (after the fixed ones) through
// the gateway, and checks each against MinIO's trace and, at the end, the
// protected targets.
func (w *diffWorld) run(seed uint64, n int, fixed []*diffRequest) *diffReport {
	t := w.t
	start := time.Now()
	gen := &diffGen{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), apis: diffAPIs()}
	reqs := slices.Clone(fixed)
	for i := range reqs {
		reqs[i].n = -(i + 1)
	}
	for range n {
		reqs = append(reqs, gen.next())
	}
	trace := harness.StartTrace(t, w.minio)
	before := trace.Len()

	outcomes := make([]*diffOutcome, len(reqs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				q := reqs[i]
				timeout := diffTimeout
				if strings.Contains(q.rawQuery, "events") {
					timeout = time.Second // ListenNotification streams until the client goes
				}
				ctx, cancel := context.WithTimeout(t.Context(), timeout)
				resp, err := w.send(ctx, q, diffMallory, i)
				cancel()
				outcomes[i] = &diffOutcome{req: q, resp: resp, err: err}
			}
		})
	}
	for i := range reqs {
		work <- i
	}
	close(work)
	wg.Wait()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := trace.Sync(ctx); err != nil {
		t.Fatalf("trace: %v", err)
	}
	entries := trace.Entries()[before:]
	byID := map[string][]harness.TraceEntry{}
	var unattributed []harness.TraceEntry
	for _, e := range entries {
		switch {
		case harness.IsTraceSync(e), strings.HasPrefix(e.Path, "/minio/"):
		case e.RequestID == "":
			unattributed = append(unattributed, e)
		default:
			byID[e.RequestID] = append(byID[e.RequestID], e)
		}
	}

	rep := &diffReport{seed: seed, requests: len(reqs), routedAway: map[string]int{}, ops: map[string]int{}, refusals: map[string]int{}}
	seen := map[string]bool{}
	for i, o := range outcomes {
		o.id = w.front.id(i)
		if o.id == "" {
			o.id = w.logs.idOf(diffRemote(i))
		}
		o.op, _ = w.logs.op(o.id)
		o.calls = byID[o.id]
		seen[o.id] = true
		rep.ops[o.op]++
		rep.calls += len(o.calls)
		if len(o.calls) > 0 {
			rep.forwarded++
		}
		if o.op == diffRefused {
			rep.refused++
			code := "(no answer)"
			if o.resp != nil {
				code = fmt.Sprintf("%d %s", o.resp.status, o.resp.code)
			}
			rep.refusals[code]++
		}
		o.bad = diffCheckOutcome(o, rep.routedAway)
		for _, m := range o.bad {
			if notes := w.logs.notesOf(o.id); len(notes) > 0 {
				m += "\n    gateway log: " + strings.Join(notes, "\n    gateway log: ")
			}
			rep.mismatches = append(rep.mismatches, m)
		}
	}
	for id, es := range byID {
		if !seen[id] {
			for _, e := range es {
				rep.mismatches = append(rep.mismatches, fmt.Sprintf("MinIO executed %s for gateway request %s, which is none of the generated ones", e, id))
			}
		}
	}
	for _, e := range unattributed {
		rep.mismatches = append(rep.mismatches, fmt.Sprintf("MinIO executed %s without a %s header", e, harness.TraceRequestIDHeader))
	}
	rep.outcomes = outcomes
	rep.damage = w.checkProtected(entries, outcomes)
	rep.duration = time.Since(start)
	return rep
}

// checkProtected checks, on MinIO and in etcd, that the run changed no
// protected target. For a target that changed, it names the MinIO calls
// that acted on it.
func (w *diffWorld) checkProtected(entries []harness.TraceEntry, outcomes []*diffOutcome) []string {
	ctx := w.t.Context()
	var damage []string
	outcomeOf := map[string]*diffOutcome{}
	for _, o := range outcomes {
		outcomeOf[o.id] = o
	}
	// blame lists the mutating calls MinIO executed on p's object (as
	// sent, or as MinIO cleans it), and the DeleteObjects whose body
	// names it, with the requests they were made for.
	blame := func(p *diffProtected) string {
		var b strings.Builder
		for _, e := range entries {
			if !diffMutating[e.FuncName] {
				continue
			}
			dec, err := url.PathUnescape(e.Path)
			if err != nil {
				continue
			}
			onKey := strings.HasPrefix(dec, "/"+p.bucket+"/") && path.Clean("/"+strings.TrimPrefix(dec, "/"+p.bucket+"/")) == "/"+p.key
			inBody := e.FuncName == "s3.DeleteMultipleObjects" && dec == "/"+p.bucket && bytes.Contains(e.Body, []byte(path.Base(p.key)))
			if !onKey && !inBody {
				continue
			}
			fmt.Fprintf(&b, "\n    MinIO %s", e)
			if o := outcomeOf[e.RequestID]; o != nil {
				fmt.Fprintf(&b, " for %s, classified %s", o.req, o.op)
			} else {
				fmt.Fprintf(&b, " for gateway request %q", e.RequestID)
			}
		}
		return b.String()
	}
	for _, p := range []*diffProtected{w.refBlob, w.manifest, w.guardBlob} {
		obj, err := w.direct.GetObject(ctx, p.bucket, p.key, minio.GetObjectOptions{})
		var got []byte
		if err == nil {
			got, err = io.ReadAll(obj)
			obj.Close()
		}
		switch {
		case err != nil:
			damage = append(damage, fmt.Sprintf("%s %s/%s: %v%s", p.name, p.bucket, p.key, err, blame(p)))
		case !bytes.Equal(got, p.body):
			damage = append(damage, fmt.Sprintf("%s %s/%s: holds %q, want %q%s", p.name, p.bucket, p.key, got, p.body, blame(p)))
		}
	}
	if rec, err := w.store.GetRefSource(ctx, w.manifest.bucket, w.manifest.key); err != nil || !slices.Equal(rec.Value.Digests, []string{w.refDigest}) {
		damage = append(damage, fmt.Sprintf("manifest's reference record: %+v, %v; want digests [%s]", rec.Value, err, w.refDigest))
	}
	if ok, err := w.store.Referenced(ctx, w.guardDigest, time.Now()); err != nil || ok {
		damage = append(damage, fmt.Sprintf("guarded digest %s: referenced %v (%v), want not referenced", w.guardDigest, ok, err))
	}
	if g, err := w.store.Guarded(ctx, w.guardDigest); err != nil || !g {
		damage = append(damage, fmt.Sprintf("guarded digest %s: guard armed %v (%v)", w.guardDigest, g, err))
	}

	upload := &diffProtected{name: "owner's upload", bucket: diffRegBucket, key: diffUploadKey}
	core := minio.Core{Client: w.direct}
	res, err := core.ListObjectParts(ctx, diffRegBucket, diffUploadKey, w.uploadID, 0, 1000)
	switch {
	case err != nil:
		damage = append(damage, fmt.Sprintf("owner's upload %s: %v%s", w.uploadID, err, blame(upload)))
	case !slices.EqualFunc(res.ObjectParts, w.uploadParts, func(a, b minio.ObjectPart) bool {
		return a.PartNumber == b.PartNumber && a.ETag == b.ETag && a.Size == b.Size
	}):
		damage = append(damage, fmt.Sprintf("owner's upload %s: parts %+v, want %+v%s", w.uploadID, res.ObjectParts, w.uploadParts, blame(upload)))
	}
	sess, err := w.store.GetSession(ctx, diffRegBucket, w.uploadID)
	if err != nil || sess.Value.State != etcdstore.StateActive || sess.Value.Owner != diffOwner {
		damage = append(damage, fmt.Sprintf("owner's upload %s: session state %q owner %q (%v), want active, %s", w.uploadID, sess.Value.State, sess.Value.Owner, err, diffOwner))
	}
	return damage
}

// log prints a run's figures and, when there are any, its mismatches
// (the first 60 in full, then one line per kind).
func (rep *diffReport) log(t *testing.T) {
	t.Helper()
	t.Logf("differential run: seed %d (%s=%d to repeat), %d requests in %v: %d reached MinIO (%d calls), %d refused by the gateway, %d mismatches, %d protected targets changed",
		rep.seed, diffSeedEnv, rep.seed, rep.requests, rep.duration.Round(time.Millisecond), rep.forwarded, rep.calls, rep.refused, len(rep.mismatches), len(rep.damage))
	var ops []string
	for op, n := range rep.ops {
		ops = append(ops, fmt.Sprintf("%s %d", op, n))
	}
	sort.Strings(ops)
	t.Logf("operations: %s", strings.Join(ops, ", "))
	var refusals []string
	for code, n := range rep.refusals {
		refusals = append(refusals, fmt.Sprintf("%s %d", code, n))
	}
	sort.Strings(refusals)
	t.Logf("refusals: %s", strings.Join(refusals, ", "))
	if len(rep.routedAway) > 0 {
		var ra []string
		for op, n := range rep.routedAway {
			ra = append(ra, fmt.Sprintf("%s %d", op, n))
		}
		sort.Strings(ra)
		t.Logf("forwarded but refused by MinIO's router (NotImplemented, MethodNotAllowed; nothing executed): %s", strings.Join(ra, ", "))
	}
	for i, m := range rep.mismatches {
		if i == 60 {
			t.Logf("... and %d more mismatches", len(rep.mismatches)-60)
			break
		}
		t.Logf("MISMATCH %s", m)
	}
	for _, d := range rep.damage {
		t.Logf("PROTECTED TARGET CHANGED: %s", d)
	}
}

// diffFixed are requests every run sends first: the mix-ups the suite
// exists for, so that even a short run has them.
func (w *diffWorld) diffFixed() []*diffRequest {
	obj := func(method, bucket, key, rawQuery string, header http.Header, body []byte) *diffRequest {
		p := "/" + bucket + "/" + key
		if header == nil {
			header = http.Header{}
		}
		return &diffRequest{method: method, path: p, rawPath: escapePath(p), rawQuery: rawQuery, header: header, body: body, target: "fixed", shape: "canonical"}
	}
	deletes := func(bucket string, keys ...string) *diffRequest {
		var b strings.Builder
		b.WriteString("<Delete>")
		for _, k := range keys {
			fmt.Fprintf(&b, "<Object><Key>%s</Key></Object>", k)
		}
		b.WriteString("</Delete>")
		sum := md5.Sum([]byte(b.String()))
		q := &diffRequest{method: http.MethodPost, path: "/" + bucket, rawPath: "/" + bucket, rawQuery: "delete", body: []byte(b.String()),
			header: http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(sum[:])}}, target: "fixed", shape: "-"}
		for _, k := range keys {
			q.badBodyKey = q.badBodyKey || diffBadKey(k)
		}
		return q
	}
	up := url.QueryEscape(w.uploadID)
	mine := url.QueryEscape(w.mineID)
	copyHdr := http.Header{"X-Amz-Copy-Source": {"/" + diffPlainBucket + "/obj"}}
	return []*diffRequest{
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId="+up+"&tagging", nil, nil),
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId="+up+"&acl", nil, nil),
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId="+up, nil, nil),
		// An empty upload id names no upload to the gateway; MinIO's abort
		// of it removes every upload of the key.
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId=", nil, nil),
		obj(http.MethodPost, diffRegBucket, w.freeBlobKey, "uploadId=", nil,
			[]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag></Part></CompleteMultipartUpload>`)),
		obj(http.MethodDelete, diffPlainBucket, diffMineKey, "tagging&uploadId="+mine, nil, nil),
		obj(http.MethodDelete, diffPlainBucket, "gen/other", "uploadId="+mine+"&versionId=null", nil, nil),
		obj(http.MethodPut, diffRegBucket, w.manifest.key, "retention", copyHdr, nil),
		obj(http.MethodPut, diffRegBucket, w.manifest.key, "legal-hold", copyHdr, nil),
		obj(http.MethodPut, diffRegBucket, w.refBlob.key, "retention", copyHdr, nil),
		obj(http.MethodPost, diffRegBucket, diffUploadKey, "uploadId="+up+"&select&select-type=2", nil, nil),
		obj(http.MethodGet, diffRegBucket, w.guardBlob.key, "lambdaArn=arn%3Aminio%3As3-object-lambda%3A%3Afn%3Awebhook", nil, nil),
		deletes(diffRegBucket, "/"+w.refBlob.key),
		deletes(diffRegBucket, "blobs/./sha256/"+strings.TrimPrefix(w.refBlob.key, diffBlobPrefix)),
		deletes(diffPlainBucket, "/obj"),
		// MinIO cleans "gen/./wedge" to "gen/wedge" and then waits for its
		// own lock on that name: the request, and every later one on it,
		// hangs.
		deletes(diffPlainBucket, "gen/wedge", "gen/./wedge"),
	}
}

func TestDifferentialOneMeaning(t *testing.T) {
	w := newDiffWorld(t)
	seed := diffSeed(t)
	t.Logf("seed %d", seed)
	rep := w.run(seed, diffRuns(t), w.diffFixed())
	rep.log(t)
	if len(rep.mismatches) > 0 || len(rep.damage) > 0 {
		t.Errorf("%d mismatches (a call MinIO executed that the gateway's classification does not allow, a request MinIO saw that the gateway must refuse, or a request left unanswered), %d protected targets changed; %s=%d repeats this run", len(rep.mismatches), len(rep.damage), diffSeedEnv, seed)
	}
}

// TestDifferentialDetectsBrokenRow breaks one row of operationRules the
// way a plausible edit would (the AbortMultipartUpload row is gone and
// DeleteObject accepts uploadId, so DELETE ?uploadId= is classified
// DeleteObject while MinIO aborts the upload) and requires the suite to
// report it: as mismatches, and as the owner's upload aborted.
func TestDifferentialDetectsBrokenRow(t *testing.T) {
	saved := operationRules
	t.Cleanup(func() { operationRules = saved })
	var broken []operationRule
	for _, rule := range saved {
		switch rule.op {
		case OpAbortMultipartUpload:
			continue
		case OpDeleteObject:
			rule.params = append(slices.Clone(rule.params), "uploadId")
		}
		broken = append(broken, rule)
	}
	if len(broken) != len(saved)-1 {
		t.Fatalf("operationRules has no AbortMultipartUpload row to drop")
	}
	operationRules = broken

	w := newDiffWorld(t)
	rep := w.run(1, 300, w.diffFixed())
	rep.log(t)
	found := 0
	for _, o := range rep.outcomes {
		if o.op != string(OpDeleteObject) || len(o.bad) == 0 {
			continue
		}
		if slices.ContainsFunc(o.calls, func(c harness.TraceEntry) bool { return c.FuncName == "s3.AbortMultipartUpload" }) {
			found++
		}
	}
	if found == 0 {
		t.Errorf("no mismatch reported for a DeleteObject that MinIO executed as AbortMultipartUpload")
	}
	if !slices.ContainsFunc(rep.damage, func(d string) bool { return strings.HasPrefix(d, "owner's upload") }) {
		t.Errorf("the owner's upload was not reported changed; damage: %q", rep.damage)
	}
	t.Logf("the broken row was reported: %d DeleteObject requests executed as AbortMultipartUpload, %d mismatches in all, %d protected targets changed", found, len(rep.mismatches), len(rep.damage))
}

// diffMinIOHandlers are the S3 API handlers MinIO's router
// (cmd/api-router.go of the pinned MinIO) registers, as its trace names
// them.
var diffMinIOHandlers = strings.Fields(`
	s3.AbortMultipartUpload s3.CompleteMultipartUpload s3.CopyObject s3.CopyObjectPart s3.DeleteBucket
	s3.DeleteBucketCors s3.DeleteBucketEncryption s3.DeleteBucketLifecycle s3.DeleteBucketPolicy
	s3.DeleteBucketReplicationConfig s3.DeleteBucketTagging s3.DeleteBucketWebsite s3.DeleteMultipleObjects
	s3.DeleteObject s3.DeleteObjectTagging s3.GetBucketACL s3.GetBucketAccelerate s3.GetBucketCors
	s3.GetBucketEncryption s3.GetBucketLifecycle s3.GetBucketLocation s3.GetBucketLogging
	s3.GetBucketNotification s3.GetBucketObjectLockConfig s3.GetBucketPolicy s3.GetBucketPolicyStatus
	s3.GetBucketReplicationConfig s3.GetBucketReplicationMetrics s3.GetBucketReplicationMetricsV2
	s3.GetBucketRequestPayment s3.GetBucketTagging s3.GetBucketVersioning s3.GetBucketWebsite s3.GetObject
	s3.GetObjectACL s3.GetObjectAttributes s3.GetObjectLambda s3.GetObjectLegalHold s3.GetObjectRetention
	s3.GetObjectTagging s3.HeadBucket s3.HeadObject s3.ListBuckets s3.ListMultipartUploads s3.ListObjectParts
	s3.ListObjectVersions s3.ListObjectVersionsM s3.ListObjectsV1 s3.ListObjectsV2 s3.ListObjectsV2M
	s3.ListenNotification s3.NewMultipartUpload s3.PostPolicyBucket s3.PostRestoreObject s3.PutBucket
	s3.PutBucketACL s3.PutBucketCors s3.PutBucketEncryption s3.PutBucketLifecycle s3.PutBucketNotification
	s3.PutBucketObjectLockConfig s3.PutBucketPolicy s3.PutBucketReplicationConfig s3.PutBucketTagging
	s3.PutBucketVersioning s3.PutObject s3.PutObjectACL s3.PutObjectExtract s3.PutObjectLegalHold
	s3.PutObjectPart s3.PutObjectRetention s3.PutObjectTagging s3.ResetBucketReplicationStart
	s3.ResetBucketReplicationStatus s3.SelectObjectContent s3.ValidateBucketReplicationCreds
`)

// TestDifferentialOperationNames checks the suite's expectation table
// against operationRules without a backend: every operation the gateway
// serves, and every helper call listed, names a handler MinIO has, so that
// a new row fails here rather than as a flood of mismatches.
func TestDifferentialOperationNames(t *testing.T) {
	known := map[string]bool{}
	for _, h := range diffMinIOHandlers {
		known[strings.ToLower(h)] = true
	}
	for _, rule := range operationRules {
		for _, c := range diffOwnCalls(string(rule.op)) {
			if !known[strings.ToLower(c)] {
				t.Errorf("operation %s: MinIO has no handler %s; name its handler in diffOpCalls", rule.op, c)
			}
		}
	}
	for op, calls := range diffHelperCalls {
		for _, c := range calls {
			if !known[strings.ToLower(c)] {
				t.Errorf("helper call %s of %s: MinIO has no such handler", c, op)
			}
		}
	}
	for c := range diffMutating {
		if !known[strings.ToLower(c)] {
			t.Errorf("mutating call %s: MinIO has no such handler", c)
		}
	}
}
