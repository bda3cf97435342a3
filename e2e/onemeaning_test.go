//go:build e2e

package e2e

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The one-meaning tests send requests that the gateway and MinIO could read
// as two different operations, or on two different keys, and check that
// whatever the gateway lets through keeps the protection of what MinIO
// executes: a referenced blob is not deleted or overwritten, no blob key
// ends up with content that does not hash to its digest, and another
// principal's upload is neither listed to, changed, completed nor aborted
// by bob. Each request must be refused, or served without harm (MinIO's
// own error for a call it was asked for counts as served); which of the
// two is the gateway's choice, and each case says what came back and what
// reached MinIO when it fails.

// s3SubResources are the query parameters S3 defines as sub-resources: each
// turns a request on an object or a bucket into another call.
var s3SubResources = []string{
	"acl", "attributes", "legal-hold", "restore", "retention", "select", "tagging", "torrent",
	"accelerate", "analytics", "cors", "encryption", "intelligent-tiering", "inventory", "lifecycle",
	"logging", "metrics", "notification", "object-lock", "ownershipControls", "policy", "policyStatus",
	"publicAccessBlock", "replication", "requestPayment", "versioning", "website", "location",
	"versions", "events", "lambdaArn",
}

// omBlob is a content-addressed blob: its key names the SHA-256 of body.
type omBlob struct {
	key, hex string
	body     []byte
}

func newOMBlob(body []byte) omBlob {
	h := harness.SHA256Hex(body)
	return omBlob{key: "blobs/sha256/" + h, hex: h, body: body}
}

// omUpload is alice's multipart upload that bob attacks.
type omUpload struct {
	key, id string
	parts   []s3types.CompletedPart
	// etags are MinIO's parts of the upload, by number.
	etags map[int32]string
}

// omFixture is a gateway with a digest layout (blobs/sha256/ verified,
// manifests/ naming them) and sessions whose ownership is enforced, in
// front of a MinIO reached through a recording proxy; alice owns a
// referenced blob and an upload, bob attacks them.
type omFixture struct {
	e      *harness.Env
	proxy  *harness.FaultProxy
	store  *sessionStore
	hc     *http.Client
	direct *s3.Client
	alice  *s3.Client
	bucket string
	// ref is stored and named by a manifest; fresh is never stored, its
	// key names the digest of its body; wrong hashes to neither, and is a
	// well-formed tagging document, so that a call that reads it as one
	// (PutObjectTagging) is served rather than failing on it.
	ref, fresh omBlob
	wrong      []byte
	victim     omUpload
}

var omHexKey = regexp.MustCompile(`^blobs/sha256/([0-9a-f]{64})$`)

// startOneMeaning starts the gateway, stores alice's referenced blob, the
// manifest naming it and her upload, and checks that without tricks the
// protections hold: bob's DELETE of the blob is refused as referenced, his
// wrong body as a bad digest, and his part upload as not his.
func startOneMeaning(t *testing.T) *omFixture {
	t.Helper()
	bucket := harness.BucketName(t)
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{
		Credentials: []harness.Credential{secAlice, secBob},
		Config: map[string]any{
			"digests": map[string]any{
				"namespaces": []string{bucket + "/blobs/sha256/"},
				"sources":    []string{bucket + "/manifests/"},
			},
			"sessions": map[string]any{"enforce_ownership": true},
			"reclaim":  map[string]any{"interval": "1h"},
		},
	})
	hc := e.HTTPClient(t)
	// A redirect is an answer, not something to follow with another method.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	f := &omFixture{
		e: e, proxy: proxy, store: newSessionStore(t, e), hc: hc, direct: e.DirectSDK(t), bucket: bucket,
		alice: e.SDK(t, harness.WithCredentials(secAlice.AccessKey, secAlice.SecretKey)),
		ref:   newOMBlob([]byte(strings.Repeat("referenced layer of "+bucket+"; ", 40))),
		fresh: newOMBlob([]byte("a layer never stored, of " + bucket)),
		wrong: []byte("<Tagging><TagSet><Tag><Key>mallory</Key><Value>" + bucket + "</Value></Tag></TagSet></Tagging>"),
	}
	ctx := t.Context()
	if _, err := f.direct.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(f.ref.key), Body: bytes.NewReader(f.ref.body)}); err != nil {
		t.Fatalf("alice pushes the blob: %v", err)
	}
	manifest := `{"schemaVersion":2,"layers":[{"digest":"sha256:` + f.ref.hex + `"}]}`
	if _, err := f.alice.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/app/v1"), Body: strings.NewReader(manifest)}); err != nil {
		t.Fatalf("alice writes the manifest: %v", err)
	}
	f.victim = f.newVictim(t)

	f.bob(http.MethodDelete, f.ref.key, nil, nil).must(t, hc).requireError(t, http.StatusConflict, "BlobReferenced")
	f.bob(http.MethodPut, f.fresh.key, nil, f.wrong).must(t, hc).requireError(t, http.StatusBadRequest, "BadDigest")
	f.bob(http.MethodPut, f.victim.key, uploadQ(f.victim.id, "partNumber", "1"), f.wrong).must(t, hc).
		requireError(t, http.StatusForbidden, "AccessDenied")
	f.checkRef(t)
	f.checkNamespace(t)
	f.checkVictim(t)
	return f
}

