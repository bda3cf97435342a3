package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestChildrenOnly: the etcd client's tracer makes a span under a parent
// and none without one, so that background calls start no trace.
func TestChildrenOnly(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	children := ChildrenOnly(tp).Tracer("etcd")

	ctx, span := children.Start(context.Background(), "lone")
	span.End()
	if ctx != context.Background() || span.SpanContext().IsValid() {
		t.Errorf("a call under no span started one")
	}
	parentCtx, parent := tp.Tracer("test").Start(context.Background(), "request")
	_, child := children.Start(parentCtx, "Range")
	child.End()
	parent.End()
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "Range" || spans[0].Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("spans %v, want Range under request", spans.Snapshots())
	}
}

// TestLogAttrs: a log line names the trace of a recording span, and no
// trace without one or when the trace is not sampled.
func TestLogAttrs(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	attrs := LogAttrs(ctx)
	if len(attrs) != 2 || attrs[0].Key != "trace_id" || attrs[0].Value.String() != span.SpanContext().TraceID().String() ||
		attrs[1].Key != "span_id" || attrs[1].Value.String() != span.SpanContext().SpanID().String() {
		t.Errorf("LogAttrs = %v", attrs)
	}
	if got := LogArgs(context.Background()); got != nil {
		t.Errorf("LogArgs without a span = %v", got)
	}
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	ctx, span = unsampled.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	if got := LogAttrs(ctx); got != nil {
		t.Errorf("LogAttrs of an unsampled span = %v", got)
	}
}
