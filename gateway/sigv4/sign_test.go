package sigv4

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signerCase is one request to sign: built afresh for each signer.
type signerCase struct {
	name   string
	method string
	url    string
	// rawPath, when set, is the escaped path as a proxy sets it.
	rawPath string
	host    string
	length  int64
	header  http.Header
}

func (c signerCase) request(t *testing.T) *http.Request {
	t.Helper()
	r, err := http.NewRequest(c.method, c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.rawPath != "" {
		p, err := url.PathUnescape(c.rawPath)
		if err != nil {
			t.Fatal(err)
		}
		r.URL.Path, r.URL.RawPath = p, c.rawPath
	}
	r.Host = c.host
	r.ContentLength = c.length
	for k, vs := range c.header {
		r.Header[k] = append([]string(nil), vs...)
	}
	return r
}

var signerCases = []signerCase{
	{name: "plain GET", method: "GET", url: "http://127.0.0.1:9000/bucket/key",
		header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}, "X-Sweepgate-Request-Id": {"r1"}}},
	{name: "small PUT", method: "PUT", url: "http://127.0.0.1:9000/bucket/small/put-01", length: 4096,
		header: http.Header{
			"X-Amz-Content-Sha256": {"UNSIGNED-PAYLOAD"}, "Content-Type": {"application/octet-stream"},
			"User-Agent": {"aws-sdk-go-v2"}, "Expect": {"100-continue"}, "Content-Md5": {"abc=="},
			"X-Amz-Meta-Color": {"  dark   blue  "}, "Accept-Encoding": {"identity"},
			"Content-Length": {"4096"}, "Amz-Sdk-Invocation-Id": {"x"},
		}},
	{name: "escaped path", method: "PUT", url: "http://127.0.0.1:9000/b/x", rawPath: "/b/a%20b/c%2Fd/%E2%82%AC~._-", length: 1,
		header: http.Header{"X-Amz-Content-Sha256": {"STREAMING-UNSIGNED-PAYLOAD-TRAILER"}, "Transfer-Encoding": {"chunked"}}},
	{name: "query", method: "GET", url: "http://127.0.0.1:9000/b?uploads&prefix=a+b%2Fc&a=2&a=1&max-keys=&x%20y=%E2%82%AC&z=a;b",
		header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}}},
	{name: "multiple values and odd spacing", method: "POST", url: "http://backend:9000/b/k?uploadId=abc%3D%3D&partNumber=3",
		header: http.Header{
			"X-Amz-Content-Sha256": {emptySHA256}, "X-Amz-Meta-List": {"a", " b ", "c  d"},
			"x-amz-meta-lower": {"\tv  w\t"}, "Authorization": {"stale"}, "X-Amz-Date": {"stale"},
			"X-Amzn-Trace-Id": {"t"},
		}},
	{name: "default http port", method: "GET", url: "http://backend:80/b/k", header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}}},
	{name: "default https port", method: "HEAD", url: "https://backend:443/b/k", header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}}},
	{name: "https on port 80", method: "HEAD", url: "https://backend:80/b/k", header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}}},
	{name: "ipv6 default port", method: "GET", url: "http://[::1]:80/b/k", header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}}},
	{name: "ipv6", method: "GET", url: "http://[::1]:9000/", header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}}},
	{name: "Host differs from URL", method: "DELETE", url: "http://127.0.0.1:9000/b/k", host: "other:8080",
		header: http.Header{"X-Amz-Content-Sha256": {emptySHA256}}},
	{name: "empty path", method: "GET", url: "http://127.0.0.1:9000", header: http.Header{}},
}

// TestSignerMatchesSDK: the gateway's backend signer produces the very
// request aws-sdk-go-v2's signer produced before it (headers, query, host),
// so that the backend sees each request exactly as it did.
func TestSignerMatchesSDK(t *testing.T) {
	sdk := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecret}
	ours := &Signer{AccessKey: testAccessKey, SecretKey: testSecret, Region: "eu-west-3", Service: "s3"}
	for _, c := range signerCases {
		t.Run(c.name, func(t *testing.T) {
			// Twice: the second signing runs on a cached key and recycled
			// buffers.
			for i, at := range []time.Time{testTime, testTime.Add(25 * time.Hour).In(time.FixedZone("x", 3600))} {
				want, got := c.request(t), c.request(t)
				hash := want.Header.Get("X-Amz-Content-Sha256")
				if err := sdk.SignHTTP(context.Background(), creds, want, hash, "s3", "eu-west-3", at); err != nil {
					t.Fatal(err)
				}
				ours.Sign(got, hash, at)
				if !reflect.DeepEqual(got.Header, want.Header) {
					t.Errorf("signing %d: headers\n got %q\nwant %q", i, got.Header, want.Header)
				}
				if got.Host != want.Host || got.URL.String() != want.URL.String() {
					t.Errorf("signing %d: host %q url %q, want %q %q", i, got.Host, got.URL, want.Host, want.URL)
				}
			}
		})
	}
}