// newVictim starts an upload of alice's with one part.
func (f *omFixture) newVictim(t *testing.T) omUpload {
	t.Helper()
	const key = "alice/upload.bin"
	id := createUpload(t, f.alice, f.bucket, key)
	d := harness.NewData(7801, 64*kib)
	part := mustUploadPart(t, f.alice, f.bucket, key, id, 1, d.Section(0, d.Size))
	return omUpload{key: key, id: id, parts: []s3types.CompletedPart{part}, etags: backendPartNumbers(t, f.direct, f.bucket, key, id)}
}

// bob returns a request on bucket/key signed by bob.
func (f *omFixture) bob(method, key string, q url.Values, body []byte, header ...string) rawCall {
	c := raw(f.e, method, f.bucket, key, q, body)
	c.accessKey, c.secretKey = secBob.AccessKey, secBob.SecretKey
	if len(header) > 0 {
		c.header = http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			c.header.Set(header[i], header[i+1])
		}
	}
	return c
}

// bobAt sends a request to the gateway on the escaped path (sent as it is,
// dot segments and encodings included) with the Host header host (the
// gateway's address when empty), signed by bob as S3 signs a path: its
// decoded form, escaped once (so %2F is signed as /), which is what the
// gateway and MinIO compute. A signature the gateway refuses would prove
// nothing about which key it reads.
func (f *omFixture) bobAt(t *testing.T, method, host, path string, body []byte) answer {
	t.Helper()
	r := newRequest(t, method, f.e.Endpoint+path, body)
	if host != "" {
		r.Host = host
	}
	written := r.URL.RawPath
	r.URL.RawPath = ""
	r = secSign(t, f.e, secBob, r, harness.SHA256Hex(body))
	r.URL.RawPath = written
	if got := r.URL.EscapedPath(); got != path {
		t.Fatalf("the path %s would go out as %s", path, got)
	}
	return f.send(t, r)
}

// sendAsBob signs r as bob, adds the unsigned headers, sends it and reads
// the answer.
func (f *omFixture) sendAsBob(t *testing.T, r *http.Request, unsigned http.Header) answer {
	t.Helper()
	r = secSign(t, f.e, secBob, r, harness.SHA256Hex(readBody(t, r)))
	for k, vs := range unsigned {
		r.Header[k] = append(r.Header[k], vs...)
	}
	return f.send(t, r)
}

