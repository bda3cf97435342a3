package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what a FaultProxy does to one HTTP request.
type Fault int

// The faults a FaultProxy injects.
const (
	// Forward passes the request and its response through unchanged.
	Forward Fault = iota
	// DropResponse forwards the request, reads the target's whole
	// response (so the target has finished acting on it) and then closes
	// the client's connection without sending any of it: a response lost
	// on the way back.
	DropResponse
	// CloseBeforeForward reads the request and closes the client's
	// connection without forwarding it: the target never sees it, and the
	// client cannot tell that from a lost response.
	CloseBeforeForward
	// HoldRequest keeps the request from the target until Rule.Until is
	// closed, then forwards it: a slow path to the target, which lets a
	// test order what the target sees.
	HoldRequest
	// HoldResponse forwards the request at once but keeps the target's
	// response from the client until Rule.Until is closed: the target has
	// acted, and the client does not know yet.
	HoldResponse
	// DeliverLate holds the request like HoldRequest, then delivers it
	// even if the client gave up and closed its connection meanwhile, and
	// keeps the connection to the target open until the target answered
	// in full (the answer reaches the client if it is still there): a
	// request its sender timed out on, executed afterwards. Its body must
	// have been sent whole during the hold (a small one without Expect).
	DeliverLate
)

func (f Fault) String() string {
	switch f {
	case Forward:
		return "forward"
	case DropResponse:
		return "drop-response"
	case CloseBeforeForward:
		return "close-before-forward"
	case HoldRequest:
		return "hold-request"
	case HoldResponse:
		return "hold-response"
	case DeliverLate:
		return "deliver-late"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// ProxiedRequest is what a FaultProxy saw of one request, and what it did.
type ProxiedRequest struct {
	Method string
	// Path is the request path as sent (escaped).
	Path   string
	Query  url.Values
	Header http.Header
	// Fault is what the proxy did to the request.
	Fault Fault
	// Status is the target's final response status, 0 when the request
	// was not forwarded or no response came.
	Status int
}

// Rule selects requests for a fault.
type Rule struct {
	// Match selects the requests; nil selects every request.
	Match func(ProxiedRequest) bool
	Fault Fault
	// Times is how many matching requests get the fault; 0 means all of
	// them until the injection is removed.
	Times int
	// Until releases what HoldRequest, HoldResponse and DeliverLate hold,
	// when it is closed. Closing the proxy releases them too.
	Until <-chan struct{}
}

// Injection is a Rule armed on a FaultProxy.
type Injection struct {
	p    *FaultProxy
	rule Rule
	hits int
}

// Hits returns how many requests the fault was applied to so far.
func (in *Injection) Hits() int {
	in.p.mu.Lock()
	defer in.p.mu.Unlock()
	return in.hits
}

// Remove disarms the injection; requests after it are not affected by it.
func (in *Injection) Remove() {
	in.p.mu.Lock()
	defer in.p.mu.Unlock()
	for i, r := range in.p.rules {
		if r == in {
			in.p.rules = append(in.p.rules[:i], in.p.rules[i+1:]...)
			return
		}
	}
}

// FaultProxy is a TCP proxy on loopback for HTTP/1.1 connections. It
// forwards each connection to a target and can, request by request, lose the
// response on the way back or not forward the request at all, as a network or
// a crashing peer would. Faults are armed and disarmed while it runs. It
// records every request it saw, so a test can check what reached the target.
//
// It reads just enough of each message (the head, and the body's framing) to
// know where one request or response ends; bytes are forwarded unchanged, so
// signatures stay valid, and interim responses (100 Continue) pass through.
// Requests on one connection are expected in turn, as net/http sends them,
// not pipelined.
type FaultProxy struct {
	// URL is http://ADDR, for use as an endpoint.
	URL string
	// Addr is the proxy's host:port.
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	rules  []*Injection
	log    []ProxiedRequest
	conns  map[net.Conn]struct{}
	nconns int
	closed bool
	done   chan struct{} // closed by Close
}

// StartFaultProxy starts a proxy to target (host:port, or an http:// URL) on
// a free loopback port; t.Cleanup closes it.
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	p, err := NewFaultProxy(target)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// NewFaultProxy starts a proxy to target; Close stops it.
func NewFaultProxy(target string) (*FaultProxy, error) {
	if u, err := url.Parse(target); err == nil && u.Scheme == "http" && u.Host != "" {
		target = u.Host
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("fault proxy target %q: want host:port or http://host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listen: %w", err)
	}
	p := &FaultProxy{
		URL:    "http://" + ln.Addr().String(),
		Addr:   ln.Addr().String(),
		target: target,
		ln:     ln,
		conns:  map[net.Conn]struct{}{},
		done:   make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Inject arms a fault.
func (p *FaultProxy) Inject(r Rule) *Injection {
	in := &Injection{p: p, rule: r}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, in)
	return in
}

// ClearFaults disarms every fault.
func (p *FaultProxy) ClearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Requests returns the requests seen so far, in the order they arrived.
func (p *FaultProxy) Requests() []ProxiedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProxiedRequest, len(p.log))
	copy(out, p.log)
	return out
}

// Find returns the requests seen so far that match.
func (p *FaultProxy) Find(match func(ProxiedRequest) bool) []ProxiedRequest {
	var out []ProxiedRequest
	for _, r := range p.Requests() {
		if match == nil || match(r) {
			out = append(out, r)
		}
	}
	return out
}

// Connections returns how many client connections the proxy accepted.
func (p *FaultProxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nconns
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines.
func (p *FaultProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// MatchUpload selects requests with the method (any when empty) whose query
// names the upload.
func MatchUpload(method, uploadID string) func(ProxiedRequest) bool {
	return func(r ProxiedRequest) bool {
		return (method == "" || r.Method == method) && r.Query.Get("uploadId") == uploadID
	}
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.mu.Lock()
		p.nconns++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers a connection for Close; false when the proxy is closed.
func (p *FaultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *FaultProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// decide records a request and picks its fault.
func (p *FaultProxy) decide(r ProxiedRequest) (int, Fault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.Fault = Forward
	var until <-chan struct{}
	for _, in := range p.rules {
		if in.rule.Times > 0 && in.hits >= in.rule.Times {
			continue
		}
		if in.rule.Match == nil || in.rule.Match(r) {
			in.hits++
			r.Fault, until = in.rule.Fault, in.rule.Until
			break
		}
	}
	p.log = append(p.log, r)
	return len(p.log) - 1, r.Fault, until
}

// hold waits until until is closed or the proxy closes.
func (p *FaultProxy) hold(until <-chan struct{}) {
	select {
	case <-until:
	case <-p.done:
	}
}

func (p *FaultProxy) setStatus(i, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log[i].Status = status
}

// exchange is one forwarded request awaiting its response.
type exchange struct {
	idx    int
	method string
	fault  Fault
	until  <-chan struct{}
	// answered, for DeliverLate, is closed once the target's answer has
	// been read in full.
	answered chan struct{}
}

// maxHead bounds a request or response head.
const maxHead = 1 << 20

// serve proxies one client connection.
func (p *FaultProxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	upstream, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(upstream) {
		client.Close()
		upstream.Close()
		return
	}
	defer p.untrack(upstream)
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			client.Close()
			upstream.Close()
		})
	}
	defer shutdown()

	pending := make(chan exchange, 4)
	respDone := make(chan struct{})
	go func() {
		defer close(respDone)
		defer shutdown()
		p.responses(upstream, client, pending)
	}()
	p.requests(client, upstream, pending, respDone, shutdown)
	close(pending)
	<-respDone
}

// requests forwards the client's requests, applying faults, until the client
// closes or a fault ends the connection.
func (p *FaultProxy) requests(client, upstream net.Conn, pending chan<- exchange, respDone <-chan struct{}, shutdown func()) {
	br := bufio.NewReaderSize(client, 64<<10)
	for {
		head, err := readHead(br)
		if err != nil {
			shutdown()
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			shutdown()
			return
		}
		idx, fault, until := p.decide(ProxiedRequest{
			Method: req.Method, Path: req.URL.EscapedPath(), Query: req.URL.Query(), Header: req.Header,
		})
		chunked := len(req.TransferEncoding) > 0 && req.TransferEncoding[0] == "chunked"
		if fault == CloseBeforeForward {
			// Take the body first, so the client has sent all it means to and
			// waits for an answer that never comes. A client waiting for 100
			// Continue sends no body; do not wait for it.
			if !strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
				_ = copyBody(io.Discard, br, req.ContentLength, chunked)
			}
			shutdown()
			return
		}
		if fault == HoldRequest || fault == DeliverLate {
			p.hold(until)
		}
		ex := exchange{idx: idx, method: req.Method, fault: fault, until: until}
		if fault == DeliverLate {
			ex.answered = make(chan struct{})
		}
		pending <- ex
		if _, err := upstream.Write(head); err != nil {
			shutdown()
			return
		}
		if err := copyBody(upstream, br, req.ContentLength, chunked); err != nil {
			shutdown()
			return
		}
		if ex.answered != nil {
			// Whether or not the client is still there, the connection to
			// the target is not closed before its answer is read.
			select {
			case <-ex.answered:
			case <-respDone:
				return
			case <-p.done:
				return
			}
		}
	}
}

// responses forwards the target's responses, dropping the ones whose request
// says so, until the target closes or pending is closed.
func (p *FaultProxy) responses(upstream, client net.Conn, pending <-chan exchange) {
	br := bufio.NewReaderSize(upstream, 64<<10)
	var (
		cur  exchange
		have bool
	)
	for {
		head, err := readHead(br)
		if err != nil {
			return
		}
		if !have {
			var ok bool
			if cur, ok = <-pending; !ok {
				return
			}
			have = true
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), &http.Request{Method: cur.method})
		if err != nil {
			return
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			// An interim answer goes through even when the final one is to
			// be lost: without it the client would never send its body.
			if _, err := client.Write(head); err != nil {
				return
			}
			continue
		}
		p.setStatus(cur.idx, resp.StatusCode)
		have = false
		length := resp.ContentLength
		chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
		if cur.method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
			length, chunked = 0, false
		}
		if cur.fault == DropResponse {
			_ = copyBody(io.Discard, br, length, chunked)
			return
		}
		if cur.fault == HoldResponse {
			p.hold(cur.until)
		}
		if cur.fault == DeliverLate {
			// The answer is read in full from the target even when the
			// client has gone.
			w := &lenientWriter{w: client}
			_, _ = w.Write(head)
			err := copyBody(w, br, length, chunked)
			close(cur.answered)
			if err != nil || w.err != nil || length < 0 && !chunked {
				return
			}
			continue
		}
		if _, err := client.Write(head); err != nil {
			return
		}
		if err := copyBody(client, br, length, chunked); err != nil || length < 0 && !chunked {
			return
		}
	}
}

