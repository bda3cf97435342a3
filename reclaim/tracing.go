package reclaim

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/tracing"
)

// passTracer makes the span of each pass from the process's tracer
// provider, which serve installs when tracing is on; otherwise it is
// OpenTelemetry's no-op provider, and a pass makes no span.
var passTracer = otel.Tracer(tracing.ScopeName)

// startPassSpan starts the span of a pass (a root span: a pass serves no
// client request). The pass's backend and etcd calls, made under the
// returned context, are its children.
func startPassSpan(ctx context.Context) (context.Context, trace.Span) {
	return passTracer.Start(ctx, "reclaim pass")
}

// endPassSpan ends a pass's span with what its report says: its number,
// term, whether it was a dry run or refused, and why it stopped.
func endPassSpan(span trace.Span, rep Report, err error) {
	if span.IsRecording() {
		span.SetAttributes(
			attribute.Int64("sweepgate.pass", rep.Pass),
			attribute.Int64("sweepgate.term", rep.Term),
			attribute.Bool("sweepgate.dry_run", rep.DryRun),
			attribute.String("sweepgate.refused", rep.Refused),
		)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "the pass stopped")
		}
	}
	span.End()
}