// send sends r to the gateway as it is and reads the answer.
func (f *omFixture) send(t *testing.T, r *http.Request) answer {
	t.Helper()
	resp := do(t, f.hc, r)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// readBody returns a request's body without consuming it.
func readBody(t *testing.T, r *http.Request) []byte {
	t.Helper()
	if r.GetBody == nil {
		return nil
	}
	rc, err := r.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deleteDoc is a DeleteObjects document naming keys, as written (already
// XML-escaped), and its Content-MD5.
func deleteDoc(keys ...string) ([]byte, string) {
	var b strings.Builder
	b.WriteString("<Delete>")
	for _, k := range keys {
		b.WriteString("<Object><Key>" + k + "</Key></Object>")
	}
	b.WriteString("</Delete>")
	sum := md5.Sum([]byte(b.String()))
	return []byte(b.String()), base64.StdEncoding.EncodeToString(sum[:])
}

// get reads bucket/key on MinIO; found is false when there is no such key.
func (f *omFixture) get(t *testing.T, key string) (body []byte, found bool) {
	t.Helper()
	out, err := f.direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key)})
	if code := apiErrorCode(err); code == "NoSuchKey" || code == "NotFound" {
		return nil, false
	}
	if err != nil {
		t.Fatalf("GetObject %s on MinIO: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read %s on MinIO: %v", key, err)
	}
	return b, true
}

// checkRef checks on MinIO that the referenced blob holds its bytes. After
// reporting a failure it puts them back, so that the next case starts from
// the same state.
func (f *omFixture) checkRef(t *testing.T) {
	t.Helper()
	got, found := f.get(t, f.ref.key)
	switch {
	case !found:
		t.Errorf("the referenced blob %s is gone from MinIO", f.ref.key)
	case !bytes.Equal(got, f.ref.body):
		t.Errorf("the referenced blob %s holds other bytes on MinIO: %q", f.ref.key, excerptBytes(got))
	default:
		return
	}
	if _, err := f.direct.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(f.ref.key), Body: bytes.NewReader(f.ref.body)}); err != nil {
		t.Fatalf("restore the referenced blob: %v", err)
	}
}

// checkNamespace checks on MinIO that every key of the blob namespace holds
// content hashing to its digest. After reporting a failure it deletes what
// does not (and restores the referenced blob).
func (f *omFixture) checkNamespace(t *testing.T) {
	t.Helper()
	out, err := f.direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(f.bucket), Prefix: aws.String("blobs/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		key := aws.ToString(o.Key)
		m := omHexKey.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		got, found := f.get(t, key)
		if !found || harness.SHA256Hex(got) == m[1] {
			continue
		}
		t.Errorf("the blob key %s holds unverified content on MinIO: %q", key, excerptBytes(got))
		if key == f.ref.key {
			f.checkRef(t)
			continue
		}
		if _, err := f.direct.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
}

// omSession is what `sweepgate sessions show --json` prints of a session.
type omSession struct {
	Session struct {
		Owner     string `json:"owner"`
		State     string `json:"state"`
		PartCount int    `json:"part_count"`
		Parts     []struct {
			PartNumber int32  `json:"part_number"`
			ETag       string `json:"etag"`
		} `json:"parts"`
	} `json:"session"`
}

// sessionProblem compares a session document with alice's untouched upload:
// active, owned by alice, with exactly its parts. It returns "" when they
// agree.
func (f *omFixture) sessionProblem(doc []byte) string {
	var s omSession
	if err := json.Unmarshal(doc, &s); err != nil {
		return fmt.Sprintf("not a session document (%v): %s", err, doc)
	}
	etags := map[int32]string{}
	for _, p := range s.Session.Parts {
		etags[p.PartNumber] = unquoteETag(p.ETag)
	}
	if s.Session.State != "active" || s.Session.Owner != secAlice.Principal || s.Session.PartCount != len(f.victim.etags) || !maps.Equal(etags, f.victim.etags) {
		return fmt.Sprintf("state %q, owner %q, %d parts %v; want active, owned by %s, with parts %v",
			s.Session.State, s.Session.Owner, s.Session.PartCount, etags, secAlice.Principal, f.victim.etags)
	}
	return ""
}

// checkVictim checks alice's upload on MinIO (listed, with the same parts,
// not completed into an object) and its session in etcd (active, alice's,
// the same parts). After reporting a failure it starts a new
// upload for the next case.
func (f *omFixture) checkVictim(t *testing.T) {
	t.Helper()
	var problems []string
	out, err := f.direct.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(f.bucket), Key: aws.String(f.victim.key), UploadId: aws.String(f.victim.id)})
	if err != nil {
		problems = append(problems, fmt.Sprintf("MinIO lists no parts of it: %v", err))
	} else {
		etags := map[int32]string{}
		for _, p := range out.Parts {
			etags[aws.ToInt32(p.PartNumber)] = unquoteETag(aws.ToString(p.ETag))
		}
		if !maps.Equal(etags, f.victim.etags) {
			problems = append(problems, fmt.Sprintf("MinIO holds parts %v, want %v", etags, f.victim.etags))
		}
	}
	if _, found := f.get(t, f.victim.key); found {
		problems = append(problems, "MinIO holds an object at its key: it was completed")
		if _, err := f.direct.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(f.victim.key)}); err != nil {
			t.Fatal(err)
		}
	}
	if rec, _, _, found := f.store.lookup(t, f.bucket, f.victim.id); !found {
		problems = append(problems, "its session is gone from etcd")
	} else {
		etags := map[int32]string{}
		for n, p := range f.store.parts(t, f.victim.id) {
			etags[int32(n)] = unquoteETag(p.ETag)
		}
		if rec.State != "active" || rec.Owner != secAlice.Principal || !maps.Equal(etags, f.victim.etags) {
			problems = append(problems, fmt.Sprintf("its session in etcd: state %q, owner %q, parts %v; want active, owned by %s, with parts %v",
				rec.State, rec.Owner, etags, secAlice.Principal, f.victim.etags))
		}
	}
	if len(problems) == 0 {
		return
	}
	t.Errorf("alice's upload %s of %s was touched:\n  %s", f.victim.id, f.victim.key, strings.Join(problems, "\n  "))
	_, _ = f.direct.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{Bucket: aws.String(f.bucket), Key: aws.String(f.victim.key), UploadId: aws.String(f.victim.id)})
	f.victim = f.newVictim(t)
}

