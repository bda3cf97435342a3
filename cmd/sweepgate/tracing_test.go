package main

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
)

// TestServeTracingOff: with tracing.endpoint empty serve sets up nothing:
// no provider, no tracer for the gateway and the backend client, no dial
// option for the etcd client, and the process's provider stays the
// no-op one the reclaimer's passes then use.
func TestServeTracingOff(t *testing.T) {
	st, err := newServeTracing(config.Defaults(), cli.BuildInfo{Version: "test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.provider != nil || st.tracer() != nil || st.etcdDialOptions() != nil {
		t.Errorf("tracing off set something up: provider %v, tracer %v, dial options %v", st.provider, st.tracer(), st.etcdDialOptions())
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Errorf("tracing off installed an SDK tracer provider as the process's")
	}
	st.shutdown(nil) // nothing to flush, nothing to log
}
