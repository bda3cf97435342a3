package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TraceRequestIDHeader is the request header that names, on every request
// the gateway sends to the backend, the gateway request it is part of.
const TraceRequestIDHeader = "X-Sweepgate-Request-Id"

// TraceEntry is one call MinIO executed, as its admin trace reports it.
type TraceEntry struct {
	// FuncName names the handler that served the call: "s3." and the S3
	// API for the S3 API ("s3.DeleteObject", "s3.NewMultipartUpload",
	// "s3.DeleteMultipleObjects", ...), the bare handler name for requests
	// that reached no S3 API ("notImplementedHandler",
	// "errorResponseHandler", "methodNotAllowedHandler.func1").
	FuncName string
	// Time is when MinIO started serving the call.
	Time time.Time
	// Method, Path (as sent, percent-encoded when it was) and RawQuery of
	// the request.
	Method, Path, RawQuery string
	// Header is the request's header as MinIO received it.
	Header http.Header
	// Body is the request's body, for the calls whose bodies MinIO traces
	// (most but PutObject, UploadPart and the other data calls).
	Body []byte
	// StatusCode is MinIO's answer.
	StatusCode int
	// RequestID is the TraceRequestIDHeader value, "" without one.
	RequestID string
}

// IsS3 reports whether the entry is an S3 API call, as opposed to a
// request MinIO refused before any S3 API handler ran.
func (e TraceEntry) IsS3() bool { return strings.HasPrefix(e.FuncName, "s3.") }

func (e TraceEntry) String() string {
	q := ""
	if e.RawQuery != "" {
		q = "?" + e.RawQuery
	}
	return fmt.Sprintf("%s (%s %s%s -> %d)", e.FuncName, e.Method, e.Path, q, e.StatusCode)
}

// traceRecord is the part of madmin.TraceInfo (as MinIO's trace endpoint
// sends it, one JSON object after another) that TraceEntry keeps.
type traceRecord struct {
	FuncName string    `json:"funcname"`
	Time     time.Time `json:"time"`
	Path     string    `json:"path"`
	Error    string    `json:"error"`
	HTTP     *struct {
		Request struct {
			Method   string      `json:"method"`
			Path     string      `json:"path"`
			RawQuery string      `json:"rawquery"`
			Headers  http.Header `json:"headers"`
			Body     []byte      `json:"body"`
		} `json:"request"`
		Response struct {
			StatusCode int `json:"statuscode"`
		} `json:"response"`
	} `json:"http"`
}

// Trace is a subscription to MinIO's trace of the S3 API calls it executes
// (GET /minio/admin/v3/trace with s3 and internal calls), collecting every
// entry from its start until Stop. MinIO publishes an entry once it has
// served the call, so an entry may arrive shortly after its answer; Sync
// waits until everything MinIO served before it has arrived.
type Trace struct {
	m      *MinIO
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every new entry
	entries []TraceEntry
	err     error // why the stream ended, once it has
	stopped bool
}

// StartTrace subscribes to m's trace and returns once the subscription
// provably receives entries (a first Sync). t.Cleanup stops it.
func StartTrace(t testing.TB, m *MinIO) *Trace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &Trace{m: m, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Endpoint+"/minio/admin/v3/trace?s3=true&internal=true", nil)
	if err != nil {
		cancel()
		t.Fatalf("harness: trace: %v", err)
	}
	// The admin API takes S3 signatures by the root credentials.
	if err := SignV4(ctx, req, m.AccessKey, m.SecretKey, m.Region, EmptySHA256, time.Now()); err != nil {
		cancel()
		t.Fatalf("harness: trace: %v", err)
	}
	// The response's headers come with the first entry or the first
	// keep-alive (a space, every second), after the subscription is made.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("harness: trace: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		cancel()
		t.Fatalf("harness: trace: MinIO answered %s: %s", resp.Status, body)
	}
	go tr.read(resp.Body)
	t.Cleanup(tr.Stop)
	sctx, scancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer scancel()
	if err := tr.Sync(sctx); err != nil {
		t.Fatalf("harness: trace: %v", err)
	}
	return tr
}

