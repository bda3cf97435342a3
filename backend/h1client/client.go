// Package h1client is an HTTP/1.1 client for bodiless GET and HEAD
// requests to a plain http backend, done in the calling goroutine.
//
// net/http's Transport hands every request to two goroutines of its
// connection (one writing, one reading) and waits for them on channels; for
// a small request that hand-off costs about as much CPU as the request's own
// system calls. Client writes the request with the standard library's
// serialisation (Request.Write) and reads the answer with http.ReadResponse
// over the connection's buffered reader, in the goroutine that called
// RoundTrip, and keeps a small pool of keep-alive connections.
//
// A response body of known length also writes itself (io.WriterTo): it
// hands the writer the connection, limited to the body's remaining bytes,
// so that a writer ending in a TCP connection moves them with splice.
//
// A connection goes back to the pool only when its response body was read
// (or written) to its end, the response allows reuse (HTTP/1.1 or later, no Connection:
// close, a body of known length or a chunked body that ended) and nothing
// beyond the response was received; any other ends it. A request that failed
// on a reused connection before any byte of the response arrived is sent
// once more on a new connection (GET and HEAD are idempotent). The request's
// context bounds the whole exchange: cancelling it closes the connection,
// which ends a read or write in progress, and RoundTrip or the body's Read
// returns the context's error. 1xx responses other than 101 are passed to
// the context's httptrace.ClientTrace.Got1xxResponse and skipped.
package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Client sends GET and HEAD requests without a body to plain http servers.
// Its zero value is not usable: use New.
type Client struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration
	readSize    int
	now         func() time.Time

	mu   sync.Mutex
	idle map[string][]*conn // by host:port, the most recently used last
}

// Options are a Client's limits; zero fields take the defaults.
type Options struct {
	// DialTimeout bounds connecting (default 10s); KeepAlive is the TCP
	// keep-alive period (default 30s).
	DialTimeout, KeepAlive time.Duration
	// MaxIdlePerHost is the most idle connections kept to one address
	// (default 256); IdleTimeout is how long one may stay idle (default 90s).
	MaxIdlePerHost int
	IdleTimeout    time.Duration
	// ReadBufferSize is each connection's read buffer (default 64 KiB).
	ReadBufferSize int
}

// New returns a Client with the given limits.
func New(o Options) *Client {
	d := &net.Dialer{Timeout: orDefault(o.DialTimeout, 10*time.Second), KeepAlive: orDefault(o.KeepAlive, 30*time.Second)}
	return &Client{
		dial:        d.DialContext,
		maxIdle:     orDefault(o.MaxIdlePerHost, 256),
		idleTimeout: orDefault(o.IdleTimeout, 90*time.Second),
		readSize:    orDefault(o.ReadBufferSize, 64<<10),
		now:         time.Now,
		idle:        map[string][]*conn{},
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Handles reports whether RoundTrip takes req: a GET or HEAD without a body
// to an http:// URL.
func Handles(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.Body == nil || req.Body == http.NoBody) && req.URL.Scheme == "http" && !req.Close
}

// conn is one connection to the server and its buffers.
type conn struct {
	nc        net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	addr      string
	idleSince time.Time
}

// errNotHandled is returned for a request Handles refuses.
var errNotHandled = errors.New("h1client: only bodiless GET and HEAD requests to http:// URLs")

// RoundTrip sends req and returns the server's response, whose body must be
// read to its end or closed. It implements http.RoundTripper for the
// requests Handles takes.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if !Handles(req) {
		return nil, errNotHandled
	}
	if req.URL.Host == "" {
		return nil, errors.New("h1client: request URL has no host")
	}
	if err := validHeader(req.Header); err != nil {
		return nil, err
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	for attempt := 0; ; attempt++ {
		cn, reused, err := c.get(req.Context(), addr, attempt > 0)
		if err != nil {
			return nil, err
		}
		res, err, nothingRead := c.exchange(cn, req)
		if err == nil {
			return res, nil
		}
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if !reused || !nothingRead || attempt > 0 {
			return nil, err
		}
		// A pooled connection the server had closed: once more on a new
		// one, not on another pooled one, which may be as stale.
	}
}

// exchange writes req on cn and reads its response, the connection owned by
// the response's body from then on; on failure cn is closed and
// nothingRead says whether any byte of a response had arrived.
func (c *Client) exchange(cn *conn, req *http.Request) (_ *http.Response, err error, nothingRead bool) {
	ctx := req.Context()
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { cn.nc.Close() })
	}
	fail := func(e error) (*http.Response, error, bool) {
		stop()
		cn.nc.Close()
		return nil, e, nothingRead
	}
	nothingRead = true
	if err := req.Write(cn.bw); err != nil {
		return fail(err)
	}
	if err := cn.bw.Flush(); err != nil {
		return fail(err)
	}
	if _, err := cn.br.Peek(1); err != nil {
		return fail(err)
	}
	nothingRead = false
	res, err := readFinal(ctx, cn.br, req)
	if err != nil {
		return fail(err)
	}
	b := &body{rc: res.Body, res: res, cn: cn, c: c, stop: stop, ctx: ctx}
	if res.Body == http.NoBody || req.Method == http.MethodHead {
		// Nothing to read: the connection is free now.
		b.release()
		return res, nil, false
	}
	res.Body = b
	return res, nil, false
}

// max1xx is how many informational responses one request may get, as in
// net/http's Transport.
const max1xx = 5

