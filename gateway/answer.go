package gateway

import (
	"io"
	"net/http"
	"strconv"

	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// send sends a client's request on to the backend and reads the answer
// whole; the backend client reports the call's duration and the backend's
// request id to the request's Caller.
func (g *Gateway) send(out *http.Request) (*s3client.Answer, error) {
	return s3client.Send(g.backend, out)
}

// backendFailed answers a request whose backend round trip failed.
func (g *Gateway) backendFailed(w http.ResponseWriter, r *http.Request, req *request, err error) {
	if r.Context().Err() != nil {
		return // the client went away; nobody is left to answer
	}
	g.log.Warn("backend request failed", "id", req.id, "op", req.route.Operation, "err", err)
	g.writeError(w, r, s3err.ErrBadGateway)
}

// writeAnswer answers the client with a backend answer read whole.
func (g *Gateway) writeAnswer(w http.ResponseWriter, req *request, a *s3client.Answer) {
	s3err.WriteAnswer(w, a.Status, a.Header, a.Body, req.id)
}

// answer writes a service's reply to the client: an error as an S3 error
// document; a backend response as it streams, its error document (if
// small) and its X-Amz-Request-Id carrying the gateway's request id; an
// answer read or rendered whole with its length; a replayed outcome as it
// was recorded, marked as a replay. Connection-level headers of a backend
// answer are never passed on.
func (g *Gateway) answer(w http.ResponseWriter, r *http.Request, req *request, rep reply.Reply) {
	switch {
	case rep.Err != nil:
		g.writeError(w, r, rep.Err)
	case rep.Stream != nil:
		resp := rep.Stream
		defer resp.Body.Close()
		s3err.StampResponse(resp, req.id)
		s3err.CopyAnswerHeader(w.Header(), resp.Header, req.id)
		if resp.ContentLength >= 0 {
			w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	case rep.Replayed:
		h := w.Header()
		for k, vs := range rep.Header {
			h[k] = vs
		}
		h.Set("X-Amz-Request-Id", req.id)
		h.Set("X-Sweepgate-Idempotent-Replay", "true")
		w.WriteHeader(rep.Status)
		_, _ = w.Write(rep.Body)
	case rep.Status == http.StatusNoContent:
		s3err.CopyAnswerHeader(w.Header(), rep.Header, req.id)
		w.WriteHeader(http.StatusNoContent)
	default:
		s3err.WriteAnswer(w, rep.Status, rep.Header, rep.Body, req.id)
	}
}
