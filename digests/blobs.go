package digests

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// place records a write of digest's blob in flight, and returns the
// function that ends the record (always to be called). ok false means the
// write is refused, with answer.
func (s *Service) place(ctx context.Context, q *Request, digest string) (end func(), answer reply.Reply, ok bool) {
	end = func() {
		ctx, cancel := s.stateContext(ctx)
		defer cancel()
		if err := s.store.EndPlacement(ctx, digest, q.RequestID, q.Bucket, q.Key, s.now()); err != nil {
			s.log.Warn("blob placement not ended; it retains the blob until it is older than the placement grace", "id", q.RequestID, "digest", digest, "err", err)
		}
	}
	sctx, cancel := s.stateContext(ctx)
	defer cancel()
	if err := s.store.PlaceBlob(sctx, digest, q.RequestID, q.Bucket, q.Key, s.now()); err != nil {
		end() // it may have been made
		if errors.Is(err, etcdstore.ErrGuarded) {
			s.guardRefusals.WithLabelValues(string(q.Op)).Inc()
			return nil, reply.Error(s3err.ErrSlowDown.WithMessage("The blob %s is being reclaimed; upload it again once its deletion is done.", digest)), false
		}
		return nil, s.refuseState(q, err), false
	}
	return end, reply.Reply{}, true
}

// putBlob serves a PutObject of a blob: the write is placed, and, when the
// namespace verifies, its content must hash to the digest in its key.
func (s *Service) putBlob(ctx context.Context, q *Request, ns *cas.Namespace, digest string) reply.Reply {
	end, refused, ok := s.place(ctx, q, digest)
	if !ok {
		return refused
	}
	if !ns.Verify {
		return passPlaced(end)
	}
	defer end()
	if contentSized(ns, q.DecodedLength) {
		return s.putContentBlob(ctx, q, digest)
	}
	h, _ := cas.NewHash(digest) // Namespace.Digest returns valid digests only
	_, hexs, _ := strings.Cut(digest, ":")
	want, _ := hex.DecodeString(hexs)
	q.Observe(h)
	out, err := q.Forward.Request()
	if err != nil {
		return reply.Error(err)
	}
	if out.ContentLength == 0 {
		if !bytes.Equal(h.Sum(nil), want) {
			return reply.Error(errBadBlob(digest))
		}
		return s.forwardRequest(ctx, q, out)
	}
	check := &digestCheck{src: out.Body, h: h, want: want}
	out.Body = io.NopCloser(check)
	resp, err := s.backend.RoundTrip(out)
	// A mismatch makes the transport fail the request; an answer that came
	// before the body was read whole is the backend's own refusal.
	if err != nil && check.mismatch.Load() {
		return reply.Error(errBadBlob(digest))
	}
	return s.relay(ctx, q, resp, err)
}

// passPlaced passes a placed write on as the gateway serves it without
// digest reclamation, ending its placement (end) only once the write is
// answered.
func passPlaced(end func()) reply.Reply {
	r := reply.PassOn()
	r.Done = end
	return r
}

func errBadBlob(digest string) error {
	return s3err.ErrBadDigest.WithMessage("The content does not hash to %s, the digest its key names; nothing was stored.", digest)
}

// digestCheck passes a blob's outbound body through, always holding back
// its last byte until the source has ended, and then releases it only if
// the content (hashed into h as it was decoded) matches the digest. On a
// mismatch the backend never receives a complete body and stores nothing.
type digestCheck struct {
	src      io.Reader
	h        hash.Hash
	want     []byte
	held     byte
	hasHeld  bool
	checked  bool
	err      error
	mismatch atomic.Bool // read after the transport's goroutine failed
}