// readFinal reads responses until one that is not informational (101
// included, which the caller refuses), passing each 1xx to the trace.
func readFinal(ctx context.Context, br *bufio.Reader, req *http.Request) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(ctx)
	for n := 0; ; n++ {
		res, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if res.StatusCode < 100 || res.StatusCode > 199 || res.StatusCode == http.StatusSwitchingProtocols {
			return res, nil
		}
		if n >= max1xx {
			return nil, errors.New("h1client: too many 1xx informational responses")
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(res.StatusCode, textproto.MIMEHeader(res.Header)); err != nil {
				return nil, err
			}
		}
	}
}

// body is a response body that frees its connection at its end.
type body struct {
	rc   io.ReadCloser
	res  *http.Response
	cn   *conn
	c    *Client
	ctx  context.Context
	stop func() bool
	done bool
	// read counts the bytes Read returned.
	read int64
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	switch {
	case err == io.EOF:
		b.release()
	case err != nil:
		b.fail()
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
	}
	return n, err
}

// fail ends the body and its connection after an error.
func (b *body) fail() {
	b.done = true
	b.stop()
	b.cn.nc.Close()
}

// WriteTo writes the rest of the body to w and reports how many bytes it
// wrote. A body of known length (a Content-Length, no transfer coding) is
// handed to w as the connection itself, limited to the body's remaining
// bytes, after the bytes already buffered: when w's ReadFrom ends in a TCP
// connection's (net/http's server's response writer does, for a plain
// connection), Linux moves the bytes from socket to socket with splice,
// without copying them into the process. The connection then goes back to
// the pool under the rules Read's end applies; a body the server ends
// early is io.ErrUnexpectedEOF, and any failure ends the connection. A
// body of unknown length is copied through Read.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	if b.done {
		return 0, nil
	}
	if b.res.ContentLength < 0 || len(b.res.TransferEncoding) > 0 {
		return io.Copy(w, readerOnly{b})
	}
	remaining := b.res.ContentLength - b.read
	var written int64
	if n := min(int64(b.cn.br.Buffered()), remaining); n > 0 {
		buf, _ := b.cn.br.Peek(int(n))
		nw, err := w.Write(buf)
		_, _ = b.cn.br.Discard(nw)
		written, remaining = int64(nw), remaining-int64(nw)
		if err == nil && nw < len(buf) {
			err = io.ErrShortWrite
		}
		if err != nil {
			b.fail()
			return written, err
		}
	}
	var err error
	if remaining > 0 {
		lr := &io.LimitedReader{R: b.cn.nc, N: remaining}
		var n int64
		n, err = io.Copy(w, lr)
		written += n
		if err == nil && lr.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		b.fail()
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return written, err
	}
	// The whole body went past the reader of the response, which would
	// try to read it again if closed: the connection is freed without it.
	b.rc = nil
	b.release()
	return written, nil
}

// readerOnly hides a reader's WriteTo from io.Copy.
type readerOnly struct{ io.Reader }

// Close ends the body; a body not read to its end takes its connection
// with it.
func (b *body) Close() error {
	if !b.done {
		b.fail()
	}
	return nil
}

// release ends the exchange after the whole response arrived: the
// connection goes back to the pool when the response allows it (never
// after a protocol switch, when it no longer speaks HTTP/1.1). A nil rc is
// a body WriteTo took past the response's reader.
func (b *body) release() {
	b.done = true
	if b.rc != nil && b.rc != http.NoBody {
		b.rc.Close() // at EOF: closes nothing, completes the trailers
	}
	if !b.stop() || b.res.Close || !b.res.ProtoAtLeast(1, 1) || b.cn.br.Buffered() > 0 ||
		b.res.StatusCode == http.StatusSwitchingProtocols {
		b.cn.nc.Close()
		return
	}
	b.c.put(b.cn)
}

// get returns an idle connection to addr, or a new one (always when fresh
// is set), and whether it was idle.
func (c *Client) get(ctx context.Context, addr string, fresh bool) (*conn, bool, error) {
	now := c.now()
	c.mu.Lock()
	for !fresh {
		list := c.idle[addr]
		if len(list) == 0 {
			break
		}
		cn := list[len(list)-1]
		list[len(list)-1] = nil
		c.idle[addr] = list[:len(list)-1]
		if now.Sub(cn.idleSince) > c.idleTimeout {
			c.mu.Unlock()
			cn.nc.Close()
			c.mu.Lock()
			continue
		}
		c.mu.Unlock()
		return cn, true, nil
	}
	c.mu.Unlock()
	nc, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, false, ctxErr
		}
		return nil, false, fmt.Errorf("h1client: dial %s: %w", addr, err)
	}
	return &conn{nc: nc, addr: addr, br: bufio.NewReaderSize(nc, c.readSize), bw: bufio.NewWriterSize(nc, 4<<10)}, false, nil
}

// put keeps cn for the next request, unless the pool to its address is full.
func (c *Client) put(cn *conn) {
	cn.idleSince = c.now()
	c.mu.Lock()
	if len(c.idle[cn.addr]) < c.maxIdle {
		c.idle[cn.addr] = append(c.idle[cn.addr], cn)
		cn = nil
	}
	c.mu.Unlock()
	if cn != nil {
		cn.nc.Close()
	}
}

// CloseIdleConnections closes the pooled connections.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	idle := c.idle
	c.idle = map[string][]*conn{}
	c.mu.Unlock()
	for _, list := range idle {
		for _, cn := range list {
			cn.nc.Close()
		}
	}
}

// validHeader refuses what net/http's Transport refuses: invalid header
// field names or values.
func validHeader(h http.Header) error {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1client: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h1client: invalid header field value for %q", k)
			}
		}
	}
	return nil
}
