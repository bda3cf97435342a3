package multipart

import (
	"context"
	"encoding/xml"
	"net/url"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3err"
)

// initiateResult is the backend's answer to CreateMultipartUpload.
type initiateResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

// create forwards CreateMultipartUpload and records an active session for
// the upload id the backend returns. If the session cannot be recorded the
// new upload is aborted again, so no upload exists that nobody owns.
func (s *Service) create(ctx context.Context, c *Call) reply.Reply {
	// Without an answer the backend may still have created the upload;
	// the reclaimer holds such an orphan for a person, never deletes it.
	var res initiateResult
	resp, body, answer, ok := s.sendForXML(c, &res)
	if !ok {
		return answer
	}
	if res.UploadID == "" {
		s.log.Error("create multipart upload: no upload id in the backend's answer", "id", c.RequestID)
		return s.fail(c, s3err.ErrBadGateway)
	}
	now := s.now().UTC()
	sess := &etcdstore.Session{
		Bucket: c.Bucket, Key: c.Key, UploadID: res.UploadID, Owner: c.Principal,
		Created: now, LastActivity: now,
	}
	sess.Transition(etcdstore.StateActive, now, actorGateway, "created")
	rctx, cancel := detached(ctx)
	defer cancel()
	if _, err := s.store.CreateSession(rctx, sess); err != nil {
		s.log.Error("create multipart upload: session not recorded; aborting the new upload", "id", c.RequestID, "upload_id", res.UploadID, "err", err)
		audit.Record(s.logFor(ctx), audit.AbortUpload, audit.Upload(c.Bucket, c.Key, res.UploadID), "its session could not be recorded, so nobody would own it",
			"principal", c.Principal, "id", c.RequestID)
		if aerr := s.abortBackend(rctx, c.Bucket, c.Key, res.UploadID); aerr != nil {
			s.log.Error("create multipart upload: abort of unrecorded upload failed; it is an orphan", "id", c.RequestID, "upload_id", res.UploadID, "err", aerr)
		}
		return s.fail(c, err)
	}
	s.metrics.transitions.WithLabelValues("", string(etcdstore.StateActive)).Inc()
	return reply.Buffered(resp, body)
}

// uploadQuery is the query that names one upload.
func uploadQuery(uploadID string) url.Values {
	return url.Values{"uploadId": {uploadID}}
}
