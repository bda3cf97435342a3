package gateway

import (
	"bytes"

	"io"
	"net/http"

	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3err"
)

// errBodyTooLarge refuses a request body the gateway must read whole (a
// CompleteMultipartUpload document) when it is larger than it may be.
var errBodyTooLarge = &s3err.Error{Code: "MaxMessageLengthExceeded", Message: "Your request was too big.", HTTPStatus: http.StatusBadRequest}

// serveMultipart hands a multipart call to the session service and writes
// its answer.
func (g *Gateway) serveMultipart(w http.ResponseWriter, r *http.Request, req *request) {
	g.answer(w, r, req, g.sessions.Serve(r.Context(), g.multipartCall(r, req)))
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
		ReadBody: func(limit int64) ([]byte, error) {
			b, err := io.ReadAll(io.LimitReader(payload.Body(), limit+1))
			if err != nil {
				return nil, err
			}
			if int64(len(b)) > limit {
				return nil, errBodyTooLarge
			}
			return b, nil
		},
		BackendRequest: func(body []byte) (*http.Request, error) {
			return g.backendRequest(r, req, body)
		},
	}
}

// backendRequest builds the backend request for a client request that the
// session service forwards: the client's payload as verified, or body.
func (g *Gateway) backendRequest(in *http.Request, req *request, body []byte) (*http.Request, error) {
	out := in.Clone(in.Context())
	out.RequestURI = ""
	out.Close = false
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	g.addressBackend(out, in, req)
	// The session service reads some answers itself (XML it parses and may
	// rewrite): they must not come back compressed.
	out.Header.Del("Accept-Encoding")
	outbound := req.auth.Payload.Outbound()
	if body == nil {
		if err := outbound.Apply(out); err != nil {
			return nil, err
		}
		return out, nil
	}
	for _, h := range outbound.Remove {
		out.Header.Del(h)
	}
	out.TransferEncoding = nil
	out.Header.Del("Content-Length")
	out.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	out.ContentLength = int64(len(body))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = nil
	if len(body) == 0 {
		out.Body = http.NoBody
	}
	return out, nil
}
