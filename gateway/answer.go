package gateway

import (
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
	writeWhole(w, a.Status, a.Header, a.Body, req.id)
}

// answer writes a service's reply to the client: a request passed on as
// the gateway serves it without the service; an error as an S3 error
// document; a backend response as the proxy relays it (passThrough.relay),
// its error document (if small) and its X-Amz-Request-Id carrying the
// gateway's request id; an
// answer read or rendered whole with its length; a replayed outcome as it
// was recorded, marked as a replay; nothing for the zero Reply (the client
// went away). Connection-level headers of a backend answer are never
// passed on. The reply's Done runs once the answer is written.
func (g *Gateway) answer(w http.ResponseWriter, r *http.Request, req *request, rep reply.Reply) {
	if rep.Done != nil {
		defer rep.Done()
	}
	switch {
	case rep.Pass:
		g.pass(w, r, req)
	case rep.Err != nil:
		g.writeError(w, r, rep.Err)
	case rep.Stream != nil:
		g.proxy.relay(w, r, rep.Stream, func(resp *http.Response) error {
			s3err.StampResponse(resp, req.id)
			resp.Header.Set("X-Amz-Request-Id", req.id)
			return nil
		})
	case rep.Replayed:
		h := w.Header()
		for k, vs := range rep.Header {
			h[k] = vs
		}
		h.Set("X-Amz-Request-Id", req.id)
		h.Set("X-Sweepgate-Idempotent-Replay", "true")
		w.WriteHeader(rep.Status)
		_, _ = w.Write(rep.Body)
	case rep.Status == 0:
		// Nothing to answer: the client went away.
	case rep.Status == http.StatusNoContent:
		copyAnswerHeader(w.Header(), rep.Header, req.id)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeWhole(w, rep.Status, rep.Header, rep.Body, req.id)
	}
}

// copyAnswerHeader copies a backend answer's headers to the client's
// answer dst, without the hop-by-hop ones (hopHeaders) and the length,
// which is set anew, and sets X-Amz-Request-Id to requestID.
func copyAnswerHeader(dst, src http.Header, requestID string) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, k := range hopHeaders {
		dst.Del(k)
	}
	dst.Del("Content-Length")
	dst.Set("X-Amz-Request-Id", requestID)
}

// writeWhole answers with an answer read or rendered whole: its headers as
// copyAnswerHeader copies them, its length, and its error document, if it
// is one, restamped with requestID (s3err.StampRequestID).
func writeWhole(w http.ResponseWriter, status int, header http.Header, body []byte, requestID string) {
	body = s3err.StampRequestID(body, requestID)
	copyAnswerHeader(w.Header(), header, requestID)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
