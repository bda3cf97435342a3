package digests

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// refWrite is a write of a reference object on its way to the backend.
type refWrite struct {
	bucket, key string
	digests     []string
	// md5 is the hex MD5 of the body the write stores, which MinIO gives a
	// single PUT as its ETag: a HEAD after a lost answer compares it.
	md5 string
	// sent reports whether the backend received the whole request. One
	// that did not cannot have stored a Content-Length body.
	sent func() bool
	// etag returns the stored object's ETag from a successful answer.
	etag func(*s3client.Answer) string
}

// putRef serves a PutObject into a reference source: the verified body is
// read whole, its digests are recorded, then it goes to the backend.
func (s *Service) putRef(ctx context.Context, q *Request, src *cas.Source) reply.Reply {
	what := "The object"
	if n := q.DecodedLength; n > src.MaxBody {
		return reply.Error(errSourceTooLarge(src, what))
	}
	body, err := io.ReadAll(io.LimitReader(q.Body(), src.MaxBody+1))
	if err != nil {
		return reply.Error(err)
	}
	if int64(len(body)) > src.MaxBody {
		return reply.Error(errSourceTooLarge(src, what))
	}
	digests, err := src.Extract(body)
	if err != nil {
		return reply.Error(errDigests(err))
	}
	out := q.Forward.WithPayloadRead(body)
	return s.writePut(ctx, q, out, body, digests)
}

// writePut sends out, a PutObject carrying body, as a write of an object
// that names digests (writeRef).
func (s *Service) writePut(ctx context.Context, q *Request, out *http.Request, body []byte, digests []string) reply.Reply {
	sent := &sentReader{r: bytes.NewReader(body), total: int64(len(body))}
	if len(body) > 0 {
		out.Body = io.NopCloser(sent)
	}
	sum := md5.Sum(body)
	return s.writeRef(ctx, q, out, refWrite{
		bucket: q.Bucket, key: q.Key, digests: digests,
		md5:  hex.EncodeToString(sum[:]),
		sent: sent.done,
		etag: func(a *s3client.Answer) string { return unquoteETag(a.Header.Get("ETag")) },
	})
}

// writeCopy sends out, a CopyObject of a source whose body was read, as a
// write of an object that names digests (writeRef).
func (s *Service) writeCopy(ctx context.Context, q *Request, out *http.Request, body []byte, digests []string) reply.Reply {
	sum := md5.Sum(body)
	return s.writeRef(ctx, q, out, refWrite{
		bucket: q.Bucket, key: q.Key, digests: digests,
		md5:  hex.EncodeToString(sum[:]),
		sent: func() bool { return true },
		etag: func(a *s3client.Answer) string { e, _ := s3client.ResultETag(a.Body); return e },
	})
}

// sentReader reports whether a transport read a request body whole.
type sentReader struct {
	r     io.Reader
	total int64
	n     atomic.Int64
}

