package digests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
	"github.com/sweepgate/sweepgate/tracing"
)

// CopySource is the object a CopyObject copies, as the gateway read and
// checked its x-amz-copy-source header.
type CopySource struct {
	Bucket, Key string
	// VersionID is the version to copy; "" for the latest.
	VersionID string
}

// Request is one client request, authenticated and routed by the gateway,
// that the service serves.
type Request struct {
	Op         s3op.Operation
	Bucket     string
	Key        string
	CopySource CopySource // for a CopyObject
	// Query is the request's query (read only): its uploadId, versionId.
	Query     url.Values
	Principal string
	RequestID string
	// Resource is the request path, for error documents.
	Resource string
	// Header is the client's request header (read only).
	Header http.Header

	// DecodedLength is the length of the verified body as the client
	// declared it, or -1.
	DecodedLength int64
	// Body returns the verified body. Read it through exactly one of Body
	// or a backend request that carries the client's payload.
	Body func() io.Reader
	// Observe makes w receive the verified body's bytes as they are
	// forwarded. Call it before the Forward's Request.
	Observe func(w io.Writer)
	// PayloadErr reports why the client's body failed verification, if it
	// did, after a failed backend call.
	PayloadErr func() error
	// Forward is the client's request as the backend is to receive it,
	// sent with the client's verified payload (Request), with a body of the
	// service's own (WithBody), or with the payload read whole
	// (WithPayloadRead).
	Forward *backend.Forward
	// Complete sends the client's CompleteMultipartUpload the way the
	// gateway does without digest reclamation (through the session
	// service when sessions are on), with header in place of the
	// client's, and returns its answer read whole, for the service to act
	// on before the client hears it.
	Complete func(header http.Header) reply.Reply
}

// ServiceConfig is what a Service needs.
type ServiceConfig struct {
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
	// Parts is the multipart sessions' store, whose recorded part sizes
	// bound the object a complete assembles; nil when sessions are off.
	Parts *etcdstore.Store
	// Sessions is the multipart session service, through which the upload
	// of a blob stored already is aborted; nil when sessions are off.
	Sessions *multipart.Service
	// Backend reaches the S3 server behind the gateway.
	Backend multipart.Backend
	Now     func() time.Time
	Logger  *slog.Logger
	// Metrics registers the service's series; nil registers nothing.
	Metrics prometheus.Registerer
}

// Defaults of ServiceConfig.
const (
	// DefaultTrashWindow is how long a deleted reference object's digests
	// stay restorable, and retained.
	DefaultTrashWindow = 168 * time.Hour
	// DefaultHoldTTL is the lease of a reference hold around a multipart
	// complete into a source.
	DefaultHoldTTL = 30 * time.Second
	// stateTimeout bounds the etcd work of one request. That work runs on a
	// context the client cannot cancel: a client hanging up between the
	// record and the backend write must not leave the record half done.
	stateTimeout = 15 * time.Second
)

// Service records the references and placements of a content-addressed
// layout around the client's writes, reads and deletes of its reference
// objects and blobs (docs/digests.md), before their bytes go to the
// backend: it records a reference object's digests, moves them to the
// trash when it is deleted, keeps guarded blobs from being written or
// read, keeps verified blobs written once, and refuses a referenced
// blob's delete to anyone but an admin.
type Service struct {
	store       *etcdstore.Store
	layout      *cas.Layout
	trashWindow time.Duration
	admins      []string
	holdTTL     time.Duration
	parts       *etcdstore.Store
	sessions    *multipart.Service
	backend     multipart.Backend
	// s3 makes the service's own reads of the backend (HEAD, GET).
	s3  *s3client.Client
	now func() time.Time
	log *slog.Logger
	// guards is the local copy of the armed guards that blob reads ask
	// (Run keeps it up to date).
	guards *etcdstore.GuardWatch
	// guardRefusals counts writes refused because a digest they name has
	// an armed guard: producers racing the collector.
	guardRefusals *prometheus.CounterVec
}