// lenientWriter writes to w until a write fails (err), then swallows the
// rest, so a message is read in full even when its destination has gone.
type lenientWriter struct {
	w   io.Writer
	err error
}

func (l *lenientWriter) Write(b []byte) (int, error) {
	if l.err == nil {
		_, l.err = l.w.Write(b)
	}
	return len(b), nil
}

// readHead reads a message head, up to and including the empty line, as it
// came.
func readHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if len(head) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		head = append(head, line...)
		if len(head) > maxHead {
			return nil, errors.New("fault proxy: message head too large")
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) <= 2 && strings.TrimRight(string(line), "\r\n") == "" {
			if len(head) == len(line) {
				// Blank lines between messages are allowed; skip them.
				head = head[:0]
				continue
			}
			return head, nil
		}
	}
}

// copyBody copies one message body: length bytes, a chunked body as it is
// (chunks and trailer), or with length < 0 and not chunked, everything until
// the sender closes.
func copyBody(dst io.Writer, br *bufio.Reader, length int64, chunked bool) error {
	switch {
	case chunked:
		return copyChunked(dst, br)
	case length > 0:
		_, err := io.CopyN(dst, br, length)
		return err
	case length < 0:
		_, err := io.Copy(dst, br)
		return err
	}
	return nil
}

// copyChunked copies a chunked body unchanged.
func copyChunked(dst io.Writer, br *bufio.Reader) error {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if _, err := io.WriteString(dst, line); err != nil {
			return err
		}
		sizeText, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ";")
		size, err := strconv.ParseInt(strings.TrimSpace(sizeText), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("fault proxy: bad chunk size line %q", line)
		}
		if size == 0 {
			// The trailer: header lines up to an empty line.
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return err
				}
				if _, err := io.WriteString(dst, line); err != nil {
					return err
				}
				if strings.TrimRight(line, "\r\n") == "" {
					return nil
				}
			}
		}
		if _, err := io.CopyN(dst, br, size+2); err != nil {
			return err
		}
	}
}
