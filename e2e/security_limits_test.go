//go:build e2e

package e2e

// Security: oversized requests are refused before the gateway reads them.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestSecurityLimits: requests over a limit are refused from their headers,
// before the gateway reads the body, records anything or asks MinIO: a
// header block of a megabyte, a part or object over 5 GiB, a
// CompleteMultipartUpload or DeleteObjects document over its size, and a
// write into a digest reference source over its parse limit.
func TestSecurityLimits(t *testing.T) {
	t.Parallel()
	bucket := harness.BucketName(t)
	const maxRef = 64 * kib
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"namespaces": []string{bucket + "/blobs/sha256/"},
			"sources":    []string{bucket + "/manifests/"},
			"max_body":   maxRef,
		},
	}})
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	hc := e.HTTPClient(t)
	cred := envCred(e)
	ctx := t.Context()
	if _, err := direct.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	signedHead := func(t *testing.T, method, target string, n int64, header ...string) []byte {
		return signedWireHead(t, e, cred, method, target, n, header...)
	}
	reached := func(match func(harness.ProxiedRequest) bool) []harness.ProxiedRequest { return proxy.Find(match) }

	t.Run("header block", func(t *testing.T) {
		many := []byte("GET /" + bucket + " HTTP/1.1\r\nHost: " + e.Gateway.Addr() + "\r\n")
		for i := range 1024 {
			many = fmt.Appendf(many, "X-Filler-%04d: %s\r\n", i, strings.Repeat("f", 1000))
		}
		many = append(many, "\r\n"...)
		long := []byte("GET /" + bucket + " HTTP/1.1\r\nHost: " + e.Gateway.Addr() + "\r\nX-Long: " + strings.Repeat("l", mib) + "\r\n\r\n")
		for _, tc := range []struct {
			name, addr string
			head       []byte
		}{
			{"S3, a thousand headers", e.Gateway.Addr(), many},
			{"S3, one header of a megabyte", e.Gateway.Addr(), long},
			{"admin listener", strings.TrimPrefix(e.Gateway.AdminEndpoint, "http://"), many},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := exchange(t, tc.addr, tc.head, nil)
				if a.status != http.StatusRequestHeaderFieldsTooLarge && a.status != http.StatusBadRequest {
					t.Fatalf("got %d, want 431 or 400; body:\n%s", a.status, a.body)
				}
				requireWireRefusal(t, a, a.status, "")
			})
		}
		if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("the gateway after the header floods: %v", err)
		}
	})

	t.Run("CompleteMultipartUpload body", func(t *testing.T) {
		key := "limits/complete"
		id := createUpload(t, c, bucket, key)
		part := mustUploadPart(t, c, bucket, key, id, 1, harness.NewData(7401, kib).Section(0, kib))
		before := store.dump(t)
		// A well-formed start, then parts past the 4 MiB the gateway
		// reads; the request announces 64 MiB and sends a little over 4.
		doc := []byte("<CompleteMultipartUpload>")
		for len(doc) < 4*mib+64*kib {
			doc = fmt.Appendf(doc, "<Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>", aws.ToString(part.ETag))
		}
		head := signedHead(t, http.MethodPost, objectURL(e.Endpoint, bucket, key)+"?uploadId="+url.QueryEscape(id), 64*mib)
		a := exchange(t, e.Gateway.Addr(), head, doc)
		requireWireRefusal(t, a, http.StatusBadRequest, "MaxMessageLengthExceeded")
		requireUnchanged(t, "an oversized complete", before, store.dump(t))
		if got := reached(harness.MatchUpload(http.MethodPost, id)); len(got) != 0 {
			t.Fatalf("the oversized complete reached MinIO:\n  %s", describeProxied(got))
		}
		// The upload is unharmed.
		if _, err := completeUpload(ctx, c, bucket, key, id, []s3types.CompletedPart{part}); err != nil {
			t.Fatalf("complete after the oversized one: %v", err)
		}
	})

	t.Run("part or object over 5 GiB", func(t *testing.T) { limitsOver5GiB(t, e, c, direct, store, proxy, signedHead, bucket) })

	t.Run("DeleteObjects body", func(t *testing.T) { limitsDeleteObjects(t, e, direct, hc, proxy, signedHead, bucket) })

	t.Run("reference object over the parse limit", func(t *testing.T) { limitsReferenceObject(t, e, c, direct, proxy, signedHead, bucket, maxRef) })
}

