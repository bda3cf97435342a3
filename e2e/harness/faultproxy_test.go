package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoTarget is an HTTP server that answers with the SHA-256 of the request
// body and counts the requests it handled by method and path.
type echoTarget struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

func newEchoTarget(t *testing.T) *echoTarget {
	e := &echoTarget{seen: map[string]int{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.seen[r.Method+" "+r.URL.Path]++
		e.mu.Unlock()
		sum := sha256.Sum256(b)
		w.Header().Set("X-Body-Sha256", hex.EncodeToString(sum[:]))
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/chunked":
			// Flushing before the end makes the server answer chunked.
			w.WriteHeader(http.StatusOK)
			for i := range 3 {
				fmt.Fprintf(w, "part %d;", i)
				w.(http.Flusher).Flush()
			}
		default:
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		}
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *echoTarget) count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen[key]
}

// proxyClient returns a client whose connections are kept alive and reused,
// so several requests share one proxied connection.
func proxyClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, ExpectContinueTimeout: 10 * time.Second, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func proxyDo(t *testing.T, c *http.Client, method, url string, body io.Reader, header http.Header) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestFaultProxyForwardsUnchanged(t *testing.T) {
	target := newEchoTarget(t)
	p := StartFaultProxy(t, target.URL)
	c := proxyClient(t)
	big := NewData(1, 3<<20).Bytes()
	tests := []struct {
		name     string
		method   string
		path     string
		body     func() io.Reader
		header   http.Header
		status   int
		wantBody string
		bodySum  string
	}{
		{"get", http.MethodGet, "/a", nil, nil, 200, "hello", SHA256Hex(nil)},
		{"head", http.MethodHead, "/a", nil, nil, 200, "", SHA256Hex(nil)},
		{"no content", http.MethodDelete, "/empty", nil, nil, 204, "", SHA256Hex(nil)},
		{"chunked response", http.MethodGet, "/chunked", nil, nil, 200, "part 0;part 1;part 2;", SHA256Hex(nil)},
		{"sized body", http.MethodPut, "/put", func() io.Reader { return bytes.NewReader(big) }, nil, 200, "hello", SHA256Hex(big)},
		// A reader of unknown length is sent chunked.
		{"chunked body", http.MethodPut, "/put", func() io.Reader { return io.MultiReader(bytes.NewReader(big[:1000]), strings.NewReader("tail")) }, nil, 200, "hello",
			SHA256Hex(append(append([]byte{}, big[:1000]...), "tail"...))},
		{"100-continue", http.MethodPut, "/put", func() io.Reader { return bytes.NewReader(big) }, http.Header{"Expect": {"100-continue"}}, 200, "hello", SHA256Hex(big)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			start := time.Now()
			resp, b, err := proxyDo(t, c, tc.method, p.URL+tc.path, body, tc.header)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || string(b) != tc.wantBody || resp.Header.Get("X-Body-Sha256") != tc.bodySum {
				t.Fatalf("%s %q sha256 %s, want %d %q %s", resp.Status, b, resp.Header.Get("X-Body-Sha256"), tc.status, tc.wantBody, tc.bodySum)
			}
			// A lost 100 Continue would show as the client's whole
			// ExpectContinueTimeout.
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
	if n := p.Connections(); n != 1 {
		t.Errorf("%d connections for requests sent one after another; the proxy should keep them alive", n)
	}
	reqs := p.Requests()
	if len(reqs) != len(tests) {
		t.Fatalf("proxy saw %d requests, want %d", len(reqs), len(tests))
	}
	for i, r := range reqs {
		if r.Method != tests[i].method || r.Path != tests[i].path || r.Status != tests[i].status || r.Fault != Forward {
			t.Errorf("request %d: %+v, want %s %s %d forwarded", i, r, tests[i].method, tests[i].path, tests[i].status)
		}
	}
}

func TestFaultProxyFaults(t *testing.T) {
	target := newEchoTarget(t)
	p := StartFaultProxy(t, target.URL)
	c := proxyClient(t)
	isPut := func(r ProxiedRequest) bool { return r.Method == http.MethodPut && r.Query.Get("uploadId") == "u1" }

	// A request before the fault warms the connection, so the fault hits a
	// reused one as it would in a gateway.
	if _, _, err := proxyDo(t, c, http.MethodGet, p.URL+"/warm", nil, nil); err != nil {
		t.Fatal(err)
	}

	drop := p.Inject(Rule{Match: isPut, Fault: DropResponse, Times: 1})
	if _, _, err := proxyDo(t, c, http.MethodPut, p.URL+"/obj?uploadId=u2", strings.NewReader("x"), nil); err != nil {
		t.Fatalf("a request the rule does not match: %v", err)
	}
	_, _, err := proxyDo(t, c, http.MethodPut, p.URL+"/obj?uploadId=u1", strings.NewReader("x"), nil)
	if err == nil {
		t.Fatal("the dropped response arrived")
	}
	if n := target.count("PUT /obj"); n != 2 {
		t.Fatalf("target handled %d PUTs, want 2 (the dropped response's request reaches it)", n)
	}
	if drop.Hits() != 1 {
		t.Fatalf("drop hits %d, want 1", drop.Hits())
	}
	// Times: 1 is spent; the same request now goes through.
	if _, _, err := proxyDo(t, c, http.MethodPut, p.URL+"/obj?uploadId=u1", strings.NewReader("x"), nil); err != nil {
		t.Fatalf("after the fault was spent: %v", err)
	}

	closeAll := p.Inject(Rule{Fault: CloseBeforeForward})
	for range 2 {
		if _, _, err := proxyDo(t, c, http.MethodPost, p.URL+"/never", strings.NewReader("body"), nil); err == nil {
			t.Fatal("a request that was not forwarded got an answer")
		}
	}
	if n := target.count("POST /never"); n != 0 {
		t.Fatalf("target handled %d requests the proxy was to close before forwarding", n)
	}
	closeAll.Remove()
	if _, _, err := proxyDo(t, c, http.MethodPost, p.URL+"/after", strings.NewReader("body"), nil); err != nil {
		t.Fatalf("after Remove: %v", err)
	}
	// The client may retry a failed request on its own; count what the
	// proxy recorded rather than what the client sent.
	closed := p.Find(func(r ProxiedRequest) bool { return r.Fault == CloseBeforeForward })
	if len(closed) < 2 || closeAll.Hits() != len(closed) {
		t.Fatalf("closed %d requests with %d hits", len(closed), closeAll.Hits())
	}
	for _, r := range closed {
		if r.Status != 0 {
			t.Fatalf("a request closed before forwarding has status %d", r.Status)
		}
	}
	dropped := p.Find(func(r ProxiedRequest) bool { return r.Fault == DropResponse })
	if len(dropped) != 1 || dropped[0].Status != http.StatusOK {
		t.Fatalf("dropped: %+v, want one with the target's status 200", dropped)
	}
	if got := p.Find(MatchUpload(http.MethodPut, "u1")); len(got) != 2 {
		t.Fatalf("MatchUpload found %d requests, want 2", len(got))
	}
}

func TestFaultProxyHolds(t *testing.T) {
	target := newEchoTarget(t)
	p := StartFaultProxy(t, target.URL)
	c := proxyClient(t)
	tests := []struct {
		fault      Fault
		path       string
		seenOnHold int // requests the target handled while the hold lasts
	}{
		{HoldRequest, "/held-request", 0},
		{HoldResponse, "/held-response", 1},
	}
	for _, tc := range tests {
		t.Run(tc.fault.String(), func(t *testing.T) {
			release := make(chan struct{})
			in := p.Inject(Rule{Match: func(r ProxiedRequest) bool { return r.Path == tc.path }, Fault: tc.fault, Until: release})
			defer in.Remove()
			done := make(chan error, 1)
			go func() {
				_, b, err := proxyDo(t, c, http.MethodPut, p.URL+tc.path, strings.NewReader("body"), nil)
				if err == nil && string(b) != "hello" {
					err = fmt.Errorf("body %q", b)
				}
				done <- err
			}()
			deadline := time.Now().Add(5 * time.Second)
			for in.Hits() == 0 || target.count("PUT "+tc.path) < tc.seenOnHold {
				if time.Now().After(deadline) {
					t.Fatalf("hits %d, target saw %d", in.Hits(), target.count("PUT "+tc.path))
				}
				time.Sleep(5 * time.Millisecond)
			}
			select {
			case err := <-done:
				t.Fatalf("the call returned (%v) while held", err)
			default:
			}
			if n := target.count("PUT " + tc.path); n != tc.seenOnHold {
				t.Fatalf("target handled %d requests during the hold, want %d", n, tc.seenOnHold)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatalf("after release: %v", err)
			}
			if n := target.count("PUT " + tc.path); n != 1 {
				t.Fatalf("target handled %d requests, want 1", n)
			}
		})
	}
}

// TestFaultProxyDeliverLate: a request held until its client gave up is
// delivered afterwards, and the target executes it with its connection
// open (its request context is not cancelled) until it has answered.
func TestFaultProxyDeliverLate(t *testing.T) {
	entered := make(chan string, 1)
	cancelled := make(chan struct{})
	answer := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		entered <- string(b)
		select {
		case <-answer:
		case <-r.Context().Done():
			close(cancelled)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(target.Close)
	p := StartFaultProxy(t, target.URL)
	release := make(chan struct{})
	in := p.Inject(Rule{Match: func(r ProxiedRequest) bool { return r.Query.Has("delete") }, Fault: DeliverLate, Until: release})

	c := &http.Client{Timeout: 300 * time.Millisecond}
	resp, err := c.Post(p.URL+"/bucket?delete", "application/xml", strings.NewReader("<Delete/>"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("the held request was answered before its release")
	}
	if in.Hits() != 1 {
		t.Fatalf("hits %d, want 1", in.Hits())
	}
	select {
	case <-entered:
		t.Fatal("the target saw the request before its release")
	default:
	}
	// The client has given up and closed its connection; the request
	// still reaches the target, whole.
	close(release)
	select {
	case body := <-entered:
		if body != "<Delete/>" {
			t.Fatalf("target read body %q", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request was not delivered after its release")
	}
	// The proxy keeps the target's connection while the target works: a
	// proxy that closed it would cancel the request at once.
	select {
	case <-cancelled:
		t.Fatal("the target's request was cancelled: the proxy closed its connection before the answer")
	case <-time.After(300 * time.Millisecond):
	}
	close(answer)
	deadline := time.Now().Add(10 * time.Second)
	for {
		reqs := p.Find(func(r ProxiedRequest) bool { return r.Fault == DeliverLate })
		if len(reqs) == 1 && reqs[0].Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the target's answer was not read: %+v", reqs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
