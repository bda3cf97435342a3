package digests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sweepgate/sweepgate/gateway/s3err"
	"github.com/sweepgate/sweepgate/s3client"
)

// answer is a backend response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// success reports a 2xx answer that is not an error document (a copy or a
// complete may answer 200 and fail in its body).
func (a *answer) success() bool {
	_, _, isErr := s3client.ErrorDocument(a.body)
	return a.status >= 200 && a.status < 300 && !isErr
}

// definiteFailure reports an answer that says the request changed nothing:
// a redirect or a client error.
func (a *answer) definiteFailure() bool { return a.status >= 300 && a.status < 500 }

// Error makes a refusal usable as an error (hashObject's, a failed
// delete's).
func (a *answer) Error() string { return fmt.Sprintf("backend answered %d", a.status) }

// unquoteETag returns an ETag without its quotes.
func unquoteETag(s string) string { return s3client.UnquoteETag(s) }

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

// readAnswer reads an answer whole, within s3client.MaxAnswer.
func readAnswer(resp *http.Response) (*answer, error) {
	body, err := s3client.ReadBody(resp.Body, s3client.MaxAnswer)
	if err != nil {
		return nil, fmt.Errorf("read backend answer: %w", err)
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
	s3err.CopyAnswerHeader(w.Header(), resp.Header, q.RequestID)
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
	s3err.WriteAnswer(w, a.status, a.header, a.body, q.RequestID)
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
	return s3client.ResultETag(c.body.Bytes())
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
