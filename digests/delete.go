package digests

import (
	"context"
	"encoding/xml"
	"errors"
	"time"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// DeleteTarget is an object a DeleteObjects names.
type DeleteTarget struct {
	Key       string
	VersionID string
}

// DeleteRefusal is an object of a DeleteObjects that is not sent to the
// backend, and the S3 error its entry in the DeleteResult carries.
type DeleteRefusal struct {
	Key, VersionID string
	Code, Message  string
}

// trashedObject is a reference object whose references a DeleteObjects
// moved to the trash.
type trashedObject struct {
	obj DeleteTarget
	at  time.Time
}

// DeleteObjects does digest reclamation's part of a DeleteObjects in a
// bucket of the layout (Serves(s3op.DeleteObjects, ...)), whose document the
// gateway has parsed and checked into objs. Each blob's guard is armed
// first (a blob whose guard is armed already is refused with SlowDown),
// then each referenced blob is refused (unless an admin asks) and each
// reference object's references move to the trash; then send sends the
// rest to the backend (keep indexes objs), with a context that ends at the
// deadline recorded on the guards, and returns the backend's answer, or
// the error that stopped it. A reference object the backend did not delete
// gets its references back; the guards are released once the answer is
// clear, and left for a pass to settle otherwise. send is not called when
// nothing is left to send, nor once the recorded deadline has passed.
//
// It returns the refused objects, for the gateway's DeleteResult; ok false
// means the request is answered with answer instead (its etcd step failed,
// or the deadline passed before the request could be sent).
func (s *Service) DeleteObjects(ctx context.Context, q *Request, objs []DeleteTarget, send func(ctx context.Context, keep []int) (status int, body []byte, err error)) (refused []DeleteRefusal, answer reply.Reply, ok bool) {
	ctx = context.WithValue(ctx, serviceRequestKey{}, q)
	sendCtx := ctx
	ctx, cancel := s.stateContext(ctx)
	defer cancel()
	keep := make([]int, len(objs))
	for i := range objs {
		keep[i] = i
	}
	now := s.now()
	sendBy := now.Add(clientDeleteTimeout)
	keep, refused, guards, err := s.guardBlobs(ctx, q, objs, keep, now, sendBy)
	if err != nil {
		return nil, s.refuseState(q, err), false
	}
	keep, refusedRefs, err := s.refuseReferenced(ctx, q, objs, keep)
	if err == nil {
		refused = append(refused, refusedRefs...)
		var inFlight []DeleteRefusal
		var trashed []trashedObject
		keep, trashed, inFlight, err = s.trashSources(ctx, q.Bucket, q.Principal, objs, keep)
		refused = append(refused, inFlight...)
		if err == nil && len(keep) > 0 {
			left := sendBy.Sub(s.now())
			if left <= 0 {
				for _, t := range trashed {
					s.restoreTrash(ctx, q.Bucket, t.obj.Key, t.at)
				}
				s.releaseGuards(ctx, q, guards)
				return nil, reply.Error(s3err.ErrSlowDown.WithMessage("The delete could not be sent before its deadline; retry.")), false
			}
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(sendCtx), left)
			status, body, serr := send(dctx, keep)
			dcancel()
			var a *s3client.Answer
			if serr == nil {
				a = &s3client.Answer{Status: status, Body: body}
			}
			s.settleTrash(ctx, q.Bucket, trashed, a, serr)
			if serr != nil || !(a.DefiniteFailure() || a.Success() && s3client.DocumentIs(a.Body, "DeleteResult")) {
				if len(guards) > 0 {
					s.log.Warn("client's DeleteObjects unclear; the guards of its blobs stay armed until a pass settles them", "id", q.RequestID, "blobs", len(guards), "err", serr)
				}
				return refused, reply.Reply{}, true
			}
		}
	}
	s.releaseGuards(ctx, q, guards)
	if err != nil {
		return nil, s.refuseState(q, err), false
	}
	return refused, reply.Reply{}, true
}

// armedGuard is a guard a client's delete armed, with its mod revision.
type armedGuard struct {
	digest string
	rev    int64
}

// guardBlobs arms the guard of each blob among the objects keep names,
// recording the delete about to be sent (deadline sendBy). A blob whose
// guard is armed already is refused with SlowDown. On an error, the
// guards armed so far are released.
func (s *Service) guardBlobs(ctx context.Context, q *Request, objs []DeleteTarget, keep []int, now, sendBy time.Time) (send []int, refused []DeleteRefusal, guards []armedGuard, err error) {
	seen := map[string]bool{}
	for _, i := range keep {
		o := objs[i]
		_, digest, blob := s.layout.Namespace(q.Bucket, o.Key)
		if !blob || seen[digest] {
			send = append(send, i)
			continue
		}
		rev, err := s.store.ArmGuard(ctx, etcdstore.Guard{
			Digest: digest, Bucket: q.Bucket, Key: o.Key, At: now.UTC(),
			Attempt: &etcdstore.DeleteAttempt{Sent: now.UTC(), Deadline: sendBy.UTC()},
		})
		switch {
		case errors.Is(err, etcdstore.ErrGuarded):
			refused = append(refused, DeleteRefusal{Key: o.Key, VersionID: o.VersionID, Code: s3err.ErrSlowDown.Code, Message: "The blob " + digest + " is being reclaimed or deleted, or a complete naming blobs is in flight; retry."})
			continue
		case err != nil:
			s.releaseGuards(ctx, q, guards)
			return nil, nil, nil, err
		}
		seen[digest] = true
		guards = append(guards, armedGuard{digest: digest, rev: rev})
		send = append(send, i)
	}
	return send, refused, guards, nil
}