func (r *sentReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

func (r *sentReader) done() bool { return r.n.Load() >= r.total }

// copyRef serves a CopyObject into a reference source: the copy source is
// read from the backend (within the parse limit), its digests are
// recorded, then the copy goes to the backend, conditional on the source
// still being the body that was read.
func (s *Service) copyRef(ctx context.Context, q *Request, src *cas.Source) reply.Reply {
	cs := q.CopySource
	body, etag, err := s.s3.Get(ctx, cs.Bucket, cs.Key, s3client.GetOptions{VersionID: cs.VersionID}, src.MaxBody)
	var refused *s3client.Error
	switch {
	case errors.As(err, &refused):
		return answer(&s3client.Answer{Status: refused.Status, Header: refused.Header, Body: refused.Body})
	case errors.Is(err, s3client.ErrTooLarge):
		return reply.Error(errSourceTooLarge(src, "The copy source"))
	case err != nil:
		return s.backendFailed(ctx, q, err)
	}
	if want := q.Header.Get("X-Amz-Copy-Source-If-Match"); want != "" && want != "*" && unquoteETag(want) != etag {
		return reply.Error(s3err.ErrPreconditionFailed)
	}
	digests, err := src.Extract(body)
	if err != nil {
		return reply.Error(errDigests(err))
	}
	out, err := q.Forward.Request()
	if err != nil {
		return reply.Error(err)
	}
	// The copy stores the body whose digests were recorded, or nothing.
	out.Header.Set("X-Amz-Copy-Source-If-Match", `"`+etag+`"`)
	return s.writeCopy(ctx, q, out, body, digests)
}

// writeRef records the write rw of a reference object, sends out to the
// backend, records its outcome and answers the client. The outcome is
// recorded before the client hears the answer, so that the client's next
// write of the object does not meet this one still in flight.
func (s *Service) writeRef(ctx context.Context, q *Request, out *http.Request, rw refWrite) reply.Reply {
	id := q.RequestID
	if err := s.beginRefWrite(ctx, rw.bucket, rw.key, etcdstore.RefWrite{ID: id, Digests: rw.digests, At: s.now()}); err != nil {
		return s.refuseState(q, err)
	}
	sctx, cancel := s.stateContext(ctx)
	defer cancel()
	if s.layout.ConfirmsBlobs(rw.bucket, rw.key) {
		if missing, err := s.missingBlob(sctx, rw.digests); missing != "" || err != nil {
			s.endRefWrite(sctx, rw.bucket, rw.key, id, etcdstore.WriteFailed, "")
			if err != nil {
				return s.backendFailed(ctx, q, err)
			}
			return reply.Error(s3err.ErrBlobNotStored.WithMessage("The object names %s, which is not stored (it was deleted, or never uploaded); upload that blob again, then write the object.", missing))
		}
	}
	a, err := s.send(out)
	outcome, etag := s.writeOutcome(sctx, rw, a, err)
	s.endRefWrite(sctx, rw.bucket, rw.key, id, outcome, etag)
	if err != nil {
		return s.backendFailed(ctx, q, err)
	}
	if a.Success() && outcome != etcdstore.WriteCommitted {
		// A success that names no result (a copy answered without a
		// CopyObjectResult) and whose object is not the body recorded
		// cannot be taken for one.
		return reply.Error(errNoResult)
	}
	return answer(a)
}

// missingBlob returns a digest of digests whose blob no namespace stores,
// or "" when every one is stored. It is called once the write's references
// are recorded: from then on no delete of a named blob can start (a guard
// is armed only where no reference is recorded, and a reference write
// meets any guard armed before it), so a blob found here stays stored. A
// HEAD that fails otherwise than NoSuchKey is an error: nothing is
// confirmed.
func (s *Service) missingBlob(ctx context.Context, digests []string) (string, error) {
	const inFlight = 8
	missing := make([]bool, len(digests))
	errs := make([]error, len(digests))
	var wg sync.WaitGroup
	slots := make(chan struct{}, inFlight)
	for i, d := range digests {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			missing[i], errs[i] = s.blobMissing(ctx, d)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", fmt.Errorf("confirm the named blobs: %w", err)
	}
	for i, d := range digests {
		if missing[i] {
			return d, nil
		}
	}
	return "", nil
}

// blobMissing reports whether no namespace stores digest's blob.
func (s *Service) blobMissing(ctx context.Context, digest string) (bool, error) {
	for _, p := range s.layout.BlobPlaces(digest) {
		_, err := s.s3.Head(ctx, p.Bucket, p.Key)
		switch {
		case err == nil:
			return false, nil
		case !errors.Is(err, s3client.ErrNoSuchKey) && !errors.Is(err, s3client.ErrNoSuchBucket):
			return false, err
		}
	}
	return true, nil
}

// errNoResult answers a write whose backend answer said success but did
// not say what was stored.
var errNoResult = s3err.ErrBadGateway.WithMessage("The backend answered the write without saying what it stored; its outcome is unknown. Please retry.")

// beginRefWrite records a write of a reference object as pending. When it
// fails for another reason than a refusal, the record may have been made
// all the same: it is ended as failed, so no pending write stays behind.
func (s *Service) beginRefWrite(ctx context.Context, bucket, key string, rw etcdstore.RefWrite) error {
	ctx, cancel := s.stateContext(ctx)
	defer cancel()
	err := s.store.BeginRefWrite(ctx, bucket, key, rw)
	if err != nil && !errors.Is(err, etcdstore.ErrGuarded) && !errors.Is(err, etcdstore.ErrWriteInFlight) {
		s.endRefWrite(ctx, bucket, key, rw.ID, etcdstore.WriteFailed, "")
	}
	return err
}

// writeOutcome decides what became of a reference object's write from the
// backend's answer a (or the error that stopped it).
//
// A 4xx answer, or a body the backend did not receive whole, stored
// nothing. No answer or a server error is unclear: a HEAD that shows the
// body's MD5 as the object's ETag proves it stored; anything else leaves
// the outcome unknown, which keeps both bodies' digests until the rebuild
// reads the object (a 404 right after a lost answer may precede the
// backend's commit).
func (s *Service) writeOutcome(ctx context.Context, rw refWrite, a *s3client.Answer, err error) (etcdstore.WriteOutcome, string) {
	switch {
	case err == nil && a.Success() && rw.etag(a) != "":
		return etcdstore.WriteCommitted, rw.etag(a)
	case err == nil && a.DefiniteFailure(), !rw.sent():
		return etcdstore.WriteFailed, ""
	}
	info, herr := s.s3.Head(ctx, rw.bucket, rw.key)
	if herr == nil && info.ETag == rw.md5 {
		return etcdstore.WriteCommitted, info.ETag
	}
	s.logFor(ctx).Warn("reference write outcome unknown; the rebuild settles it", "bucket", rw.bucket, "key", rw.key, "err", errors.Join(err, herr))
	return etcdstore.WriteUnknown, ""
}

// endRefWrite records a write's outcome (a committed write in a bucket
// that keeps versions as a version added). It retries briefly, since a write
// left pending refuses every later write of the object.
func (s *Service) endRefWrite(ctx context.Context, bucket, key, id string, outcome etcdstore.WriteOutcome, etag string) {
	var err error
	settle := false
	if outcome == etcdstore.WriteCommitted {
		outcome, settle = s.committed(ctx, bucket, key)
	}
	for attempt := range 3 {
		if err = s.store.EndRefWrite(ctx, bucket, key, id, outcome, etag, s.now()); err == nil {
			if settle {
				vs, lerr := s.s3.KeyVersions(ctx, bucket, key)
				s.settleVersions(ctx, bucket, key, vs, lerr)
			}
			return
		}
		if !s.pause(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			break
		}
	}
	s.logFor(ctx).Error("reference write left pending", "bucket", bucket, "key", key, "write", id, "outcome", outcome, "err", err)
}

// pause waits d, or until ctx ends (then it reports false).
func (s *Service) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// deleteRef serves a DeleteObject of a reference object: its references
// move to the trash first, and come back if the backend did not delete it.
func (s *Service) deleteRef(ctx context.Context, q *Request) reply.Reply {
	_, answer, _ := s.deleteRefWith(ctx, q, s.send)
	return answer
}

// deleteRefWith is deleteRef sending the delete through send. It returns
// the backend's answer, or the error that stands for it (no answer: the
// outcome is unclear), nil and nil when nothing was sent; and the client's
// answer.
func (s *Service) deleteRefWith(ctx context.Context, q *Request, send func(*http.Request) (*s3client.Answer, error)) (*s3client.Answer, reply.Reply, error) {
	bucket, key := q.Bucket, q.Key
	now := s.now()
	trashed, err := s.trash(ctx, bucket, key, q.Principal, now)
	if err != nil {
		return nil, s.refuseState(q, err), nil
	}
	if !trashed {
		// No references recorded: nothing to move.
		return s.deleteObject(ctx, q, send)
	}
	audit.Record(s.logFor(ctx), audit.TrashObject, bucket+"/"+key, "DeleteObject of a reference object: its digests stay retained in the trash until it expires",
		"principal", q.Principal, "client", backend.ClientAddr(ctx), "id", q.RequestID, "deleted_at", now, "expires", now.Add(s.trashWindow))
	out, err := q.Forward.Request()
	if err != nil {
		sctx, cancel := s.stateContext(ctx)
		defer cancel()
		s.restoreTrash(sctx, bucket, key, now)
		return nil, reply.Error(err), nil
	}
	a, err := send(out)
	sctx, cancel := s.stateContext(ctx)
	defer cancel()
	s.settleDeleted(sctx, bucket, key, q.Query.Has("versionId"), a, err, now)
	if err != nil {
		return nil, s.backendFailed(ctx, q, err), err
	}
	return a, answer(a), nil
}

// trash moves the references of bucket/key to the trash, stamped now.
// When the move fails for another reason than a write in flight, it may
// have been made all the same: it is undone.
func (s *Service) trash(ctx context.Context, bucket, key, principal string, now time.Time) (bool, error) {
	ctx, cancel := s.stateContext(ctx)
	defer cancel()
	_, trashed, err := s.store.TrashRefSource(ctx, bucket, key, principal, now, now.Add(s.trashWindow))
	if err != nil && !errors.Is(err, etcdstore.ErrWriteInFlight) {
		s.restoreTrash(ctx, bucket, key, now)
	}
	return trashed, err
}

// stillThere decides from a delete's answer (or the error that stopped it)
// whether the object is still there, so its references must come back. A
// delete of one version may leave another current, and an unclear answer
// says nothing: both are settled by a HEAD. A HEAD that fails too keeps
// the trash, which retains the digests until it expires.
func (s *Service) stillThere(ctx context.Context, bucket, key string, version bool, a *s3client.Answer, err error) bool {
	switch {
	case err == nil && a.DefiniteFailure():
		return true
	case err == nil && a.Success() && !version:
		return false
	}
	_, herr := s.s3.Head(ctx, bucket, key)
	found := herr == nil
	if errors.Is(herr, s3client.ErrNoSuchKey) {
		herr = nil
	}
	if herr != nil {
		s.logFor(ctx).Warn("reference object's delete outcome unknown; its references stay in the trash", "bucket", bucket, "key", key, "err", errors.Join(err, herr))
	}
	return herr == nil && found
}

// restoreTrash brings back the references trashed at deletedAt.
func (s *Service) restoreTrash(ctx context.Context, bucket, key string, deletedAt time.Time) {
	_, err := s.store.RestoreTrash(ctx, bucket, key, deletedAt, s.now())
	if err == nil {
		audit.Record(s.logFor(ctx), audit.RestoreTrash, bucket+"/"+key, "the object's delete was not done, so its references come back from the trash",
			"deleted_at", deletedAt)
	}
	if err != nil && !errors.Is(err, etcdstore.ErrNotFound) {
		s.logFor(ctx).Error("references of an object that was not deleted stay in the trash; restore them with 'sweepgate trash restore'", "bucket", bucket, "key", key, "deleted_at", deletedAt, "err", err)
	}
}
