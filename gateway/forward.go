package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
)

// passThrough is the streaming reverse proxy of the plain pass-through
// operations. It does what httputil.ReverseProxy with a Rewrite function
// does for a request that asks for no protocol upgrade (checkConnection
// lets none through), and sends the backend the same request: the
// hop-by-hop headers and those the Connection header names removed, TE:
// trailers kept when the client sent it, the Forwarded and X-Forwarded-*
// headers removed, unparsable query parameters dropped, no Go User-Agent
// added. Towards the client it keeps the proxy's rules too: hop-by-hop
// response headers removed, trailers announced and passed on, 1xx responses
// relayed, a body of unknown length or an event stream flushed write by
// write, a failed body copy aborting the response. What it saves is
// allocation: the backend's response header values are handed to the
// client's header map rather than copied one by one.
type passThrough struct {
	transport http.RoundTripper
	buffers   *bufferPool
	// rewrite addresses and prepares the outbound request.
	rewrite func(out, in *http.Request)
	// modifyResponse may refuse a backend response: its error is answered
	// by errorHandler, as is a failed round trip.
	modifyResponse func(*http.Response) error
	errorHandler   func(http.ResponseWriter, *http.Request, error)
	// logf reports a backend body that failed while being copied.
	logf func(format string, args ...any)
}

// hopHeaders are the hop-by-hop headers a proxy never passes on (RFC 7230
// section 6.1, RFC 2616 section 13.5.1), the list of httputil.ReverseProxy.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// forwardedHeaders are the client's forwarding headers, never passed on.
var forwardedHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

func (p *passThrough) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	relay := &relay1xx{rw: rw}
	outreq := p.outbound(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: relay.got1xx,
	}), req)
	res, err := p.transport.RoundTrip(outreq)
	relay.finish()
	if err != nil {
		p.errorHandler(rw, outreq, err)
		return
	}
	p.relay(rw, outreq, res, p.modifyResponse)
}

// relay writes res, the backend's answer to req (a client's request, or
// the backend request made of it), to rw
// the way httputil.ReverseProxy does: hop-by-hop headers removed, modify
// applied (an error answers through the error handler instead), trailers
// announced and passed on, the body flushed as it arrives where the answer
// streams. It is the one way a backend response reaches a client, for the
// proxy's own round trips and for the responses the services relay
// (Gateway.answer). It closes res.Body.
func (p *passThrough) relay(rw http.ResponseWriter, req *http.Request, res *http.Response, modify func(*http.Response) error) {
	upgrade := res.StatusCode == http.StatusSwitchingProtocols
	if !upgrade {
		removeHopByHopHeaders(res.Header)
	}
	if err := modify(res); err != nil {
		res.Body.Close()
		p.errorHandler(rw, req, err)
		return
	}
	if upgrade {
		// Nobody asked for a protocol switch (checkConnection refuses
		// Connection: upgrade), so the backend cannot answer with one.
		res.Body.Close()
		p.errorHandler(rw, req, fmt.Errorf("backend tried to switch protocol %q when none was requested", res.Header.Get("Upgrade")))
		return
	}
	h := rw.Header()
	moveHeader(h, res.Header)
	announcedTrailers := len(res.Trailer)
	if announcedTrailers > 0 {
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	rw.WriteHeader(res.StatusCode)
	if err := p.copyResponse(rw, res.Body, flushesEachWrite(res)); err != nil {
		res.Body.Close()
		if req.Context().Value(http.ServerContextKey) == nil {
			return // not under an http.Server, which would recover the panic
		}
		panic(http.ErrAbortHandler)
	}
	res.Body.Close() // now, to populate res.Trailer
	if len(res.Trailer) > 0 {
		// Force chunking, so that net/http does not compute a length for a
		// short body and the trailers can follow it.
		_ = http.NewResponseController(rw).Flush()
	}
	if len(res.Trailer) == announcedTrailers {
		moveHeader(h, res.Trailer)
		return
	}
	for k, vv := range res.Trailer {
		for _, v := range vv {
			h.Add(http.TrailerPrefix+k, v)
		}
	}
}

// outbound returns the request for the backend: a clone of req with
// context ctx, without hop-by-hop or forwarding headers, with its query
// cleaned, as rewrite leaves it.
func (p *passThrough) outbound(ctx context.Context, req *http.Request) *http.Request {
	outreq := req.Clone(ctx)
	if req.ContentLength == 0 {
		outreq.Body = nil // a nil body lets the transport retry the request
	}
	if outreq.Body != nil {
		// The transport closes the body it was given when it cannot
		// connect; the client's body stays open until the handler returns
		// (closing it with a 100-continue unanswered would hang).
		outreq.Body = noopCloser{outreq.Body}
	}
	if outreq.Header == nil {
		outreq.Header = make(http.Header)
	}
	outreq.Close = false
	removeHopByHopHeaders(outreq.Header)
	if headerValuesContainToken(req.Header["Te"], "trailers") {
		outreq.Header.Set("Te", "trailers")
	}
	for _, k := range forwardedHeaders {
		outreq.Header.Del(k)
	}
	outreq.URL.RawQuery = cleanQueryParams(outreq.URL.RawQuery)
	p.rewrite(outreq, req)
	if _, ok := outreq.Header["User-Agent"]; !ok {
		// An empty value keeps the Go client's default User-Agent off.
		outreq.Header.Set("User-Agent", "")
	}
	return outreq
}

// relay1xx passes the backend's informational responses to the client
// until the round trip has returned.
type relay1xx struct {
	rw   http.ResponseWriter
	mu   sync.Mutex
	done bool
}

func (r *relay1xx) got1xx(code int, header textproto.MIMEHeader) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil // the response's own header map is the handler's now
	}
	h := r.rw.Header()
	copyHeader(h, http.Header(header))
	r.rw.WriteHeader(code)
	clear(h) // WriteHeader keeps a 1xx response's headers in the map
	return nil
}

