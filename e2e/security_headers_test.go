//go:build e2e

package e2e

// Security: nothing unsigned rides along on a signed request.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestSecuritySmuggledHeaders: headers added to a signed request after
// signing (or to a presigned URL) are refused, whether S3's (x-amz-*) or the
// backend's own (x-minio-*), and so are changed signed headers, a changed
// Host, a query added after signing, and requests whose framing is
// ambiguous (two Hosts, two Content-Lengths). None of them reaches MinIO
// and nothing changes there.
func TestSecuritySmuggledHeaders(t *testing.T) {
	t.Parallel()
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{})
	hc := e.HTTPClient(t)
	direct := e.DirectSDK(t)
	cred := envCred(e)
	bucket, private := e.Bucket(t), e.Bucket(t)
	objects := map[string]harness.Data{}
	for i, k := range []string{"existing", "dir/x", "dir/y"} {
		objects[k] = harness.NewData(uint64(7200+i), 3*kib)
		putData(t, direct, bucket, k, objects[k])
	}
	secret := harness.NewData(7210, 5*kib)
	putData(t, direct, private, "secret", secret)

	requireUntouched := func(t *testing.T) {
		t.Helper()
		requireSmuggleUntouched(t, direct, bucket, private, objects, secret)
	}

	sm := smuggler{e: e, cred: cred, bucket: bucket, body: harness.NewData(7220, 4*kib).Bytes()}
	body, put, del, presigned := sm.body, sm.put, sm.del, sm.presigned
	cases := smuggleCases(sm, private)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireS3Error(t, do(t, hc, tc.req(t)), tc.status, tc.code)
			requireUntouched(t)
			if got := proxiedTo(proxy, bucket, private); len(got) != 0 {
				t.Fatalf("refused requests reached MinIO:\n  %s", describeProxied(got))
			}
		})
	}

	// Framing that two parsers could read two ways is refused before
	// anything is forwarded, and the connection is closed.
	wire := func(t *testing.T, n int64, extra []string, b []byte) wireAnswer {
		r := secSign(t, e, cred, newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "framed"), []byte("hello")), harness.SHA256Hex([]byte("hello")))
		head := wireHead(r, n, extra...)
		if len(head)+len(b) > 4096 {
			// exchange's one write is read whole by the gateway only up
			// to 4 KiB; a longer request could be answered with a RST.
			t.Fatalf("the request is %d bytes, over the 4 KiB the gateway's first read takes", len(head)+len(b))
		}
		return exchange(t, e.Gateway.Addr(), head, b)
	}
	t.Run("two Host headers", func(t *testing.T) {
		requireWireRefusal(t, wire(t, 5, []string{"Host: " + private + ".localhost"}, []byte("hello")), http.StatusBadRequest, "")
	})
	t.Run("two Content-Lengths", func(t *testing.T) {
		requireWireRefusal(t, wire(t, 5, []string{"Content-Length: 6"}, []byte("hello!")), http.StatusBadRequest, "")
	})
	t.Run("Content-Length and chunked", func(t *testing.T) {
		a := wire(t, 5, []string{"Transfer-Encoding: chunked"}, []byte("5\r\nhello\r\n0\r\n\r\n"))
		if a.status < 400 || a.status >= 500 {
			t.Fatalf("got %d %q, want a refusal; body:\n%s", a.status, a.code(), a.body)
		}
	})
	t.Run("nothing changed", func(t *testing.T) {
		requireUntouched(t)
		if got := proxiedTo(proxy, bucket, private); len(got) != 0 {
			t.Fatalf("refused requests reached MinIO:\n  %s", describeProxied(got))
		}
	})

	// The same requests, signed as they are sent, are served: the
	// refusals above are about what was added or changed.
	t.Run("controls", func(t *testing.T) {
		requireStatus(t, do(t, hc, put(t, "control/meta", "X-Amz-Meta-Role", "reader")), http.StatusOK)
		requireStatus(t, do(t, hc, presigned(t, http.MethodPut, "control/presigned", body)), http.StatusOK)
		requireStatus(t, do(t, hc, del(t, "dir")), http.StatusNoContent)
		for _, k := range []string{"dir/x", "dir/y"} {
			requireObject(t, direct, bucket, k, objects[k])
		}
	})
}

