package multipart

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3err"
)

// maxCompleteBody bounds a CompleteMultipartUpload body: 10000 parts with
// their checksums fit comfortably.
const maxCompleteBody = 4 << 20

// completeBackendTimeout bounds a complete's backend call, which does not
// end with its client's request (see complete).
const completeBackendTimeout = 5 * time.Minute

var (
	errMalformedXML     = &s3err.Error{Code: "MalformedXML", Message: "The XML you provided was not well-formed or did not validate against our published schema.", HTTPStatus: http.StatusBadRequest}
	errInvalidPartOrder = &s3err.Error{Code: "InvalidPartOrder", Message: "The list of parts was not in ascending order. The parts list must be specified in order by part number.", HTTPStatus: http.StatusBadRequest}
)

// completeRequest is the body of CompleteMultipartUpload.
type completeRequest struct {
	XMLName xml.Name       `xml:"CompleteMultipartUpload"`
	Parts   []completePart `xml:"Part"`
}

type completePart struct {
	PartNumber int    `xml:"PartNumber"`
	ETag       string `xml:"ETag"`
}

// parseComplete reads and checks a CompleteMultipartUpload body as S3 does:
// well-formed, at least one part, part numbers in range and ascending.
func parseComplete(body []byte) ([]completePart, error) {
	var req completeRequest
	if err := xml.Unmarshal(body, &req); err != nil || len(req.Parts) == 0 {
		return nil, errMalformedXML
	}
	for i, p := range req.Parts {
		if p.PartNumber < 1 || p.PartNumber > maxPartNumber {
			return nil, errPartNumber
		}
		if strings.TrimSpace(p.ETag) == "" {
			return nil, errMalformedXML
		}
		if i > 0 && p.PartNumber <= req.Parts[i-1].PartNumber {
			return nil, errInvalidPartOrder
		}
	}
	return req.Parts, nil
}

func unquote(etag string) string { return strings.Trim(strings.TrimSpace(etag), `"`) }