// NewService checks cfg and returns its Service. An empty layout turns
// digest reclamation off (a nil Service, which serves nothing): nothing
// would be recorded.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Layout.Empty() {
		return nil, nil
	}
	if cfg.Store == nil {
		return nil, errors.New("digests: a store is required to record references")
	}
	if cfg.Backend == nil {
		return nil, errors.New("digests: a backend is required")
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("digests: %w", err)
	}
	s := &Service{
		store:       cfg.Store,
		layout:      cfg.Layout,
		trashWindow: cfg.TrashWindow,
		admins:      cfg.AdminPrincipals,
		holdTTL:     cfg.HoldTTL,
		parts:       cfg.Parts,
		sessions:    cfg.Sessions,
		backend:     cfg.Backend,
		s3:          s3client.New(cfg.Backend, 0),
		now:         cfg.Now,
		log:         cfg.Logger,
		guardRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sweepgate", Subsystem: "gateway", Name: "guard_refusals_total",
			Help: "Writes refused with SlowDown because a digest they name is being reclaimed, by operation.",
		}, []string{"op"}),
	}
	if s.trashWindow <= 0 {
		s.trashWindow = DefaultTrashWindow
	}
	if s.holdTTL <= 0 {
		s.holdTTL = DefaultHoldTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.guards = s.store.WatchGuards(s.log)
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(s.guardRefusals)
	}
	return s, nil
}

// Run keeps the service's copy of the armed guards up to date until ctx
// ends; until it has listed them once, blob reads see no guard.
func (s *Service) Run(ctx context.Context) {
	if s != nil {
		s.guards.Run(ctx)
	}
}

// Guards returns the copy of the armed guards that blob reads ask.
func (s *Service) Guards() *etcdstore.GuardWatch { return s.guards }

// NeedsState reports whether serving op, which Serves accepted, reads or
// writes etcd: everything but a blob's GET or HEAD, which asks the local
// copy of the guards.
func (s *Service) NeedsState(op s3op.Operation) bool {
	return op != s3op.GetObject && op != s3op.HeadObject
}

// Serves reports whether the service serves op on bucket/key: a write or
// delete of a reference object, a write, read or delete of a blob whose
// key carries a digest, and a DeleteObjects in a bucket of the layout.
// Everything else goes where it goes without digest reclamation. A nil
// Service serves nothing.
func (s *Service) Serves(op s3op.Operation, bucket, key string) bool {
	if s == nil || bucket == "" {
		return false
	}
	switch op {
	case s3op.DeleteObjects:
		return s.layout.HasBucket(bucket)
	case s3op.PutObject, s3op.CopyObject, s3op.CompleteMultipartUpload, s3op.DeleteObject:
		if s.layout.Source(bucket, key) != nil {
			return true
		}
		_, _, ok := s.layout.Namespace(bucket, key)
		return ok
	case s3op.GetObject, s3op.HeadObject:
		_, _, ok := s.layout.Namespace(bucket, key)
		return ok
	}
	return false
}

// Serve serves one request that Serves accepted (DeleteObjects aside,
// which the gateway serves with DeleteObjects) and returns the client's
// answer, for the gateway to write.
func (s *Service) Serve(ctx context.Context, q *Request) reply.Reply {
	ctx = context.WithValue(ctx, serviceRequestKey{}, q)
	if src := s.layout.Source(q.Bucket, q.Key); src != nil {
		switch q.Op {
		case s3op.PutObject:
			return s.putRef(ctx, q, src)
		case s3op.CopyObject:
			return s.copyRef(ctx, q, src)
		case s3op.CompleteMultipartUpload:
			return s.completeRef(ctx, q, src)
		case s3op.DeleteObject:
			return s.deleteRef(ctx, q)
		}
		return reply.Error(s3err.ErrInternal.WithMessage("digests: %s is not served in a reference source", q.Op))
	}
	ns, digest, _ := s.layout.Namespace(q.Bucket, q.Key)
	switch q.Op {
	case s3op.PutObject:
		return s.putBlob(ctx, q, ns, digest)
	case s3op.CopyObject, s3op.CompleteMultipartUpload:
		return s.writeBlob(ctx, q, ns, digest)
	case s3op.GetObject, s3op.HeadObject:
		return s.readBlob(q, digest)
	case s3op.DeleteObject:
		return s.deleteBlob(ctx, q, digest)
	}
	return reply.Error(s3err.ErrInternal.WithMessage("digests: %s is not served in a namespace", q.Op))
}

