//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// sha256Hasher adapts crypto/sha256 to the hasher minio-go's signer takes.
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

// signedStream builds a PUT of data as STREAMING-AWS4-HMAC-SHA256-PAYLOAD
// (64 KiB chunks, each signed in a chain from the seed signature), the way
// minio-go sends it, and returns the request with the encoded body, which a
// test may alter and set with setBody.
func signedStream(t *testing.T, e *harness.Env, url string, data []byte, at time.Time) (*http.Request, []byte) {
	t.Helper()
	req := newRequest(t, http.MethodPut, url, nil)
	req.Body = io.NopCloser(bytes.NewReader(data))
	req = signer.StreamingSignV4(req, e.AccessKey, e.SecretKey, "", e.Region, int64(len(data)), at.UTC(), sha256Hasher{sha256.New()})
	body, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(body)) != req.ContentLength {
		t.Fatalf("signed stream is %d bytes, Content-Length says %d", len(body), req.ContentLength)
	}
	setBody(req, body)
	return req, body
}

// setBody replaces a request's body, keeping its Content-Length.
func setBody(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

// chunkDataOffset returns the offset in an aws-chunked body of data byte n
// of chunk i (both from 0).
func chunkDataOffset(t *testing.T, body []byte, chunk, n int) int {
	t.Helper()
	off := 0
	for i := 0; ; i++ {
		end := bytes.Index(body[off:], []byte("\r\n"))
		if end < 0 {
			t.Fatalf("chunk %d has no header", i)
		}
		header := string(body[off : off+end])
		sizeHex, _, _ := bytes.Cut([]byte(header), []byte(";"))
		size, err := strconv.ParseInt(string(sizeHex), 16, 64)
		if err != nil || size == 0 {
			t.Fatalf("chunk %d: header %q", i, header)
		}
		data := off + end + 2
		if i == chunk {
			if n >= int(size) {
				t.Fatalf("chunk %d has %d bytes, no byte %d", i, size, n)
			}
			return data + n
		}
		off = data + int(size) + 2
	}
}

// unsignedTrailerBody encodes data as an aws-chunked body with 64 KiB
// chunks, unsigned, ending in the trailer lines given ("name:value"), as
// aws-sdk-go-v2 sends STREAMING-UNSIGNED-PAYLOAD-TRAILER.
func unsignedTrailerBody(data []byte, trailers ...string) []byte {
	var b bytes.Buffer
	for off := 0; off < len(data); off += 64 * kib {
		c := data[off:min(off+64*kib, len(data))]
		fmt.Fprintf(&b, "%x\r\n", len(c))
		b.Write(c)
		b.WriteString("\r\n")
	}
	b.WriteString("0\r\n")
	for _, tr := range trailers {
		b.WriteString(tr + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// unsignedTrailerRequest builds a signed PUT of data as
// STREAMING-UNSIGNED-PAYLOAD-TRAILER with the CRC32 trailer value crc.
func unsignedTrailerRequest(t *testing.T, e *harness.Env, url string, data []byte, crc string) *http.Request {
	t.Helper()
	req := newRequest(t, http.MethodPut, url, unsignedTrailerBody(data, "x-amz-checksum-crc32:"+crc))
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
	req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
	return signed(t, e, req, harness.StreamingUnsignedTrail)
}
