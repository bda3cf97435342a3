package sigv4

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sha256Request is a header-signed PUT declaring the SHA-256 of declared
// and carrying sent.
func sha256Request(t *testing.T, declared, sent []byte) *http.Request {
	t.Helper()
	r := newRequest(t, http.MethodPut, s3URL(t, "bucket", "object", ""), nil)
	r.ContentLength = int64(len(sent))
	sdkSign(t, r, hexSHA256(declared), testAccessKey, testSecret, testRegion, testTime)
	r.Body = io.NopCloser(bytes.NewReader(sent))
	return r
}

func TestOutboundSHA256(t *testing.T) {
	body := testData(10000)
	bad := append(append([]byte(nil), body[:len(body)-1]...), body[len(body)-1]^1)
	for _, step := range []int{1, 2, 1000, 1 << 20} {
		t.Run("good/"+strconv.Itoa(step), func(t *testing.T) {
			res, err := testVerifier(testTime).Verify(sha256Request(t, body, body))
			if err != nil {
				t.Fatal(err)
			}
			o := res.Payload.Outbound()
			out, err := readWith(o.Body, step)
			if err != nil || !bytes.Equal(out, body) || o.ContentLength != int64(len(body)) || o.ContentSHA256 != unsignedPayload {
				t.Fatalf("%d bytes, %v, CL %d, hash %s", len(out), err, o.ContentLength, o.ContentSHA256)
			}
			if !res.Payload.Consumed() || res.Payload.Err() != nil {
				t.Fatal("not consumed cleanly")
			}
		})
		t.Run("bad/"+strconv.Itoa(step), func(t *testing.T) {
			res, err := testVerifier(testTime).Verify(sha256Request(t, body, bad))
			if err != nil {
				t.Fatal(err)
			}
			o := res.Payload.Outbound()
			out, err := readWith(o.Body, step)
			wantErr(t, err, "XAmzContentSHA256Mismatch", "")
			wantErr(t, res.Payload.Err(), "XAmzContentSHA256Mismatch", "")
			if len(out) != len(bad)-1 || !bytes.Equal(out, bad[:len(bad)-1]) {
				t.Fatalf("released %d of %d bytes; want all but the last", len(out), len(bad))
			}
		})
	}
}

func TestApply(t *testing.T) {
	body := testData(1000)
	t.Run("sha256", func(t *testing.T) {
		res, err := testVerifier(testTime).Verify(sha256Request(t, body, body))
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPut, "http://backend/bucket/object", nil)
		req.Header.Set("Content-Length", "1")
		req.GetBody = func() (io.ReadCloser, error) { return nil, nil }
		if err := res.Payload.Outbound().Apply(req); err != nil {
			t.Fatal(err)
		}
		if req.ContentLength != 1000 || req.GetBody != nil || req.Header.Get("Content-Length") != "" ||
			req.Header.Get("X-Amz-Content-Sha256") != unsignedPayload {
			t.Fatalf("request %+v", req)
		}
		got, err := io.ReadAll(req.Body)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes, %v", len(got), err)
		}
	})
	t.Run("trailer headers replaced", func(t *testing.T) {
		hdr, wire := testStream{mode: ModeStreamingSignedTrailer, data: body, trailer: "x-amz-checksum-sha256"}.build(t)
		res, err := testVerifier(testTime).Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPut, "http://backend/bucket/object", nil)
		req.Header = hdr.Clone()
		if err := res.Payload.Outbound().Apply(req); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"Content-Encoding":             "aws-chunked",
			"X-Amz-Trailer":                "x-amz-checksum-sha256",
			"X-Amz-Decoded-Content-Length": "1000",
			"X-Amz-Content-Sha256":         streamingUnsignedPayloadTrailer,
		}
		for k, v := range want {
			if got := req.Header.Values(k); len(got) != 1 || got[0] != v {
				t.Fatalf("%s = %q, want %q", k, got, v)
			}
		}
	})
	t.Run("empty signed stream verifies before NoBody", func(t *testing.T) {
		hdr, wire := testStream{mode: ModeStreamingSigned}.build(t)
		res, err := testVerifier(testTime).Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPut, "http://backend/bucket/object", nil)
		if err := res.Payload.Outbound().Apply(req); err != nil {
			t.Fatal(err)
		}
		if req.Body != http.NoBody || req.ContentLength != 0 || !res.Payload.Consumed() {
			t.Fatalf("Body %v, CL %d, consumed %v", req.Body, req.ContentLength, res.Payload.Consumed())
		}

		hdr, wire = testStream{mode: ModeStreamingSigned}.build(t)
		wire = flipAt(wire, bytes.Index(wire, []byte("="))+1)
		res, err = testVerifier(testTime).Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, res.Payload.Outbound().Apply(httptest.NewRequest(http.MethodPut, "http://backend/x", nil)), "SignatureDoesNotMatch", "")
	})
	t.Run("empty body with wrong hash", func(t *testing.T) {
		res, err := testVerifier(testTime).Verify(sha256Request(t, body, nil))
		if err != nil {
			t.Fatal(err)
		}
		err = res.Payload.Outbound().Apply(httptest.NewRequest(http.MethodPut, "http://backend/x", nil))
		wantErr(t, err, "XAmzContentSHA256Mismatch", "")
	})
}