func (c *digestCheck) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for range 100 {
		if c.err == io.EOF && !c.checked {
			c.checked = true
			if !bytes.Equal(c.h.Sum(nil), c.want) {
				c.mismatch.Store(true)
				c.err = errDigestMismatch
			}
		}
		if c.err != nil {
			if c.err == io.EOF && c.hasHeld {
				p[0], c.hasHeld = c.held, false
				return 1, nil
			}
			return 0, c.err
		}
		var n int
		var err error
		if !c.hasHeld {
			n, err = c.src.Read(p)
			if n > 0 {
				c.held, c.hasHeld = p[n-1], true
				n--
			}
		} else if len(p) > 1 {
			// Read behind the held byte, send it first and hold the last.
			n, err = c.src.Read(p[1:])
			if n > 0 {
				p[0], c.held = c.held, p[n]
			}
		} else {
			var one [1]byte
			n, err = c.src.Read(one[:])
			if n == 1 {
				p[0], c.held = c.held, one[0]
			}
		}
		if err != nil {
			c.err = err
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, io.ErrNoProgress
}

var errDigestMismatch = errors.New("digests: blob content does not match its digest")

// writeBlob serves a CopyObject or CompleteMultipartUpload of a blob under
// a placement. In a verifying namespace neither replaces the object at the
// key with content that does not hash to its digest, and neither deletes an
// object the gateway did not write: a copy is verified before it is sent
// (copyBlob), a complete lands only on a free key and is verified after
// (completeBlob).
func (s *Service) writeBlob(ctx context.Context, q *Request, ns *cas.Namespace, digest string) reply.Reply {
	end, refused, ok := s.place(ctx, q, digest)
	if !ok {
		return refused
	}
	if !ns.Verify {
		return passPlaced(end)
	}
	defer end()
	if q.Op == s3op.CopyObject {
		return s.copyBlob(ctx, q, ns, digest)
	}
	if ns.Content != "" {
		if refused, ok := s.refuseSmallComplete(ctx, q); !ok {
			return refused
		}
	}
	return s.completeBlob(ctx, q, digest)
}

// hashDigest returns the sum of h as a digest of digest's algorithm.
func hashDigest(digest string, h hash.Hash) string {
	algo, _, _ := strings.Cut(digest, ":")
	return algo + ":" + hex.EncodeToString(h.Sum(nil))
}

// readBlob serves a GetObject or HeadObject of a blob: one whose bytes are
// being deleted does not exist, so that a producer uploads it again rather
// than naming bytes that are about to go. The guards come from the local
// copy (etcdstore.GuardWatch), so a read costs etcd nothing and works while
// etcd does not answer; a stale copy only advises a producer wrongly for a
// moment, as every write naming the digest is checked in etcd itself.
func (s *Service) readBlob(q *Request, digest string) reply.Reply {
	if s.guards.Armed(digest) {
		return reply.Error(s3err.ErrNoSuchKey.WithMessage("The specified key does not exist: its blob is being reclaimed; upload it again."))
	}
	return reply.PassOn()
}

// clientDeleteTimeout is the deadline of a blob delete the gateway sends
// for a client, recorded on the guard armed for it: until that deadline
// plus digests.guard_settle has passed, the leader leaves a guard it finds
// (its gateway died, or the answer was unclear) armed.
const clientDeleteTimeout = 30 * time.Second

// deleteBlob serves a client's DeleteObject of a blob: one still referenced
// is refused unless an admin principal asks. The digest's guard is armed
// first, with the attempt about to be sent, so no reference write can land
// between the reference check and the delete: a write recorded before the
// guard is seen by the check, one after it is refused with SlowDown. The
// guard is released once the backend's answer is clear (success or a
// refusal); after an unclear answer it is left, with its attempt, for the
// leader to settle once the delete can no longer be executed (SettleDue
// between passes, settleGuards at a pass's start).
func (s *Service) deleteBlob(ctx context.Context, q *Request, digest string) reply.Reply {
	sctx, cancel := s.stateContext(ctx)
	defer cancel()
	now := s.now()
	sendBy := now.Add(clientDeleteTimeout)
	rev, err := s.store.ArmGuard(sctx, etcdstore.Guard{
		Digest: digest, Bucket: q.Bucket, Key: q.Key, At: now.UTC(),
		Attempt: &etcdstore.DeleteAttempt{Sent: now.UTC(), Deadline: sendBy.UTC()},
	})
	if errors.Is(err, etcdstore.ErrGuarded) {
		return reply.Error(s3err.ErrSlowDown.WithMessage("The blob %s is being reclaimed or deleted, or a complete naming blobs is in flight; retry.", digest))
	}
	if err != nil {
		return s.refuseState(q, err) // the guard may be armed: a pass settles it
	}
	release := func() {
		rctx, cancel := s.stateContext(ctx)
		defer cancel()
		if err := s.store.ReleaseGuard(rctx, digest, rev); err != nil {
			s.log.Warn("guard of a client's blob delete not released; a pass settles it", "id", q.RequestID, "digest", digest, "err", err)
		}
	}
	referenced, err := s.store.Referenced(sctx, digest, now)
	if err != nil {
		release()
		return s.refuseState(q, err)
	}
	if referenced {
		if !s.isAdmin(q.Principal) {
			release()
			return reply.Error(errReferenced(digest))
		}
		audit.Record(s.logFor(ctx), audit.DeleteBlob, digest, "an admin principal deletes a blob that is still referenced",
			"principal", q.Principal, "client", backend.ClientAddr(ctx), "id", q.RequestID, "bucket", q.Bucket, "key", q.Key)
	}
	send := func(out *http.Request) (*s3client.Answer, error) {
		left := sendBy.Sub(s.now())
		if left <= 0 {
			return nil, errors.New("the delete's recorded deadline passed before it could be sent")
		}
		dctx, cancel := context.WithTimeout(out.Context(), left)
		defer cancel()
		return s.send(out.WithContext(dctx))
	}
	var a *s3client.Answer
	var answer reply.Reply
	if s.layout.HasReferences(q.Bucket, q.Key) {
		// What a manifest names goes to the trash, like a reference
		// object's references.
		a, answer, err = s.deleteRefWith(ctx, q, send)
	} else {
		a, answer, err = s.deleteObject(ctx, q, send)
	}
	if err == nil && (a == nil || a.Success() || a.DefiniteFailure()) {
		release() // nothing was sent, or the answer is clear
		return answer
	}
	s.log.Warn("client's blob delete unclear; its guard stays armed until a pass settles it", "id", q.RequestID, "digest", digest, "err", err)
	return answer
}

// deleteObject sends a client's delete through send. It returns the
// backend's answer (nil when nothing was sent, with the error that stands
// for it when no answer came) and the client's.
func (s *Service) deleteObject(ctx context.Context, q *Request, send func(*http.Request) (*s3client.Answer, error)) (*s3client.Answer, reply.Reply, error) {
	out, err := q.Forward.Request()
	if err != nil {
		return nil, reply.Error(err), nil
	}
	a, err := send(out)
	if err != nil {
		return nil, s.backendFailed(ctx, q, err), err
	}
	return a, answer(a), nil
}

func errReferenced(digest string) *s3err.Error {
	return s3err.ErrBlobReferenced.WithMessage("The blob %s is still referenced by a reference object or its trash; only an admin principal may delete it.", digest)
}
