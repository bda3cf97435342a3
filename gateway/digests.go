package gateway

import (
	"context"
	"net/http"

	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// serveDigests hands a request that the digest service serves to it, with
// the means to read and forward its verified body, and writes its answer.
func (g *Gateway) serveDigests(w http.ResponseWriter, r *http.Request, req *request) {
	q, err := g.digestRequest(r, req)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	g.answer(w, r, req, req.shard.Digests.Serve(r.Context(), q))
}

// digestRequest is the digest service's view of a request.
func (g *Gateway) digestRequest(r *http.Request, req *request) (*digests.Request, error) {
	payload := req.auth.Payload
	q := &digests.Request{
		Op:            req.route.Operation,
		Bucket:        req.route.Bucket,
		Key:           req.route.Key,
		Query:         r.URL.Query(),
		Principal:     req.auth.Principal,
		RequestID:     req.id,
		Resource:      r.URL.Path,
		Header:        r.Header,
		DecodedLength: payload.DecodedLength(),
		Body:          payload.Body,
		Observe:       payload.Observe,
		PayloadErr:    payload.Err,
		Forward:       g.forwardOf(r, req),
		Complete: func(header http.Header) reply.Reply {
			in := r
			if header != nil {
				in = r.Clone(r.Context())
				in.Header = header
			}
			return g.completeWhole(in, req)
		},
	}
	if req.route.Operation == s3op.CopyObject {
		// resolveRoute refused a copy source that does not parse.
		cs, err := parseCopySource(r.Header.Get("X-Amz-Copy-Source"))
		if err != nil {
			return nil, err
		}
		q.CopySource = digests.CopySource{Bucket: cs.bucket, Key: cs.key, VersionID: cs.versionID}
	}
	return q, nil
}

// pass serves a request the way the gateway serves it without digest
// reclamation.
func (g *Gateway) pass(w http.ResponseWriter, r *http.Request, req *request) {
	if req.route.Operation.IsMultipart() && req.shard.Sessions != nil {
		g.serveMultipart(w, r, req)
		return
	}
	g.forward(w, r, req)
}

// completeWhole sends a CompleteMultipartUpload the way the gateway does
// without digest reclamation (through the session service when sessions
// are on) and returns its answer read whole.
func (g *Gateway) completeWhole(r *http.Request, req *request) reply.Reply {
	if req.shard.Sessions != nil {
		return req.shard.Sessions.Serve(r.Context(), g.multipartCall(r, req)).Whole()
	}
	out, err := g.forwardOf(r, req).Request()
	if err != nil {
		return reply.Error(err)
	}
	a, err := g.send(out)
	switch {
	case err == nil:
		return reply.Reply{Status: a.Status, Header: a.Header, Body: a.Body}
	case req.auth.Payload.Err() != nil:
		return reply.Error(req.auth.Payload.Err())
	case r.Context().Err() != nil:
		return reply.Reply{} // the client went away; nobody is left to answer
	}
	g.log.Warn("backend request failed", "id", req.id, "op", req.route.Operation, "err", err)
	return reply.Error(s3err.ErrBadGateway)
}

// deleteDigests has the digest service do its part of a DeleteObjects in
// a bucket of the layout: it refuses referenced blobs and trashes the
// references of reference objects, and sendBatch sends the objects it
// keeps. ok false means the request has been answered.
func (g *Gateway) deleteDigests(w http.ResponseWriter, r *http.Request, req *request, objs []deleteObject, sendBatch func(context.Context, []deleteObject) (*s3client.Answer, error)) (refused []deleteError, ok bool) {
	q, err := g.digestRequest(r, req)
	if err != nil {
		g.writeError(w, r, err)
		return nil, false
	}
	targets := make([]digests.DeleteTarget, len(objs))
	for i, o := range objs {
		targets[i] = digests.DeleteTarget{Key: o.Key, VersionID: o.VersionID}
	}
	refusals, answer, ok := req.shard.Digests.DeleteObjects(r.Context(), q, targets, func(ctx context.Context, keep []int) (int, []byte, error) {
		kept := make([]deleteObject, len(keep))
		for i, k := range keep {
			kept[i] = objs[k]
		}
		a, err := sendBatch(ctx, kept)
		if err != nil {
			return 0, nil, err
		}
		return a.Status, a.Body, nil
	})
	if !ok {
		g.answer(w, r, req, answer)
		return nil, false
	}
	for _, f := range refusals {
		refused = append(refused, deleteError{Key: f.Key, VersionID: f.VersionID, Code: f.Code, Message: f.Message})
	}
	return refused, true
}