// backendResult is what the fake backend saw of one request.
type backendResult struct {
	header http.Header
	length int64
	body   []byte
	err    error
}

// TestOutboundOverHTTP sends outbound bodies through a real net/http
// transport to a backend, and checks that a body failing verification
// never reaches the backend whole: the transport aborts the request, and
// the backend sees a short body (and, for trailer streams, no trailer).
func TestOutboundOverHTTP(t *testing.T) {
	results := make(chan backendResult, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		results <- backendResult{r.Header.Clone(), r.ContentLength, b, err}
		w.WriteHeader(http.StatusOK)
	}))
	defer backend.Close()

	data := testData(200 << 10)
	send := func(t *testing.T, r *http.Request) (*Result, backendResult, error) {
		t.Helper()
		res, err := testVerifier(testTime).Verify(r)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPut, backend.URL+"/bucket/object", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Payload.Outbound().Apply(req); err != nil {
			t.Fatal(err)
		}
		resp, err := backend.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		select {
		case got := <-results:
			return res, got, err
		case <-time.After(10 * time.Second):
			t.Fatal("backend saw no request")
		}
		return nil, backendResult{}, nil
	}

	type tc struct {
		name string
		good func(t *testing.T) *http.Request
		bad  func(t *testing.T) *http.Request
		code string
	}
	bad := append(append([]byte(nil), data[:len(data)-1]...), data[len(data)-1]^1)
	for _, c := range []tc{
		{"sha256",
			func(t *testing.T) *http.Request { return sha256Request(t, data, data) },
			func(t *testing.T) *http.Request { return sha256Request(t, data, bad) },
			"XAmzContentSHA256Mismatch"},
		{"signed",
			streamRequest(testStream{mode: ModeStreamingSigned, data: data}, false),
			streamRequest(testStream{mode: ModeStreamingSigned, data: data}, true),
			"SignatureDoesNotMatch"},
		{"signed-trailer",
			streamRequest(testStream{mode: ModeStreamingSignedTrailer, data: data, trailer: "x-amz-checksum-crc32c"}, false),
			streamRequest(testStream{mode: ModeStreamingSignedTrailer, data: data, trailer: "x-amz-checksum-crc32c"}, true),
			"SignatureDoesNotMatch"},
		{"unsigned-trailer",
			streamRequest(testStream{mode: ModeStreamingUnsignedTrailer, data: data, trailer: "x-amz-checksum-crc64nvme"}, false),
			streamRequest(testStream{mode: ModeStreamingUnsignedTrailer, data: data, trailer: "x-amz-checksum-crc64nvme"}, true),
			"BadDigest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, got, err := send(t, c.good(t))
			if err != nil || got.err != nil {
				t.Fatalf("good body: client %v, backend %v", err, got.err)
			}
			if got.length != int64(len(got.body)) {
				t.Fatalf("backend Content-Length %d, body %d", got.length, len(got.body))
			}
			body := got.body
			if name := res.Payload.TrailerName(); name != "" {
				body = decodeOutbound(t, got.body, name, int64(len(data)))
			}
			if !bytes.Equal(body, data) {
				t.Fatal("backend received other data")
			}

			res, got, err = send(t, c.bad(t))
			if err == nil {
				t.Fatal("the backend request succeeded with a bad body")
			}
			if got.err == nil || int64(len(got.body)) >= got.length {
				t.Fatalf("backend read %d of %d bytes, err %v: it saw the whole body", len(got.body), got.length, got.err)
			}
			if strings.Contains(string(got.body), "x-amz-checksum") {
				t.Fatal("backend received the trailer")
			}
			wantErr(t, res.Payload.Err(), c.code, "")
		})
	}
}

