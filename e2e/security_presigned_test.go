//go:build e2e

package e2e

// Security: a presigned URL does only what it was signed for, and only
// while it is valid.

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

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestSecurityPresigned: a presigned URL works for what it was signed for
// while it is valid, and for nothing else: not after its expiry (which the
// gateway's max_clock_skew does not lengthen), not with its validity moved
// or lengthened by editing the query, not for another key, bucket or call.
func TestSecurityPresigned(t *testing.T) {
	t.Parallel()
	const skew = 5 * time.Second
	e := harness.Start(t, harness.Options{MaxClockSkew: skew})
	e.RequireGateway(t)
	hc := e.HTTPClient(t)
	direct := e.DirectSDK(t)
	cred := envCred(e)

	t.Run("replay after expiry", func(t *testing.T) { presignedExpiry(t, e, hc, direct, cred) })

	t.Run("validity cannot be moved", func(t *testing.T) { presignedValidityFixed(t, e, hc, cred, skew) })

	t.Run("PUT URL is for its key only", func(t *testing.T) {
		f := newRefusalFixture(t, e)
		other := e.Bucket(t)
		d := harness.NewData(7103, 8*kib)
		body := d.Bytes()
		const signedKey = "dir/signed-key"
		putURL := secPresign(t, e, cred, http.MethodPut, f.url(signedKey), time.Now(), time.Hour)
		retarget := func(path string) func(t *testing.T) *http.Request {
			return func(t *testing.T) *http.Request {
				return newRequest(t, http.MethodPut, e.Endpoint+path+"?"+strings.SplitN(putURL, "?", 2)[1], body)
			}
		}
		b := "/" + f.bucket + "/"
		runRefusals(t, f, []refusal{
			{name: "another key", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "dir/other-key")},
			{name: "the existing object", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + existingKey)},
			{name: "another bucket", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget("/" + other + "/" + signedKey)},
			{name: "a longer key", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + signedKey + ".exe")},
			{name: "a shorter key", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "dir/signed")},
			{name: "other case", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "Dir/Signed-Key")},
			{name: "dot segments", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: retarget(b + "x/../" + signedKey)},
			{name: "virtual-hosted style", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
				r := retarget("/" + signedKey)(t)
				r.Host = f.bucket + ".localhost:" + fmt.Sprint(e.Gateway.Port())
				return r
			}},
			{name: "made an UploadPart", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
				return newRequest(t, http.MethodPut, putURL+"&partNumber=1&uploadId=bm90LWFuLXVwbG9hZA", body)
			}},
			{name: "made a CreateMultipartUpload", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
				return newRequest(t, http.MethodPost, putURL+"&uploads=", nil)
			}},
		})
		if out, err := direct.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(other)}); err != nil || len(out.Contents) != 0 {
			t.Fatalf("the other bucket: %v, %d objects; want none", err, len(out.Contents))
		}
		// The URL itself works, more than once, as S3's do.
		t.Run("control: its own key", func(t *testing.T) {
			for range 2 {
				requireStatus(t, do(t, hc, newRequest(t, http.MethodPut, putURL, body)), http.StatusOK)
			}
			requireObject(t, direct, f.bucket, signedKey, d)
		})
	})
}

