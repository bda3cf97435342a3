// Package gateway is sweepgate's S3 front door. It authenticates every request
// with AWS Signature V4, decides where the request goes, and passes ordinary
// S3 calls through to the backend as a streaming reverse proxy, re-signed
// with the backend identity the client's credential names (identities.go).
//
// A request's path through the package, in order: ServeHTTP (request id,
// the client's address, metrics, log line, the body's read deadline) ->
// resolveRoute (bucket, key, and the operation from the one table of
// operations the gateway serves, operationRules; what it cannot name
// exactly as the backend will execute it is refused) -> the total
// in-flight limit -> sigv4.Verifier.Verify (who signed it, how its body is
// checked) -> the credential's in-flight limit -> dispatch (the one place
// that decides which handler serves an operation) -> proxy (rewrite, sign,
// stream).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/clientip"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
	"github.com/sweepgate/sweepgate/tracing"
)

// Config is what a Gateway needs to know.
type Config struct {
	// Backend is the signed connection to the backing S3 server; the
	// gateway installs the identities of its key sets in it (SetKeys).
	Backend *backend.Client
	// Region is the region clients sign for; empty accepts any region.
	Region string
	// Domains enable virtual-hosted-style requests: Host bucket.<domain>.
	Domains []string
	// Credentials are the keys clients may sign with, each naming a
	// principal and an identity of Backend's. With Backend's identities
	// they make the first key set (Keys); SetKeys installs others.
	Credentials []sigv4.Credential
	// CheckBuckets, when set, are the buckets CheckBackend asks about
	// (a one-key listing of each) instead of listing every bucket.
	CheckBuckets []string
	// ReservedKeys are key prefixes, in every bucket, that hold sweepgate's
	// own records on the backend (the restore witness): no client may
	// write or delete a key under one (403 AccessDenied); reads pass.
	ReservedKeys []string
	// MaxClockSkew is how far a request's time may lie from the gateway's clock.
	MaxClockSkew time.Duration
	// Logger receives the gateway's warnings and errors.
	Logger *slog.Logger
	// RequestLog receives the one line per request; Logger when nil.
	RequestLog *slog.Logger
	// Metrics registers the gateway's series; nil registers nothing.
	Metrics prometheus.Registerer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Sessions serves the multipart calls; nil passes them through like
	// any other.
	Sessions *multipart.Service
	// Digests serves the writes, reads and deletes of content-addressed
	// layouts; nil passes them through like any other.
	Digests *digests.Service
	// StateHealth returns nil while etcd answers (etcdstore.Availability's
	// Err) in a keyspace schema this gateway reads; while it returns an
	// error, requests that must be recorded in etcd (multipart calls,
	// reference writes, blob writes and deletes) are refused at once: with
	// the error itself when it is an *s3err.Error, else with SlowDown and
	// Retry-After. Nil always answers nil: each such request then waits
	// for etcd up to the store's request timeout.
	StateHealth func() error
	// Tracer, when set, makes a server span of every request (tracing.go);
	// nil (tracing off) makes none and reads no traceparent.
	Tracer trace.Tracer
	// Trusted are the proxies whose X-Forwarded-For entries name the
	// client (SetTrusted installs others); the zero value trusts none.
	Trusted clientip.Trusted
	// Limits bound the requests in flight and the wait for a body
	// (SetLimits installs others); the zero value limits nothing.
	Limits Limits
	// Shards and Router, when Router is set, replace Sessions, Digests and
	// StateHealth: each request needing state goes to the services of its
	// bucket's shard (etcd.shards, the default shard first).
	Shards []Shard
	Router ShardRouter
}

