package s3err

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sweepgate/sweepgate/s3client"
)

// MaxStampedBody bounds the backend error documents StampResponse reads
// to restamp; S3's are a few hundred bytes, and a larger body is streamed
// on as it is.
const MaxStampedBody = 64 << 10

// StampRequestID returns body with the RequestId of its S3 <Error>
// document set to requestID, or body itself when it is not an error
// document. A backend's error carries the backend's own request id; the
// gateway's replaces it so that the id a client reports is the one in the
// gateway's logs (whose request line keeps the backend's as backend_id).
func StampRequestID(body []byte, requestID string) []byte {
	if !isErrorDocument(body) {
		return body
	}
	var id bytes.Buffer
	_ = xml.EscapeText(&id, []byte(requestID))
	const open, end = "<RequestId>", "</RequestId>"
	if i := bytes.Index(body, []byte(open)); i >= 0 {
		if j := bytes.Index(body[i:], []byte(end)); j >= 0 {
			return concat(body[:i+len(open)], id.Bytes(), body[i+j:])
		}
	}
	if i := bytes.LastIndex(body, []byte("</Error>")); i >= 0 {
		return concat(body[:i], []byte(open), id.Bytes(), []byte(end), body[i:])
	}
	return body
}

func concat(parts ...[]byte) []byte {
	var n int
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// isErrorDocument reports whether body's root element is <Error>.
func isErrorDocument(body []byte) bool {
	_, _, ok := s3client.ErrorDocument(body)
	return ok
}

// StampResponse restamps the error document of a backend response (see
// StampRequestID) before it is passed on: only an answer of status 300 or
// more with a small, uncompressed XML body of known length, which it reads
// whole. Every other answer streams on untouched.
func StampResponse(resp *http.Response, requestID string) {
	if resp.StatusCode < 300 || resp.ContentLength <= 0 || resp.ContentLength > MaxStampedBody ||
		(resp.Request != nil && resp.Request.Method == http.MethodHead) ||
		resp.Header.Get("Content-Encoding") != "" || !strings.Contains(resp.Header.Get("Content-Type"), "xml") {
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, resp.ContentLength))
	resp.Body.Close()
	if err != nil {
		// The client gets what arrived and then the same failure.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return
	}
	body = StampRequestID(body, requestID)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