// presignedExpiry checks that a presigned URL works until it expires and
// never after.
func presignedExpiry(t *testing.T, e *harness.Env, hc *http.Client, direct *s3.Client, cred harness.Credential) {
	bucket := e.Bucket(t)
	first, second := harness.NewData(7101, 64*kib), harness.NewData(7102, 64*kib)
	const validity = 3 * time.Second
	// X-Amz-Date has whole seconds: the URLs expire at signedAt+validity.
	signedAt := time.Now().Truncate(time.Second)
	u := objectURL(e.Endpoint, bucket, "replayed")
	putURL := secPresign(t, e, cred, http.MethodPut, u, signedAt, validity)
	getURL := secPresign(t, e, cred, http.MethodGet, u, signedAt, validity)
	requireStatus(t, do(t, hc, newRequest(t, http.MethodPut, putURL, first.Bytes())), http.StatusOK)
	if got := requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, getURL, nil)), http.StatusOK); !bytes.Equal(got, first.Bytes()) {
		t.Fatal("the presigned GET returned other bytes")
	}
	if time.Now().After(signedAt.Add(validity)) {
		t.Fatalf("the valid uses took past the URLs' expiry; the test cannot tell expiry from slowness")
	}
	// A second past expiry: well inside the clock skew, which must not
	// count for a presigned URL's expiry.
	time.Sleep(time.Until(signedAt.Add(validity + time.Second)))
	requireS3Error(t, do(t, hc, newRequest(t, http.MethodPut, putURL, second.Bytes())), http.StatusForbidden, "AccessDenied")
	requireS3Error(t, do(t, hc, newRequest(t, http.MethodGet, getURL, nil)), http.StatusForbidden, "AccessDenied")
	requireObject(t, direct, bucket, "replayed", first)

	// The expired URL cannot be brought back by editing its query.
	now := time.Now().UTC()
	for _, tc := range []struct {
		name    string
		edit    func(q url.Values)
		allowed []string
	}{
		{"X-Amz-Expires lengthened to a week", func(q url.Values) { q.Set("X-Amz-Expires", "604800") },
			[]string{"403 SignatureDoesNotMatch"}},
		{"X-Amz-Date moved to now", func(q url.Values) { q.Set("X-Amz-Date", now.Format("20060102T150405Z")) },
			// Across midnight the credential's date no longer matches.
			[]string{"403 SignatureDoesNotMatch", "400 AuthorizationQueryParametersError"}},
		{"X-Amz-Date and the credential's date moved to now", func(q url.Values) {
			q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), signedAt.UTC().Format("20060102"), now.Format("20060102"), 1))
			q.Set("X-Amz-Date", now.Format("20060102T150405Z"))
		}, []string{"403 SignatureDoesNotMatch"}},
		{"a second X-Amz-Expires", func(q url.Values) { q.Add("X-Amz-Expires", "3600") },
			[]string{"400 AuthorizationQueryParametersError"}},
		{"a lower-case x-amz-expires", func(q url.Values) { q.Set("x-amz-expires", "3600") },
			[]string{"403 AccessDenied", "403 SignatureDoesNotMatch", "400 AuthorizationQueryParametersError"}},
		{"X-Amz-Expires removed", func(q url.Values) { q.Del("X-Amz-Expires") },
			[]string{"400 AuthorizationQueryParametersError"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, signedURL := range []string{putURL, getURL} {
				pu, err := url.Parse(signedURL)
				if err != nil {
					t.Fatal(err)
				}
				q := pu.Query()
				tc.edit(q)
				pu.RawQuery = q.Encode()
				method, body := http.MethodGet, []byte(nil)
				if signedURL == putURL {
					method, body = http.MethodPut, second.Bytes()
				}
				requireRefusal(t, do(t, hc, newRequest(t, method, pu.String(), body)), tc.allowed...)
			}
			requireObject(t, direct, bucket, "replayed", first)
		})
	}
}

