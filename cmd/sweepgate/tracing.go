package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/tracing"
)

// tracingFlushTimeout bounds the export of the spans still queued when
// serve stops.
const tracingFlushTimeout = 5 * time.Second

// serveTracing is serve's OpenTelemetry tracing. With tracing.endpoint
// empty it is off: provider is nil, no exporter or batching goroutine
// exists, and the gateway, the backend client and the etcd client are
// given no tracer.
type serveTracing struct {
	provider *sdktrace.TracerProvider
}

// newServeTracing sets up the export of cfg's traces: a batching
// OTLP/gRPC exporter to tracing.endpoint (plain gRPC with
// tracing.insecure, else TLS with tracing.ca_file's or the system's
// roots), a parent-based sampler of tracing.sample_ratio, and the resource
// of this process (service.name sweepgate, its version, an instance id
// fresh at each start, the host name). The exporter dials lazily: a
// collector that does not answer loses spans, never requests. Its errors
// are logged as warnings.
func newServeTracing(cfg *config.Config, build cli.BuildInfo, logger *slog.Logger) (*serveTracing, error) {
	t := cfg.Tracing
	if t.Endpoint == "" {
		return &serveTracing{}, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(t.Endpoint)}
	if t.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	} else {
		roots, err := cfg.TracingRootCAs()
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})))
	}
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing.endpoint: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(tracingResource(build)...))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: exporting spans failed", "endpoint", t.Endpoint, "err", err)
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.SampleRatio))),
	)
	// The reclaimer's passes take their tracer from the process's provider.
	otel.SetTracerProvider(tp)
	return &serveTracing{provider: tp}, nil
}

// tracingResource are the attributes that say which process made a span.
func tracingResource(build cli.BuildInfo) []attribute.KeyValue {
	var id [16]byte
	_, _ = rand.Read(id[:])
	attrs := []attribute.KeyValue{
		attribute.String("service.name", tracing.ServiceName),
		attribute.String("service.version", build.Version),
		attribute.String("service.instance.id", hex.EncodeToString(id[:])),
	}
	if host, err := os.Hostname(); err == nil {
		attrs = append(attrs, attribute.String("host.name", host))
	}
	return attrs
}

// tracer is the tracer of the gateway's and the backend client's spans;
// nil when tracing is off.
func (t *serveTracing) tracer() trace.Tracer {
	if t == nil || t.provider == nil {
		return nil
	}
	return t.provider.Tracer(tracing.ScopeName)
}

// etcdDialOptions instrument the etcd client: every RPC made under a span
// (a request's etcd calls) becomes a client span of it; RPCs made under
// none start no trace. None when tracing is off.
func (t *serveTracing) etcdDialOptions() []grpc.DialOption {
	if t == nil || t.provider == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tracing.ChildrenOnly(t.provider)),
	))}
}

// etcdKV wraps the embedded member's in-process KV service so that its
// calls are client spans as etcdDialOptions makes them over gRPC; nil when
// tracing is off.
func (t *serveTracing) etcdKV() func(pb.KVClient) pb.KVClient {
	if t == nil || t.provider == nil {
		return nil
	}
	tp := tracing.ChildrenOnly(t.provider)
	return func(kv pb.KVClient) pb.KVClient { return tracing.EtcdKV(kv, tp) }
}

// shutdown exports the spans still queued, for up to tracingFlushTimeout,
// and stops the exporter.
func (t *serveTracing) shutdown(logger *slog.Logger) {
	if t == nil || t.provider == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans queued at shutdown were not all exported", "err", err)
	}
}