func (r *relay1xx) finish() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// copyResponse copies the backend's body to the client through a pooled
// buffer, flushing after every write when flush is set (and once before
// the first, so the client has the headers at once). A body that can
// write itself (io.WriterTo: the backend client's bodies of known length,
// which hand the client's response writer their connection) does so when
// nothing is flushed write by write: on Linux, with both ends plain TCP,
// the bytes then go from the backend's socket to the client's with splice
// and never through the gateway's memory.
func (p *passThrough) copyResponse(rw http.ResponseWriter, src io.Reader, flush bool) error {
	if wt, ok := src.(io.WriterTo); ok && !flush {
		_, err := wt.WriteTo(rw)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			p.logf("backend body read failed during copy: %v", err)
		}
		return err
	}
	buf := p.buffers.Get()
	defer p.buffers.Put(buf)
	var flushFn func() error
	if flush {
		flushFn = http.NewResponseController(rw).Flush
		_ = flushFn()
	}
	for {
		nr, rerr := src.Read(buf)
		if rerr != nil && rerr != io.EOF && !errors.Is(rerr, context.Canceled) {
			p.logf("backend body read failed during copy: %v", rerr)
		}
		if nr > 0 {
			nw, werr := rw.Write(buf[:nr])
			if werr != nil {
				return werr
			}
			if nw != nr {
				return io.ErrShortWrite
			}
			if flushFn != nil {
				_ = flushFn()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// flushesEachWrite reports whether a response streams: an event stream or
// a body of unknown length, which the client gets write by write.
func flushesEachWrite(res *http.Response) bool {
	if ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); ct == "text/event-stream" {
		return true
	}
	return res.ContentLength == -1
}

// moveHeader adds src's values to dst, handing over src's value slices
// where dst has no values of its own: src must not be used afterwards.
func moveHeader(dst, src http.Header) {
	for k, vv := range src {
		if old, ok := dst[k]; ok {
			dst[k] = append(old, vv...)
			continue
		}
		dst[k] = vv
	}
}

func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}

// removeHopByHopHeaders removes the headers the Connection header names and
// the hop-by-hop headers.
func removeHopByHopHeaders(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		h.Del(f)
	}
}

// headerValuesContainToken reports whether a comma-separated value names
// token, case-insensitively.
func headerValuesContainToken(values []string, token string) bool {
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(tok), token) {
				return true
			}
		}
	}
	return false
}

// maxQueryParams is net/url's default limit on a query's parameters.
const maxQueryParams = 10000

// cleanQueryParams drops the query parameters url.ParseQuery cannot parse
// (a ';' separator, a bad escape) or that exceed its limit, re-encoding the
// rest; a clean query comes back as it is.
func cleanQueryParams(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	if strings.Count(s, "&")+1 > maxQueryParams {
		return reencode(s)
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// noopCloser keeps the transport from closing the client's request body.
type noopCloser struct{ io.ReadCloser }

func (noopCloser) Close() error { return nil }
