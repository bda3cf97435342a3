package tracing

import (
	"context"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// answeringKV is a KV service whose Txn answers err and whose Range
// answers an empty range; its other calls are not used.
type answeringKV struct {
	pb.KVClient
	err error
}

func (k answeringKV) Txn(context.Context, *pb.TxnRequest, ...grpc.CallOption) (*pb.TxnResponse, error) {
	return &pb.TxnResponse{Succeeded: k.err == nil}, k.err
}

func (k answeringKV) Range(context.Context, *pb.RangeRequest, ...grpc.CallOption) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{}, nil
}

// TestEtcdKV: an in-process KV call made under a request's span is a
// client span named as gRPC's instrumentation names it, with its rpc
// attributes and its error; a call under no span makes none, and the
// answer passes through unchanged.
func TestEtcdKV(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	refused := errors.New("etcdserver: request timed out")
	kv := EtcdKV(answeringKV{err: refused}, ChildrenOnly(tp))

	if _, err := kv.Range(context.Background(), &pb.RangeRequest{}); err != nil || len(exp.GetSpans()) != 0 {
		t.Fatalf("a call under no span: %v, %d spans", err, len(exp.GetSpans()))
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "UploadPart")
	resp, err := kv.Txn(ctx, &pb.TxnRequest{})
	parent.End()
	if !errors.Is(err, refused) || resp == nil || resp.Succeeded {
		t.Fatalf("Txn through the wrapper: %v, %v; want the service's answer", resp, err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("spans %v, want the Txn and its parent", spans.Snapshots())
	}
	s := spans[0]
	want := map[attribute.Key]string{"rpc.system": "grpc", "rpc.service": "etcdserverpb.KV", "rpc.method": "Txn"}
	for k, v := range want {
		if got := attrOf(s, k); got != v {
			t.Errorf("span %s: %s = %q, want %q", s.Name, k, got, v)
		}
	}
	if s.Name != "etcdserverpb.KV/Txn" || s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != parent.SpanContext().SpanID() ||
		s.Status.Code != codes.Error || len(s.Events) == 0 {
		t.Errorf("span %+v; want a client span etcdserverpb.KV/Txn under UploadPart with the error", s)
	}
}

func attrOf(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.AsString()
		}
	}
	return ""
}