// Gateway is an http.Handler that serves the S3 API in front of a backend.
type Gateway struct {
	domains []string
	// keys is the key set installed now (SetKeys); verify is what its
	// verifiers are built with.
	keys   atomic.Pointer[keySet]
	verify struct {
		region  string
		maxSkew time.Duration
	}
	checkBuckets []string
	reservedKeys []string
	backend      *backend.Client
	// shards are the services of each store of state, the default first;
	// router names a bucket's, nil with one store.
	shards     []Shard
	router     ShardRouter
	proxy      *passThrough
	log        *slog.Logger
	requestLog *slog.Logger
	metrics    *metrics
	ids        *requestIDs
	now        func() time.Time
	tracer     trace.Tracer // nil: tracing off
	trusted    atomic.Pointer[clientip.Trusted]
	limits     atomic.Pointer[Limits]
	inFlight   inFlight
}

// New returns a gateway serving through cfg.Backend, cfg.Sessions and
// cfg.Digests.
func New(cfg Config) (*Gateway, error) {
	if cfg.Backend == nil {
		return nil, errors.New("gateway: no backend client")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestLog == nil {
		cfg.RequestLog = cfg.Logger
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Gateway{
		domains:      cfg.Domains,
		checkBuckets: cfg.CheckBuckets,
		reservedKeys: cfg.ReservedKeys,
		backend:      cfg.Backend,
		shards:       cfg.Shards,
		router:       cfg.Router,
		log:          cfg.Logger,
		requestLog:   cfg.RequestLog,
		metrics:      newMetrics(cfg.Metrics),
		ids:          newRequestIDs(),
		now:          cfg.Now,
		tracer:       cfg.Tracer,
	}
	if cfg.Router == nil {
		g.shards = []Shard{{Name: "default", Sessions: cfg.Sessions, Digests: cfg.Digests, StateHealth: cfg.StateHealth}}
	} else if len(cfg.Shards) == 0 {
		return nil, errors.New("gateway: a shard router without shards")
	}
	g.verify.region, g.verify.maxSkew = cfg.Region, cfg.MaxClockSkew
	g.SetTrusted(cfg.Trusted)
	g.SetLimits(cfg.Limits)
	if err := g.SetKeys(Keys{Clients: cfg.Credentials, Identities: cfg.Backend.Identities()}); err != nil {
		return nil, err
	}
	g.proxy = &passThrough{
		transport:      cfg.Backend.Transport(),
		buffers:        newBufferPool(copyBufferSize),
		rewrite:        g.rewrite,
		modifyResponse: g.modifyResponse,
		errorHandler:   g.proxyError,
		logf: func(format string, args ...any) {
			cfg.Logger.Warn(fmt.Sprintf(format, args...))
		},
	}
	return g, nil
}

// CheckBackend reports whether the backend answers requests signed with the
// background identity: a ListBuckets, or a one-key listing of each of
// Config.CheckBuckets when they are set, which a bucket the key's policy
// denies passes (see checkBackend).
func (g *Gateway) CheckBackend(ctx context.Context) error {
	return g.backend.Check(ctx, g.checkBuckets)
}

// copyBufferSize is the size of the buffers that carry response bodies from
// the backend to the client: large enough that a large object moves in few
// system calls, small enough that many concurrent requests stay cheap.
const copyBufferSize = 128 << 10

// bufferPool recycles the proxy's copy buffers.
type bufferPool struct{ pool sync.Pool }

func newBufferPool(size int) *bufferPool {
	return &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, size); return &b }}}
}

