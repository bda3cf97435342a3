//go:build integration

package harness

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestTraceAttributesCalls checks the trace reader against a running
// MinIO: each call it executed comes back with its handler name, method,
// path, query, status, traced body and the request id header.
func TestTraceAttributesCalls(t *testing.T) {
	m := StartMinIO(t)
	tr := StartTrace(t, m)
	send := func(id, method, target string, body []byte) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, m.Endpoint+target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(TraceRequestIDHeader, id)
		if err := SignV4(t.Context(), req, m.AccessKey, m.SecretKey, m.Region, SHA256Hex(body), time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	send("make", http.MethodPut, "/traced", nil)
	send("tag", http.MethodPut, "/traced?tagging", []byte(`<Tagging><TagSet></TagSet></Tagging>`))
	send("abort", http.MethodDelete, "/traced/k?uploadId=x&tagging", nil)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := tr.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	byID := tr.ByRequestID()
	check := func(id, funcName, method, path, query string, status int) TraceEntry {
		t.Helper()
		es := byID[id]
		if len(es) != 1 {
			t.Fatalf("request %s: %d entries %v, want 1", id, len(es), es)
		}
		e := es[0]
		if e.FuncName != funcName || e.Method != method || e.Path != path || e.RawQuery != query || e.StatusCode != status || !e.IsS3() {
			t.Fatalf("request %s: entry %+v; want %s %s %s?%s -> %d", id, e, funcName, method, path, query, status)
		}
		return e
	}
	check("make", "s3.PutBucket", http.MethodPut, "/traced", "", http.StatusOK)
	if e := check("tag", "s3.PutBucketTagging", http.MethodPut, "/traced", "tagging=", http.StatusOK); !bytes.Contains(e.Body, []byte("<Tagging>")) {
		t.Fatalf("PutBucketTagging traced with body %q", e.Body)
	}
	// MinIO's router tries AbortMultipartUpload before DeleteObjectTagging:
	// the trace names the handler that ran.
	check("abort", "s3.AbortMultipartUpload", http.MethodDelete, "/traced/k", "tagging=&uploadId=x", http.StatusNotFound)
	if n := len(byID[""]); n != 0 {
		t.Fatalf("%d entries without a request id: %v", n, byID[""])
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
}