// checkListing checks that a listing answered to bob shows nothing of
// alice's upload.
func (f *omFixture) checkListing(t *testing.T, a answer) {
	t.Helper()
	if bytes.Contains(a.body, []byte(f.victim.id)) || bytes.Contains(a.body, []byte(f.victim.key)) {
		t.Errorf("bob was shown alice's upload %s of %s:\n%s", f.victim.id, f.victim.key, excerptBytes(a.body))
	}
}

// attempt runs one attack: send, then the case's checks. Any answer will
// do if the checks hold, but a server error the gateway made up without
// asking MinIO (other than NotImplemented) leaves unclear what it meant. A
// failing case logs the answer and every request MinIO received for it.
func (f *omFixture) attempt(t *testing.T, send func(t *testing.T) answer, checks ...func(t *testing.T, a answer)) {
	t.Helper()
	before := len(f.proxy.Requests())
	a := send(t)
	reached := f.proxy.Requests()[before:]
	if a.status >= 500 && a.status != http.StatusNotImplemented && len(reached) == 0 {
		t.Errorf("the gateway answered %d %s without asking MinIO; body:\n%s", a.status, a.errorCode(), excerptBytes(a.body))
	}
	for _, check := range checks {
		check(t, a)
	}
	if t.Failed() {
		t.Logf("the gateway answered %d %s; MinIO received:\n  %s", a.status, a.errorCode(), describeProxied(reached))
	}
}

// excerptBytes shortens a body for a message.
func excerptBytes(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "..."
	}
	return string(b)
}