// TestSignerVerifies: what the signer signs, the verifier accepts.
func TestSignerVerifies(t *testing.T) {
	s := &Signer{AccessKey: testAccessKey, SecretKey: testSecret, Region: testRegion, Service: "s3"}
	r := newRequest(t, http.MethodGet, s3URL(t, "b", "dir/a b+c", "list-type=2&prefix=a%20b"), nil)
	r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	s.Sign(r, emptySHA256, testTime)
	res, err := testVerifier(testTime).Verify(r)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if res.Principal != testPrincipal {
		t.Fatalf("principal %q", res.Principal)
	}
}

// rotatingCredentials is a credentials store whose secret changes, as a
// reloaded credentials file's would.
type rotatingCredentials struct{ secret atomic.Value }

func (c *rotatingCredentials) Lookup(accessKey string) (Credential, bool) {
	if accessKey != testAccessKey {
		return Credential{}, false
	}
	return Credential{AccessKey: testAccessKey, SecretKey: c.secret.Load().(string), Principal: testPrincipal}, true
}

// TestSigningKeyCacheScopes: a key cached for one secret, day, region or
// service is never served for another, and a rotated secret takes effect
// at once in the verifier and in the signer.
func TestSigningKeyCacheScopes(t *testing.T) {
	var c keyCache
	base := [4]string{"secret", "20260314", "us-east-1", "s3"}
	c.get(base[0], base[1], base[2], base[3])
	for i := range base {
		other := base
		other[i] += "x"
		got := c.get(other[0], other[1], other[2], other[3])
		if !bytes.Equal(got, deriveKey(other[0], other[1], other[2], other[3])) {
			t.Fatalf("key for %q is not its own", other)
		}
	}

	creds := &rotatingCredentials{}
	creds.secret.Store("first-secret")
	v := &Verifier{Credentials: creds, Region: testRegion, Now: func() time.Time { return testTime }}
	signed := func(secret string, at time.Time) *http.Request {
		r := newRequest(t, http.MethodGet, s3URL(t, "b", "k", ""), nil)
		sdkSign(t, r, emptySHA256, testAccessKey, secret, testRegion, at)
		return r
	}
	if _, err := v.Verify(signed("first-secret", testTime)); err != nil {
		t.Fatalf("first secret: %v", err)
	}
	creds.secret.Store("second-secret")
	_, err := v.Verify(signed("first-secret", testTime))
	wantErr(t, err, "SignatureDoesNotMatch", "")
	if _, err := v.Verify(signed("second-secret", testTime)); err != nil {
		t.Fatalf("second secret: %v", err)
	}
	// The next day's key is derived afresh, not served from the cache.
	next := testTime.Add(24 * time.Hour)
	v.Now = func() time.Time { return next }
	if _, err := v.Verify(signed("second-secret", next)); err != nil {
		t.Fatalf("next day: %v", err)
	}

	// The signer signs for its current secret, and for the day it is given.
	s := &Signer{AccessKey: testAccessKey, SecretKey: "second-secret", Region: testRegion, Service: "s3"}
	for _, at := range []time.Time{testTime, next} {
		v.Now = func() time.Time { return at }
		r := newRequest(t, http.MethodGet, s3URL(t, "b", "k", ""), nil)
		r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		s.Sign(r, emptySHA256, at)
		if _, err := v.Verify(r); err != nil {
			t.Fatalf("signer at %v: %v", at, err)
		}
	}
}

// TestSigningKeyCacheConcurrent: many goroutines asking for overlapping
// scopes, past the cache's bound, each get their scope's own key (run with
// -race).
func TestSigningKeyCacheConcurrent(t *testing.T) {
	var c keyCache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range maxCachedKeys / 2 {
				secret := "s" + strconv.Itoa(i%3)
				region := fmt.Sprintf("r%d", (i*7+g)%(maxCachedKeys/4))
				got := c.get(secret, "20260314", region, "s3")
				if !bytes.Equal(got, deriveKey(secret, "20260314", region, "s3")) {
					t.Errorf("goroutine %d: wrong key for %s %s", g, secret, region)
					return
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) > maxCachedKeys {
		t.Fatalf("cache holds %d keys, bound %d", len(c.keys), maxCachedKeys)
	}
}

// BenchmarkSigner and BenchmarkSignerSDK sign the same small PUT, for the
// cost per request of the backend signature.
func BenchmarkSigner(b *testing.B) {
	s := &Signer{AccessKey: testAccessKey, SecretKey: testSecret, Region: testRegion, Service: "s3"}
	benchmarkSign(b, func(r *http.Request) { s.Sign(r, "UNSIGNED-PAYLOAD", testTime) })
}

func BenchmarkSignerSDK(b *testing.B) {
	sdk := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecret}
	benchmarkSign(b, func(r *http.Request) {
		_ = sdk.SignHTTP(context.Background(), creds, r, "UNSIGNED-PAYLOAD", "s3", testRegion, testTime)
	})
}

func benchmarkSign(b *testing.B, sign func(r *http.Request)) {
	c := signerCases[1]
	r, _ := http.NewRequest(c.method, c.url, nil)
	r.ContentLength = c.length
	b.ReportAllocs()
	for b.Loop() {
		r.Header = c.header.Clone()
		sign(r)
	}
}