// presignedValidityFixed checks that a presigned URL's validity cannot be
// moved by editing its query, with the gateway allowing skew of clock skew.
func presignedValidityFixed(t *testing.T, e *harness.Env, hc *http.Client, cred harness.Credential, skew time.Duration) {
	f := newRefusalFixture(t, e)
	get := func(at time.Time, expires time.Duration) string {
		return secPresign(t, e, cred, http.MethodGet, f.url(existingKey), at, expires)
	}
	edited := func(signed string, edit func(q url.Values)) string {
		pu, err := url.Parse(signed)
		if err != nil {
			t.Fatal(err)
		}
		q := pu.Query()
		edit(q)
		pu.RawQuery = q.Encode()
		return pu.String()
	}
	getReq := func(u string) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request { return newRequest(t, http.MethodGet, u, nil) }
	}
	past := time.Now().Add(-10 * time.Minute)
	otherKey := secPresign(t, e, cred, http.MethodGet, f.url("other"), time.Now(), time.Hour)
	runRefusals(t, f, []refusal{
		// Dating a URL ahead would make it valid for longer; beyond
		// the clock skew it is not valid yet.
		{name: "signed an hour ahead", status: 403, code: "AccessDenied", gateway: true, req: getReq(get(time.Now().Add(time.Hour), time.Minute))},
		{name: "signed a week ahead with a week's validity", status: 403, code: "AccessDenied", gateway: true, req: getReq(get(time.Now().Add(7*24*time.Hour), 7*24*time.Hour))},
		{name: "validity over a week, as signed", status: 400, code: "AuthorizationQueryParametersError", gateway: true, req: getReq(get(time.Now(), 7*24*time.Hour+time.Second))},
		{name: "X-Amz-Expires zero", status: 400, code: "AuthorizationQueryParametersError", gateway: true,
			req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-Expires", "0") }))},
		{name: "X-Amz-Expires negative", status: 400, code: "AuthorizationQueryParametersError", gateway: true,
			req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-Expires", "-60") }))},
		{name: "X-Amz-Date moved forward on an expired URL", status: 403, code: "SignatureDoesNotMatch", gateway: true,
			req: getReq(edited(get(past, time.Minute), func(q url.Values) {
				moved := past.Add(9*time.Minute + 30*time.Second).UTC()
				q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), past.UTC().Format("20060102"), moved.Format("20060102"), 1))
				q.Set("X-Amz-Date", moved.Format("20060102T150405Z"))
			}))},
		{name: "another URL's signature", status: 403, code: "SignatureDoesNotMatch", gateway: true,
			req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-Signature", mustQuery(t, otherKey, "X-Amz-Signature")) }))},
		{name: "X-Amz-SignedHeaders without host", status: 400, code: "AuthorizationQueryParametersError", gateway: true,
			req: getReq(edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-SignedHeaders", "x-amz-date") }))},
		{name: "X-Amz-SignedHeaders lengthened", status: 403, code: "SignatureDoesNotMatch", gateway: true, req: func(t *testing.T) *http.Request {
			r := newRequest(t, http.MethodGet, edited(get(time.Now(), time.Hour), func(q url.Values) { q.Set("X-Amz-SignedHeaders", "host;x-amz-acl") }), nil)
			r.Header.Set("X-Amz-Acl", "public-read")
			return r
		}},
		// Query parameters turn a GET of an object into other calls
		// (its ACL, a version, a part, a listing) or change the answer
		// (response-*): every one is signed.
		{name: "versionId added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
			req: getReq(get(time.Now(), time.Hour) + "&versionId=null")},
		{name: "acl added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
			req: getReq(get(time.Now(), time.Hour) + "&acl=")},
		{name: "response-content-type added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
			req: getReq(get(time.Now(), time.Hour) + "&response-content-type=text%2Fhtml")},
		{name: "partNumber added", status: 403, code: "SignatureDoesNotMatch", gateway: true,
			req: getReq(get(time.Now(), time.Hour) + "&partNumber=1")},
	})
	// Within the clock skew, a URL dated a little ahead is accepted:
	// the refusals above are about the distance, not the direction.
	t.Run("control: signed within the skew", func(t *testing.T) {
		got := requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, get(time.Now().Add(skew/2), time.Minute), nil)), http.StatusOK)
		if !bytes.Equal(got, f.existing.Bytes()) {
			t.Fatal("the presigned GET returned other bytes")
		}
	})
}

// mustQuery returns the query parameter name of a URL.
func mustQuery(t *testing.T, u, name string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Query().Get(name)
}
