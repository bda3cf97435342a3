package multipart

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// errNoSession says the upload has no session: it is passed through.
var errNoSession = errors.New("multipart: upload has no session")

// abort serves AbortMultipartUpload. "aborting" is recorded before the
// backend abort; the backend's confirmation (or its NoSuchUpload) makes the
// session "aborted", and anything unclear makes it "cleanup_pending" for
// the reconciler. Either way the client gets 204: the upload is logically
// gone and takes no more parts. A repeated abort answers 204 too.
func (s *Service) abort(ctx context.Context, c *Call) reply.Reply {
	if answer, ok := s.replayIdempotent(ctx, c); ok {
		return answer
	}
	err := s.abortUpload(ctx, c)
	switch {
	case errors.Is(err, errNoSession):
		audit.Record(s.logFor(ctx), audit.AbortUpload, audit.Upload(c.Bucket, c.Key, c.UploadID), "client abort of an upload without a session, passed through to the backend",
			"principal", c.Principal, "client", backend.ClientAddr(ctx), "id", c.RequestID)
		return s.passThrough(c, nil)
	case errors.Is(err, errNoSuchUpload):
		s.rememberIdempotent(ctx, c, err)
		return s.fail(c, err)
	case err != nil:
		return s.fail(c, err)
	default:
		s.rememberIdempotent(ctx, c, nil)
		return reply.NoContent()
	}
}

// abortUpload records the abort intent, aborts on the backend and records
// what came of it. It returns nil when the upload is (logically) aborted.
func (s *Service) abortUpload(ctx context.Context, c *Call) error {
	for range s.attempts {
		v, found, err := s.loadSession(ctx, c)
		if err != nil {
			return err
		}
		if !found {
			return errNoSession
		}
		if !s.mayAct(c.Principal, &v.Value) {
			return s3err.ErrAccessDenied
		}
		switch v.Value.State {
		case etcdstore.StateAborting, etcdstore.StateAborted, etcdstore.StateCleanupPending:
			return nil
		case etcdstore.StateCompleted:
			return errNoSuchUpload
		case etcdstore.StateCompleting:
			return errInProgress
		}
		now := s.now().UTC()
		_, ok, err := s.transition(ctx, v, etcdstore.StateAborting, "client abort", func(sess *etcdstore.Session) {
			sess.LastActivity = now
		})
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		s.fault(FaultAbortAfterIntent)

		out, err := c.backendRequest(nil)
		if err != nil {
			return err
		}
		unclear := abortOutcome(s.backend.RoundTrip(out))
		rctx, cancel := detached(ctx)
		defer cancel()
		outcome := etcdstore.StateAborted
		if unclear != nil {
			outcome = etcdstore.StateCleanupPending
		}
		audit.Record(s.logFor(ctx), audit.AbortUpload, audit.Upload(c.Bucket, c.Key, c.UploadID), "client abort",
			"principal", c.Principal, "client", backend.ClientAddr(ctx), "id", c.RequestID, "outcome", outcome)
		if unclear == nil {
			_, err = s.settle(rctx, c.Bucket, c.UploadID, etcdstore.StateAborting, etcdstore.StateAborted, "backend confirmed abort", nil)
		} else {
			s.log.Warn("abort outcome unclear; left for the reconciler", "id", c.RequestID, "upload_id", c.UploadID, "err", unclear)
			_, err = s.settle(rctx, c.Bucket, c.UploadID, etcdstore.StateAborting, etcdstore.StateCleanupPending, "abort outcome unclear", func(sess *etcdstore.Session) {
				sess.Uncertain = unclear.Error()
				sess.AbortAttempts++
			})
		}
		if err != nil {
			// The intent is recorded ("aborting"), so the reconciler
			// finishes the abort; the client's abort stands.
			s.log.Error("abort outcome not recorded; the reconciler will settle it", "id", c.RequestID, "upload_id", c.UploadID, "err", err)
		}
		return nil
	}
	return errTooManyConflicts
}

// abortOutcome reads the backend's answer to an abort: nil when the upload is
// gone (aborted now, answered 204 or 200 with no body as S3 answers an
// abort, or NoSuchUpload because it already was), or an error saying why
// the outcome is unclear. A success status whose body cannot be read, or
// carries any document (an error document among them), is unclear.
func abortOutcome(resp *http.Response, err error) error {
	if err != nil {
		return fmt.Errorf("no answer from the backend: %w", err)
	}
	defer resp.Body.Close()
	body, rerr := readBody(resp)
	switch {
	case (resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK) && rerr == nil && s3client.EmptyBody(body):
		return nil
	case resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK:
		return fmt.Errorf("backend answered %d with an unexpected body (%d bytes, error code %q)", resp.StatusCode, len(body), ErrorCode(body))
	case resp.StatusCode == http.StatusNotFound && ErrorCode(body) == "NoSuchUpload":
		return nil
	}
	code := ErrorCode(body)
	return fmt.Errorf("backend answered %d %s", resp.StatusCode, code)
}

