package gateway

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway/s3err"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/s3client"
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
	etag func(*answer) string
}

// putRef serves a PutObject into a reference source: the verified body is
// read whole, its digests are recorded, then it goes to the backend.
func (g *Gateway) putRef(w http.ResponseWriter, r *http.Request, req *request, src *cas.Source) {
	payload := req.auth.Payload
	what := "The object"
	if n := payload.DecodedLength(); n > src.MaxBody {
		g.writeError(w, r, errTooLarge(src, what))
		return
	}
	body, err := io.ReadAll(io.LimitReader(payload.Body(), src.MaxBody+1))
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if int64(len(body)) > src.MaxBody {
		g.writeError(w, r, errTooLarge(src, what))
		return
	}
	digests, err := src.Extract(body)
	if err != nil {
		g.writeError(w, r, errDigests(err))
		return
	}
	out, err := g.backendRequest(r, req, body)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	keepEncoding(out, payload)
	sent := &sentReader{r: bytes.NewReader(body), total: int64(len(body))}
	if len(body) > 0 {
		out.Body = io.NopCloser(sent)
	}
	sum := md5.Sum(body)
	g.writeRef(w, r, req, out, refWrite{
		bucket: req.route.Bucket, key: req.route.Key, digests: digests,
		md5:  hex.EncodeToString(sum[:]),
		sent: sent.done,
		etag: func(a *answer) string { return unquoteETag(a.header.Get("ETag")) },
	})
}

// keepEncoding carries what the buffered body loses over to its backend
// request: a verified trailing checksum (as a header, which the backend
// checks and stores), and content encodings other than aws-chunked.
func keepEncoding(out *http.Request, p *sigv4.Payload) {
	if name, value, ok := p.Checksum(); ok {
		out.Header.Set(name, value)
	}
	var encodings []string
	for e := range strings.SplitSeq(p.Outbound().Header.Get("Content-Encoding"), ",") {
		if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
			encodings = append(encodings, e)
		}
	}
	if len(encodings) > 0 {
		out.Header.Set("Content-Encoding", strings.Join(encodings, ","))
	}
}

// sentReader reports whether a transport read a request body whole.
type sentReader struct {
	r     io.Reader
	total int64
	n     atomic.Int64
}

func (s *sentReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n.Add(int64(n))
	return n, err
}

func (s *sentReader) done() bool { return s.n.Load() >= s.total }

// copyRef serves a CopyObject into a reference source: the copy source is
// read from the backend (within the parse limit), its digests are
// recorded, then the copy goes to the backend, conditional on the source
// still being the body that was read.
func (g *Gateway) copyRef(w http.ResponseWriter, r *http.Request, req *request, src *cas.Source) {
	cs, err := parseCopySource(r.Header.Get("X-Amz-Copy-Source"))
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	body, etag, err := g.s3.Get(r.Context(), cs.bucket, cs.key, s3client.GetOptions{VersionID: cs.versionID}, src.MaxBody)
	var refused *s3client.Error
	switch {
	case errors.As(err, &refused):
		g.writeAnswer(w, req, &answer{status: refused.Status, header: refused.Header, body: refused.Body})
		return
	case errors.Is(err, s3client.ErrTooLarge):
		g.writeError(w, r, errTooLarge(src, "The copy source"))
		return
	case err != nil:
		g.backendFailed(w, r, req, err)
		return
	}
	if want := r.Header.Get("X-Amz-Copy-Source-If-Match"); want != "" && want != "*" && unquoteETag(want) != etag {
		g.writeError(w, r, s3err.ErrPreconditionFailed)
		return
	}
	digests, err := src.Extract(body)
	if err != nil {
		g.writeError(w, r, errDigests(err))
		return
	}
	out, err := g.backendRequest(r, req, nil)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	// The copy stores the body whose digests were recorded, or nothing.
	out.Header.Set("X-Amz-Copy-Source-If-Match", `"`+etag+`"`)
	sum := md5.Sum(body)
	g.writeRef(w, r, req, out, refWrite{
		bucket: req.route.Bucket, key: req.route.Key, digests: digests,
		md5:  hex.EncodeToString(sum[:]),
		sent: func() bool { return true },
		etag: func(a *answer) string { e, _ := s3client.ResultETag(a.body); return e },
	})
}

