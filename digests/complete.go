package digests

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// blobReadTimeout bounds the service's own reads of a stored blob (a
// completed object read back, an object found at the key) so that a hung
// backend does not hold a request forever. These reads go on when the
// client hangs up: a completed object that does not hash to its digest
// must be found and deleted all the same.
const blobReadTimeout = time.Hour

// completeBlob serves a CompleteMultipartUpload onto a blob's key in a
// verifying namespace. The content is unknown until the backend has
// assembled it, so the complete is sent with If-None-Match: * and lands
// only on a key that holds no object: it never replaces one.
//
//   - It lands: the object is the gateway's own write. It is read back and
//     hashed, and one that does not hash to the digest is deleted again
//     (removeCompleted) and answered BadDigest.
//   - The backend refuses it (PreconditionFailed): the key holds an object,
//     and the upload is as it was (the session service returns its session
//     to active). completeOntoStored settles it.
//
// A complete that carries the client's own If-Match could only replace the
// object at the key, so it is refused and not sent. One that carries the
// client's own If-None-Match gets the backend's answer as it is.
func (s *Service) completeBlob(ctx context.Context, q *Request, digest string) reply.Reply {
	if q.Header.Get("If-Match") != "" {
		return reply.Error(s3err.ErrPreconditionFailed.WithMessage("The key of blob %s is written once: a complete with If-Match could only replace the object at the key, so it was not sent; nothing was changed.", digest))
	}
	own := q.Header.Get("If-None-Match") != ""
	header := q.Header.Clone()
	header.Set("If-None-Match", "*")
	completed := q.Complete(header)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), blobReadTimeout)
	defer cancel()
	if etag, ok := resultETag(completed); ok {
		return s.checkCompleted(rctx, q, completed, etag, digest)
	}
	if completed.StatusCode() == http.StatusPreconditionFailed && !own && completed.Code() == "PreconditionFailed" {
		return s.completeOntoStored(rctx, q, digest)
	}
	return completed
}

// checkCompleted reads back the object a complete onto a blob's key made
// (the version it answered, with the ETag it answered) and answers the
// client: the complete's own answer when the object hashes to digest, and
// BadDigest, once the object is deleted again, when it does not.
func (s *Service) checkCompleted(ctx context.Context, q *Request, completed reply.Reply, etag, digest string) reply.Reply {
	bucket, key := q.Bucket, q.Key
	versionID := completed.Header.Get("X-Amz-Version-Id")
	var query url.Values
	if versionID != "" {
		query = url.Values{"versionId": {versionID}}
	}
	got, err := s.hashObject(ctx, bucket, key, query, http.Header{"If-Match": {`"` + etag + `"`}}, digest, 0)
	var refused *s3client.Answer
	switch {
	case errors.As(err, &refused) && refused.Status == http.StatusNotFound:
		// The object the answer names is gone: deleted since, or a retried
		// complete replays the result of one whose object did not hash to
		// its digest and was deleted. A success would have the producer
		// name a blob that is not stored.
		return reply.Error(s3err.ErrNoSuchKey.WithMessage("The object this complete made is no longer at the key (one that does not hash to %s is deleted again); upload the blob again.", digest))
	case err != nil:
		// A 412 means another write replaced the object since: through
		// the gateway, that was a verified blob.
		s.log.Warn("completed blob not verified", "id", q.RequestID, "bucket", bucket, "key", key, "err", err)
	case !got.match:
		removed := s.removeCompleted(ctx, q, etag, versionID)
		return reply.Error(s3err.ErrBadDigest.WithMessage("The completed content does not hash to %s, the digest its key names; %s.", digest, removed))
	}
	return completed
}