// abortBackend aborts an upload on the backend outside a client request (the
// reconciler, or a create whose session could not be recorded).
func (s *Service) abortBackend(ctx context.Context, bucket, key, uploadID string) error {
	req, err := s.backend.NewRequest(ctx, http.MethodDelete, bucket, key, uploadQuery(uploadID))
	if err != nil {
		return err
	}
	return abortOutcome(s.backend.RoundTrip(req))
}

// idempotencyID is the etcd key of a client's Idempotency-Key: scoped to the
// principal, so one principal's key never answers another's request.
func idempotencyID(c *Call) string {
	sum := sha256.Sum256([]byte(c.Principal + "\x00" + c.IdempotencyKey))
	return hex.EncodeToString(sum[:])
}

// idempotencyRequest identifies what an Idempotency-Key was first used for.
func idempotencyRequest(c *Call) string {
	return string(c.Op) + " " + c.Bucket + "/" + c.Key + "?uploadId=" + c.UploadID
}

var errIdempotencyReuse = s3err.ErrInvalidRequest.WithMessage("The Idempotency-Key was already used for a different request.")

// replayIdempotent returns the answer of a call whose Idempotency-Key has
// a recorded outcome (that outcome, as it was recorded), and ok true; ok
// false when the call must be served.
func (s *Service) replayIdempotent(ctx context.Context, c *Call) (answer reply.Reply, ok bool) {
	if c.IdempotencyKey == "" {
		return reply.Reply{}, false
	}
	o, err := s.store.GetIdempotent(ctx, idempotencyID(c))
	if errors.Is(err, etcdstore.ErrNotFound) {
		return reply.Reply{}, false
	}
	if err != nil {
		return s.fail(c, err), true
	}
	if o.Request != idempotencyRequest(c) {
		return s.fail(c, errIdempotencyReuse), true
	}
	return reply.Reply{Status: o.Status, Header: o.Header, Body: o.Body, Replayed: true}, true
}

// rememberIdempotent records the first definite outcome of a call that
// carries an Idempotency-Key.
func (s *Service) rememberIdempotent(ctx context.Context, c *Call, outcome error) {
	if c.IdempotencyKey == "" {
		return
	}
	o := etcdstore.IdempotentOutcome{Request: idempotencyRequest(c), Status: http.StatusNoContent, At: s.now().UTC()}
	if outcome != nil {
		e := s3err.As(outcome)
		o.Status = e.HTTPStatus
		o.Body = s3err.Document(e, c.Resource, c.RequestID)
		o.Header = map[string][]string{"Content-Type": {"application/xml"}}
	}
	rctx, cancel := detached(ctx)
	defer cancel()
	if _, err := s.store.PutIdempotent(rctx, idempotencyID(c), o, s.idemTTL); err != nil && !errors.Is(err, etcdstore.ErrConflict) {
		s.log.Warn("idempotent outcome not recorded", "id", c.RequestID, "err", err)
	}
}

// AbortRequest names an upload to abort for a request that another service
// serves (the digest service's complete of a blob stored already).
type AbortRequest struct {
	Bucket, Key, UploadID string
	// Principal and RequestID are the client request's, for the session's
	// ownership check and the audit line.
	Principal, RequestID string
}

// AbortUpload aborts an upload the way a client's abort does (the intent
// recorded before the backend call, the outcome after, an unclear one left
// to the reconciler), with a backend call of its own. An upload without a
// session is aborted on the backend directly. It returns nil when the
// upload is (logically) aborted.
func (s *Service) AbortUpload(ctx context.Context, r AbortRequest) error {
	req, err := s.backend.NewRequest(ctx, http.MethodDelete, r.Bucket, r.Key, uploadQuery(r.UploadID))
	if err != nil {
		return err
	}
	c := &Call{
		Op: s3op.AbortMultipartUpload, Bucket: r.Bucket, Key: r.Key, UploadID: r.UploadID,
		Principal: r.Principal, RequestID: r.RequestID, Header: http.Header{},
		Forward: backend.NewForward(req, nil),
	}
	err = s.abortUpload(ctx, c)
	if errors.Is(err, errNoSession) {
		audit.Record(s.logFor(ctx), audit.AbortUpload, audit.Upload(r.Bucket, r.Key, r.UploadID), "abort of an upload without a session, sent to the backend",
			"principal", r.Principal, "id", r.RequestID)
		return s.abortBackend(ctx, r.Bucket, r.Key, r.UploadID)
	}
	return err
}