// partsDigest identifies a part list, so a retried complete is recognised.
func partsDigest(parts []completePart) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", p.PartNumber, unquote(p.ETag))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// multipartETag returns the ETag S3 gives the object a complete with these
// parts produces (the MD5 of the parts' MD5s, then "-" and the count), or ""
// when a part's ETag is not an MD5 (encrypted uploads).
func multipartETag(parts []completePart) string {
	h := md5.New()
	for _, p := range parts {
		b, err := hex.DecodeString(unquote(p.ETag))
		if err != nil || len(b) != md5.Size {
			return ""
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(parts))
}

// clientCompleteErrors are the backend's answers that say the complete
// request itself was wrong: the upload is unchanged and takes the client's
// next attempt, so its session returns to active.
var clientCompleteErrors = map[string]bool{
	"InvalidPart": true, "InvalidPartOrder": true, "EntityTooSmall": true,
	"MalformedXML": true, "InvalidArgument": true, "InvalidRequest": true,
	"BadDigest": true, "InvalidDigest": true,
}

// CompleteResult is the S3 answer to a successful complete.
type CompleteResult struct {
	XMLName        xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUploadResult"`
	Location       string   `xml:"Location"`
	Bucket         string   `xml:"Bucket"`
	Key            string   `xml:"Key"`
	ETag           string   `xml:"ETag"`
	ChecksumCRC32  string   `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C string   `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64  string   `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1   string   `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256 string   `xml:"ChecksumSHA256,omitempty"`
}

func (r CompleteResult) completion(versionID string) *etcdstore.Completion {
	c := &etcdstore.Completion{Location: r.Location, Bucket: r.Bucket, Key: r.Key, ETag: r.ETag, VersionID: versionID}
	for name, v := range map[string]string{
		"ChecksumCRC32": r.ChecksumCRC32, "ChecksumCRC32C": r.ChecksumCRC32C, "ChecksumCRC64NVME": r.ChecksumCRC64,
		"ChecksumSHA1": r.ChecksumSHA1, "ChecksumSHA256": r.ChecksumSHA256,
	} {
		if v != "" {
			if c.Checksums == nil {
				c.Checksums = etcdstore.Checksums{}
			}
			c.Checksums[name] = v
		}
	}
	return c
}

// replayCompletion answers a retried complete with the recorded result.
func (s *Service) replayCompletion(comp *etcdstore.Completion) reply.Reply {
	r := CompleteResult{Location: comp.Location, Bucket: comp.Bucket, Key: comp.Key, ETag: comp.ETag}
	r.ChecksumCRC32 = comp.Checksums["ChecksumCRC32"]
	r.ChecksumCRC32C = comp.Checksums["ChecksumCRC32C"]
	r.ChecksumCRC64 = comp.Checksums["ChecksumCRC64NVME"]
	r.ChecksumSHA1 = comp.Checksums["ChecksumSHA1"]
	r.ChecksumSHA256 = comp.Checksums["ChecksumSHA256"]
	h := http.Header{}
	if comp.VersionID != "" {
		h.Set("X-Amz-Version-Id", comp.VersionID)
	}
	return reply.XML(h, r)
}

// complete serves CompleteMultipartUpload. "completing" is recorded before
// the backend call; success records the result (replayed to retries with the
// same part list); a definite client error (or a refused condition, while
// the upload stands) returns the session to active; anything unclear leaves
// it completing for a retry or the reconciler, which never reverts or
// deletes it. Only one complete of an upload is in flight on
// the backend at a time (completeAttempt); another answers OperationAborted.
func (s *Service) complete(ctx context.Context, c *Call) reply.Reply {
	body, err := c.readBody(maxCompleteBody)
	if err != nil {
		return s.fail(c, err)
	}
	parts, err := parseComplete(body)
	if err != nil {
		return s.fail(c, err)
	}
	attempt, err := s.newCompleteAttempt(ctx, c)
	if err != nil {
		return s.fail(c, err)
	}
	defer func() {
		rctx, cancel := detached(ctx)
		defer cancel()
		attempt.release(rctx)
	}()
	sess, answer, ok := s.claimComplete(ctx, c, parts, body, attempt)
	if !ok {
		return answer
	}
	s.fault(FaultCompleteAfterIntent)
	return s.sendComplete(ctx, c, body, attempt, &sess)
}

// claimComplete records the session completing with parts under attempt,
// and returns it. Where the complete is not this request's to send (no
// session: passed through; not the caller's; completed, aborted or another
// complete in flight; too many conflicting writes) it returns the client's
// answer and ok false.
func (s *Service) claimComplete(ctx context.Context, c *Call, parts []completePart, body []byte, attempt *completeAttempt) (_ etcdstore.Session, answer reply.Reply, ok bool) {
	digest := partsDigest(parts)
	none := etcdstore.Session{}
	// inFlight reports whether another complete of the upload is in
	// flight, with the answer that refuses this one.
	inFlight := func() (reply.Reply, bool) {
		lctx, cancel := s.bounded(ctx)
		defer cancel()
		live, err := attempt.live(lctx)
		if err != nil {
			return s.fail(c, err), true
		}
		if live {
			return s.fail(c, errInProgress), true
		}
		return reply.Reply{}, false
	}
	var sess etcdstore.Session
	for try := 0; ; try++ {
		if try == s.attempts {
			return none, s.fail(c, errTooManyConflicts), false
		}
		v, found, err := s.loadSession(ctx, c)
		if err != nil {
			return none, s.fail(c, err), false
		}
		if !found {
			return none, s.passThrough(c, body), false
		}
		if !s.mayAct(c.Principal, &v.Value) {
			return none, s.fail(c, s3err.ErrAccessDenied), false
		}
		switch v.Value.State {
		case etcdstore.StateCompleted:
			if v.Value.PartsDigest == digest && v.Value.Completion != nil {
				return none, s.replayCompletion(v.Value.Completion), false
			}
			return none, s.fail(c, errNoSuchUpload), false
		case etcdstore.StateAborting, etcdstore.StateAborted, etcdstore.StateCleanupPending:
			return none, s.fail(c, errNoSuchUpload), false
		case etcdstore.StateCompleting:
			if v.Value.PartsDigest != digest {
				return none, s.fail(c, errInProgress), false
			}
			if answer, busy := inFlight(); busy {
				return none, answer, false
			}
			// A retry of a complete whose outcome is unknown, and no
			// gateway is sending it: this request takes it over.
			nv, ok, err := s.transition(ctx, v, etcdstore.StateCompleting, "client retried the complete", nil, attempt.claim())
			if err != nil {
				return none, s.fail(c, err), false
			}
			if !ok {
				continue
			}
			sess = nv.Value
		default:
			now := s.now().UTC()
			nv, ok, err := s.transition(ctx, v, etcdstore.StateCompleting, "client complete", func(sess *etcdstore.Session) {
				sess.LastActivity = now
				sess.PartsDigest = digest
				sess.ExpectedETag = multipartETag(parts)
				sess.Uncertain = ""
			}, attempt.claim())
			if err != nil {
				return none, s.fail(c, err), false
			}
			if !ok {
				if answer, busy := inFlight(); busy {
					return none, answer, false
				}
				continue
			}
			sess = nv.Value
		}
		break
	}
	return sess, reply.Reply{}, true
}

// sendComplete sends the complete the session records, which attempt
// holds, to the backend and settles the session by the backend's answer.
func (s *Service) sendComplete(ctx context.Context, c *Call, body []byte, attempt *completeAttempt, sess *etcdstore.Session) reply.Reply {
	out, err := c.backendRequest(body)
	if err != nil {
		return s.fail(c, err)
	}
	// The backend's complete runs to its end even when the client gives
	// up meanwhile: cut off midway, MinIO leaves the upload without its
	// parts and makes no object, so every retry would get InvalidPart.
	// Finished, its result is recorded for the client's retry.
	bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), completeBackendTimeout)
	defer bcancel()
	resp, err := s.backend.RoundTrip(out.WithContext(bctx))
	rctx, cancel := detached(ctx)
	defer cancel()
	if err != nil {
		return s.completeUnclear(rctx, c, attempt, sess, fmt.Sprintf("no answer from the backend: %v", err), nil, nil)
	}
	respBody, err := readBody(resp)
	resp.Body.Close()
	if err != nil {
		return s.completeUnclear(rctx, c, attempt, sess, err.Error(), nil, nil)
	}
	code := ErrorCode(respBody)
	if resp.StatusCode == http.StatusOK && code == "" {
		var res CompleteResult
		if err := xml.Unmarshal(respBody, &res); err != nil {
			return s.completeUnclear(rctx, c, attempt, sess, "unreadable complete result", resp, respBody)
		}
		comp := res.completion(resp.Header.Get("X-Amz-Version-Id"))
		comp.At = s.now().UTC()
		s.recordCompleted(rctx, c, comp, "backend completed", attempt)
		return reply.Buffered(resp, respBody)
	}
	switch {
	case clientCompleteErrors[code], code == "PreconditionFailed" && s.uploadStands(rctx, sess):
		if _, err := s.settle(rctx, c.Bucket, c.UploadID, etcdstore.StateCompleting, etcdstore.StateActive, "complete refused: "+code, func(sess *etcdstore.Session) {
			sess.PartsDigest, sess.ExpectedETag = "", ""
		}, attempt.owned()); err != nil {
			s.log.Error("complete refused but session not returned to active", "id", c.RequestID, "upload_id", c.UploadID, "err", err)
		}
		return reply.Buffered(resp, respBody)
	case code == "NoSuchUpload":
		// An earlier complete may have succeeded without our seeing it.
		return s.completeUnclear(rctx, c, attempt, sess, "backend answered NoSuchUpload", resp, respBody)
	default:
		return s.completeUnclear(rctx, c, attempt, sess, fmt.Sprintf("backend answered %d %s", resp.StatusCode, code), resp, respBody)
	}
}

