//go:build e2e

package e2e

// The one-meaning tests' fixture: the referenced blob, bob's victim upload,
// the requests sent as bob, and the checks that the protection held.

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

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
		for n, p := range f.store.parts(t, f.bucket, f.victim.id) {
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
