package multipart

import (
	"context"

	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// maxPartNumber is S3's largest part number.
const maxPartNumber = 10000

var (
	errNoSuchUpload = &s3err.Error{Code: "NoSuchUpload", Message: "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.", HTTPStatus: http.StatusNotFound}
	errPartNumber   = s3err.ErrInvalidArgument.WithMessage("Part number must be an integer between 1 and 10000, inclusive")
	errInProgress   = &s3err.Error{Code: "OperationAborted", Message: "A conflicting conditional operation is currently in progress against this resource. Try again.", HTTPStatus: http.StatusConflict}
)

// parsePartNumber checks a part number as S3 does.
func parsePartNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxPartNumber {
		return 0, errPartNumber
	}
	return n, nil
}

// acceptsActivity reports whether a session in state st takes activity at
// all. An expired session does: activity wins over cleanup. A completing one
// takes part listings but not parts (see recordActivity).
func acceptsActivity(st etcdstore.SessionState) bool {
	switch st {
	case etcdstore.StateActive, etcdstore.StateExpired, etcdstore.StateCompleting:
		return true
	}
	return false
}

// recordActivity records activity on the call's session before the call's
// bytes go to the backend: on an active session one transaction that
// compares the session and writes the activity key; on an expired session a
// transition back to active. With flight set (a part), the same transaction
// records the part in flight under the gateway's lease, so that the check
// of the session's state and the record that keeps the reclaimer away are
// one decision: a reclaimer that moved the session first makes this
// transaction fail and the part is refused; one that comes after finds the
// record. found is false when the upload has no session. lease is the
// lease the flight's record was written under. The writes more go in the
// same transaction.
func (s *Service) recordActivity(ctx context.Context, c *Call, part int, flight string, more ...clientv3.Op) (found bool, lease clientv3.LeaseID, err error) {
	for range s.attempts {
		v, ok, err := s.loadSession(ctx, c)
		if err != nil || !ok {
			return ok, 0, err
		}
		if !s.mayAct(c.Principal, &v.Value) {
			return true, 0, s3err.ErrAccessDenied
		}
		if !acceptsActivity(v.Value.State) {
			return true, 0, errNoSuchUpload
		}
		if c.Op != s3op.ListParts && v.Value.State == etcdstore.StateCompleting {
			// The complete may still fail and return the upload to active,
			// so the part is refused for now, not for good.
			return true, 0, errInProgress
		}
		act := etcdstore.Activity{At: s.now().UTC(), What: string(c.Op), Part: part}
		var also []clientv3.Op
		if flight != "" {
			if lease, err = s.flights.lease(ctx); err != nil {
				return true, 0, err
			}
			also = append(also, s.store.InFlightOp(c.UploadID, flight, act, lease))
			also = append(also, more...)
		}
		if flight != "" {
			err = s.stampPart(ctx, c, v, act, also...)
		} else {
			err = s.stamp(ctx, c, v, act, also...)
		}
		switch {
		case errors.Is(err, etcdstore.ErrConflict):
			s.metrics.conflicts.Inc()
			continue
		case flight != "" && leaseGone(err):
			s.flights.lost(lease)
			continue
		}
		return true, lease, err
	}
	return true, 0, errTooManyConflicts
}

// stamp records act on the session v (active or expired) together with the
// writes also, comparing the revision v was read at: on an active session
// the activity key only, so parallel parts do not conflict; on an expired
// session a move back to active, since activity wins over cleanup.
func (s *Service) stamp(ctx context.Context, c *Call, v etcdstore.Versioned[etcdstore.Session], act etcdstore.Activity, also ...clientv3.Op) error {
	if v.Value.State != etcdstore.StateExpired {
		return s.store.RecordActivity(ctx, c.Bucket, c.UploadID, v.ModRev, act, also...)
	}
	sess := v.Value
	sess.History = slices.Clone(sess.History)
	sess.LastActivity = act.At
	sess.ExpiredAt = nil
	sess.Transition(etcdstore.StateActive, act.At, actorGateway, "activity: "+act.What)
	_, err := s.store.UpdateSession(ctx, etcdstore.SessionUpdate{
		Session: &sess, ModRev: v.ModRev,
		Then: append([]clientv3.Op{s.store.ActivityOp(c.UploadID, act)}, also...),
	})
	if err == nil {
		s.metrics.transitions.WithLabelValues(string(etcdstore.StateExpired), string(etcdstore.StateActive)).Inc()
	}
	return err
}

