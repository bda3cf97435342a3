package tracing

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// EtcdKV returns kv, an etcd KV client that calls an etcd server in
// process (the embedded member's, which no gRPC connection instruments),
// making each call a client span named as gRPC instrumentation names the
// same call over the network ("etcdserverpb.KV/Txn"), with its rpc.system,
// rpc.service and rpc.method attributes and its error. tp should be
// ChildrenOnly's, so that calls made under no span (probes, the
// reclaimer's idle reads) start no trace.
func EtcdKV(kv pb.KVClient, tp trace.TracerProvider) pb.KVClient {
	return tracedKV{kv: kv, t: tp.Tracer(ScopeName)}
}

type tracedKV struct {
	kv pb.KVClient
	t  trace.Tracer
}

// traced runs one call of the KV service under its span.
func traced[Req, Resp any](t trace.Tracer, ctx context.Context, method string, req Req,
	do func(context.Context, Req, ...grpc.CallOption) (Resp, error), opts []grpc.CallOption) (Resp, error) {
	ctx, span := t.Start(ctx, "etcdserverpb.KV/"+method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", "etcdserverpb.KV"), attribute.String("rpc.method", method)))
	defer span.End()
	resp, err := do(ctx, req, opts...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return resp, err
}

func (k tracedKV) Range(ctx context.Context, r *pb.RangeRequest, opts ...grpc.CallOption) (*pb.RangeResponse, error) {
	return traced(k.t, ctx, "Range", r, k.kv.Range, opts)
}

func (k tracedKV) Put(ctx context.Context, r *pb.PutRequest, opts ...grpc.CallOption) (*pb.PutResponse, error) {
	return traced(k.t, ctx, "Put", r, k.kv.Put, opts)
}

func (k tracedKV) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest, opts ...grpc.CallOption) (*pb.DeleteRangeResponse, error) {
	return traced(k.t, ctx, "DeleteRange", r, k.kv.DeleteRange, opts)
}

func (k tracedKV) Txn(ctx context.Context, r *pb.TxnRequest, opts ...grpc.CallOption) (*pb.TxnResponse, error) {
	return traced(k.t, ctx, "Txn", r, k.kv.Txn, opts)
}

func (k tracedKV) Compact(ctx context.Context, r *pb.CompactionRequest, opts ...grpc.CallOption) (*pb.CompactionResponse, error) {
	return traced(k.t, ctx, "Compact", r, k.kv.Compact, opts)
}