func (p *bufferPool) Get() []byte  { return *p.pool.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// request is what the gateway knows about one request while serving it.
type request struct {
	id    string
	route Route
	auth  *sigv4.Result
	// caller is who the request's backend calls are made for: it signs
	// them with the identity of the client that signed the request, and
	// has no signer until the request is verified.
	caller backend.Caller
	// backendRequestID is the backend's own id for its (last) response,
	// for the log; set from every backend call made for the request, some
	// of which run at once.
	backendRequestID atomic.Pointer[string]
	backendStart     time.Time
	// span is the request's server span, nil with tracing off.
	span trace.Span
	// shard is the shard of the request's bucket (dispatch sets it).
	shard *Shard
	// errorCode is the S3 error code the gateway answered with, if any.
	errorCode atomic.Pointer[string]
	// client is the client's address (Gateway.clientAddr).
	client netip.Addr
}

// setBackendRequestID notes the backend's id for a response to a call made
// for the request; calls made at once may each set it.
func (req *request) setBackendRequestID(id string) { req.backendRequestID.Store(&id) }

type requestKey struct{}

func requestFrom(ctx context.Context) *request {
	req, _ := ctx.Value(requestKey{}).(*request)
	return req
}

// ServeHTTP serves one S3 request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := g.now()
	req := &request{id: g.ids.next(), client: g.clientAddr(r)}
	req.caller = backend.Caller{RequestID: req.id, Done: func(elapsed time.Duration, backendID string) {
		// The services' backend calls are timed under the request's
		// operation, as the proxy's are.
		g.metrics.backendDuration.WithLabelValues(string(req.route.Operation)).Observe(elapsed.Seconds())
		if backendID != "" {
			req.setBackendRequestID(backendID)
		}
	}}
	if req.client.IsValid() {
		req.caller.ClientAddr = req.client.String()
	}
	rec := &responseRecorder{ResponseWriter: w}
	rec.bodyUnread = func() bool {
		return r.ContentLength != 0 && (req.auth == nil || !req.auth.Payload.Consumed())
	}
	r = g.startSpan(r, req)
	r = r.WithContext(backend.WithCaller(context.WithValue(r.Context(), requestKey{}, req), &req.caller))
	limits := g.limits.Load()
	stopDeadlines, timedOut := watchBody(w, r, limits.BodyReadTimeout)
	defer stopDeadlines()
	rec.replace = func() error {
		if timedOut() {
			return s3err.ErrRequestTimeout
		}
		return nil
	}
	rec.resource, rec.id = r.URL.Path, req.id
	defer func() {
		elapsed := g.now().Sub(start)
		status := rec.status
		if status == 0 {
			status = 499 // the client went away before any answer
		}
		g.metrics.observe(req.route.Operation, status, elapsed)
		g.logRequest(r, req, rec, status, elapsed)
		g.endSpan(r, req, status)
	}()
	defer func() {
		// A client cut off while its handler answered nothing (the cut
		// cancelled the request's context) still hears why.
		if rec.status == 0 && timedOut() {
			g.writeError(rec, r, s3err.ErrRequestTimeout)
		}
	}()

	route, routeErr := resolveRoute(r, g.domains)
	req.route = route
	release := g.inFlight.acquire(limits.MaxInFlight)
	if release == nil {
		g.refuseLimited(rec, r, "total")
		return
	}
	defer release()
	if err := checkConnection(r.Header); err != nil {
		g.writeError(rec, r, err)
		return
	}
	if routeErr == errPostPolicy {
		g.writeError(rec, r, routeErr)
		return
	}
	keys := g.keys.Load()
	auth, err := keys.verifier.Verify(r)
	if err != nil {
		g.metrics.authFailures.WithLabelValues(s3err.As(err).Code).Inc()
		g.writeError(rec, r, err)
		return
	}
	req.auth, req.caller.Signer = auth, keys.identities.Signer(auth.Backend)
	releaseKey := g.inFlight.acquireKey(auth.AccessKey, limits.MaxInFlightPerCredential)
	if releaseKey == nil {
		g.refuseLimited(rec, r, "credential")
		return
	}
	defer releaseKey()
	if routeErr != nil {
		g.writeError(rec, r, routeErr)
		return
	}
	if err := checkDeclaredSize(req.route.Operation, auth.Payload.DecodedLength()); err != nil {
		g.writeError(rec, r, err)
		return
	}
	if err := checkBackendControls(r.Header); err != nil {
		g.writeError(rec, r, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := g.checkReserved(req.route.Key); err != nil {
			g.writeError(rec, r, err)
			return
		}
	}
	g.dispatch(rec, r, req)
}

// logRequest writes the request's log line (when info is enabled), its
// attributes built in place rather than boxed one by one.
func (g *Gateway) logRequest(r *http.Request, req *request, rec *responseRecorder, status int, elapsed time.Duration) {
	ctx := logContext(req)
	if !g.requestLog.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var buf [13]slog.Attr
	attrs := append(buf[:0],
		slog.String("id", req.id), slog.String("op", string(req.route.Operation)), slog.String("method", r.Method),
		slog.String("bucket", req.route.Bucket), slog.Int("status", status), slog.Int64("bytes_out", rec.bytes),
		slog.Int64("duration_ms", elapsed.Milliseconds()), slog.String("remote", r.RemoteAddr))
	if req.client.IsValid() {
		attrs = append(attrs, slog.String("client", req.client.String()))
	}
	if req.auth != nil {
		attrs = append(attrs, slog.String("principal", req.auth.Principal))
	}
	if id := req.backendRequestID.Load(); id != nil && *id != "" {
		attrs = append(attrs, slog.String("backend_id", *id))
	}
	attrs = append(attrs, tracing.LogAttrs(ctx)...)
	g.requestLog.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

// dispatch sends an authenticated request to the handler for its operation:
// every DeleteObjects to the handler that parses its keys, writes, reads
// and deletes in a content-addressed layout to the digest service (when
// digest reclamation is on), the multipart calls to the session service
// (when sessions are on), and everything else through the reverse proxy.
func (g *Gateway) dispatch(w http.ResponseWriter, r *http.Request, req *request) {
	req.shard = g.shardOf(req.route.Bucket)
	sh := req.shard
	switch {
	case req.route.Operation == s3op.DeleteObjects:
		g.deleteObjects(w, r, req)
	case sh.Digests.Serves(req.route.Operation, req.route.Bucket, req.route.Key):
		if sh.Digests.NeedsState(req.route.Operation) && (g.refuseWithoutState(w, r, sh) || g.refuseUnassigned(w, r, req)) {
			return
		}
		g.serveDigests(w, r, req)
	case req.route.Operation.IsMultipart() && sh.Sessions != nil:
		if g.refuseWithoutState(w, r, sh) || g.refuseUnassigned(w, r, req) {
			return
		}
		g.serveMultipart(w, r, req)
	default:
		g.forward(w, r, req)
	}
}

// refuseWithoutState answers a request that must be recorded in etcd, and
// reports true, while StateHealth says the state cannot take it: with the
// S3 error StateHealth gives, if it gives one, and otherwise with SlowDown
// and Retry-After (the last probe of etcd failed: the client retries
// instead of waiting on a store that does not answer). Nothing reached
// etcd or the backend.
func (g *Gateway) refuseWithoutState(w http.ResponseWriter, r *http.Request, sh *Shard) bool {
	if sh.StateHealth == nil {
		return false
	}
	err := sh.StateHealth()
	if err == nil {
		return false
	}
	g.metrics.stateRefusals.Inc()
	if s3e := (*s3err.Error)(nil); errors.As(err, &s3e) {
		g.writeError(w, r, s3e)
		return true
	}
	g.writeError(w, r, s3err.ErrStateUnavailable)
	return true
}

// forward passes the request to the backend through the streaming proxy
// (passThrough).
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, req *request) {
	if out := req.auth.Payload.Outbound(); out.ContentLength == 0 {
		// No body goes to the backend, so check now that the empty payload is
		// the one that was signed.
		if err := out.Apply(&http.Request{}); err != nil {
			g.writeError(w, r, err)
			return
		}
	}
	g.proxy.ServeHTTP(w, r)
}

// clientAuthHeaders belong to the client's signature and must not reach the
// backend, which gets the gateway's own.
var clientAuthHeaders = []string{
	"Authorization", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Security-Token",
}

// presignQuery are the query parameters of a presigned URL's signature.
var presignQuery = []string{
	"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
	"X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token",
}

// rewrite turns an authenticated client request into the backend request:
// path-style address, the client's signature removed, the verified body and
// the headers its payload mode needs. The backend client signs it.
func (g *Gateway) rewrite(out, in *http.Request) {
	req := requestFrom(in.Context())
	g.addressBackend(out, in, req)
	// forward has already read an empty payload, so Apply cannot fail here.
	_ = req.auth.Payload.Outbound().Apply(out)
	req.backendStart = g.now()
}

// addressBackend points out, a copy of the client's request in, at the
// backend: path-style, with the client's signature (header or presigned
// query) removed. The backend client adds the gateway's own.
func (g *Gateway) addressBackend(out, in *http.Request, req *request) {
	g.backend.Address(out.URL, req.route.Bucket, req.route.Key)
	out.Host = ""
	if req.auth.Presigned {
		q := in.URL.Query()
		for _, k := range presignQuery {
			q.Del(k)
		}
		out.URL.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	}
	for _, h := range clientAuthHeaders {
		out.Header.Del(h)
	}
	// Idempotency keys are sweepgate's to honour. Sent on, they would also
	// make net/http resend a failed DELETE or PUT by itself
	// (Request.isReplayable): a blind retry of a destructive call.
	out.Header.Del("Idempotency-Key")
	out.Header.Del("X-Idempotency-Key")
}

// modifyResponse stamps the gateway's request id on a backend response, in
// its header and in its error document if it is one. It refuses a response
// to a body that failed verification: that cannot be a success, and the
// client must hear why.
func (g *Gateway) modifyResponse(resp *http.Response) error {
	req := requestFrom(resp.Request.Context())
	g.metrics.backendDuration.WithLabelValues(string(req.route.Operation)).Observe(g.now().Sub(req.backendStart).Seconds())
	if err := req.auth.Payload.Err(); err != nil {
		return err
	}
	req.setBackendRequestID(resp.Header.Get("X-Amz-Request-Id"))
	resp.Header.Set("X-Amz-Request-Id", req.id)
	s3err.StampResponse(resp, req.id)
	return nil
}

// lowerMetadataNames writes user metadata header names in lower case, as S3
// sends them. Go canonicalises header names when it reads the backend's
// response (x-amz-meta-color becomes X-Amz-Meta-Color), so does Header.Add
// when the proxy copies it, and clients such as botocore take the metadata
// key's case from the header name.
func lowerMetadataNames(h http.Header) {
	for name, values := range h {
		if len(name) > len("X-Amz-Meta-") && strings.HasPrefix(name, "X-Amz-Meta-") {
			delete(h, name)
			h[strings.ToLower(name)] = values
		}
	}
}

// proxyError answers a request whose backend round trip failed: with the
// body's own verification error when that is what stopped it, and otherwise
// with ServiceUnavailable, since the backend's answer is unknown.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	req := requestFrom(r.Context())
	if perr := req.auth.Payload.Err(); perr != nil {
		var s3e *s3err.Error
		if errors.As(perr, &s3e) {
			g.writeError(w, r, perr)
			return
		}
	}
	if r.Context().Err() != nil {
		return // the client went away; nobody is left to answer
	}
	g.log.Warn("backend request failed", "id", req.id, "op", req.route.Operation, "err", err)
	g.writeError(w, r, s3err.ErrBadGateway)
}

// writeError answers with an S3 XML error.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	req := requestFrom(r.Context())
	var s3e *s3err.Error
	if !errors.As(err, &s3e) {
		g.log.Error("internal error", "id", req.id, "err", err)
	}
	if req.span != nil {
		code := s3err.As(err).Code
		req.errorCode.Store(&code)
	}
	s3err.Write(w, err, r.URL.Path, req.id)
}