// limitsOver5GiB checks that a part or an object declaring more than 5 GiB
// is refused with EntityTooLarge before a byte of it is read.
func limitsOver5GiB(t *testing.T, e *harness.Env, c, direct *s3.Client, store *sessionStore, proxy *harness.FaultProxy, signedHead headSigner, bucket string) {
	cred := envCred(e)
	key := "limits/huge"
	id := createUpload(t, c, bucket, key)
	const size = 5<<30 + 1
	target := objectURL(e.Endpoint, bucket, key)
	presignedPut := func(t *testing.T) []byte {
		r := newRequest(t, http.MethodPut, secPresign(t, e, cred, http.MethodPut, target, time.Now(), time.Hour), nil)
		return wireHead(r, size)
	}
	for _, tc := range []struct {
		name string
		head func(t *testing.T) []byte
	}{
		{"UploadPart", func(t *testing.T) []byte {
			return signedHead(t, http.MethodPut, target+"?partNumber=1&uploadId="+url.QueryEscape(id), size)
		}},
		{"UploadPart of 6 GiB", func(t *testing.T) []byte {
			return signedHead(t, http.MethodPut, target+"?partNumber=2&uploadId="+url.QueryEscape(id), 6<<30)
		}},
		{"UploadPart, signed chunks", func(t *testing.T) []byte {
			return signedHead(t, http.MethodPut, target+"?partNumber=3&uploadId="+url.QueryEscape(id), size+64*mib,
				"X-Amz-Content-Sha256", harness.StreamingSigned, "Content-Encoding", "aws-chunked",
				"X-Amz-Decoded-Content-Length", fmt.Sprint(int64(size)))
		}},
		{"PutObject", func(t *testing.T) []byte { return signedHead(t, http.MethodPut, target, size) }},
		{"PutObject, presigned", presignedPut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := store.dump(t)
			a := exchange(t, e.Gateway.Addr(), tc.head(t), nil)
			requireWireRefusal(t, a, http.StatusBadRequest, "EntityTooLarge")
			requireUnchanged(t, "an oversized upload", before, store.dump(t))
			if got := proxy.Find(func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPut && r.Path == "/"+bucket+"/"+key }); len(got) != 0 {
				t.Fatalf("the oversized upload reached MinIO:\n  %s", describeProxied(got))
			}
		})
	}
	requireAbsent(t, direct, bucket, key)
	if got := backendPartNumbers(t, direct, bucket, key, id); len(got) != 0 {
		t.Fatalf("MinIO holds parts %v", got)
	}
}

// limitsDeleteObjects checks that an oversized DeleteObjects document is
// refused before it is read, and reaches MinIO not at all.
func limitsDeleteObjects(t *testing.T, e *harness.Env, direct *s3.Client, hc *http.Client, proxy *harness.FaultProxy, signedHead headSigner, bucket string) {
	cred := envCred(e)
	kept := harness.NewData(7402, 100)
	for _, k := range []string{"limits/keep-1", "limits/keep-2"} {
		putData(t, direct, bucket, k, kept)
	}
	doc := []byte("<Delete>")
	for len(doc) < 2*mib+64*kib {
		doc = append(doc, "<Object><Key>limits/keep-1</Key></Object>"...)
	}
	head := signedHead(t, http.MethodPost, objectURL(e.Endpoint, bucket, "")+"?delete=", 64*mib)
	a := exchange(t, e.Gateway.Addr(), head, doc)
	requireWireRefusal(t, a, http.StatusBadRequest, "MaxMessageLengthExceeded")

	// Over 1000 keys in a small document.
	var b strings.Builder
	b.WriteString("<Delete>")
	for i := range 1001 {
		fmt.Fprintf(&b, "<Object><Key>limits/keep-%d</Key></Object>", i%2+1)
	}
	b.WriteString("</Delete>")
	many := []byte(b.String())
	r := secSign(t, e, cred, newRequest(t, http.MethodPost, objectURL(e.Endpoint, bucket, "")+"?delete=", many), harness.SHA256Hex(many))
	requireS3Error(t, do(t, hc, r), http.StatusBadRequest, "MalformedXML")

	for _, k := range []string{"limits/keep-1", "limits/keep-2"} {
		requireObject(t, direct, bucket, k, kept)
	}
	if got := proxy.Find(func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPost && r.Query.Has("delete") }); len(got) != 0 {
		t.Fatalf("a refused DeleteObjects reached MinIO:\n  %s", describeProxied(got))
	}
}

