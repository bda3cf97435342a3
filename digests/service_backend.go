package digests

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sweepgate/sweepgate/gateway/s3err"
)

// maxAnswer bounds the backend answers read whole (the XML answers of
// writes and deletes, which are small).
const maxAnswer = 8 << 20

// answer is a backend response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// success reports a 2xx answer that is not an error document (a copy or a
// complete may answer 200 and fail in its body).
func (a *answer) success() bool {
	return a.status >= 200 && a.status < 300 && !isErrorDocument(a.body)
}

// definiteFailure reports an answer that says the request changed nothing:
// a redirect or a client error.
func (a *answer) definiteFailure() bool { return a.status >= 300 && a.status < 500 }

// Error makes a refusal usable as an error by the readers below.
func (a *answer) Error() string { return fmt.Sprintf("backend answered %d", a.status) }

// isErrorDocument reports whether body is an S3 <Error> document.
func isErrorDocument(body []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		t, err := d.Token()
		if err != nil {
			return false
		}
		if se, ok := t.(xml.StartElement); ok {
			return se.Name.Local == "Error"
		}
	}
}

// resultETag returns the ETag of a result document (CopyObjectResult,
// CompleteMultipartUploadResult), and false for an error document.
func resultETag(body []byte) (string, bool) {
	var doc struct {
		XMLName xml.Name
		ETag    string `xml:"ETag"`
	}
	if xml.Unmarshal(body, &doc) != nil || doc.XMLName.Local == "Error" || doc.ETag == "" {
		return "", false
	}
	return unquoteETag(doc.ETag), true
}

func unquoteETag(s string) string { return strings.Trim(strings.TrimSpace(s), `"`) }

// send sends a client's request on to the backend and reads the answer
// whole; the gateway's backend client times the call and notes the
// backend's request id.
func (s *Service) send(out *http.Request) (*answer, error) {
	resp, err := s.backend.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAnswer(resp)
}

func readAnswer(resp *http.Response) (*answer, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("read backend answer: %w", err)
	}
	if len(body) > maxAnswer {
		return nil, fmt.Errorf("backend answer larger than %d bytes", maxAnswer)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// call makes a request of the service's own to the backend.
func (s *Service) call(ctx context.Context, method, bucket, key string, query url.Values, header http.Header) (*answer, error) {
	req, err := s.backend.NewRequest(ctx, method, bucket, key, query)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := s.backend.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", method, bucket, key, err)
	}
	defer resp.Body.Close()
	return readAnswer(resp)
}

// headObject returns the ETag of bucket/key, and found false when the
// backend says it does not exist.
func (s *Service) headObject(ctx context.Context, bucket, key string) (etag string, found bool, err error) {
	a, err := s.call(ctx, http.MethodHead, bucket, key, nil, nil)
	switch {
	case err != nil:
		return "", false, err
	case a.status == http.StatusOK:
		return unquoteETag(a.header.Get("ETag")), true, nil
	case a.status == http.StatusNotFound:
		return "", false, nil
	}
	return "", false, fmt.Errorf("HEAD %s/%s: backend answered %d", bucket, key, a.status)
}

// errObjectTooLarge says an object is over the limit it is read within.
var errObjectTooLarge = errors.New("digests: object larger than its parse limit")

// readObject reads bucket/key whole (the version query names, the one
// with ETag ifMatch when not empty), at most limit bytes, and returns it
// with its ETag. A backend refusal is returned as an *answer error.
func (s *Service) readObject(ctx context.Context, bucket, key string, query url.Values, ifMatch string, limit int64) ([]byte, string, error) {
	req, err := s.backend.NewRequest(ctx, http.MethodGet, bucket, key, query)
	if err != nil {
		return nil, "", err
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", `"`+ifMatch+`"`)
	}
	resp, err := s.backend.RoundTrip(req)
	if err != nil {
		return nil, "", fmt.Errorf("GET %s/%s: %w", bucket, key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a, err := readAnswer(resp)
		if err != nil {
			return nil, "", err
		}
		return nil, "", a
	}
	if resp.ContentLength > limit {
		return nil, "", errObjectTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("GET %s/%s: %w", bucket, key, err)
	}
	if int64(len(body)) > limit {
		return nil, "", errObjectTooLarge
	}
	return body, unquoteETag(resp.Header.Get("ETag")), nil
}

// forwardRequest sends a prepared backend request and streams its answer
// to the client, as the gateway's proxy does.
func (s *Service) forwardRequest(ctx context.Context, w http.ResponseWriter, q *Request, out *http.Request) {
	resp, err := s.backend.RoundTrip(out)
	s.relay(ctx, w, q, resp, err)
}

// relay streams the backend's answer to a forwarded request to the client.
// A body that failed verification is answered with its own error: the
// backend cannot have stored it, and the client must hear why.
func (s *Service) relay(ctx context.Context, w http.ResponseWriter, q *Request, resp *http.Response, err error) {
	if resp != nil {
		defer resp.Body.Close()
	}
	if perr := q.PayloadErr(); perr != nil {
		s.writeError(w, q, perr)
		return
	}
	if err != nil {
		s.backendFailed(ctx, w, q, err)
		return
	}
	s3err.StampResponse(resp, q.RequestID)
	copyAnswerHeader(w.Header(), resp.Header, q.RequestID)
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// backendFailed answers a request whose backend round trip failed.
func (s *Service) backendFailed(ctx context.Context, w http.ResponseWriter, q *Request, err error) {
	if ctx.Err() != nil {
		return // the client went away; nobody is left to answer
	}
	s.log.Warn("backend request failed", "id", q.RequestID, "op", q.Op, "err", err)
	s.writeError(w, q, s3err.ErrBadGateway)
}

// writeAnswer answers the client with a backend answer read whole.
func (s *Service) writeAnswer(w http.ResponseWriter, q *Request, a *answer) {
	body := a.body
	if !a.success() {
		body = s3err.StampRequestID(body, q.RequestID)
	}
	copyAnswerHeader(w.Header(), a.header, q.RequestID)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(body)
}

// answerHopHeaders are the headers of a backend answer that are not
// passed on: connection-level ones, and the length, which is set anew.
var answerHopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
}

func copyAnswerHeader(dst, src http.Header, requestID string) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, k := range answerHopHeaders {
		dst.Del(k)
	}
	dst.Set("X-Amz-Request-Id", requestID)
}

// capture is a ResponseWriter that keeps a whole answer, so that the
// service can act on a complete's or a copy's outcome (which a 200 may
// carry as an <Error> body) before the client hears it.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newCapture() *capture { return &capture{header: make(http.Header)} }

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(p)
}

// result returns the ETag of a successful result document.
func (c *capture) result() (string, bool) {
	if c.status < 200 || c.status >= 300 {
		return "", false
	}
	return resultETag(c.body.Bytes())
}

// writeTo sends the captured answer to the client.
func (c *capture) writeTo(w http.ResponseWriter) {
	if c.status == 0 {
		return // nothing was answered: the client went away
	}
	for k, vs := range c.header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(c.body.Len()))
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body.Bytes())
}
