//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// otlpCollector is an OTLP/gRPC trace collector on the loopback that keeps
// every span it is sent, and the string attributes of their resources.
type otlpCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	addr string

	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
}

func startCollector(t *testing.T) *otlpCollector {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &otlpCollector{addr: l.Addr().String(), resource: map[string]string{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return c
}

func (c *otlpCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			c.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *otlpCollector) collected() ([]*tracepb.Span, map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...), c.resource
}

// clientTrace sets the traceparent of each request a client sends: the
// one of the call under way (set), a trace of its own per call.
type clientTrace struct {
	base http.RoundTripper
	mu   sync.Mutex
	cur  string
}

func (c *clientTrace) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	tp := c.cur
	c.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", tp)
	return c.base.RoundTrip(r)
}

// set starts a new client trace and returns its trace and span ids.
func (c *clientTrace) set(t *testing.T) (traceID, spanID string) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	traceID, spanID = hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	c.mu.Lock()
	c.cur = "00-" + traceID + "-" + spanID + "-01"
	c.mu.Unlock()
	return traceID, spanID
}

func hexID(b []byte) string { return hex.EncodeToString(b) }

func spanString(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// backendTraceparents are the traceparent headers MinIO received, by the
// trace id they name.
func backendTraceparents(t *testing.T, tr *harness.Trace) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := tr.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range tr.Entries() {
		if tp := e.Header.Get("Traceparent"); tp != "" {
			parts := strings.Split(tp, "-")
			if len(parts) != 4 {
				t.Fatalf("MinIO got a malformed traceparent %q", tp)
			}
			out[parts[1]] = append(out[parts[1]], tp)
		}
	}
	return out
}

// logLines are the gateway's log lines with message msg, by their
// trace_id ("" for none).
func logLines(t *testing.T, g *harness.Gateway, msg string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for l := range strings.SplitSeq(g.Log(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != msg {
			continue
		}
		id, _ := m["trace_id"].(string)
		out[id] = append(out[id], m)
	}
	return out
}

// TestTracing: with tracing.endpoint set, every S3 call sent with a
// traceparent continues the client's trace in a server span named by its
// operation, whose children are its backend calls (whose traceparent MinIO
// receives) and, for the multipart calls, its etcd calls; the spans reach
// the collector by the time the gateway has stopped, and the request's log
// line (and an abort's audit line) carries the trace id. A reclaimer pass
// has a span of its own, with its backend and etcd calls under it.
func TestTracing(t *testing.T) {
	t.Parallel()
	col := startCollector(t)
	env := harness.Start(t, harness.Options{Config: map[string]any{
		"tracing": map[string]any{"endpoint": col.addr, "insecure": true},
	}})
	env.RequireGateway(t)
	tr := harness.StartTrace(t, env.MinIO)
	ct := &clientTrace{}
	c := env.SDK(t, harness.WithTransport(func(rt http.RoundTripper) http.RoundTripper { ct.base = rt; return ct }))
	bucket := env.Bucket(t)
	ctx := t.Context()

	type call struct{ op, traceID, spanID string }
	var calls []call
	traced := func(op string, f func() error) {
		t.Helper()
		traceID, spanID := ct.set(t)
		if err := f(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		calls = append(calls, call{op, traceID, spanID})
	}
	body := harness.NewData(1, 5*mib)
	traced("PutObject", func() error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj"), Body: body.Reader(), ContentLength: aws.Int64(body.Size)})
		return err
	})
	traced("GetObject", func() error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj")})
		if err == nil {
			_, _, err = harness.HashReader(out.Body)
			out.Body.Close()
		}
		return err
	})
	var uploadID *string
	traced("CreateMultipartUpload", func() error {
		out, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp")})
		if err == nil {
			uploadID = out.UploadId
		}
		return err
	})
	var etag *string
	traced("UploadPart", func() error {
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: uploadID,
			PartNumber: aws.Int32(1), Body: body.Reader(), ContentLength: aws.Int64(body.Size)})
		if err == nil {
			etag = out.ETag
		}
		return err
	})
	traced("CompleteMultipartUpload", func() error {
		_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: etag}}}})
		return err
	})
	var abortUploadID *string
	traced("CreateMultipartUpload", func() error {
		out, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("aborted")})
		if err == nil {
			abortUploadID = out.UploadId
		}
		return err
	})
	traced("AbortMultipartUpload", func() error {
		_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("aborted"), UploadId: abortUploadID})
		return err
	})

	awaitLeading(t, env.Gateway)
	pass := runPass(t, env.Gateway.AdminEndpoint)

	atBackend := backendTraceparents(t, tr)
	// The spans still queued are exported on the way out.
	env.Gateway.Stop()
	spans, resource := col.collected()
	if resource["service.name"] != "sweepgate" || resource["service.version"] == "" || resource["service.instance.id"] == "" {
		t.Errorf("spans' resource %v, want service.name sweepgate, its version and instance", resource)
	}
	lines := logLines(t, env.Gateway, "request")
	for _, cl := range calls {
		checkTracedCall(t, cl.op, cl.traceID, cl.spanID, spans, atBackend[cl.traceID], lines[cl.traceID])
	}
	checkPassSpan(t, pass.Pass, spans)
	// The abort's audit line names the abort's trace.
	abort := calls[len(calls)-1]
	if audits := logLines(t, env.Gateway, "audit")[abort.traceID]; len(audits) != 1 || audits[0]["action"] != "abort_upload" {
		t.Errorf("audit lines with the abort's trace id %s: %v, want its abort_upload line", abort.traceID, audits)
	}
}

