package gateway

import (
	"net/http"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/multipart"
)

// serveMultipart hands a multipart call to the session service and writes
// its answer.
func (g *Gateway) serveMultipart(w http.ResponseWriter, r *http.Request, req *request) {
	g.answer(w, r, req, req.shard.Sessions.Serve(r.Context(), g.multipartCall(r, req)))
}

// multipartCall is the session service's view of a multipart call, with
// the means to read and forward its verified body.
func (g *Gateway) multipartCall(r *http.Request, req *request) *multipart.Call {
	q := r.URL.Query()
	payload := req.auth.Payload
	return &multipart.Call{
		Op:             req.route.Operation,
		Bucket:         req.route.Bucket,
		Key:            req.route.Key,
		UploadID:       q.Get("uploadId"),
		PartNumber:     q.Get("partNumber"),
		Principal:      req.auth.Principal,
		RequestID:      req.id,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Resource:       r.URL.Path,
		Header:         r.Header,
		Observe:        payload.Observe,
		PayloadErr:     payload.Err,
		Body:           payload.Body,
		Forward:        g.forwardOf(r, req),
	}
}

// forwardOf prepares in, a verified client request, for the backend (each
// request a service builds from it, cloned only then):
// path-style, without the client's signature, the hop-by-hop headers and
// Accept-Encoding (a service reads some answers itself: they must not come
// back compressed). A service sends it with the client's verified payload
// or a body of its own (backend.Forward).
func (g *Gateway) forwardOf(in *http.Request, req *request) *backend.Forward {
	return backend.PrepareForward(in, func(out *http.Request) {
		out.RequestURI = ""
		out.Close = false
		for _, h := range hopHeaders {
			out.Header.Del(h)
		}
		g.addressBackend(out, in, req)
		out.Header.Del("Accept-Encoding")
	}, req.auth.Payload)
}