// TestOneMeaningSubresources: every sub-resource S3 defines, added to a
// request the gateway protects — the DELETE or DeleteObjects of a
// referenced blob, a blob PUT whose body does not hash to its key (to a
// new key and over the referenced blob), and bob's ListMultipartUploads,
// UploadPart, CompleteMultipartUpload and AbortMultipartUpload on alice's
// upload — is refused or served with the protection intact. Afterwards,
// on MinIO, the referenced blob holds its bytes and alice's upload its
// part, her session (read with `sweepgate sessions show`) is active, and
// she completes the upload.
func TestOneMeaningSubresources(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	start := time.Now()
	sub := func(s string, q url.Values) url.Values {
		if q == nil {
			q = url.Values{}
		}
		q.Set(s, "")
		return q
	}
	targets := []struct {
		name  string
		send  func(t *testing.T, s string) answer
		check func(t *testing.T, a answer)
	}{
		{"DeleteObject of a referenced blob", func(t *testing.T, s string) answer {
			return f.bob(http.MethodDelete, f.ref.key, sub(s, nil), nil).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkRef(t) }},
		{"DeleteObjects naming a referenced blob", func(t *testing.T, s string) answer {
			doc, sum := deleteDoc(f.ref.key)
			return f.bob(http.MethodPost, "", sub(s, url.Values{"delete": {""}}), doc, "Content-MD5", sum).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkRef(t) }},
		{"PutObject of a blob with a wrong body", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPut, f.fresh.key, sub(s, nil), f.wrong).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkNamespace(t) }},
		{"PutObject over a referenced blob with a wrong body", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPut, f.ref.key, sub(s, nil), f.wrong).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) }},
		{"ListMultipartUploads by another principal", func(t *testing.T, s string) answer {
			return f.bob(http.MethodGet, "", sub(s, url.Values{"uploads": {""}}), nil).must(t, f.hc)
		}, func(t *testing.T, a answer) { f.checkListing(t, a); f.checkVictim(t) }},
		{"UploadPart on another principal's upload", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPut, f.victim.key, sub(s, uploadQ(f.victim.id, "partNumber", "1")), f.wrong).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkVictim(t) }},
		{"CompleteMultipartUpload of another principal's upload", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPost, f.victim.key, sub(s, uploadQ(f.victim.id)), completeXML(f.victim.parts...)).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkVictim(t) }},
		{"AbortMultipartUpload of another principal's upload", func(t *testing.T, s string) answer {
			return f.bob(http.MethodDelete, f.victim.key, sub(s, uploadQ(f.victim.id)), nil).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkVictim(t) }},
	}
	for _, s := range s3SubResources {
		t.Run(s, func(t *testing.T) {
			for _, tg := range targets {
				t.Run(tg.name, func(t *testing.T) {
					f.attempt(t, func(t *testing.T) answer { return tg.send(t, s) }, tg.check)
				})
			}
		})
	}
	t.Logf("%d sub-resources on %d targets in %v", len(s3SubResources), len(targets), time.Since(start).Round(time.Millisecond))

	t.Run("afterwards", func(t *testing.T) {
		if got, found := f.get(t, f.ref.key); !found || !bytes.Equal(got, f.ref.body) {
			t.Errorf("the referenced blob on MinIO: found %v, %d bytes; want its %d bytes", found, len(got), len(f.ref.body))
		}
		if ids := backendUploads(t, f.direct, f.bucket); !slices.Contains(ids, f.victim.id) {
			t.Errorf("MinIO lists uploads %v, not alice's %s", ids, f.victim.id)
		}
		if got := backendPartNumbers(t, f.direct, f.bucket, f.victim.key, f.victim.id); !maps.Equal(got, f.victim.etags) {
			t.Errorf("MinIO holds parts %v of alice's upload, want %v", got, f.victim.etags)
		}
		out := mustSweepgate(t, 0, f.e.Gateway.AdminEndpoint, "sessions", "show", f.bucket, f.victim.id, "--json")
		if p := f.sessionProblem([]byte(out)); p != "" {
			t.Errorf("sweepgate sessions show: %s", p)
		}
		if _, err := completeUpload(t.Context(), f.alice, f.bucket, f.victim.key, f.victim.id, f.victim.parts); err != nil {
			t.Fatalf("alice completes her upload: %v", err)
		}
		requireObject(t, f.direct, f.bucket, f.victim.key, harness.NewData(7801, 64*kib))
	})
}

