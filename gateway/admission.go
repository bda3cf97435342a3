package gateway

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sweepgate/sweepgate/clientip"
	"github.com/sweepgate/sweepgate/s3err"
)

// Limits bound what the gateway serves at once and how long it waits for a
// request body. The zero value limits nothing.
type Limits struct {
	// MaxInFlight is the most requests served at once; 0 is no limit.
	MaxInFlight int64
	// MaxInFlightPerCredential is the most requests served at once for
	// one access key, counted once the signature is verified; 0 is no
	// limit.
	MaxInFlightPerCredential int64
	// BodyReadTimeout is the longest the gateway waits for the next bytes
	// of a request body once it has asked for them; 0 waits forever.
	BodyReadTimeout time.Duration
}

// errTooManyInFlight refuses a request over an in-flight limit, before
// anything of it is done.
var errTooManyInFlight = &s3err.Error{Code: "SlowDown", Message: "Too many requests are in flight. Please reduce your request rate.",
	HTTPStatus: http.StatusServiceUnavailable, RetryAfter: time.Second}

// SetLimits installs l for every request that starts after it returns;
// requests already in flight count against the new limits.
func (g *Gateway) SetLimits(l Limits) { g.limits.Store(&l) }

// SetTrusted installs the trusted proxies for every request that starts
// after it returns.
func (g *Gateway) SetTrusted(t clientip.Trusted) { g.trusted.Store(&t) }

// clientAddr resolves the address of the client behind r: its connection's
// peer (with the PROXY protocol, the source its trusted proxy named), or,
// when that is a trusted proxy, the right-most X-Forwarded-For entry that
// is not.
func (g *Gateway) clientAddr(r *http.Request) netip.Addr {
	return g.trusted.Load().Resolve(clientip.PeerAddr(r.RemoteAddr), r.Header.Values("X-Forwarded-For"))
}

// inFlight counts the requests being served, in total and per access key.
// Every count taken is given back by the release it returned, once, on
// every way out of the request (the caller defers it).
type inFlight struct {
	total atomic.Int64
	mu    sync.Mutex
	byKey map[string]int64
}

// acquire counts one more request in total, unless limit (when positive)
// is reached. It returns the release, or nil when the request is refused.
func (f *inFlight) acquire(limit int64) func() {
	for {
		n := f.total.Load()
		if limit > 0 && n >= limit {
			return nil
		}
		if f.total.CompareAndSwap(n, n+1) {
			return func() { f.total.Add(-1) }
		}
	}
}

// acquireKey counts one more request for key, unless limit is reached; a
// limit of 0 counts nothing and always admits. It returns the release, or
// nil when the request is refused.
func (f *inFlight) acquireKey(key string, limit int64) func() {
	if limit <= 0 {
		return func() {}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byKey[key] >= limit {
		return nil
	}
	if f.byKey == nil {
		f.byKey = make(map[string]int64)
	}
	f.byKey[key]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.byKey[key]--; f.byKey[key] <= 0 {
			delete(f.byKey, key)
		}
	}
}

// keyCount is how many requests of key are counted now.
func (f *inFlight) keyCount(key string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byKey[key]
}

// deadlineBody is a request body read with a deadline for each read: the
// client has timeout to send the next bytes after the gateway asks for
// them. It sets the connection's read deadline only while the body is
// being read and the handler runs: once the body has ended (net/http then
// watches the connection itself) or the handler has returned (stop), it
// no longer touches the connection.
type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration
	mu       sync.Mutex
	stopped  bool
	timedOut atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if !b.stopped {
		if err := b.rc.SetReadDeadline(time.Now().Add(b.timeout)); err != nil {
			b.stopped = true // the connection takes no deadline: read without one
		}
	}
	b.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.stop()
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			b.timedOut.Store(true)
			return n, s3err.ErrRequestTimeout
		}
	}
	return n, err
}

// stop ends the deadlines.
func (b *deadlineBody) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
}

// watchBody wraps r's body, when it has one, in a deadlineBody with
// timeout. It returns the function that stops the deadlines, to run before
// the handler returns, and the one that reports whether the client was
// cut off for sending nothing for timeout.
func watchBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) (stop func(), timedOut func() bool) {
	if timeout <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return func() {}, func() bool { return false }
	}
	b := &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: timeout}
	r.Body = b
	return b.stop, b.timedOut.Load
}

// refuseLimited answers a request over the in-flight limit named by limit
// ("total" or "credential") with SlowDown and Retry-After, and counts it.
func (g *Gateway) refuseLimited(w http.ResponseWriter, r *http.Request, limit string) {
	g.metrics.limited.WithLabelValues(limit).Inc()
	g.writeError(w, r, errTooManyInFlight)
}

// Trusted returns the trusted proxies installed now.
func (g *Gateway) Trusted() clientip.Trusted { return *g.trusted.Load() }
