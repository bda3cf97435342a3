package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/tracing"
)

// The client's trace context in these tests.
const (
	clientTraceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID   = "00f067aa0ba902b7"
	clientTraceCtx = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// tracedBackend is a stand-in backend that answers every request with 200
// and remembers the trace headers each one carried.
type tracedBackend struct {
	mu          sync.Mutex
	traceparent []string
	tracestate  []string
}

func (b *tracedBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.traceparent = append(b.traceparent, r.Header.Get("Traceparent"))
	b.tracestate = append(b.tracestate, r.Header.Get("Tracestate"))
	b.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("X-Amz-Request-Id", "BACKEND-ID")
	_, _ = w.Write([]byte("hello"))
}

// tracingGateway serves a gateway in front of a tracedBackend, tracing
// with tracer (nil: off) and logging requests as JSON into logs.
func tracingGateway(t *testing.T, tracer trace.Tracer, logs io.Writer) (*httptest.Server, *tracedBackend, sigv4.Credential) {
	t.Helper()
	be := &tracedBackend{}
	backendSrv := httptest.NewServer(be)
	t.Cleanup(backendSrv.Close)
	cred := sigv4.Credential{AccessKey: "tracekey", SecretKey: "trace-secret-0123456789", Principal: "tracer"}
	g := newTestGateway(t, testParts{
		Endpoint: backendSrv.URL, Region: "us-east-1", AccessKey: "AKBACKEND", SecretKey: "backend-secret",
		Tracer: tracer,
	}, Config{
		Credentials: []sigv4.Credential{cred},
		Logger:      slog.New(slog.NewJSONHandler(logs, nil)),
	})
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv, be, cred
}

// sendTraced sends a GET of path, signed with secret, carrying the
// client's traceparent and a tracestate, and closes srv: it serves one
// request.
func sendTraced(t *testing.T, srv *httptest.Server, cred sigv4.Credential, secret, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Traceparent", clientTraceCtx)
	req.Header.Set("Tracestate", "client=1")
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	creds := aws.Credentials{AccessKeyID: cred.AccessKey, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The request's span ends, and its line is written, once its handler
	// returns, after the answer: Close waits for that.
	srv.Close()
	return resp
}

func spanAttr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestRequestSpanTree: a request with a client's traceparent continues
// its trace in a server span named by its operation, with the request's
// attributes; its backend call is a client span under it, and the backend
// gets that span's traceparent, not the client's; the request's log line
// carries the trace id.
func TestRequestSpanTree(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var logs syncBuffer
	srv, be, cred := tracingGateway(t, tp.Tracer("test"), &logs)

	resp := sendTraced(t, srv, cred, cred.SecretKey, "/bucket/some/key")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the request's and its backend call's: %+v", len(spans), spans.Snapshots())
	}
	backendSpan, server := spans[0], spans[1]
	if server.Name != "GetObject" || server.SpanKind != trace.SpanKindServer {
		t.Errorf("request span %q of kind %v, want GetObject, server", server.Name, server.SpanKind)
	}
	if got := server.SpanContext.TraceID().String(); got != clientTraceID {
		t.Errorf("request span's trace %s, want the client's %s", got, clientTraceID)
	}
	if got := server.Parent.SpanID().String(); got != clientSpanID || !server.Parent.IsRemote() {
		t.Errorf("request span's parent %s (remote %v), want the client's span %s", got, server.Parent.IsRemote(), clientSpanID)
	}
	want := map[attribute.Key]string{
		tracing.Operation: "GetObject", tracing.Bucket: "bucket", tracing.Method: "GET",
		tracing.Principal: "tracer", tracing.RequestID: resp.Header.Get("X-Amz-Request-Id"),
	}
	for k, v := range want {
		if got := spanAttr(server, k).AsString(); got != v {
			t.Errorf("request span's %s = %q, want %q", k, got, v)
		}
	}
	if got := spanAttr(server, tracing.Status).AsInt64(); got != 200 {
		t.Errorf("request span's status %d, want 200", got)
	}
	if backendSpan.SpanKind != trace.SpanKindClient || backendSpan.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("backend span %q of kind %v under %s, want a client span under the request's %s",
			backendSpan.Name, backendSpan.SpanKind, backendSpan.Parent.SpanID(), server.SpanContext.SpanID())
	}
	if got := spanAttr(backendSpan, tracing.Status).AsInt64(); got != 200 {
		t.Errorf("backend span's status %d, want 200", got)
	}
	wantParent := "00-" + clientTraceID + "-" + backendSpan.SpanContext.SpanID().String() + "-01"
	if len(be.traceparent) != 1 || be.traceparent[0] != wantParent {
		t.Errorf("the backend got traceparent %q, want the backend span's %q", be.traceparent, wantParent)
	}
	if len(be.tracestate) != 1 || be.tracestate[0] != "client=1" {
		t.Errorf("the backend got tracestate %q, want the trace's client=1", be.tracestate)
	}
	line := requestLine(t, &logs)
	if line["trace_id"] != clientTraceID || line["span_id"] != server.SpanContext.SpanID().String() {
		t.Errorf("request line %v, want trace_id %s and span_id %s", line, clientTraceID, server.SpanContext.SpanID())
	}
}

// TestRefusedRequestSpan: a request the gateway refuses still has its span,
// with the S3 error code it was answered with, and reaches no backend.
func TestRefusedRequestSpan(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	srv, be, cred := tracingGateway(t, tp.Tracer("test"), io.Discard)

	resp := sendTraced(t, srv, cred, "not-the-secret", "/bucket/key")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET with a wrong signature: %d", resp.StatusCode)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want the request's alone", len(spans))
	}
	if got := spanAttr(spans[0], tracing.ErrorCode).AsString(); got != "SignatureDoesNotMatch" {
		t.Errorf("refused request's error code %q, want SignatureDoesNotMatch", got)
	}
	if got := spanAttr(spans[0], tracing.Principal).AsString(); got != "" {
		t.Errorf("refused request names principal %q", got)
	}
	if len(be.traceparent) != 0 {
		t.Errorf("a refused request reached the backend")
	}
}

// TestTracingOffForwardsNoTraceparent: with tracing off the client's
// traceparent and tracestate do not reach the backend, and the log line
// has no trace id.
func TestTracingOffForwardsNoTraceparent(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	srv, be, cred := tracingGateway(t, nil, &logs)
	if resp := sendTraced(t, srv, cred, cred.SecretKey, "/bucket/key"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	if len(be.traceparent) != 1 || be.traceparent[0] != "" || be.tracestate[0] != "" {
		t.Errorf("the backend got traceparent %q, tracestate %q; want none", be.traceparent, be.tracestate)
	}
	if line := requestLine(t, &logs); line["trace_id"] != nil {
		t.Errorf("request line with tracing off carries a trace id: %v", line)
	}
}

// syncBuffer is a bytes.Buffer safe for a handler's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// requestLine returns the one "request" line in logs.
func requestLine(t *testing.T, logs *syncBuffer) map[string]any {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var found []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(logs.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil && m["msg"] == "request" {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d request lines, want 1: %s", len(found), logs.buf.String())
	}
	return found[0]
}
