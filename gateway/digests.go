package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway/s3err"
)

// DigestsConfig turns on reference recording for content-addressed layouts.
type DigestsConfig struct {
	Store  *etcdstore.Store
	Layout *cas.Layout
	// TrashWindow is how long a deleted reference object's digests stay
	// restorable (and retained); 168h when 0.
	TrashWindow time.Duration
	// AdminPrincipals may delete blobs that are still referenced.
	AdminPrincipals []string
	// HoldTTL is the lease of a reference hold around a multipart complete
	// into a source (default 30s): how long a hold outlives a gateway that
	// stopped renewing it.
	HoldTTL time.Duration
}

const (
	defaultTrashWindow = 168 * time.Hour
	defaultHoldTTL     = 30 * time.Second
	// stateTimeout bounds the etcd work of one request. That work runs on a
	// context the client cannot cancel: a client hanging up between the
	// record and the backend write must not leave the record half done.
	stateTimeout = 15 * time.Second
	// maxDeleteBody and maxDeleteObjects bound a DeleteObjects request as S3
	// does: 1000 keys of up to 1 KiB each fit.
	maxDeleteBody    = 2 << 20
	maxDeleteObjects = 1000
	// s3Namespace is the XML namespace of S3's documents.
	s3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"
)

// errStateUnavailable answers a request whose etcd step failed. Nothing
// reached the backend, so a retry is safe.
var errStateUnavailable = s3err.ErrServiceUnavailable.WithMessage("sweepgate could not read or record the references of this request in its state store; nothing was changed. Please retry.")

// digestGate is what the gateway needs to record references around the
// writes and deletes of a content-addressed layout.
type digestGate struct {
	store       *etcdstore.Store
	layout      *cas.Layout
	trashWindow time.Duration
	admins      []string
	holdTTL     time.Duration
	// parts is the multipart sessions' store, whose recorded part sizes
	// bound the object a complete assembles; nil when sessions are off.
	parts *etcdstore.Store
}

// newDigestGate checks cfg. An empty layout turns digest reclamation off
// (nil gate): nothing would be recorded.
func newDigestGate(cfg *DigestsConfig, sessions *SessionsConfig) (*digestGate, error) {
	if cfg.Layout.Empty() {
		return nil, nil
	}
	if cfg.Store == nil {
		return nil, errors.New("digests: a store is required to record references")
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("digests: %w", err)
	}
	d := &digestGate{
		store:       cfg.Store,
		layout:      cfg.Layout,
		trashWindow: cfg.TrashWindow,
		admins:      cfg.AdminPrincipals,
		holdTTL:     cfg.HoldTTL,
	}
	if d.trashWindow <= 0 {
		d.trashWindow = defaultTrashWindow
	}
	if d.holdTTL <= 0 {
		d.holdTTL = defaultHoldTTL
	}
	if sessions != nil {
		d.parts = sessions.Store
	}
	return d, nil
}

// serves reports whether the digest handlers serve rt: a write or delete
// of a reference object, a write, read or delete of a blob whose key
// carries a digest, and a DeleteObjects in a bucket of the layout.
// Everything else goes where it goes without digest reclamation.
func (d *digestGate) serves(rt Route) bool {
	if d == nil || rt.Bucket == "" {
		return false
	}
	switch rt.Operation {
	case OpDeleteObjects:
		return d.layout.HasBucket(rt.Bucket)
	case OpPutObject, OpCopyObject, OpCompleteMultipartUpload, OpDeleteObject:
		if d.layout.Source(rt.Bucket, rt.Key) != nil {
			return true
		}
		_, _, ok := d.layout.Namespace(rt.Bucket, rt.Key)
		return ok
	case OpGetObject, OpHeadObject:
		_, _, ok := d.layout.Namespace(rt.Bucket, rt.Key)
		return ok
	}
	return false
}

func (d *digestGate) isAdmin(principal string) bool { return slices.Contains(d.admins, principal) }

// serveDigests serves a request that serves accepted.
func (g *Gateway) serveDigests(w http.ResponseWriter, r *http.Request, req *request) {
	rt := req.route
	if src := g.digests.layout.Source(rt.Bucket, rt.Key); src != nil {
		switch rt.Operation {
		case OpPutObject:
			g.putRef(w, r, req, src)
		case OpCopyObject:
			g.copyRef(w, r, req, src)
		case OpCompleteMultipartUpload:
			g.completeRef(w, r, req, src)
		case OpDeleteObject:
			g.deleteRef(w, r, req)
		}
		return
	}
	ns, digest, _ := g.digests.layout.Namespace(rt.Bucket, rt.Key)
	switch rt.Operation {
	case OpPutObject:
		g.putBlob(w, r, req, ns, digest)
	case OpCopyObject, OpCompleteMultipartUpload:
		g.writeBlob(w, r, req, ns, digest)
	case OpGetObject, OpHeadObject:
		g.readBlob(w, r, req, digest)
	case OpDeleteObject:
		g.deleteBlob(w, r, req, digest)
	}
}

// pass serves a request the way the gateway serves it without digest
// reclamation.
func (g *Gateway) pass(w http.ResponseWriter, r *http.Request, req *request) {
	if req.route.Operation.IsMultipart() && g.sessions != nil {
		g.serveMultipart(w, r, req)
		return
	}
	g.forward(w, r, req)
}

// stateContext returns the context of a request's etcd work: it keeps the
// request's values but not its cancellation (see stateTimeout).
func stateContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), stateTimeout)
}

// refuseState answers a request whose etcd step refused or failed: a
// guarded digest or a write in flight is a retryable SlowDown, anything
// else a ServiceUnavailable.
func (g *Gateway) refuseState(w http.ResponseWriter, r *http.Request, req *request, err error) {
	switch {
	case errors.Is(err, etcdstore.ErrGuarded):
		g.metrics.guardRefusals.WithLabelValues(string(req.route.Operation)).Inc()
		g.writeError(w, r, s3err.ErrSlowDown.WithMessage("A blob this object names is being reclaimed; upload it again and retry."))
	case errors.Is(err, etcdstore.ErrWriteInFlight):
		g.writeError(w, r, s3err.ErrSlowDown.WithMessage("Another write or delete of this object is in flight; retry."))
	default:
		g.log.Error("digest state unavailable", "id", req.id, "op", req.route.Operation, "err", err)
		g.writeError(w, r, errStateUnavailable)
	}
}

// errTooLarge refuses a reference object larger than its source's parse
// limit: its references could not be recorded whole.
func errTooLarge(src *cas.Source, what string) error {
	return s3err.ErrEntityTooLarge.WithMessage("%s is larger than the %d-byte parse limit of reference source %s, so its digests could not be recorded whole; nothing was stored.", what, src.MaxBody, src.Name)
}

// errDigests refuses a reference object whose digests cannot be recorded.
func errDigests(err error) error {
	if errors.Is(err, cas.ErrTooManyDigests) {
		return s3err.ErrInvalidArgument.WithMessage("The object names more than %d digests, more than one reference object may record; nothing was stored.", cas.MaxDigestsPerObject)
	}
	return s3err.ErrInvalidArgument.WithMessage("The object's digests could not be read: %v.", err)
}
