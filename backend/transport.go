package backend

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/backend/h1client"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/tracing"
)

// emptySHA256 is the hex SHA-256 of an empty payload.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// signingTransport signs every request with a backend identity's key just
// before it is sent, so whatever prepared the request (the proxy, a
// service, a health check) only has to say which payload hash to sign with,
// in the X-Amz-Content-Sha256 header. signer picks the identity for each
// request (Client.signer); a request it refuses is not sent. A client's
// traceparent and tracestate never reach the backend: with a tracer, the
// call's own span's take their place, signed with the rest (traceCall).
type signingTransport struct {
	base   http.RoundTripper
	signer func(*http.Request) (*sigv4.Signer, error)
	now    func() time.Time
	tracer trace.Tracer // nil: no spans
	host   string       // the backend's host:port, for the spans
}

func (t *signingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	signer, err := t.signer(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	req.Header.Del(RequestIDHeader)
	for _, h := range connectionHeaders {
		req.Header.Del(h)
	}
	if c := CallerFrom(req.Context()); c != nil {
		req.Header.Set(RequestIDHeader, c.RequestID)
		if c.ClientAddr != "" {
			req.Header.Set(ClientAddrHeader, c.ClientAddr)
		}
	}
	for _, h := range tracing.TraceHeaders {
		req.Header.Del(h)
	}
	span := t.traceCall(req)
	payloadHash := req.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		payloadHash = emptySHA256
		req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	}
	// X-Amz-Date and Authorization are the signer's to set.
	req.Header.Del("Authorization")
	req.Header.Del("X-Amz-Date")
	signer.Sign(req, payloadHash, t.now())
	resp, err := t.base.RoundTrip(req)
	if span != nil {
		endCall(span, resp, err)
	}
	return resp, err
}

// traceCall starts the client span of a backend call made under a span and
// writes its traceparent (and the trace's tracestate) into req's headers,
// before they are signed. It returns nil, and writes nothing, without a
// tracer or a parent span. The span covers the round trip up to the
// response's headers, not the copy of its body.
func (t *signingTransport) traceCall(req *http.Request) trace.Span {
	if t.tracer == nil || !trace.SpanContextFromContext(req.Context()).IsValid() {
		return nil
	}
	ctx, span := t.tracer.Start(req.Context(), "backend "+req.Method, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(tracing.Method.String(req.Method), tracing.ServerAddress.String(t.host))
		if c := CallerFrom(req.Context()); c != nil {
			span.SetAttributes(tracing.RequestID.String(c.RequestID))
		}
	}
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return span
}

// endCall ends a backend call's span with the backend's status, or the
// error that left it without one.
func endCall(span trace.Span, resp *http.Response, err error) {
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, "backend round trip failed")
	default:
		span.SetAttributes(tracing.Status.Int(resp.StatusCode), tracing.BackendRequestID.String(resp.Header.Get("X-Amz-Request-Id")))
		if resp.StatusCode >= 500 {
			span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
		}
	}
	span.End()
}

// newTransport returns the transport that carries the backend's calls: it
// keeps many idle connections (clients send many small requests
// concurrently), never compresses (bytes pass through as they are), and
// waits for 100-continue when the client asked for it. roots, when not nil,
// are the certificate authorities an https backend's certificate must
// chain to, instead of the system's.
func newTransport(roots *x509.CertPool) *splitTransport {
	std := &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 5 * time.Second,
		DisableCompression:    true,
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
	}
	if roots != nil {
		std.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	direct := h1client.New(h1client.Options{
		DialTimeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		MaxIdlePerHost: 256, IdleTimeout: 90 * time.Second, ReadBufferSize: 64 << 10,
	})
	// Callers hand the signer a path that is already escaped the way S3
	// wants it (Path), and the signer signs it as it is. Its derived key
	// is cached per day.
	return &splitTransport{direct: direct, std: std}
}

// splitTransport sends bodiless GET and HEAD requests to a plain http
// backend with h1client, in the calling goroutine, and every other request
// (with a body, another method, an https backend) with net/http's
// Transport, on a pool of connections of its own. Both have the same dial,
// keep-alive and idle limits.
type splitTransport struct {
	direct *h1client.Client
	std    *http.Transport
}

func (t *splitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if h1client.Handles(req) {
		return t.direct.RoundTrip(req)
	}
	return t.std.RoundTrip(req)
}

// CloseIdleConnections closes both pools' idle connections.
func (t *splitTransport) CloseIdleConnections() {
	t.direct.CloseIdleConnections()
	t.std.CloseIdleConnections()
}