// releaseGuards releases the guards a client's delete armed, each only if
// it is still as armed; one left behind is settled by a pass.
func (s *Service) releaseGuards(ctx context.Context, q *Request, guards []armedGuard) {
	for _, g := range guards {
		if err := s.store.ReleaseGuard(ctx, g.digest, g.rev); err != nil {
			s.log.Warn("guard of a client's blob delete not released; a pass settles it", "id", q.RequestID, "digest", g.digest, "err", err)
		}
	}
}

// refuseReferenced splits the objects keep names into those that may be
// deleted and the blobs that are still referenced, which a principal who
// is not an admin may not delete. It changes nothing; the blobs' guards
// are armed already, so no reference can be recorded after it looked.
func (s *Service) refuseReferenced(ctx context.Context, q *Request, objs []DeleteTarget, keep []int) (send []int, refused []DeleteRefusal, err error) {
	admin := s.isAdmin(q.Principal)
	for _, i := range keep {
		o := objs[i]
		if _, digest, blob := s.layout.Namespace(q.Bucket, o.Key); blob && !admin {
			referenced, err := s.store.Referenced(ctx, digest, s.now())
			if err != nil {
				return nil, nil, err
			}
			if referenced {
				e := errReferenced(digest)
				refused = append(refused, DeleteRefusal{Key: o.Key, VersionID: o.VersionID, Code: e.Code, Message: e.Message})
				continue
			}
		}
		send = append(send, i)
	}
	return send, refused, nil
}

// trashSources moves the references of the reference objects among those
// keep names to the trash. An object with a write in flight is refused
// (SlowDown); a failure restores everything moved so far.
func (s *Service) trashSources(ctx context.Context, bucket, principal string, objs []DeleteTarget, keep []int) (send []int, trashed []trashedObject, refused []DeleteRefusal, err error) {
	now := s.now()
	expires := now.Add(s.trashWindow)
	for _, i := range keep {
		o := objs[i]
		if !s.layout.HasReferences(bucket, o.Key) {
			send = append(send, i)
			continue
		}
		_, ok, err := s.store.TrashRefSource(ctx, bucket, o.Key, principal, now, expires)
		switch {
		case errors.Is(err, etcdstore.ErrWriteInFlight):
			refused = append(refused, DeleteRefusal{Key: o.Key, VersionID: o.VersionID, Code: s3err.ErrSlowDown.Code, Message: "Another write or delete of this object is in flight; retry."})
			continue
		case err != nil:
			s.restoreTrash(ctx, bucket, o.Key, now)
			for _, t := range trashed {
				s.restoreTrash(ctx, bucket, t.obj.Key, t.at)
			}
			return nil, nil, nil, err
		case ok:
			trashed = append(trashed, trashedObject{obj: o, at: now})
			audit.Record(s.logFor(ctx), audit.TrashObject, bucket+"/"+o.Key, "DeleteObjects of a reference object: its digests stay retained in the trash until it expires",
				"principal", principal, "client", backend.ClientAddr(ctx), "deleted_at", now, "expires", expires)
		}
		send = append(send, i)
	}
	return send, trashed, refused, nil
}

// deletesAnswer is the backend's DeleteResult, as settleTrash reads it.
// XMLName has no tag so that a backend's answer parses whatever its
// namespace.
type deletesAnswer struct {
	XMLName xml.Name
	Deleted []struct {
		Key                   string `xml:"Key"`
		VersionID             string `xml:"VersionId,omitempty"`
		DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
		DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
	} `xml:"Deleted"`
	Errors []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId,omitempty"`
		Code      string `xml:"Code"`
		Message   string `xml:"Message"`
	} `xml:"Error"`
}

// settleTrash restores the references of the trashed reference objects
// that the backend did not delete.
func (s *Service) settleTrash(ctx context.Context, bucket string, trashed []trashedObject, a *s3client.Answer, err error) {
	if len(trashed) == 0 {
		return
	}
	var got deletesAnswer
	if err == nil && a.Success() && (xml.Unmarshal(a.Body, &got) != nil || got.XMLName.Local != "DeleteResult") {
		err = errors.New("a success whose body is not a DeleteResult")
	}
	failed := map[DeleteTarget]bool{}
	for _, e := range got.Errors {
		failed[DeleteTarget{Key: e.Key, VersionID: e.VersionID}] = true
	}
	for _, t := range trashed {
		if err == nil && a.Success() && failed[DeleteTarget{Key: t.obj.Key, VersionID: t.obj.VersionID}] {
			s.restoreTrash(ctx, bucket, t.obj.Key, t.at)
			continue
		}
		s.settleDeleted(ctx, bucket, t.obj.Key, t.obj.VersionID != "", a, err, t.at)
	}
}