// requireSmuggleUntouched checks that bucket holds just objects, unchanged
// and without uploads, and private just the secret.
func requireSmuggleUntouched(t *testing.T, direct *s3.Client, bucket, private string, objects map[string]harness.Data, secret harness.Data) {
	t.Helper()
	out, err := direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if want := slices.Sorted(maps.Keys(objects)); !slices.Equal(keys, want) {
		t.Fatalf("the bucket holds %v, want %v", keys, want)
	}
	for k, d := range objects {
		requireObject(t, direct, bucket, k, d)
		head, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		if len(head.Metadata) != 0 || head.ServerSideEncryption != "" || head.WebsiteRedirectLocation != nil || aws.ToInt32(head.TagCount) != 0 {
			t.Fatalf("%s changed: metadata %v, SSE %q, redirect %v, tags %d", k, head.Metadata, head.ServerSideEncryption,
				aws.ToString(head.WebsiteRedirectLocation), aws.ToInt32(head.TagCount))
		}
	}
	requireNoUploads(t, direct, bucket)
	out, err = direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(private)})
	if err != nil || len(out.Contents) != 1 {
		t.Fatalf("the private bucket: %v, %d objects, want just the secret", err, len(out.Contents))
	}
	requireObject(t, direct, private, "secret", secret)
}

// smuggler builds TestSecuritySmuggledHeaders' requests on bucket, signed
// as cred; the PUTs carry body.
type smuggler struct {
	e      *harness.Env
	cred   harness.Credential
	bucket string
	body   []byte
}

// put is a PUT of key, with the name-value pairs signedHeaders set before
// it is signed.
func (sm smuggler) put(t *testing.T, key string, signedHeaders ...string) *http.Request {
	r := newRequest(t, http.MethodPut, objectURL(sm.e.Endpoint, sm.bucket, key), sm.body)
	for i := 0; i+1 < len(signedHeaders); i += 2 {
		r.Header.Set(signedHeaders[i], signedHeaders[i+1])
	}
	return secSign(t, sm.e, sm.cred, r, harness.SHA256Hex(sm.body))
}

// del is a signed DELETE of key.
func (sm smuggler) del(t *testing.T, key string) *http.Request {
	return secSign(t, sm.e, sm.cred, newRequest(t, http.MethodDelete, objectURL(sm.e.Endpoint, sm.bucket, key), nil), harness.EmptySHA256)
}

// presigned is a request of method on key through a presigned URL, with
// body b.
func (sm smuggler) presigned(t *testing.T, method, key string, b []byte) *http.Request {
	return newRequest(t, method, secPresign(t, sm.e, sm.cred, method, objectURL(sm.e.Endpoint, sm.bucket, key), time.Now(), time.Hour), b)
}

// smuggle is a signed request with something added or changed after it was
// signed, and the refusal it must get.
type smuggle struct {
	name   string
	req    func(t *testing.T) *http.Request
	status int
	code   string
}

