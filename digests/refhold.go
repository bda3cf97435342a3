package digests

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// completeRef serves a CompleteMultipartUpload into a reference source.
// The assembled object's body is unknown until the backend has made it,
// so the complete runs under a reference hold, which keeps every guard
// from being armed, and its digests are recorded from the object before
// the hold ends.
func (s *Service) completeRef(ctx context.Context, q *Request, src *cas.Source) reply.Reply {
	sctx, cancel := s.stateContext(ctx)
	defer cancel()
	uploadID := q.Query.Get("uploadId")
	size, known, err := s.uploadSize(sctx, q.Bucket, q.Key, uploadID)
	if err != nil {
		s.log.Error("size of an upload into a reference source unknown", "id", q.RequestID, "upload", uploadID, "err", err)
		return reply.Error(s3err.ErrServiceUnavailable.WithMessage("The size of the upload could not be read, so its references could not be recorded; nothing was changed. Please retry."))
	}
	if known && size > src.MaxBody {
		return reply.Error(errSourceTooLarge(src, fmt.Sprintf("The upload's parts (%d bytes)", size)))
	}
	hold, err := s.holdRefs(sctx, q.RequestID, q.Bucket, q.Key)
	if err != nil {
		return s.refuseState(q, err)
	}
	completed := q.Complete(nil)
	// The complete may have taken longer than one step's timeout.
	after, cancelAfter := s.stateContext(ctx)
	defer cancelAfter()
	var unrecorded string
	if etag, ok := resultETag(completed); ok {
		if err := s.recordCompleted(after, src, q.Bucket, q.Key, etag, q.RequestID); err != nil {
			unrecorded = err.Error()
		}
	} else if st := completed.StatusCode(); st < 400 || st >= 500 {
		// No clear refusal: the object may have been made.
		unrecorded = fmt.Sprintf("the complete's outcome is unclear (answered %d)", st)
	}
	hold.end(after, unrecorded)
	return completed
}

// uploadSize bounds the object a complete of uploadID would assemble: the
// sum of its parts as the sessions recorded them, or else as the backend
// lists them. known is false when neither knows the upload (the complete
// then fails, or replays an earlier one, whose object is read within the
// parse limit all the same).
func (s *Service) uploadSize(ctx context.Context, bucket, key, uploadID string) (size int64, known bool, err error) {
	if s.parts != nil {
		parts, err := s.parts.ListParts(ctx, uploadID)
		if err != nil {
			return 0, false, err
		}
		for _, p := range parts {
			size += p.Size
		}
		if len(parts) > 0 {
			return size, true, nil
		}
	}
	return s.listedPartsSize(ctx, bucket, key, uploadID)
}

// listedPartsSize sums the sizes of an upload's parts as the backend lists
// them.
func (s *Service) listedPartsSize(ctx context.Context, bucket, key, uploadID string) (int64, bool, error) {
	var size int64
	marker := ""
	for range 100 { // 10,000 parts at 1000 a page
		q := url.Values{"uploadId": {uploadID}, "max-parts": {"1000"}}
		if marker != "" {
			q.Set("part-number-marker", marker)
		}
		a, err := s.call(ctx, http.MethodGet, bucket, key, q, nil)
		if err != nil {
			return 0, false, err
		}
		if a.Status == http.StatusNotFound {
			return 0, false, nil
		}
		var page struct {
			XMLName xml.Name
			Parts   []struct {
				Size int64 `xml:"Size"`
			} `xml:"Part"`
			IsTruncated          bool   `xml:"IsTruncated"`
			NextPartNumberMarker string `xml:"NextPartNumberMarker"`
		}
		if !a.Success() || xml.Unmarshal(a.Body, &page) != nil || page.XMLName.Local != "ListPartsResult" {
			return 0, false, fmt.Errorf("list parts of upload %s: backend answered %d", uploadID, a.Status)
		}
		for _, p := range page.Parts {
			size += p.Size
		}
		if !page.IsTruncated || page.NextPartNumberMarker == "" || page.NextPartNumberMarker == marker {
			return size, true, nil
		}
		marker = page.NextPartNumberMarker
	}
	return 0, false, fmt.Errorf("list parts of upload %s: too many pages", uploadID)
}

// refHold is a reference hold under the lease of an etcd session this
// gateway keeps alive until release.
type refHold struct {
	s       *Service
	id      string
	session *concurrency.Session
	record  etcdstore.UnrecordedWrite
}

