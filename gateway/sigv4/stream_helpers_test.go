package sigv4

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// testStream describes an aws-chunked upload built by the test encoder,
// which follows AWS's published format independently of the decoder (it
// shares no code with it), and can be told to lie in the ways a broken or
// hostile client would.
type testStream struct {
	mode      PayloadMode // one of the streaming modes
	data      []byte
	chunkSize int
	trailer   string // checksum header name for trailer modes

	declared      int64  // x-amz-decoded-content-length; len(data) when -2
	trailerValue  string // sent instead of the right checksum when set
	minioLayout   bool   // "name:value\n\r\n" as minio-go writes trailers
	omitFinalCRLF bool   // signed without trailer: end after the 0-chunk line
	omitTrailer   bool   // declare a trailer but do not send it
	noDeclared    bool   // send no x-amz-decoded-content-length
	encoding      string // Content-Encoding; "aws-chunked" when empty
}

func testHMAC(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

func testSigningKey(secret, date, region, service string) []byte {
	k := testHMAC([]byte("AWS4"+secret), date)
	k = testHMAC(k, region)
	k = testHMAC(k, service)
	return testHMAC(k, "aws4_request")
}

func testChecksum(t testing.TB, name string, data []byte) string {
	t.Helper()
	a, ok := lookupChecksum(name)
	if !ok {
		t.Fatalf("unknown checksum %q", name)
	}
	h := a.new()
	h.Write(data)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// build returns the signed request headers (host is testHost) and the wire
// body of the stream, signed at testTime.
func (s testStream) build(t testing.TB) (http.Header, []byte) {
	t.Helper()
	declared := int64(len(s.data))
	if s.declared != 0 {
		declared = s.declared
	}
	if s.chunkSize == 0 {
		s.chunkSize = 64 << 10
	}
	r := newRequest(t, http.MethodPut, s3URL(t, "bucket", "object", ""), nil)
	r.ContentLength = 0
	if s.encoding == "" {
		s.encoding = "aws-chunked"
	}
	r.Header.Set("Content-Encoding", s.encoding)
	if !s.noDeclared {
		r.Header.Set("X-Amz-Decoded-Content-Length", strconv.FormatInt(declared, 10))
	}
	if s.trailer != "" {
		r.Header.Set("X-Amz-Trailer", s.trailer)
	}
	sdkSign(t, r, s.mode.String(), testAccessKey, testSecret, testRegion, testTime)
	auth := r.Header.Get("Authorization")
	seed := auth[strings.Index(auth, "Signature=")+len("Signature="):]

	date := testTime.Format("20060102")
	amzDate := testTime.Format("20060102T150405Z")
	scope := date + "/" + testRegion + "/s3/aws4_request"
	key := testSigningKey(testSecret, date, testRegion, "s3")
	signed := s.mode != ModeStreamingUnsignedTrailer
	prev := seed
	var w bytes.Buffer
	chunk := func(b []byte) {
		if !signed {
			w.WriteString(strconv.FormatInt(int64(len(b)), 16) + "\r\n")
		} else {
			h := sha256.Sum256(b)
			sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + amzDate + "\n" + scope + "\n" + prev + "\n" +
				"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n" + hex.EncodeToString(h[:])
			prev = hex.EncodeToString(testHMAC(key, sts))
			w.WriteString(strconv.FormatInt(int64(len(b)), 16) + ";chunk-signature=" + prev + "\r\n")
		}
		w.Write(b)
	}
	for rest := s.data; len(rest) > 0; {
		n := min(s.chunkSize, len(rest))
		chunk(rest[:n])
		w.WriteString("\r\n")
		rest = rest[n:]
	}
	chunk(nil)
	if s.trailer == "" {
		if !s.omitFinalCRLF {
			w.WriteString("\r\n")
		}
		return r.Header, w.Bytes()
	}
	value := s.trailerValue
	if value == "" {
		value = testChecksum(t, s.trailer, s.data)
	}
	line := strings.ToLower(s.trailer) + ":" + value
	if !s.omitTrailer {
		if s.minioLayout {
			w.WriteString(line + "\n\r\n")
		} else {
			w.WriteString(line + "\r\n")
		}
	}
	if signed {
		h := sha256.Sum256([]byte(line + "\n"))
		if s.omitTrailer {
			h = sha256.Sum256(nil)
		}
		sts := "AWS4-HMAC-SHA256-TRAILER\n" + amzDate + "\n" + scope + "\n" + prev + "\n" + hex.EncodeToString(h[:])
		w.WriteString("x-amz-trailer-signature:" + hex.EncodeToString(testHMAC(key, sts)) + "\r\n")
	}
	w.WriteString("\r\n")
	return r.Header, w.Bytes()
}

// serverRequest is what the gateway's handler would see for these headers
// and this body.
func serverRequest(t testing.TB, hdr http.Header, wire []byte) *http.Request {
	t.Helper()
	r := newRequest(t, http.MethodPut, s3URL(t, "bucket", "object", ""), wire)
	r.Header = hdr.Clone()
	r.ContentLength = int64(len(wire))
	return r
}
