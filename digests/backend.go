package digests

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sweepgate/sweepgate/reply"
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

// forwardRequest sends a prepared backend request and relays its answer
// to the client as it streams, as the gateway's proxy does.
func (s *Service) forwardRequest(ctx context.Context, q *Request, out *http.Request) reply.Reply {
	resp, err := s.backend.RoundTrip(out)
	return s.relay(ctx, q, resp, err)
}

// relay relays the backend's answer to a forwarded request. A body that
// failed verification is answered with its own error: the backend cannot
// have stored it, and the client must hear why.
func (s *Service) relay(ctx context.Context, q *Request, resp *http.Response, err error) reply.Reply {
	if perr := q.PayloadErr(); perr != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return reply.Error(perr)
	}
	if err != nil {
		return s.backendFailed(ctx, q, err)
	}
	return reply.Relay(resp)
}

// backendFailed answers a request whose backend round trip failed; nothing
// when the client went away.
func (s *Service) backendFailed(ctx context.Context, q *Request, err error) reply.Reply {
	if ctx.Err() != nil {
		return reply.Reply{} // nobody is left to answer
	}
	s.log.Warn("backend request failed", "id", q.RequestID, "op", q.Op, "err", err)
	return reply.Error(s3err.ErrBadGateway)
}

// answer answers the client with a backend answer read whole.
func answer(a *s3client.Answer) reply.Reply {
	return reply.Reply{Status: a.Status, Header: a.Header, Body: a.Body}
}

// resultETag returns the ETag of a successful result document in rep.
func resultETag(rep reply.Reply) (string, bool) {
	if st := rep.StatusCode(); st < 200 || st >= 300 || rep.Err != nil {
		return "", false
	}
	return s3client.ResultETag(rep.Body)
}
