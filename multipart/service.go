// Package multipart keeps a durable session in etcd for every multipart upload
// made through the gateway, and serves the multipart calls around it.
//
// Each call records its intent before its side effect: a part records
// activity before its bytes go to the backend, an abort records "aborting"
// before the backend abort, a complete records "completing" before the
// backend complete. A lost response or a crash therefore leaves a state that
// the reconciler (Reconcile) can finish by looking at the backend again.
// Every transition is one etcd transaction that compares the session's mod
// revision it was decided from.
package multipart

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
	"github.com/sweepgate/sweepgate/tracing"
)

// Backend reaches the S3 server behind the gateway: the service forwards
// calls through its RoundTrip (requests built from Call.Forward) and
// makes its own with NewRequest.
type Backend = s3client.Backend

// Call is one multipart request, authenticated and routed by the gateway.
type Call struct {
	Op         s3op.Operation
	Bucket     string
	Key        string
	UploadID   string
	PartNumber string // as sent; the service checks it
	Principal  string
	RequestID  string
	// IdempotencyKey is the client's Idempotency-Key header, if any.
	IdempotencyKey string
	// Resource is the request path, for error documents.
	Resource string
	// Header is the client's request header (read only).
	Header http.Header

	// Observe makes w receive the verified body's bytes as they are
	// forwarded. Call it before the Forward's Request.
	Observe func(w io.Writer)
	// Body returns the verified body. Read it through exactly one of Body
	// or the Forward's request that carries the client's payload.
	Body func() io.Reader
	// Forward is the client's request as the backend is to receive it,
	// sent with the client's verified payload or with a body of its own.
	Forward *backend.Forward
	// PayloadErr reports why the client's body failed verification, if it
	// did, after a failed backend call.
	PayloadErr func() error
}

// Defaults of Config and of the reconciler's options.
const (
	// DefaultCompleteHold is the lease of a complete in flight: how long it
	// outlives a gateway that stopped renewing it.
	DefaultCompleteHold = 30 * time.Second
	// DefaultIdempotencyRetention is how long an Idempotency-Key's outcome
	// is kept.
	DefaultIdempotencyRetention = 24 * time.Hour
	// DefaultReconcileAfter is how long a session stands in an unsettled
	// state (aborting, cleanup_pending, completing) before the reconciler
	// looks at the backend for it.
	DefaultReconcileAfter = time.Minute
)

// Config is what a Service needs.
type Config struct {
	Store   *etcdstore.Store
	Backend Backend
	// EnforceOwnership limits each session to the principal that created it
	// and the AdminPrincipals. Off, any authenticated principal may act on
	// any session (deployments that share one key).
	EnforceOwnership bool
	AdminPrincipals  []string
	// IdempotencyRetention is how long an Idempotency-Key's outcome is kept.
	IdempotencyRetention time.Duration
	// CompleteHold is how long a complete in flight keeps other completes of
	// its upload out after its gateway stops renewing the hold (30s if 0).
	CompleteHold time.Duration
	// Fault, when set, is called at named points of destructive paths so a
	// test can stop the process there (see Fault* constants).
	Fault func(point string)
	Now   func() time.Time
	// AfterFunc schedules f after d and returns what cancels it; it runs
	// the removals of lingering in-flight records (time.AfterFunc when
	// nil). A test sets it to run them when it chooses.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	Logger    *slog.Logger
	// Metrics registers the service's series; nil registers nothing.
	Metrics prometheus.Registerer
}

// Fault points: where Config.Fault is called.
const (
	// FaultAbortAfterIntent: "aborting" is recorded, the backend abort not sent.
	FaultAbortAfterIntent = "abort.after-intent"
	// FaultCompleteAfterIntent: "completing" is recorded, the complete not sent.
	FaultCompleteAfterIntent = "complete.after-intent"
)

// actorGateway is the actor recorded for transitions made while serving a
// client request.
const actorGateway = "gateway"

// Service serves the multipart calls and keeps their sessions.
type Service struct {
	store    *etcdstore.Store
	backend  Backend
	owners   bool
	admins   []string
	idemTTL  time.Duration
	hold     time.Duration
	fault    func(string)
	now      func() time.Time
	log      *slog.Logger
	metrics  *metrics
	flights  *flights
	held     *lingering
	attempts int // compare-and-put attempts before giving up
}

// New returns a Service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Backend == nil {
		return nil, errors.New("multipart: store and backend are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Fault == nil {
		cfg.Fault = func(string) {}
	}
	if cfg.CompleteHold < time.Second {
		cfg.CompleteHold = DefaultCompleteHold
	}
	if cfg.IdempotencyRetention <= 0 {
		cfg.IdempotencyRetention = DefaultIdempotencyRetention
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	s := &Service{
		store:    cfg.Store,
		backend:  cfg.Backend,
		owners:   cfg.EnforceOwnership,
		admins:   cfg.AdminPrincipals,
		idemTTL:  cfg.IdempotencyRetention,
		hold:     cfg.CompleteHold,
		fault:    cfg.Fault,
		now:      cfg.Now,
		log:      cfg.Logger,
		metrics:  newMetrics(cfg.Metrics),
		flights:  &flights{cli: cfg.Store.Client(), timeout: cmp.Or(cfg.Store.RequestTimeout(), etcdstore.DefaultRequestTimeout)},
		held:     &lingering{m: map[string]*held{}, after: cfg.AfterFunc},
		attempts: 16,
	}
	s.held.remove = s.removeHeld
	s.flights.onLost = s.held.leaseLost
	return s, nil
}