func (tr *Trace) read(body io.ReadCloser) {
	defer close(tr.done)
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var rec traceRecord
		err := dec.Decode(&rec)
		tr.mu.Lock()
		if err != nil {
			tr.err = err
			close(tr.changed)
			tr.mu.Unlock()
			return
		}
		e := TraceEntry{FuncName: rec.FuncName, Time: rec.Time, Path: rec.Path}
		if h := rec.HTTP; h != nil {
			e.Method, e.RawQuery, e.Header, e.Body = h.Request.Method, h.Request.RawQuery, h.Request.Headers, h.Request.Body
			e.StatusCode = h.Response.StatusCode
			if h.Request.Path != "" {
				e.Path = h.Request.Path
			}
			e.RequestID = h.Request.Headers.Get(TraceRequestIDHeader)
		}
		tr.entries = append(tr.entries, e)
		close(tr.changed)
		tr.changed = make(chan struct{})
		tr.mu.Unlock()
	}
}

// Stop ends the subscription. The entries collected so far stay readable.
func (tr *Trace) Stop() {
	tr.mu.Lock()
	tr.stopped = true
	tr.mu.Unlock()
	tr.cancel()
	<-tr.done
}

// Err returns why the trace stream ended before Stop, or nil.
func (tr *Trace) Err() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.stopped {
		return nil
	}
	return tr.err
}

// Entries returns a copy of every entry collected so far, in the order
// MinIO published them.
func (tr *Trace) Entries() []TraceEntry {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]TraceEntry(nil), tr.entries...)
}

// Len returns how many entries have been collected.
func (tr *Trace) Len() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.entries)
}

// ByRequestID returns the entries collected so far grouped by their
// TraceRequestIDHeader; entries without one are under "".
func (tr *Trace) ByRequestID() map[string][]TraceEntry {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make(map[string][]TraceEntry)
	for _, e := range tr.entries {
		out[e.RequestID] = append(out[e.RequestID], e)
	}
	return out
}

// Wait waits until done, called on every entry collected so far, reports
// true, the stream ends, or ctx ends.
func (tr *Trace) Wait(ctx context.Context, done func([]TraceEntry) bool) error {
	for {
		tr.mu.Lock()
		ok := done(tr.entries)
		err, changed := tr.err, tr.changed
		tr.mu.Unlock()
		switch {
		case ok:
			return nil
		case err != nil:
			return fmt.Errorf("trace stream ended: %w", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("trace: %w", ctx.Err())
		}
	}
}

// WaitFor waits until at least n entries carry request id id.
func (tr *Trace) WaitFor(ctx context.Context, id string, n int) error {
	return tr.Wait(ctx, func(es []TraceEntry) bool {
		c := 0
		for _, e := range es {
			if e.RequestID == id {
				c++
			}
		}
		return c >= n
	})
}

// Sync sends MinIO a request of its own (an anonymous ListBuckets, which
// MinIO refuses and traces) and waits for its entry, then for the trace to
// stay quiet for a moment: an entry MinIO published just after the marker
// (a call it finished serving after the marker's) arrives in that time.
// Every call MinIO answered before Sync was called is then collected.
func (tr *Trace) Sync(ctx context.Context) error {
	id := "trace-sync-" + randomID()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tr.m.Endpoint+"/", nil)
	if err != nil {
		return err
	}
	req.Header.Set(TraceRequestIDHeader, id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("trace sync request: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := tr.WaitFor(ctx, id, 1); err != nil {
		return err
	}
	const quiet = 200 * time.Millisecond
	for {
		n := tr.Len()
		select {
		case <-time.After(quiet):
		case <-ctx.Done():
			return fmt.Errorf("trace: %w", ctx.Err())
		}
		if tr.Len() == n {
			return nil
		}
	}
}

// IsTraceSync reports whether e is one of Sync's own requests.
func IsTraceSync(e TraceEntry) bool { return strings.HasPrefix(e.RequestID, "trace-sync-") }

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
