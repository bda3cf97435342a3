package sigv4

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/s3err"
)

// requireS3Error fails unless err is nil or an *s3err.Error (possibly
// wrapped): every error a client can cause must map to an S3 error code.
func requireS3Error(t *testing.T, err error) {
	t.Helper()
	var e *s3err.Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *s3err.Error", err, err)
	}
}

func FuzzParseAuthorization(f *testing.F) {
	r := newRequest(f, http.MethodGet, s3URL(f, "b", "k", ""), nil)
	sdkSign(f, r, emptySHA256, testAccessKey, testSecret, testRegion, testTime)
	good := r.Header.Get("Authorization")
	for _, seed := range []string{
		good,
		strings.ReplaceAll(good, ", ", ","),
		"AWS4-HMAC-SHA256 Credential=a/b/c/d/e/f/g/20150830/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00",
		"AWS4-HMAC-SHA256 ",
		"AWS4-HMAC-SHA256 Credential=,SignedHeaders=,Signature=",
		"AWS4-HMAC-SHA256 Credential=/////, SignedHeaders=;;host;, Signature=x",
		"AWS4-HMAC-SHA256\tCredential==,,==",
		"AWS AKID:sig",
		"AWS4-ECDSA-P256-SHA256 Credential=x",
		"",
		"\x00\xff",
	} {
		f.Add(seed)
	}
	v := testVerifier(testTime)
	f.Fuzz(func(t *testing.T, h string) {
		a, err := parseAuthorization(h)
		requireS3Error(t, err)
		if err == nil {
			if a.signature == "" || a.scope.accessKey == "" || len(a.signedHeaders) == 0 {
				t.Fatalf("accepted incomplete header %q: %+v", h, a)
			}
			hasHost := false
			for _, n := range a.signedHeaders {
				hasHost = hasHost || strings.EqualFold(n, "host")
			}
			if !hasHost {
				t.Fatalf("accepted SignedHeaders without host: %q", h)
			}
		}
		req := r.Clone(r.Context())
		req.Header.Set("Authorization", h)
		res, err := v.Verify(req)
		requireS3Error(t, err)
		if err == nil {
			// Only spelling may differ (spaces after commas): the parts
			// must be the ones that were signed.
			g, _ := parseAuthorization(good)
			if a.scope != g.scope || a.signature != g.signature || strings.Join(a.signedHeaders, ";") != strings.Join(g.signedHeaders, ";") {
				t.Fatalf("accepted a different Authorization header %q", h)
			}
		}
		if err == nil {
			_, err = io.ReadAll(res.Payload.Body())
			requireS3Error(t, err)
		}
	})
}

func FuzzPresignedQuery(f *testing.F) {
	r := newRequest(f, http.MethodGet, s3URL(f, "b", "dir/k ey", "versionId=1&acl"), nil)
	pr := sdkPresign(f, r, time.Hour, testSecret, testRegion, testTime)
	good := pr.URL.RawQuery
	for _, seed := range []string{
		good,
		strings.Replace(good, "X-Amz-Expires=3600", "X-Amz-Expires=604801", 1),
		strings.Replace(good, "X-Amz-Signature=", "X-Amz-Signature=0", 1),
		good + "&X-Amz-Signature=00",
		"X-Amz-Algorithm=AWS4-HMAC-SHA256",
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%zz",
		"X-Amz-Credential=a%2F20260314%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=&X-Amz-Date=&X-Amz-Expires=-1",
		"AWSAccessKeyId=x&Signature=y&Expires=1",
		"&&&==&=",
		"",
	} {
		f.Add(seed)
	}
	v := testVerifier(testTime.Add(time.Minute))
	f.Fuzz(func(t *testing.T, q string) {
		req := pr.Clone(pr.Context())
		u := *pr.URL
		u.RawQuery = q
		req.URL = &u
		res, err := v.Verify(req)
		requireS3Error(t, err)
		if err == nil {
			if !res.Presigned {
				t.Fatalf("query %q accepted without presigning", q)
			}
			_, err = io.ReadAll(res.Payload.Body())
			requireS3Error(t, err)
		}
		_, err = parseQuery(q)
		requireS3Error(t, err)
	})
}

// FuzzChunkDecoder feeds arbitrary bodies to requests whose headers carry
// valid seed signatures (one per streaming mode, so the fuzzer can reach
// the signature-checking paths), reads them through Body and Outbound,
// and requires that nothing panics, every error is an S3 error, a body that
// passes yields no more than it was given, and Outbound stays within its
// announced length.
func FuzzChunkDecoder(f *testing.F) {
	data := testData(600)
	streams := []testStream{
		{mode: ModeStreamingSigned, data: data, chunkSize: 256},
		{mode: ModeStreamingSignedTrailer, data: data, chunkSize: 256, trailer: "x-amz-checksum-crc32"},
		{mode: ModeStreamingUnsignedTrailer, data: data, chunkSize: 256, trailer: "x-amz-checksum-sha256"},
		{mode: ModeStreamingUnsignedTrailer, data: data, chunkSize: 256, trailer: "x-amz-checksum-crc64nvme", noDeclared: true},
	}
	headers := make([]http.Header, len(streams))
	for i, s := range streams {
		hdr, wire := s.build(f)
		headers[i] = hdr
		f.Add(uint8(i), wire)
		s.minioLayout = true
		if _, wire := s.build(f); s.trailer != "" {
			f.Add(uint8(i), wire)
		}
		f.Add(uint8(i), wire[:len(wire)/2])
		f.Add(uint8(i), []byte("ffffffffffffffff;chunk-signature=\r\n"))
	}
	f.Add(uint8(2), []byte("0\r\nx-amz-checksum-sha256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\r\n\r\n"))
	f.Add(uint8(1), []byte("0;chunk-signature=0000000000000000000000000000000000000000000000000000000000000000\r\n\r\n\r\n"))

	v := testVerifier(testTime)
	f.Fuzz(func(t *testing.T, which uint8, wire []byte) {
		hdr := headers[int(which)%len(headers)]
		for _, outbound := range []bool{false, true} {
			res, err := v.Verify(serverRequest(t, hdr, wire))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			var r io.Reader
			length := int64(-1)
			if outbound {
				o := res.Payload.Outbound()
				r, length = o.Body, o.ContentLength
			} else {
				r = res.Payload.Body()
			}
			out, err := readWith(r, 1+int(which)%4096)
			requireS3Error(t, err)
			if err != nil && res.Payload.Err() == nil {
				t.Fatal("Err() is nil after a failure")
			}
			if length >= 0 && int64(len(out)) > length {
				t.Fatalf("outbound produced %d bytes, announced %d", len(out), length)
			}
			if !outbound && len(out) > len(wire) {
				t.Fatalf("decoded %d bytes from %d", len(out), len(wire))
			}
			if err == nil {
				if length >= 0 && int64(len(out)) != length {
					t.Fatalf("outbound produced %d bytes, announced %d", len(out), length)
				}
				if !res.Payload.Consumed() {
					t.Fatal("verified but not consumed")
				}
			}
		}
	})
}