// removeCompleted deletes the object a complete onto a blob's key made
// that does not hash to the digest, and says what became of it. The
// object is the gateway's own write: the complete was sent with
// If-None-Match: *, so the key held no object before it. In a versioned
// bucket (the complete answered a version id) exactly that version is
// deleted. Without versioning the key is deleted only while a HEAD still
// shows the complete's ETag; MinIO's DeleteObject takes no condition, so a
// verified PUT of the same key that lands between that HEAD and the
// delete would be deleted with it.
func (s *Service) removeCompleted(ctx context.Context, q *Request, etag, versionID string) string {
	bucket, key := q.Bucket, q.Key
	log := s.log.With("id", q.RequestID, "bucket", bucket, "key", key, "etag", etag, "version", versionID)
	var query url.Values
	if versionID != "" {
		query = url.Values{"versionId": {versionID}}
	} else {
		now, err := s.s3.Head(ctx, bucket, key)
		switch {
		case errors.Is(err, s3client.ErrNoSuchKey):
			return "it is gone already"
		case err != nil:
			log.Error("completed blob that does not match its digest not deleted: its key could not be read", "err", err)
			return "it could not be deleted again; delete it"
		case now.ETag != etag:
			return "another write has replaced it since"
		}
	}
	a, err := s.call(ctx, http.MethodDelete, bucket, key, query, nil)
	if err != nil || !a.Success() {
		if err == nil {
			err = a
		}
		log.Error("completed blob that does not match its digest not deleted", "err", err)
		return "deleting it again failed; delete it"
	}
	return "it was deleted again"
}

// completeOntoStored serves a complete onto a blob's key that the backend
// refused because the key holds an object. That object is read and hashed.
// One that hashes to the digest is the blob, stored and verified: the
// client hears that its complete succeeded, with that object's ETag, and
// its upload is aborted, through the session service so that the session
// records it, so that the parts do not linger. One that does not was
// written around the gateway: the client hears so, and nothing is changed.
func (s *Service) completeOntoStored(ctx context.Context, q *Request, digest string) reply.Reply {
	bucket, key := q.Bucket, q.Key
	got, err := s.hashObject(ctx, bucket, key, nil, nil, digest, 0)
	switch {
	case err != nil:
		s.log.Warn("object at a blob's key not verified", "id", q.RequestID, "bucket", bucket, "key", key, "err", err)
		return reply.Error(s3err.ErrServiceUnavailable.WithMessage("The key of blob %s holds an object, which could not be read to verify it; nothing was changed. Please retry.", digest))
	case !got.match:
		s.log.Warn("object at a blob's key does not hash to its digest; written around the gateway", "id", q.RequestID, "bucket", bucket, "key", key, "etag", got.etag)
		return reply.Error(s3err.ErrPreconditionFailed.WithMessage("The key holds an object that does not hash to %s, the digest the key names: it was written around sweepgate. Nothing was changed, and the upload stays. Delete that object (an admin principal must, if the blob is referenced) and complete again.", digest))
	}
	s.abortStored(ctx, q)
	body, err := xml.Marshal(multipart.CompleteResult{
		Location: (&url.URL{Path: "/" + bucket + "/" + key}).String(),
		Bucket:   bucket,
		Key:      key,
		ETag:     `"` + got.etag + `"`,
	})
	if err != nil {
		return reply.Error(err)
	}
	body = append([]byte(xml.Header), body...)
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	h.Set("ETag", `"`+got.etag+`"`)
	if got.versionID != "" {
		h.Set("X-Amz-Version-Id", got.versionID)
	}
	return reply.Reply{Status: http.StatusOK, Header: h, Body: body}
}

// abortStored aborts the upload of a complete whose blob is stored
// already: through the session service (which records the abort, or
// leaves it to its reconciler when the backend's answer is unclear), or on
// the backend when sessions are off. A failure is logged: the client's
// blob is stored either way.
func (s *Service) abortStored(ctx context.Context, q *Request) {
	bucket, key, id := q.Bucket, q.Key, q.Query.Get("uploadId")
	var err error
	if s.sessions != nil {
		err = s.sessions.AbortUpload(ctx, multipart.AbortRequest{Bucket: bucket, Key: key, UploadID: id, Principal: q.Principal, RequestID: q.RequestID})
	} else if a, cerr := s.call(ctx, http.MethodDelete, bucket, key, url.Values{"uploadId": {id}}, nil); cerr != nil {
		err = cerr
	} else if a.Status != http.StatusNoContent {
		err = fmt.Errorf("backend answered %d: %s", a.Status, a.Body)
	}
	if err != nil {
		s.log.Warn("upload of a blob that is stored already not aborted; abort it", "id", q.RequestID, "bucket", bucket, "key", key, "upload", id, "err", err)
	}
}