// streamRequest returns a maker of s's request as the server receives it,
// with its last data byte damaged when corrupt (everything before it is
// fine).
func streamRequest(s testStream, corrupt bool) func(t *testing.T) *http.Request {
	return func(t *testing.T) *http.Request {
		hdr, wire := s.build(t)
		if corrupt {
			i := bytes.LastIndex(wire, []byte("\r\n0"))
			if i < 0 {
				i = bytes.LastIndex(wire, []byte("0;chunk-signature")) - 2
			}
			wire = flipAt(wire, i-1)
		}
		return serverRequest(t, hdr, wire)
	}
}

func TestOutboundUnsigned(t *testing.T) {
	body := testData(5000)
	r := newRequest(t, http.MethodPut, s3URL(t, "bucket", "object", ""), body)
	r.Header.Set("Content-Encoding", "gzip")
	sdkSign(t, r, unsignedPayload, testAccessKey, testSecret, testRegion, testTime)
	res, err := testVerifier(testTime).Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if res.Payload.Consumed() {
		t.Fatal("Consumed before reading")
	}
	o := res.Payload.Outbound()
	if o.ContentLength != int64(len(body)) || o.ContentSHA256 != unsignedPayload || len(o.Remove) != 0 || o.Header.Get("Content-Encoding") != "" {
		t.Fatalf("outbound %+v", o)
	}
	if o2 := res.Payload.Outbound(); o2.Body != o.Body {
		t.Fatal("Outbound is not stable across calls")
	}
	got, err := readWith(o.Body, 333)
	if err != nil || !bytes.Equal(got, body) || !res.Payload.Consumed() {
		t.Fatalf("%d bytes, %v, consumed %v", len(got), err, res.Payload.Consumed())
	}
}

func TestStaticCredentials(t *testing.T) {
	c := NewStaticCredentials(
		Credential{AccessKey: "a", SecretKey: "1", Principal: "p1"},
		Credential{AccessKey: "b", SecretKey: ""},
		Credential{AccessKey: "a", SecretKey: "2", Principal: "p2"},
	)
	if got, ok := c.Lookup("a"); !ok || got.SecretKey != "2" || got.Principal != "p2" {
		t.Fatalf("Lookup(a) = %+v, %v", got, ok)
	}
	if _, ok := c.Lookup("b"); ok {
		t.Fatal("a key with an empty secret was found")
	}
	if _, ok := c.Lookup("c"); ok {
		t.Fatal("unknown key found")
	}
	_, err := (&Verifier{}).Verify(httptest.NewRequest(http.MethodGet, "/", nil))
	wantErr(t, err, "InternalError", "credentials")
}