// Serve serves one multipart call and returns the client's answer, for the
// gateway to write.
func (s *Service) Serve(ctx context.Context, c *Call) reply.Reply {
	switch c.Op {
	case s3op.CreateMultipartUpload:
		return s.create(ctx, c)
	case s3op.UploadPart, s3op.UploadPartCopy:
		return s.uploadPart(ctx, c)
	case s3op.ListParts:
		return s.listParts(ctx, c)
	case s3op.CompleteMultipartUpload:
		return s.complete(ctx, c)
	case s3op.AbortMultipartUpload:
		return s.abort(ctx, c)
	case s3op.ListMultipartUploads:
		return s.listUploads(ctx, c)
	default:
		return s.fail(c, s3err.ErrInternal.WithMessage("multipart: unknown operation %q", c.Op))
	}
}

// mayAct reports whether principal may act on sess.
func (s *Service) mayAct(principal string, sess *etcdstore.Session) bool {
	return !s.owners || principal == sess.Owner || slices.Contains(s.admins, principal)
}

// loadSession reads the call's session. found is false when the upload has
// no session (it was not made through the gateway, or was pruned).
func (s *Service) loadSession(ctx context.Context, c *Call) (v etcdstore.Versioned[etcdstore.Session], found bool, err error) {
	v, err = s.store.GetSession(ctx, c.Bucket, c.UploadID)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	if v.Value.Key != c.Key {
		// S3 knows an upload by bucket, key and id together: the same id
		// under another key names no upload.
		return v, true, errNoSuchUpload
	}
	return v, true, nil
}

// guard is what else a session transition requires and does in the same
// etcd transaction (a complete attempt's key, say).
type guard struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
}

// transition moves a session from the state it was read in, comparing the
// revision it was read at (and the guards). ok is false when the session
// changed meanwhile or a guard did not hold.
func (s *Service) transition(ctx context.Context, v etcdstore.Versioned[etcdstore.Session], to etcdstore.SessionState, reason string, mutate func(*etcdstore.Session), guards ...guard) (etcdstore.Versioned[etcdstore.Session], bool, error) {
	sess := v.Value
	sess.History = slices.Clone(sess.History)
	from := sess.State
	now := s.now().UTC()
	if mutate != nil {
		mutate(&sess)
	}
	sess.Transition(to, now, actorGateway, reason)
	u := etcdstore.SessionUpdate{Session: &sess, ModRev: v.ModRev}
	for _, g := range guards {
		u.If = append(u.If, g.cmps...)
		u.Then = append(u.Then, g.ops...)
	}
	rev, err := s.store.UpdateSession(ctx, u)
	if errors.Is(err, etcdstore.ErrConflict) {
		s.metrics.conflicts.Inc()
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	s.metrics.transitions.WithLabelValues(string(from), string(to)).Inc()
	return etcdstore.Versioned[etcdstore.Session]{Value: sess, ModRev: rev}, true, nil
}

// settle records the outcome of a backend call on a session that this call
// moved to state from. If the session has since left that state (the
// reconciler or a retry settled it first), or a guard no longer holds, the
// outcome is not written over what happened since.
func (s *Service) settle(ctx context.Context, bucket, uploadID string, from, to etcdstore.SessionState, reason string, mutate func(*etcdstore.Session), guards ...guard) (etcdstore.Versioned[etcdstore.Session], error) {
	var cmps []clientv3.Cmp
	for _, g := range guards {
		cmps = append(cmps, g.cmps...)
	}
	for range s.attempts {
		v, err := s.store.GetSession(ctx, bucket, uploadID)
		if err != nil {
			return v, err
		}
		if v.Value.State != from {
			return v, nil
		}
		if holds, err := s.store.Holds(ctx, cmps...); err != nil || !holds {
			return v, err
		}
		nv, ok, err := s.transition(ctx, v, to, reason, mutate, guards...)
		if err != nil || ok {
			return nv, err
		}
	}
	return etcdstore.Versioned[etcdstore.Session]{}, errTooManyConflicts
}

var errTooManyConflicts = s3err.ErrServiceUnavailable.WithMessage("The upload is changing too quickly; please retry.")

// bounded returns ctx bounded as the store bounds its own requests
// (etcd.request_timeout), for the etcd calls made around the store: lease
// grants and the complete attempt's reads.
func (s *Service) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if d := s.store.RequestTimeout(); d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// detached returns a context for recording an outcome: it keeps the request's
// values but not its cancellation, so a client that hangs up after the
// backend acted cannot stop sweepgate from writing down what happened.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// logFor returns the service's logger for work done under ctx: with the
// trace and span ids of the request ctx serves when it is traced, so that
// its audit lines carry the ids of its request's trace.
func (s *Service) logFor(ctx context.Context) *slog.Logger {
	return s.log.With(tracing.LogArgs(ctx)...)
}
