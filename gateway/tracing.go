package gateway

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/tracing"
)

// unclassifiedSpanName names the span of a request until (and unless) the
// gateway names its S3 operation.
const unclassifiedSpanName = "S3"

// startSpan starts the server span of a request when tracing is on,
// continuing the trace of the client's traceparent header when it sent a
// valid one, and returns r with the span in its context. The traceparent
// is read here and nowhere else: it is not part of the S3 request the
// gateway classifies, and the backend never gets the client's own
// (backend.Config.Tracer).
func (g *Gateway) startSpan(r *http.Request, req *request) *http.Request {
	if g.tracer == nil {
		return r
	}
	ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, req.span = g.tracer.Start(ctx, unclassifiedSpanName, trace.WithSpanKind(trace.SpanKindServer))
	return r.WithContext(ctx)
}

// endSpan names a request's span by its operation, gives it the request's
// attributes and ends it.
func (g *Gateway) endSpan(r *http.Request, req *request, status int) {
	span := req.span
	if span == nil {
		return
	}
	if span.IsRecording() {
		if req.route.Operation != "" {
			span.SetName(string(req.route.Operation))
		}
		span.SetAttributes(
			tracing.Operation.String(string(req.route.Operation)),
			tracing.Bucket.String(req.route.Bucket),
			tracing.RequestID.String(req.id),
			tracing.Method.String(r.Method),
			tracing.Status.Int(status),
		)
		if req.auth != nil {
			span.SetAttributes(tracing.Principal.String(req.auth.Principal))
		}
		if code := req.errorCode.Load(); code != nil {
			span.SetAttributes(tracing.ErrorCode.String(*code))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// logContext is the context of a request's log line: the request's span,
// when it has one, whose ids the line then carries.
func logContext(req *request) context.Context {
	if req.span == nil {
		return context.Background()
	}
	return trace.ContextWithSpan(context.Background(), req.span)
}