// holdRefs takes a reference hold (etcdstore.Store.HoldRefs) under a lease
// of HoldTTL, renewed until release: a gateway that dies mid-complete lets
// the collector go on after the lease runs out. The renewals do not end
// with ctx: a hold lasts until release whatever the client does.
func (s *Service) holdRefs(ctx context.Context, id, bucket, key string) (*refHold, error) {
	ttl := int(math.Ceil(s.holdTTL.Seconds()))
	session, err := concurrency.NewSession(s.store.Client(),
		concurrency.WithTTL(max(ttl, 1)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("grant reference hold lease: %w", err)
	}
	now := s.now()
	h := &refHold{s: s, id: id, session: session, record: etcdstore.UnrecordedWrite{ID: id, Bucket: bucket, Key: key, At: now.UTC()}}
	if err := s.store.HoldRefs(ctx, id, bucket, key, session.Lease(), now); err != nil {
		if !errors.Is(err, etcdstore.ErrGuarded) {
			// The hold may have been made: its record goes with it.
			h.end(ctx, "")
		} else {
			h.release(ctx)
		}
		return nil, err
	}
	return h, nil
}

// end ends the hold. With unrecorded empty (the references are recorded,
// or the complete made no object) the complete's record is deleted;
// otherwise it is settled with that reason, so that the digest sweep keeps
// everything until a rebuild started after now has read the object. The
// record is written before the hold goes, so no moment is left without
// either.
func (h *refHold) end(ctx context.Context, unrecorded string) {
	log := h.s.logFor(ctx)
	var err error
	if unrecorded == "" {
		err = h.s.store.EndUnrecorded(ctx, h.id)
	} else {
		log.Error("references of a completed object not recorded; every blob is kept until a rebuild reads it", "bucket", h.record.Bucket, "key", h.record.Key, "reason", unrecorded)
		err = h.s.store.SettleUnrecorded(ctx, h.record, unrecorded)
	}
	if err != nil {
		// The record stays as the hold wrote it: a pass settles it once
		// the hold is gone, which keeps everything until a rebuild.
		log.Warn("record of a complete not updated; a pass settles it", "complete", h.id, "err", err)
	}
	h.release(ctx)
}

// release ends the hold: revoking its lease deletes the hold's key.
func (h *refHold) release(ctx context.Context) {
	h.session.Orphan() // stops the renewals; the revoke below ends the lease
	if _, err := h.session.Client().Revoke(ctx, h.session.Lease()); err != nil {
		h.s.logFor(ctx).Warn("reference hold not revoked; it lapses with its lease", "hold", h.id, "err", err)
	}
}

// recordCompleted records the references of the object a complete made:
// it reads the object (the version with the complete's ETag), records its
// digests, and checks the object is still that version once the write is
// pending, so that no write of the object can come between. Failures are
// not answered: the object is stored, and the caller keeps the complete's
// record (everything kept) until a rebuild reads the object. It returns
// why the references are not recorded, or nil.
func (s *Service) recordCompleted(ctx context.Context, src *cas.Source, bucket, key, etag, id string) error {
	log := s.logFor(ctx).With("bucket", bucket, "key", key, "etag", etag)
	body, _, err := s.s3.Get(ctx, bucket, key, s3client.GetOptions{IfMatch: etag}, src.MaxBody)
	var refused *s3client.Error
	switch {
	case errors.As(err, &refused):
		// Another write replaced it: that write records its own.
		log.Info("completed reference object was replaced before its references were read", "status", refused.Status)
		return nil
	case err != nil:
		return fmt.Errorf("read the completed object: %w", err)
	}
	digests, err := src.Extract(body)
	if err != nil {
		return fmt.Errorf("parse the completed object: %w", err)
	}
	w := etcdstore.RefWrite{ID: id, Digests: digests, At: s.now()}
	for attempt := range 5 {
		if err = s.store.BeginRefWrite(ctx, bucket, key, w); !errors.Is(err, etcdstore.ErrWriteInFlight) {
			break
		}
		if !s.pause(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			break
		}
	}
	if err != nil {
		if !errors.Is(err, etcdstore.ErrWriteInFlight) {
			s.endRefWrite(ctx, bucket, key, id, etcdstore.WriteFailed, "")
		}
		return fmt.Errorf("record the completed object's references: %w", err)
	}
	outcome := etcdstore.WriteCommitted
	if now, err := s.s3.Head(ctx, bucket, key); err != nil || now.ETag != etag {
		// Another write came between the read and the record: which body
		// the backend holds is for the rebuild to settle.
		outcome = etcdstore.WriteUnknown
	}
	s.endRefWrite(ctx, bucket, key, id, outcome, etag)
	return nil
}