// checkTracedCall checks the span tree of the call of op sent in trace
// traceID under the client's span spanID, the traceparents MinIO got in
// that trace and the call's request lines.
func checkTracedCall(t *testing.T, op, traceID, spanID string, spans []*tracepb.Span, atBackend []string, lines []map[string]any) {
	t.Helper()
	var server *tracepb.Span
	children := map[string]*tracepb.Span{}
	for _, s := range spans {
		if hexID(s.GetTraceId()) != traceID {
			continue
		}
		if s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
			if server != nil {
				t.Errorf("%s: two request spans in trace %s", op, traceID)
			}
			server = s
			continue
		}
		children[hexID(s.GetSpanId())] = s
	}
	if server == nil {
		t.Errorf("%s: no request span in the client's trace %s (%d spans collected)", op, traceID, len(spans))
		return
	}
	if server.GetName() != op || hexID(server.GetParentSpanId()) != spanID {
		t.Errorf("%s: request span %q under %s, want %s under the client's span %s", op, server.GetName(), hexID(server.GetParentSpanId()), op, spanID)
	}
	if got := spanString(server, "s3.operation"); got != op {
		t.Errorf("%s: s3.operation %q", op, got)
	}
	serverID := hexID(server.GetSpanId())
	var backendSpans []string
	etcdCalls := 0
	for id, s := range children {
		if hexID(s.GetParentSpanId()) != serverID || s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
			continue
		}
		switch {
		case strings.HasPrefix(s.GetName(), "backend "):
			backendSpans = append(backendSpans, id)
		case strings.HasPrefix(s.GetName(), "etcdserverpb."):
			etcdCalls++
		}
	}
	if len(backendSpans) == 0 {
		t.Errorf("%s: no backend span under the request span", op)
	}
	if multipart := strings.Contains(op, "Multipart") || op == "UploadPart"; multipart && etcdCalls == 0 {
		t.Errorf("%s: no etcd span under the request span", op)
	} else if !multipart && etcdCalls != 0 {
		t.Errorf("%s: %d etcd spans; a plain call makes none", op, etcdCalls)
	}
	if len(atBackend) == 0 {
		t.Errorf("%s: MinIO got no traceparent of trace %s", op, traceID)
	}
	for _, tp := range atBackend {
		parent := strings.Split(tp, "-")[2]
		if children[parent] == nil || !strings.HasPrefix(children[parent].GetName(), "backend ") {
			t.Errorf("%s: MinIO got traceparent %s, whose parent is not one of the request's backend spans %v", op, tp, backendSpans)
		}
	}
	if len(lines) != 1 || lines[0]["span_id"] != serverID {
		t.Errorf("%s: request lines with trace_id %s: %v, want one with span_id %s", op, traceID, lines, serverID)
	}
}

// TestTracingOff: with tracing off (the default) a client's traceparent
// does not reach the backend and no log line names a trace.
func TestTracingOff(t *testing.T) {
	t.Parallel()
	env := harness.Start(t)
	env.RequireGateway(t)
	tr := harness.StartTrace(t, env.MinIO)
	ct := &clientTrace{}
	c := env.SDK(t, harness.WithTransport(func(rt http.RoundTripper) http.RoundTripper { ct.base = rt; return ct }))
	bucket := env.Bucket(t)
	ct.set(t)
	putData(t, c, bucket, "obj", harness.NewData(2, kib))
	requireObject(t, c, bucket, "obj", harness.NewData(2, kib))
	if got := backendTraceparents(t, tr); len(got) != 0 {
		t.Errorf("with tracing off MinIO got traceparents %v", got)
	}
	lines := logLines(t, env.Gateway, "request")
	if len(lines[""]) == 0 || len(lines) != 1 {
		t.Errorf("with tracing off, request lines by trace id: %v", lines)
	}
}

// checkPassSpan checks that the reclaimer pass numbered pass has its span,
// whose children include its backend and etcd calls.
func checkPassSpan(t *testing.T, pass int64, spans []*tracepb.Span) {
	t.Helper()
	var span *tracepb.Span
	for _, s := range spans {
		if s.GetName() != "reclaim pass" {
			continue
		}
		for _, kv := range s.GetAttributes() {
			if kv.GetKey() == "sweepgate.pass" && kv.GetValue().GetIntValue() == pass {
				span = s
			}
		}
	}
	if span == nil {
		t.Errorf("no span of reclaimer pass %d", pass)
		return
	}
	backendCalls, etcdCalls := 0, 0
	for _, s := range spans {
		if !bytes.Equal(s.GetParentSpanId(), span.GetSpanId()) {
			continue
		}
		switch {
		case strings.HasPrefix(s.GetName(), "backend "):
			backendCalls++
		case strings.HasPrefix(s.GetName(), "etcdserverpb."):
			etcdCalls++
		}
	}
	if backendCalls == 0 || etcdCalls == 0 {
		t.Errorf("reclaimer pass %d: %d backend and %d etcd spans under its span, want some of each", pass, backendCalls, etcdCalls)
	}
}