// TestOneMeaningRewrittenKeys: paths MinIO may read as another key (empty
// and dot segments, in the bucket's place too, and their percent-encoded
// forms), DeleteObjects documents whose keys have such segments, and copy
// sources that reach an object of wrong content by such a path, aimed at
// the referenced blob or at a blob key never stored: each is refused or
// acts with the protection of the key MinIO acts on. The referenced blob
// keeps its bytes and no blob key gets content that does not hash to it.
func TestOneMeaningRewrittenKeys(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	b := f.bucket
	// paths spells /bucket/key in ways a backend that cleans paths reads
	// as /bucket/key; host, when set, addresses the bucket instead
	// (virtual-hosted style).
	vhost := b + ".localhost:" + fmt.Sprint(f.e.Gateway.Port())
	type spelling struct{ name, host, path string }
	paths := func(key string) []spelling {
		dir, base, _ := strings.Cut(key, "/")
		return []spelling{
			{"empty segment before the key", "", "/" + b + "//" + key},
			{"dot segment before the key", "", "/" + b + "/./" + key},
			{"dot-dot segment before the key", "", "/" + b + "/x/../" + key},
			{"dot segment in the key", "", "/" + b + "/" + dir + "/./" + base},
			{"dot-dot segment in the key", "", "/" + b + "/" + dir + "/x/../" + base},
			{"empty segment in the key", "", "/" + b + "/" + dir + "//" + base},
			{"trailing dot segment", "", "/" + b + "/" + key + "/."},
			{"dot segment before the bucket", "", "/./" + b + "/" + key},
			{"dot-dot segment before the bucket", "", "/x/../" + b + "/" + key},
			{"empty segment before the bucket", "", "//" + b + "/" + key},
			{"encoded slash before the key", "", "/" + b + "/%2F" + key},
			{"encoded dot segment", "", "/" + b + "/%2E/" + key},
			{"encoded dot-dot segment", "", "/" + b + "/x/%2E%2E/" + key},
			{"lower-case encoded dot-dot segment", "", "/" + b + "/x/%2e%2e/" + key},
			{"dot-dot between encoded slashes", "", "/" + b + "/x%2F..%2F" + key},
			{"all encoded", "", "/" + b + "/x%2F%2E%2E%2F" + key},
			{"encoded dot segment before the bucket", "", "/%2E/" + b + "/" + key},
			{"virtual-hosted, empty segment before the key", vhost, "//" + key},
			{"virtual-hosted, dot-dot segment before the key", vhost, "/x/../" + key},
			{"virtual-hosted, encoded slash before the key", vhost, "/%2F" + key},
		}
	}
	t.Run("path", func(t *testing.T) {
		for _, p := range paths(f.ref.key) {
			t.Run("DeleteObject of a referenced blob, "+p.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return f.bobAt(t, http.MethodDelete, p.host, p.path, nil) },
					func(t *testing.T, _ answer) { f.checkRef(t) })
			})
			t.Run("PutObject over a referenced blob with a wrong body, "+p.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return f.bobAt(t, http.MethodPut, p.host, p.path, f.wrong) },
					func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) })
			})
		}
		for _, p := range paths(f.fresh.key) {
			t.Run("PutObject of a blob with a wrong body, "+p.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return f.bobAt(t, http.MethodPut, p.host, p.path, f.wrong) },
					func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
		}
	})

	t.Run("DeleteObjects key", func(t *testing.T) {
		k, dir, base := f.ref.key, "blobs/sha256", f.ref.hex
		for _, tc := range []struct{ name, key string }{
			{"leading slash", "/" + k},
			{"two leading slashes", "//" + k},
			{"leading dot segment", "./" + k},
			{"leading dot-dot segment", "x/../" + k},
			{"dot segment in the key", "blobs/./sha256/" + base},
			{"dot-dot segment in the key", dir + "/../sha256/" + base},
			{"empty segment in the key", "blobs//sha256/" + base},
			{"trailing dot segment", k + "/."},
			{"dot-dot as XML character references", "x/&#46;&#46;/" + k},
			{"percent-encoded dot-dot", "x/%2E%2E/" + k},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					doc, sum := deleteDoc(tc.key)
					return f.bob(http.MethodPost, "", url.Values{"delete": {""}}, doc, "Content-MD5", sum).must(t, f.hc)
				}, func(t *testing.T, _ answer) { f.checkRef(t) })
			})
		}
	})

	t.Run("copy source", func(t *testing.T) {
		// The content a copy must not bring into a blob key, stored
		// directly on MinIO.
		const evil = "evil/obj"
		if _, err := f.direct.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(evil), Body: bytes.NewReader(f.wrong)}); err != nil {
			t.Fatal(err)
		}
		sources := []struct{ name, source string }{
			{"plain", "/" + b + "/" + evil},
			{"without a leading slash", b + "/" + evil},
			{"dot-dot segment", "/" + b + "/x/../" + evil},
			{"dot segment", "/" + b + "/./" + evil},
			{"empty segment", "/" + b + "//" + evil},
			{"dot segment in the key", "/" + b + "/evil/./obj"},
			{"encoded slash", "/" + b + "/evil%2Fobj"},
			{"dot-dot between encoded slashes", "/" + b + "/x%2F..%2F" + evil},
			{"encoded dot-dot segment", "/" + b + "/x/%2E%2E/" + evil},
			{"dot segment before the bucket", "/./" + b + "/" + evil},
			{"dot-dot segment before the bucket", "/x/../" + b + "/" + evil},
			{"through the destination's digest", "/" + b + "/blobs/sha256/" + f.fresh.hex + "/../../../" + evil},
			{"through the referenced digest", "/" + b + "/blobs/sha256/" + f.ref.hex + "/../../../" + evil},
			{"through the referenced digest, encoded", "/" + b + "/blobs/sha256/" + f.ref.hex + "%2F..%2F..%2F..%2F" + evil},
		}
		for _, src := range sources {
			t.Run("CopyObject onto a referenced blob, "+src.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return f.bob(http.MethodPut, f.ref.key, nil, nil, "X-Amz-Copy-Source", src.source).must(t, f.hc)
				}, func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) })
			})
			t.Run("CopyObject onto a new blob key, "+src.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return f.bob(http.MethodPut, f.fresh.key, nil, nil, "X-Amz-Copy-Source", src.source).must(t, f.hc)
				}, func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
		}
	})

	t.Run("afterwards", func(t *testing.T) {
		if got, found := f.get(t, f.ref.key); !found || !bytes.Equal(got, f.ref.body) {
			t.Errorf("the referenced blob on MinIO: found %v, %d bytes; want its %d bytes", found, len(got), len(f.ref.body))
		}
		f.checkNamespace(t)
	})
}