// limitsReferenceObject checks that a reference object over maxRef bytes is
// refused however it is written (PUT, announced, assembled from parts,
// copied) and never reaches MinIO, and that one at the limit is served.
func limitsReferenceObject(t *testing.T, e *harness.Env, c, direct *s3.Client, proxy *harness.FaultProxy, signedHead headSigner, bucket string, maxRef int) {
	ctx := t.Context()
	// A manifest naming a digest, padded past max_body.
	ref := func(n int) []byte {
		b := []byte(`{"layers":[{"digest":"sha256:` + strings.Repeat("ab", 32) + `"}],"pad":"`)
		b = append(b, bytes.Repeat([]byte("p"), n-len(b)-2)...)
		return append(b, `"}`...)
	}
	over := ref(maxRef + 1)
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/over"), Body: bytes.NewReader(over)})
	requireAPIError(t, err, "EntityTooLarge")
	requireAbsent(t, direct, bucket, "manifests/over")

	// Announced, not sent: refused from the headers.
	a := exchange(t, e.Gateway.Addr(), signedHead(t, http.MethodPut, objectURL(e.Endpoint, bucket, "manifests/announced"), 1<<30), nil)
	requireWireRefusal(t, a, http.StatusBadRequest, "EntityTooLarge")
	requireAbsent(t, direct, bucket, "manifests/announced")

	// Assembled from parts, or copied from a large object.
	id := createUpload(t, c, bucket, "manifests/assembled")
	part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("manifests/assembled"), UploadId: aws.String(id),
		PartNumber: aws.Int32(1), Body: bytes.NewReader(over), ContentLength: aws.Int64(int64(len(over)))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = completeUpload(ctx, c, bucket, "manifests/assembled", id, []s3types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}})
	requireAPIError(t, err, "EntityTooLarge")
	requireAbsent(t, direct, bucket, "manifests/assembled")

	if _, err := direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("limits/large-source"), Body: bytes.NewReader(over)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/copied"), CopySource: aws.String(bucket + "/limits/large-source")})
	requireAPIError(t, err, "EntityTooLarge")
	requireAbsent(t, direct, bucket, "manifests/copied")

	if got := proxy.Find(func(r harness.ProxiedRequest) bool {
		return r.Method != http.MethodGet && r.Method != http.MethodHead && strings.HasPrefix(r.Path, "/"+bucket+"/manifests/") &&
			!r.Query.Has("uploads") && !r.Query.Has("partNumber")
	}); len(got) != 0 {
		t.Fatalf("refused reference writes reached MinIO:\n  %s", describeProxied(got))
	}
	// At the limit, it is served.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/at-limit"), Body: bytes.NewReader(ref(maxRef))}); err != nil {
		t.Fatalf("a reference object at the parse limit: %v", err)
	}
}

// headSigner signs a request announcing n body bytes and renders its head:
// see signedWireHead.
type headSigner func(t *testing.T, method, target string, n int64, header ...string) []byte

// signedWireHead signs a request for target announcing n body bytes, with
// the header's name-value pairs set, as cred (with the payload unsigned,
// as the body is never sent whole, unless header sets its hash) and
// renders its head.
func signedWireHead(t *testing.T, e *harness.Env, cred harness.Credential, method, target string, n int64, header ...string) []byte {
	r := newRequest(t, method, target, nil)
	r.ContentLength = n
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if hash == "" {
		hash = harness.UnsignedPayload
	}
	return wireHead(secSign(t, e, cred, r, hash), n)
}