// uploadStands reports whether the backend still lists the session's
// upload. A complete the backend refused on its conditions (If-Match,
// If-None-Match) left the upload as it was, since MinIO checks them before
// it touches the upload, and the upload takes the client's next attempt;
// but after an earlier complete of the same upload whose answer was lost,
// the object that earlier complete made fails them too, and then the
// upload is gone: that outcome is unclear, and settled by the object's
// ETag. A listing that fails says nothing, and counts as gone.
func (s *Service) uploadStands(ctx context.Context, sess *etcdstore.Session) bool {
	gone, _, err := s.uploadGone(ctx, sess)
	return err == nil && !gone
}

// completeUnclear handles a complete whose outcome is not known: if the
// object now exists with the expected ETag the complete succeeded and is
// recorded and answered as such; otherwise the session stays completing,
// with the doubt recorded, and the client gets the backend's answer (or
// ServiceUnavailable when there was none) so that it retries.
func (s *Service) completeUnclear(ctx context.Context, c *Call, attempt *completeAttempt, sess *etcdstore.Session, why string, resp *http.Response, body []byte) reply.Reply {
	if comp, ok := s.objectCompleted(ctx, sess); ok {
		s.recordCompleted(ctx, c, comp, "object found with the expected ETag after: "+why, attempt)
		return s.replayCompletion(comp)
	}
	s.log.Warn("complete outcome unclear; session left completing", "id", c.RequestID, "upload_id", c.UploadID, "why", why)
	if _, err := s.settle(ctx, c.Bucket, c.UploadID, etcdstore.StateCompleting, etcdstore.StateCompleting, "complete outcome unclear", func(sess *etcdstore.Session) {
		sess.Uncertain = why
	}); err != nil {
		s.log.Error("complete doubt not recorded", "id", c.RequestID, "upload_id", c.UploadID, "err", err)
	}
	if resp == nil {
		return s.fail(c, s3err.ErrBadGateway)
	}
	return reply.Buffered(resp, body)
}

// recordCompleted moves a completing session to completed with its result.
func (s *Service) recordCompleted(ctx context.Context, c *Call, comp *etcdstore.Completion, reason string, attempt *completeAttempt) {
	if _, err := s.settle(ctx, c.Bucket, c.UploadID, etcdstore.StateCompleting, etcdstore.StateCompleted, reason, func(sess *etcdstore.Session) {
		sess.Completion = comp
		sess.Uncertain = ""
	}, attempt.done()); err != nil {
		// The object exists; the session stays completing and the
		// reconciler records the completion from the object.
		s.log.Error("complete succeeded but not recorded; the reconciler will", "id", c.RequestID, "upload_id", c.UploadID, "err", err)
	}
}

// objectCompleted reports whether the session's object exists with the ETag
// its complete would produce, and returns a completion built from it.
func (s *Service) objectCompleted(ctx context.Context, sess *etcdstore.Session) (*etcdstore.Completion, bool) {
	comp, _, err := s.completedObject(ctx, sess)
	return comp, err == nil && comp != nil
}