// TestOneMeaningHopByHop: a request that names one of its end-to-end
// headers in Connection (x-amz-copy-source, content-length,
// x-amz-content-sha256, host), so that a proxy drops that header on the
// way to MinIO, is refused or executed as exactly what MinIO sees. The
// attack: a PUT with a body and a signed x-amz-copy-source of content that
// matches the blob key, which the gateway could verify as a copy while
// MinIO stores the body.
func TestOneMeaningHopByHop(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	// Objects holding the right content for each destination, stored
	// directly: a copy from them is legitimate.
	for key, body := range map[string][]byte{"src/fresh": f.fresh.body, "src/ref": f.ref.body} {
		if _, err := f.direct.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	// put sends bob's PUT of body to key with the (signed) headers and
	// unsigned Connection headers, one line each. net/http sends them as
	// written.
	put := func(t *testing.T, key string, body []byte, connection []string, header ...string) answer {
		r := newRequest(t, http.MethodPut, objectURL(f.e.Endpoint, f.bucket, key), body)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return f.sendAsBob(t, r, http.Header{"Connection": connection})
	}
	for _, connection := range [][]string{
		{"x-amz-copy-source"}, {"X-Amz-Copy-Source"}, {"close, x-amz-copy-source"}, {"keep-alive,x-amz-copy-source"},
		{"keep-alive", "x-amz-copy-source"},
		{"content-length"}, {"x-amz-content-sha256"}, {"host"},
	} {
		t.Run("Connection: "+strings.Join(connection, " + "), func(t *testing.T) {
			t.Run("copy onto a new blob key with a wrong body", func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return put(t, f.fresh.key, f.wrong, connection, "X-Amz-Copy-Source", "/"+f.bucket+"/src/fresh")
				}, func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
			t.Run("copy onto a referenced blob with a wrong body", func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return put(t, f.ref.key, f.wrong, connection, "X-Amz-Copy-Source", "/"+f.bucket+"/src/ref")
				}, func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) })
			})
			t.Run("PutObject of a blob with a wrong body", func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return put(t, f.fresh.key, f.wrong, connection) },
					func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
		})
	}
	t.Run("afterwards", func(t *testing.T) {
		f.checkRef(t)
		f.checkNamespace(t)
	})
}

