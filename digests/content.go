package digests

import (
	"context"
	"io"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3err"
)

// A content namespace's blob may be a manifest that names further blobs
// (cas.Namespace.Content). What it names is recorded as the references of
// the blob's own key, in the same steps as a reference object's write
// (writeRef): before the body goes to the backend, refused while a named
// blob is being reclaimed, settled by the write's outcome. The collector
// removes them when it deletes the blob's bytes. A blob over
// cas.DefaultContentLimit is never a manifest and is written as any blob.

// contentSized reports whether a write of length bytes into ns (-1:
// unknown) may be content: ns has content and the length is within the
// limit or not declared.
func contentSized(ns *cas.Namespace, length int64) bool {
	return ns.Content != "" && length <= cas.DefaultContentLimit
}

// putContentBlob serves a PutObject of a blob into a content namespace
// whose length may be within the content limit: the body is read whole,
// checked against the digest, and parsed; what it names is recorded before
// it goes to the backend. A body found larger than the limit (its length
// was not declared) is refused: what it names could not be known.
func (s *Service) putContentBlob(ctx context.Context, q *Request, digest string) reply.Reply {
	body, err := io.ReadAll(io.LimitReader(q.Body(), cas.DefaultContentLimit+1))
	if err != nil {
		return reply.Error(err)
	}
	if len(body) > cas.DefaultContentLimit {
		return reply.Error(s3err.ErrMissingContentLength.WithMessage("A blob in a content namespace is read whole when it may be a manifest (up to %d bytes); declare the length of a larger one. Nothing was stored.", cas.DefaultContentLimit))
	}
	h, _ := cas.NewHash(digest)
	h.Write(body)
	if hashDigest(digest, h) != digest {
		return reply.Error(errBadBlob(digest))
	}
	digests, _, err := cas.ParseManifest(body)
	if err != nil {
		return reply.Error(errDigests(err))
	}
	out := q.Forward.WithPayloadRead(body)
	if len(digests) == 0 {
		return s.forwardRequest(ctx, q, out)
	}
	return s.writePut(ctx, q, out, body, digests)
}

// refuseSmallComplete refuses a CompleteMultipartUpload onto a content
// namespace's blob key whose parts add up to no more than the content
// limit: such a blob may be a manifest, whose references must be recorded
// before it is stored, and a complete's body is known only after. It
// reports whether it answered the request. Registries write manifests with
// PutObject (or CopyObject), and complete only large blobs.
func (s *Service) refuseSmallComplete(ctx context.Context, q *Request) (refused reply.Reply, ok bool) {
	sctx, cancel := s.stateContext(ctx)
	defer cancel()
	size, known, err := s.uploadSize(sctx, q.Bucket, q.Key, q.Query.Get("uploadId"))
	switch {
	case err != nil:
		s.log.Error("size of an upload into a content namespace unknown", "id", q.RequestID, "err", err)
		return reply.Error(s3err.ErrServiceUnavailable.WithMessage("The size of the upload could not be read; nothing was changed. Please retry.")), false
	case known && size <= cas.DefaultContentLimit:
		return reply.Error(s3err.ErrInvalidRequest.WithMessage("A blob of %d bytes in a content namespace may be a manifest, whose references are recorded before it is stored: write it with PutObject or CopyObject. Nothing was changed.", size)), false
	}
	return reply.Reply{}, true
}
