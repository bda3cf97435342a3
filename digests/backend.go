package digests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// unquoteETag returns an ETag without its quotes.
func unquoteETag(s string) string { return s3client.UnquoteETag(s) }

// send sends a client's request on to the backend and reads the answer
// whole; the gateway's backend client times the call and notes the
// backend's request id.
func (s *Service) send(out *http.Request) (*s3client.Answer, error) {
	return s3client.Send(s.backend, out)
}

// call makes a request of the service's own to the backend.
func (s *Service) call(ctx context.Context, method, bucket, key string, query url.Values, header http.Header) (*s3client.Answer, error) {
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
	return s3client.ReadAnswer(resp)
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
func (s *Service) writeAnswer(w http.ResponseWriter, q *Request, a *s3client.Answer) {
	s3err.WriteAnswer(w, a.Status, a.Header, a.Body, q.RequestID)
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