func (s *Service) isAdmin(principal string) bool { return slices.Contains(s.admins, principal) }

// serviceRequestKey carries the Request a context serves, for logFor.
type serviceRequestKey struct{}

// logFor returns the service's logger with the id of the request ctx
// serves: every line written while serving a request carries the id that
// its request line, its x-amz-request-id header and its S3 error body
// carry, and, when the request is traced, its trace and span ids.
func (s *Service) logFor(ctx context.Context) *slog.Logger {
	log := s.log.With(tracing.LogArgs(ctx)...)
	if q, ok := ctx.Value(serviceRequestKey{}).(*Request); ok {
		return log.With("id", q.RequestID)
	}
	return log
}

// stateContext returns the context of a request's etcd work: it keeps the
// request's values but not its cancellation (see stateTimeout).
func (s *Service) stateContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), stateTimeout)
}

// errStateUnavailable answers a request whose etcd step failed. Nothing
// reached the backend, so a retry is safe.
var errStateUnavailable = s3err.ErrServiceUnavailable.WithMessage("sweepgate could not read or record the references of this request in its state store; nothing was changed. Please retry.")

// refuseState answers a request whose etcd step refused or failed: a
// guarded digest, a write in flight or an etcd that does not answer is a
// retryable SlowDown, a record of a newer release's layout
// s3err.StateTooNew, anything else a ServiceUnavailable.
func (s *Service) refuseState(q *Request, err error) reply.Reply {
	var newer *etcdstore.NewerRecordError
	switch {
	case errors.Is(err, etcdstore.ErrGuarded):
		s.guardRefusals.WithLabelValues(string(q.Op)).Inc()
		return reply.Error(s3err.ErrSlowDown.WithMessage("A blob this object names is being reclaimed; upload it again and retry."))
	case errors.Is(err, etcdstore.ErrWriteInFlight):
		return reply.Error(s3err.ErrSlowDown.WithMessage("Another write or delete of this object is in flight; retry."))
	case etcdstore.Unavailable(err):
		s.log.Warn("digest request refused: etcd unavailable", "id", q.RequestID, "op", q.Op, "err", err)
		return reply.Error(s3err.ErrStateUnavailable)
	case errors.As(err, &newer):
		s.log.Error("digest request refused: a newer release's record", "id", q.RequestID, "op", q.Op, "err", err)
		return reply.Error(s3err.StateTooNew(newer.Kind, newer.Version, newer.Known, newer.Field))
	default:
		s.log.Error("digest state unavailable", "id", q.RequestID, "op", q.Op, "err", err)
		return reply.Error(errStateUnavailable)
	}
}

// errSourceTooLarge refuses a reference object larger than its source's
// parse limit: its references could not be recorded whole.
func errSourceTooLarge(src *cas.Source, what string) error {
	return s3err.ErrEntityTooLarge.WithMessage("%s is larger than the %d-byte parse limit of reference source %s, so its digests could not be recorded whole; nothing was stored.", what, src.MaxBody, src.Name)
}

// errDigests refuses a reference object whose digests cannot be recorded.
func errDigests(err error) error {
	if errors.Is(err, cas.ErrTooManyDigests) {
		return s3err.ErrInvalidArgument.WithMessage("The object names more than %d digests, more than one reference object may record; nothing was stored.", cas.MaxDigestsPerObject)
	}
	return s3err.ErrInvalidArgument.WithMessage("The object's digests could not be read: %v.", err)
}