// stampPart is stamp for the start or the end of a part, whose writes also
// hold the part's in-flight record or its part record. From keyspace
// schema 2 an active session's activity key is not written with them: the
// in-flight record keeps the upload while the part streams, and the part
// record's time is its end's activity (etcdstore.UploadState.
// RecordedActivity), which every release that reads schema 2 judges by.
// A keyspace in schema 1 may have gateways of releases that judge by the
// activity key alone, so there it is written as before.
func (s *Service) stampPart(ctx context.Context, c *Call, v etcdstore.Versioned[etcdstore.Session], act etcdstore.Activity, also ...clientv3.Op) error {
	if v.Value.State == etcdstore.StateActive && s.store.WritesSchema() >= 2 {
		return s.store.IfSession(ctx, c.Bucket, c.UploadID, v.ModRev, also...)
	}
	return s.stamp(ctx, c, v, act, also...)
}

// countingHash hashes and counts what passes through it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// copyPartResult is the backend's answer to UploadPartCopy.
type copyPartResult struct {
	XMLName xml.Name `xml:"CopyPartResult"`
	ETag    string   `xml:"ETag"`
}

// uploadPart serves UploadPart and UploadPartCopy. Before the bytes go to
// the backend the part is recorded in flight (beginPart): in keyspace
// schema 1 by a commit of its own record and activity; from schema 2 under
// its upload's lingering record, written by the first part of a burst on
// this gateway and checked by a read-only transaction for the others.
// Once the backend call ended, one transaction records activity again
// and, when the backend accepted the part, records it (ETag, size,
// SHA-256), and in schema 1 removes the part's in-flight record (endPart).
// So from schema 2 a part after the first of a burst costs one commit. A
// part for a session that no longer takes parts never reaches the backend.
func (s *Service) uploadPart(ctx context.Context, c *Call) reply.Reply {
	n, err := parsePartNumber(c.PartNumber)
	if err != nil {
		return s.fail(c, err)
	}
	flight, found, err := s.beginPart(ctx, c, n)
	if err != nil {
		return s.fail(c, err)
	}
	if !found {
		return s.passThrough(c, nil)
	}
	sum := &countingHash{h: sha256.New()}
	if c.Op == s3op.UploadPart {
		c.Observe(sum)
	}
	resp, err := s.send(c, nil)
	if err != nil {
		// The part's bytes are sent, or failed: either way its end is
		// activity.
		s.endPart(ctx, c, n, flight, nil)
		return s.fail(c, err)
	}
	if resp.StatusCode != http.StatusOK {
		s.endPart(ctx, c, n, flight, nil)
		return reply.Relay(resp)
	}
	part := etcdstore.Part{Number: n, At: s.now().UTC()}
	var body []byte
	if c.Op == s3op.UploadPart {
		part.ETag = resp.Header.Get("ETag")
		part.Size = sum.n
		part.SHA256 = hex.EncodeToString(sum.h.Sum(nil))
	} else {
		body, err = readBody(resp)
		resp.Body.Close()
		var res copyPartResult
		if err == nil && ErrorCode(body) == "" && xml.Unmarshal(body, &res) == nil {
			part.ETag = res.ETag
			part.Size = copyRangeSize(c.Header.Get("X-Amz-Copy-Source-Range"))
		} else {
			s.endPart(ctx, c, n, flight, nil)
			if err != nil {
				return s.fail(c, s3err.ErrBadGateway)
			}
			return reply.Buffered(resp, body)
		}
	}
	// The part's record goes in the transaction that ends it, before the
	// client gets its answer.
	s.endPart(ctx, c, n, flight, &part)
	if body != nil {
		return reply.Buffered(resp, body)
	}
	return reply.Relay(resp)
}

// copyRangeSize returns the size named by an x-amz-copy-source-range header
// (bytes=first-last), or 0 when there is none.
func copyRangeSize(h string) int64 {
	r, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return 0
	}
	a, b, ok := strings.Cut(r, "-")
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || last < first {
		return 0
	}
	return last - first + 1
}

// passThrough forwards a call on an upload that has no session (made before
// sweepgate, or directly on the backend) unchanged: sweepgate does not own
// it, and the reclaimer holds it as an orphan rather than deleting it. body
// is the request body when the service has read it already, nil otherwise.
func (s *Service) passThrough(c *Call, body []byte) reply.Reply {
	resp, err := s.send(c, body)
	if err != nil {
		return s.fail(c, err)
	}
	return reply.Relay(resp)
}