// writeRef records the write rw of a reference object, sends out to the
// backend, records its outcome and answers the client. The outcome is
// recorded before the client hears the answer, so that the client's next
// write of the object does not meet this one still in flight.
func (g *Gateway) writeRef(w http.ResponseWriter, r *http.Request, req *request, out *http.Request, rw refWrite) {
	id := req.id
	if err := g.beginRefWrite(r, rw.bucket, rw.key, etcdstore.RefWrite{ID: id, Digests: rw.digests, At: g.now()}); err != nil {
		g.refuseState(w, r, req, err)
		return
	}
	a, err := g.send(out)
	ctx, cancel := stateContext(r)
	defer cancel()
	outcome, etag := g.writeOutcome(ctx, rw, a, err)
	g.endRefWrite(ctx, rw.bucket, rw.key, id, outcome, etag)
	if err != nil {
		g.backendFailed(w, r, req, err)
		return
	}
	if a.success() && outcome != etcdstore.WriteCommitted {
		// A success that names no result (a copy answered without a
		// CopyObjectResult) and whose object is not the body recorded
		// cannot be taken for one.
		g.writeError(w, r, errNoResult)
		return
	}
	g.writeAnswer(w, req, a)
}

// errNoResult answers a write whose backend answer said success but did
// not say what was stored.
var errNoResult = s3err.ErrBadGateway.WithMessage("The backend answered the write without saying what it stored; its outcome is unknown. Please retry.")

