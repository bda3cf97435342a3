package gateway

import (
	"net/http"

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
