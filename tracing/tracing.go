// Package tracing holds what sweepgate's packages share about OpenTelemetry
// traces: the W3C trace-context propagator the gateway reads a client's
// traceparent with and writes the backend's with, the attribute names of
// its spans, the trace ids of a request's log lines, and a tracer provider
// that makes only child spans (for the etcd client, whose background calls
// must not start traces of their own). The SDK and the exporter are set up
// by serve (cmd/sweepgate); with tracing off nothing here is used and no
// span is made.
package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// ServiceName is the service.name of sweepgate's spans.
const ServiceName = "sweepgate"

// ScopeName is the instrumentation scope of the spans sweepgate makes.
const ScopeName = "github.com/sweepgate/sweepgate"

// Propagator reads and writes the W3C traceparent and tracestate headers.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// TraceHeaders are the headers Propagator reads and writes: a client's are
// never sent on to the backend as they came (the backend call's own are
// written in their place when tracing is on).
var TraceHeaders = []string{"Traceparent", "Tracestate"}

// The attributes of sweepgate's spans, beside OpenTelemetry's HTTP ones.
const (
	// Operation is the S3 operation the gateway classified the request as.
	Operation = attribute.Key("s3.operation")
	// Bucket is the request's bucket, empty for the service root.
	Bucket = attribute.Key("s3.bucket")
	// RequestID is the gateway's id of the request (its x-amz-request-id).
	RequestID = attribute.Key("sweepgate.request_id")
	// Principal is the principal the request's credential names.
	Principal = attribute.Key("sweepgate.principal")
	// ErrorCode is the S3 error code the gateway answered with.
	ErrorCode = attribute.Key("s3.error_code")
	// BackendRequestID is the backend's own id of its response.
	BackendRequestID = attribute.Key("sweepgate.backend_request_id")
	// Method and Status are the HTTP method and response status.
	Method = attribute.Key("http.request.method")
	Status = attribute.Key("http.response.status_code")
	// ServerAddress is the host:port a client span called.
	ServerAddress = attribute.Key("server.address")
)

// LogAttrs returns the trace_id and span_id attributes of the span ctx
// carries when that span is recording, for every log line written while
// serving a traced request; nil otherwise.
func LogAttrs(ctx context.Context) []slog.Attr {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	sc := span.SpanContext()
	return []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}

// LogArgs is LogAttrs as arguments of slog.Logger's Info and With.
func LogArgs(ctx context.Context) []any {
	attrs := LogAttrs(ctx)
	if attrs == nil {
		return nil
	}
	args := make([]any, len(attrs))
	for i, a := range attrs {
		args[i] = a
	}
	return args
}

// ChildrenOnly returns a tracer provider whose tracers start a span only
// under a valid parent span (a request's or a reclaimer pass's) and
// otherwise start none, returning the context unchanged: calls made for no
// traced work (probes, watches, lease keep-alives) leave no trace.
func ChildrenOnly(tp trace.TracerProvider) trace.TracerProvider {
	return childrenOnlyProvider{tp: tp}
}

type childrenOnlyProvider struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p childrenOnlyProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childrenOnlyTracer{t: p.tp.Tracer(name, opts...)}
}

type childrenOnlyTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (t childrenOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, opts...)
}