// beginRefWrite records a write of a reference object as pending. When it
// fails for another reason than a refusal, the record may have been made
// all the same: it is ended as failed, so no pending write stays behind.
func (g *Gateway) beginRefWrite(r *http.Request, bucket, key string, rw etcdstore.RefWrite) error {
	ctx, cancel := stateContext(r)
	defer cancel()
	err := g.digests.store.BeginRefWrite(ctx, bucket, key, rw)
	if err != nil && !errors.Is(err, etcdstore.ErrGuarded) && !errors.Is(err, etcdstore.ErrWriteInFlight) {
		g.endRefWrite(ctx, bucket, key, rw.ID, etcdstore.WriteFailed, "")
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
func (g *Gateway) writeOutcome(ctx context.Context, rw refWrite, a *answer, err error) (etcdstore.WriteOutcome, string) {
	switch {
	case err == nil && a.success() && rw.etag(a) != "":
		return etcdstore.WriteCommitted, rw.etag(a)
	case err == nil && a.definiteFailure(), !rw.sent():
		return etcdstore.WriteFailed, ""
	}
	info, herr := g.s3.Head(ctx, rw.bucket, rw.key)
	if herr == nil && info.ETag == rw.md5 {
		return etcdstore.WriteCommitted, info.ETag
	}
	g.logFor(ctx).Warn("reference write outcome unknown; the rebuild settles it", "bucket", rw.bucket, "key", rw.key, "err", errors.Join(err, herr))
	return etcdstore.WriteUnknown, ""
}

// endRefWrite records a write's outcome. It retries briefly, since a write
// left pending refuses every later write of the object.
func (g *Gateway) endRefWrite(ctx context.Context, bucket, key, id string, outcome etcdstore.WriteOutcome, etag string) {
	var err error
	for attempt := range 3 {
		if err = g.digests.store.EndRefWrite(ctx, bucket, key, id, outcome, etag, g.now()); err == nil {
			return
		}
		if !pause(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			break
		}
	}
	g.logFor(ctx).Error("reference write left pending", "bucket", bucket, "key", key, "write", id, "outcome", outcome, "err", err)
}

// pause waits d, or until ctx ends (then it reports false).
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// completeRef serves a CompleteMultipartUpload into a reference source.
// The assembled object's body is unknown until the backend has made it,
// so the complete runs under a reference hold, which keeps every guard
// from being armed, and its digests are recorded from the object before
// the hold ends.
func (g *Gateway) completeRef(w http.ResponseWriter, r *http.Request, req *request, src *cas.Source) {
	ctx, cancel := stateContext(r)
	defer cancel()
	uploadID := r.URL.Query().Get("uploadId")
	size, known, err := g.uploadSize(ctx, req.route.Bucket, req.route.Key, uploadID)
	if err != nil {
		g.log.Error("size of an upload into a reference source unknown", "id", req.id, "upload", uploadID, "err", err)
		g.writeError(w, r, s3err.ErrServiceUnavailable.WithMessage("The size of the upload could not be read, so its references could not be recorded; nothing was changed. Please retry."))
		return
	}
	if known && size > src.MaxBody {
		g.writeError(w, r, errTooLarge(src, fmt.Sprintf("The upload's parts (%d bytes)", size)))
		return
	}
	hold, err := g.holdRefs(ctx, req.id)
	if err != nil {
		g.refuseState(w, r, req, err)
		return
	}
	c := newCapture()
	g.pass(c, r, req)
	// The complete may have taken longer than one step's timeout.
	after, cancelAfter := stateContext(r)
	defer cancelAfter()
	if etag, ok := c.result(); ok {
		g.recordCompleted(after, src, req.route.Bucket, req.route.Key, etag, req.id)
	}
	hold.release(after)
	c.writeTo(w)
}

// uploadSize bounds the object a complete of uploadID would assemble: the
// sum of its parts as the sessions recorded them, or else as the backend
// lists them. known is false when neither knows the upload (the complete
// then fails, or replays an earlier one, whose object is read within the
// parse limit all the same).
func (g *Gateway) uploadSize(ctx context.Context, bucket, key, uploadID string) (size int64, known bool, err error) {
	if g.digests.parts != nil {
		parts, err := g.digests.parts.ListParts(ctx, uploadID)
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
	return g.listedPartsSize(ctx, bucket, key, uploadID)
}

// listedPartsSize sums the sizes of an upload's parts as the backend lists
// them.
func (g *Gateway) listedPartsSize(ctx context.Context, bucket, key, uploadID string) (int64, bool, error) {
	var size int64
	marker := ""
	for range 100 { // 10,000 parts at 1000 a page
		q := url.Values{"uploadId": {uploadID}, "max-parts": {"1000"}}
		if marker != "" {
			q.Set("part-number-marker", marker)
		}
		a, err := g.call(ctx, http.MethodGet, bucket, key, q, nil)
		if err != nil {
			return 0, false, err
		}
		if a.status == http.StatusNotFound {
			return 0, false, nil
		}
		var page struct {
			Parts []struct {
				Size int64 `xml:"Size"`
			} `xml:"Part"`
			IsTruncated          bool   `xml:"IsTruncated"`
			NextPartNumberMarker string `xml:"NextPartNumberMarker"`
		}
		if !a.success() || xml.Unmarshal(a.body, &page) != nil {
			return 0, false, fmt.Errorf("list parts of upload %s: backend answered %d", uploadID, a.status)
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

// refHold is a reference hold under a lease this gateway renews.
type refHold struct {
	g     *Gateway
	id    string
	lease clientv3.LeaseID
	stop  context.CancelFunc
}

// holdRefs takes a reference hold (etcdstore.Store.HoldRefs) under a lease
// of HoldTTL, renewed until release: a gateway that dies mid-complete lets
// the collector go on after the lease runs out.
func (g *Gateway) holdRefs(ctx context.Context, id string) (*refHold, error) {
	cli := g.digests.store.Client()
	ttl := int64(math.Ceil(g.digests.holdTTL.Seconds()))
	lease, err := cli.Grant(ctx, max(ttl, 1))
	if err != nil {
		return nil, fmt.Errorf("grant reference hold lease: %w", err)
	}
	h := &refHold{g: g, id: id, lease: lease.ID}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.stop = stop
	renewals, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		h.release(ctx)
		return nil, fmt.Errorf("keep reference hold lease alive: %w", err)
	}
	go func() {
		for range renewals { // drained so the client keeps renewing
		}
	}()
	if err := g.digests.store.HoldRefs(ctx, id, lease.ID, g.now()); err != nil {
		h.release(ctx)
		return nil, err
	}
	return h, nil
}

// release ends the hold: revoking its lease deletes the hold's key.
func (h *refHold) release(ctx context.Context) {
	h.stop()
	cli := h.g.digests.store.Client()
	if _, err := cli.Revoke(ctx, h.lease); err != nil {
		h.g.logFor(ctx).Warn("reference hold not revoked; it lapses with its lease", "hold", h.id, "err", err)
	}
}

// recordCompleted records the references of the object a complete made:
// it reads the object (the version with the complete's ETag), records its
// digests, and checks the object is still that version once the write is
// pending, so that no write of the object can come between. Failures are
// logged, not answered: the object is stored, and the rebuild finds and
// retains what could not be recorded here.
func (g *Gateway) recordCompleted(ctx context.Context, src *cas.Source, bucket, key, etag, id string) {
	log := g.logFor(ctx).With("bucket", bucket, "key", key, "etag", etag)
	body, _, err := g.s3.Get(ctx, bucket, key, s3client.GetOptions{IfMatch: etag}, src.MaxBody)
	var refused *s3client.Error
	switch {
	case errors.As(err, &refused):
		log.Info("completed reference object was replaced before its references were read", "status", refused.Status)
		return
	case err != nil:
		log.Error("references of a completed object not recorded", "err", err)
		return
	}
	digests, err := src.Extract(body)
	if err != nil {
		log.Error("references of a completed object not recorded", "err", err)
		return
	}
	w := etcdstore.RefWrite{ID: id, Digests: digests, At: g.now()}
	for attempt := range 5 {
		if err = g.digests.store.BeginRefWrite(ctx, bucket, key, w); !errors.Is(err, etcdstore.ErrWriteInFlight) {
			break
		}
		if !pause(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			break
		}
	}
	if err != nil {
		if !errors.Is(err, etcdstore.ErrWriteInFlight) {
			g.endRefWrite(ctx, bucket, key, id, etcdstore.WriteFailed, "")
		}
		log.Error("references of a completed object not recorded", "err", err)
		return
	}
	outcome := etcdstore.WriteCommitted
	if now, err := g.s3.Head(ctx, bucket, key); err != nil || now.ETag != etag {
		// Another write came between the read and the record: which body
		// the backend holds is for the rebuild to settle.
		outcome = etcdstore.WriteUnknown
	}
	g.endRefWrite(ctx, bucket, key, id, outcome, etag)
}

// deleteRef serves a DeleteObject of a reference object: its references
// move to the trash first, and come back if the backend did not delete it.
func (g *Gateway) deleteRef(w http.ResponseWriter, r *http.Request, req *request) {
	bucket, key := req.route.Bucket, req.route.Key
	now := g.now()
	trashed, err := g.trash(r, bucket, key, req.auth.Principal, now)
	if err != nil {
		g.refuseState(w, r, req, err)
		return
	}
	if !trashed {
		g.forward(w, r, req) // no references recorded: nothing to move
		return
	}
	audit.Record(g.log, audit.TrashObject, bucket+"/"+key, "DeleteObject of a reference object: its digests stay retained in the trash until it expires",
		"principal", req.auth.Principal, "id", req.id, "deleted_at", now, "expires", now.Add(g.digests.trashWindow))
	out, err := g.backendRequest(r, req, nil)
	if err != nil {
		ctx, cancel := stateContext(r)
		defer cancel()
		g.restoreTrash(ctx, bucket, key, now)
		g.writeError(w, r, err)
		return
	}
	a, err := g.send(out)
	ctx, cancel := stateContext(r)
	defer cancel()
	if g.stillThere(ctx, bucket, key, r.URL.Query().Has("versionId"), a, err) {
		g.restoreTrash(ctx, bucket, key, now)
	}
	if err != nil {
		g.backendFailed(w, r, req, err)
		return
	}
	g.writeAnswer(w, req, a)
}

// trash moves the references of bucket/key to the trash, stamped now.
// When the move fails for another reason than a write in flight, it may
// have been made all the same: it is undone.
func (g *Gateway) trash(r *http.Request, bucket, key, principal string, now time.Time) (bool, error) {
	ctx, cancel := stateContext(r)
	defer cancel()
	_, trashed, err := g.digests.store.TrashRefSource(ctx, bucket, key, principal, now, now.Add(g.digests.trashWindow))
	if err != nil && !errors.Is(err, etcdstore.ErrWriteInFlight) {
		g.restoreTrash(ctx, bucket, key, now)
	}
	return trashed, err
}

// stillThere decides from a delete's answer (or the error that stopped it)
// whether the object is still there, so its references must come back. A
// delete of one version may leave another current, and an unclear answer
// says nothing: both are settled by a HEAD. A HEAD that fails too keeps
// the trash, which retains the digests until it expires.
func (g *Gateway) stillThere(ctx context.Context, bucket, key string, version bool, a *answer, err error) bool {
	switch {
	case err == nil && a.definiteFailure():
		return true
	case err == nil && a.success() && !version:
		return false
	}
	_, herr := g.s3.Head(ctx, bucket, key)
	found := herr == nil
	if errors.Is(herr, s3client.ErrNoSuchKey) {
		herr = nil
	}
	if herr != nil {
		g.logFor(ctx).Warn("reference object's delete outcome unknown; its references stay in the trash", "bucket", bucket, "key", key, "err", errors.Join(err, herr))
	}
	return herr == nil && found
}

// restoreTrash brings back the references trashed at deletedAt.
func (g *Gateway) restoreTrash(ctx context.Context, bucket, key string, deletedAt time.Time) {
	_, err := g.digests.store.RestoreTrash(ctx, bucket, key, deletedAt, g.now())
	if err == nil {
		audit.Record(g.logFor(ctx), audit.RestoreTrash, bucket+"/"+key, "the object's delete was not done, so its references come back from the trash",
			"deleted_at", deletedAt)
	}
	if err != nil && !errors.Is(err, etcdstore.ErrNotFound) {
		g.logFor(ctx).Error("references of an object that was not deleted stay in the trash; restore them with 'sweepgate trash restore'", "bucket", bucket, "key", key, "deleted_at", deletedAt, "err", err)
	}
}
