package gateway

import (
	"fmt"
	"net/http"

	"github.com/sweepgate/sweepgate/gateway/s3err"
	"github.com/sweepgate/sweepgate/s3client"
)

// answer is a backend response read whole, for the calls whose answer the
// gateway reads before the client hears it (DeleteObjects).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// success reports a 2xx answer that is not an error document.
func (a *answer) success() bool {
	_, _, isErr := s3client.ErrorDocument(a.body)
	return a.status >= 200 && a.status < 300 && !isErr
}

// send sends a client's request on to the backend and reads the answer
// whole; backendClient.RoundTrip times the call and notes the backend's
// request id.
func (g *Gateway) send(out *http.Request) (*answer, error) {
	resp, err := g.backendClient.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := s3client.ReadBody(resp.Body, s3client.MaxAnswer)
	if err != nil {
		return nil, fmt.Errorf("read backend answer: %w", err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
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
func (g *Gateway) writeAnswer(w http.ResponseWriter, req *request, a *answer) {
	s3err.WriteAnswer(w, a.status, a.header, a.body, req.id)
}