// TestOneMeaningPostPolicy: a browser-form upload (a multipart/form-data
// POST to the bucket with a policy signed by valid credentials, which MinIO
// would store) is refused with an S3 error that says what is not served,
// whoever signed it, and nothing is stored.
func TestOneMeaningPostPolicy(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	for _, tc := range []struct {
		name string
		cred harness.Credential
		key  string
		// path is where the form goes; contentType its media type as sent.
		path, contentType string
	}{
		{"a blob key, signed with the backend's credentials", envCred(f.e), f.fresh.key, "/" + f.bucket + "/", "multipart/form-data"},
		{"a blob key, signed by alice", secAlice, f.fresh.key, "/" + f.bucket + "/", "multipart/form-data"},
		{"another key, signed with the backend's credentials", envCred(f.e), "forms/upload.txt", "/" + f.bucket, "multipart/form-data"},
		{"another key, media type in capitals", envCred(f.e), "forms/upload.txt", "/" + f.bucket + "/", "Multipart/Form-Data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := f.e.MinioGo(t, harness.WithCredentials(tc.cred.AccessKey, tc.cred.SecretKey))
			policy := minio.NewPostPolicy()
			for _, err := range []error{policy.SetBucket(f.bucket), policy.SetKey(tc.key), policy.SetExpires(time.Now().Add(time.Hour))} {
				if err != nil {
					t.Fatal(err)
				}
			}
			_, form, err := mc.PresignedPostPolicy(t.Context(), policy)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			w := multipart.NewWriter(&body)
			for _, k := range slices.Sorted(maps.Keys(form)) {
				if err := w.WriteField(k, form[k]); err != nil {
					t.Fatal(err)
				}
			}
			part, err := w.CreateFormFile("file", "upload.bin")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := part.Write(f.wrong); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			before := len(f.proxy.Requests())
			req := newRequest(t, http.MethodPost, f.e.Endpoint+tc.path, body.Bytes())
			req.Header.Set("Content-Type", tc.contentType+"; boundary="+w.Boundary())
			resp := do(t, f.hc, req)
			e, raw, err := harness.ReadS3Error(resp)
			switch {
			case err != nil:
				t.Errorf("%s: not an S3 error (%v); body:\n%s", resp.Status, err, raw)
			case resp.StatusCode < 400 || (resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented):
				t.Errorf("%s %s (%s): want a refusal", resp.Status, e.Code, e.Message)
			case !strings.Contains(strings.ToLower(e.Message), "post") && !strings.Contains(strings.ToLower(e.Message), "form"):
				t.Errorf("%d %s (%s): the error does not say that form uploads are not served", resp.StatusCode, e.Code, e.Message)
			default:
				t.Logf("%d %s: %s", resp.StatusCode, e.Code, e.Message)
			}
			if resp.Header.Get("X-Amz-Request-Id") == "" {
				t.Errorf("%s without an X-Amz-Request-Id", resp.Status)
			}
			if _, found := f.get(t, tc.key); found {
				t.Errorf("MinIO stored %s from the form", tc.key)
			}
			if got := slices.DeleteFunc(f.proxy.Requests()[before:], func(r harness.ProxiedRequest) bool {
				return r.Method != http.MethodPost || !strings.HasPrefix(r.Path, "/"+f.bucket)
			}); len(got) != 0 {
				t.Errorf("the form upload reached MinIO:\n  %s", describeProxied(got))
			}
		})
	}
	f.checkNamespace(t)
}