// smuggleCases are the requests of sm's with something smuggled in: headers
// added after the signature (a copy source from private among them), and
// the query or path changed.
func smuggleCases(sm smuggler, private string) []smuggle {
	e, cred, bucket := sm.e, sm.cred, sm.bucket
	adding := func(build func(t *testing.T) *http.Request, kv ...string) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			r := build(t)
			for i := 0; i+1 < len(kv); i += 2 {
				r.Header.Add(kv[i], kv[i+1])
			}
			return r
		}
	}
	putNew := func(t *testing.T) *http.Request { return sm.put(t, "smuggled") }
	putExisting := func(t *testing.T) *http.Request { return sm.put(t, "existing") }
	copyShaped := func(t *testing.T) *http.Request {
		return secSign(t, e, cred, newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "copied"), nil), harness.EmptySHA256)
	}
	copySource := "/" + private + "/secret"

	return []smuggle{
		// S3's own headers, added after a header signature.
		{"x-amz-copy-source added to a PUT", adding(putNew, "X-Amz-Copy-Source", copySource), 403, "AccessDenied"},
		{"x-amz-copy-source added to an empty PUT", adding(copyShaped, "X-Amz-Copy-Source", copySource), 403, "AccessDenied"},
		{"x-amz-acl added", adding(putExisting, "X-Amz-Acl", "public-read-write"), 403, "AccessDenied"},
		{"x-amz-grant-full-control added", adding(putExisting, "X-Amz-Grant-Full-Control", `id="mallory"`), 403, "AccessDenied"},
		{"x-amz-meta-* added", adding(putExisting, "X-Amz-Meta-Role", "admin"), 403, "AccessDenied"},
		{"x-amz-server-side-encryption added", adding(putExisting, "X-Amz-Server-Side-Encryption", "AES256"), 403, "AccessDenied"},
		{"x-amz-tagging added", adding(putExisting, "X-Amz-Tagging", "owner=mallory"), 403, "AccessDenied"},
		{"x-amz-website-redirect-location added", adding(putExisting, "X-Amz-Website-Redirect-Location", "https://evil.example/"), 403, "AccessDenied"},
		{"x-amz-storage-class added", adding(putExisting, "X-Amz-Storage-Class", "REDUCED_REDUNDANCY"), 403, "AccessDenied"},
		// MinIO unpacks a tar PUT with this into many objects.
		{"x-amz-meta-snowball-auto-extract added", adding(putNew, "X-Amz-Meta-Snowball-Auto-Extract", "true"), 403, "AccessDenied"},
		{"x-amz-bypass-governance-retention added to a DELETE", adding(func(t *testing.T) *http.Request { return sm.del(t, "existing") },
			"X-Amz-Bypass-Governance-Retention", "true"), 403, "AccessDenied"},
		// MinIO's own: with the gateway's credentials, x-minio-force-delete
		// turns the DELETE of "dir" into the delete of everything under
		// dir/.
		{"x-minio-force-delete added to a DELETE", adding(func(t *testing.T) *http.Request { return sm.del(t, "dir") },
			"X-Minio-Force-Delete", "true"), 403, "AccessDenied"},
		// The same on presigned URLs, which are handed to others.
		{"x-minio-force-delete added to a presigned DELETE", adding(func(t *testing.T) *http.Request { return sm.presigned(t, http.MethodDelete, "dir", nil) },
			"X-Minio-Force-Delete", "true"), 403, "AccessDenied"},
		{"x-amz-copy-source added to a presigned PUT", adding(func(t *testing.T) *http.Request { return sm.presigned(t, http.MethodPut, "copied", nil) },
			"X-Amz-Copy-Source", copySource), 403, "AccessDenied"},
		{"x-amz-acl added to a presigned PUT", adding(func(t *testing.T) *http.Request { return sm.presigned(t, http.MethodPut, "existing", sm.body) },
			"X-Amz-Acl", "public-read"), 403, "AccessDenied"},
		{"x-amz-meta-* added to a presigned PUT", adding(func(t *testing.T) *http.Request { return sm.presigned(t, http.MethodPut, "existing", sm.body) },
			"X-Amz-Meta-Role", "admin"), 403, "AccessDenied"},
		// Signed headers changed or doubled.
		{"signed x-amz-acl changed", func(t *testing.T) *http.Request {
			r := sm.put(t, "existing", "X-Amz-Acl", "private")
			r.Header.Set("X-Amz-Acl", "public-read-write")
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"signed x-amz-copy-source pointed elsewhere", func(t *testing.T) *http.Request {
			r := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "copied"), nil)
			r.Header.Set("X-Amz-Copy-Source", "/"+bucket+"/existing")
			r = secSign(t, e, cred, r, harness.EmptySHA256)
			r.Header.Set("X-Amz-Copy-Source", copySource)
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"second value of a signed x-amz-meta header", adding(func(t *testing.T) *http.Request { return sm.put(t, "existing", "X-Amz-Meta-Role", "reader") },
			"X-Amz-Meta-Role", "admin"), 403, "SignatureDoesNotMatch"},
		{"signed Content-Type changed", func(t *testing.T) *http.Request {
			r := sm.put(t, "existing", "Content-Type", "text/plain")
			r.Header.Set("Content-Type", "text/html")
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"second X-Amz-Date", adding(putExisting, "X-Amz-Date", time.Now().Add(time.Minute).UTC().Format("20060102T150405Z")), 403, "SignatureDoesNotMatch"},
		{"second X-Amz-Content-Sha256", adding(putExisting, "X-Amz-Content-Sha256", harness.UnsignedPayload), 400, "InvalidArgument"},
		{"second Authorization", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.Header.Add("Authorization", r.Header.Get("Authorization"))
			return r
		}, 400, "AuthorizationHeaderMalformed"},
		{"Host changed", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.Host = "localhost:" + fmt.Sprint(e.Gateway.Port())
			return r
		}, 403, "SignatureDoesNotMatch"},
		// A sub-resource added to the query turns a PUT of the object into
		// another call.
		{"?acl added after signing", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.URL.RawQuery = "acl="
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"?tagging added after signing", func(t *testing.T) *http.Request {
			r := putExisting(t)
			r.URL.RawQuery = "tagging="
			return r
		}, 403, "SignatureDoesNotMatch"},
	}
}
