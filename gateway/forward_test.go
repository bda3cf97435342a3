package gateway

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/backend/h1client"
)

// The backend in these tests is an httptest server: MinIO never sends
// trailers, informational responses, a protocol switch or an event stream,
// and cannot be made to break off a body, but passThrough must treat all of
// them as httputil.ReverseProxy does.

// seenRequest is what the backend received.
type seenRequest struct {
	method, host, uri string
	header            http.Header
	body              string
}

// forwardBackend answers by path; every request it saw goes to seen.
func forwardBackend(t *testing.T, seen chan<- seenRequest) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- seenRequest{r.Method, r.Host, r.RequestURI, r.Header.Clone(), string(body)}
		h := w.Header()
		switch r.URL.Path {
		case "/hop":
			h.Set("Connection", "X-Private, keep-alive")
			h.Set("X-Private", "secret")
			h.Set("Keep-Alive", "timeout=5")
			h.Set("Proxy-Authenticate", "Basic")
			h.Set("Upgrade", "h2c")
			h["X-Amz-Meta-Multi"] = []string{"a", "b"}
			fmt.Fprint(w, "hop")
		case "/trailers":
			h.Set("Trailer", "X-Checksum, X-Count")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "with trailers")
			h.Set("X-Checksum", "abc")
			h.Set("X-Count", "2")
		case "/late-trailer":
			h.Set("Trailer", "X-Checksum")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "late")
			h.Set("X-Checksum", "abc")
			h.Set(http.TrailerPrefix+"X-Unannounced", "surprise")
		case "/stream", "/events":
			if r.URL.Path == "/events" {
				h.Set("Content-Type", "text/event-stream; charset=utf-8")
			}
			for i := range 3 {
				fmt.Fprintf(w, "part %d\n", i)
				http.NewResponseController(w).Flush()
			}
		case "/early-hints":
			h.Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			h.Del("Link")
			fmt.Fprint(w, "after hints")
		case "/switch":
			h.Set("Connection", "Upgrade")
			h.Set("Upgrade", "websocket")
			w.WriteHeader(http.StatusSwitchingProtocols)
		case "/broken":
			h.Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "only ten b")
			http.NewResponseController(w).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case "/error":
			h.Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "<Error><Code>NoSuchKey</Code></Error>")
		default:
			fmt.Fprintf(w, "echo %s %d", r.URL.Path, len(body))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// forwardExchange is one client request through a proxy and what came of it.
type forwardExchange struct {
	backend             seenRequest
	status              int
	header, trailer     http.Header
	body                string
	bodyErr, requestErr bool
}

func runForward(t *testing.T, proxy http.Handler, seen <-chan seenRequest, method, path string, header http.Header, body string) forwardExchange {
	t.Helper()
	front := httptest.NewServer(proxy)
	defer front.Close()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, front.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	var ex forwardExchange
	resp, err := front.Client().Do(req)
	if err != nil {
		ex.requestErr = true
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ex.status, ex.header, ex.trailer, ex.body, ex.bodyErr = resp.StatusCode, resp.Header, resp.Trailer, string(b), err != nil
		ex.header.Del("Date")
	}
	select {
	case ex.backend = <-seen:
	default:
	}
	return ex
}

// TestPassThroughMatchesReverseProxy sends the same requests through
// passThrough and through httputil.ReverseProxy configured alike, and
// requires the backend and the client to see the same thing.
func TestPassThroughMatchesReverseProxy(t *testing.T) {
	seen := make(chan seenRequest, 1)
	backend := forwardBackend(t, seen)
	target, _ := url.Parse(backend.URL)
	rewrite := func(out *http.Request) {
		out.URL.Scheme, out.URL.Host, out.Host = target.Scheme, target.Host, ""
	}
	errorHandler := func(w http.ResponseWriter, _ *http.Request, err error) {
		w.WriteHeader(http.StatusBadGateway)
	}
	quiet := log.New(io.Discard, "", 0)
	reference := &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { rewrite(pr.Out) },
		ErrorHandler: errorHandler,
		ErrorLog:     quiet,
	}
	// passThrough over net/http's Transport and over the gateway's own
	// split of it (bodiless GET and HEAD through h1client).
	transports := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"Transport", http.DefaultTransport},
		{"h1client", h1Split{direct: h1client.New(h1client.Options{})}},
	}
	cases := []struct {
		name, method, path, body string
		header                   http.Header
	}{
		{name: "plain GET", method: "GET", path: "/bucket/key?versionId=1&list-type=2"},
		{name: "PUT with body", method: "PUT", path: "/bucket/key", body: strings.Repeat("x", 100)},
		{name: "request hop-by-hop and forwarding headers", method: "GET", path: "/bucket/key", header: http.Header{
			"Connection": {"keep-alive, X-Drop-Me"}, "X-Drop-Me": {"1"}, "Keep-Alive": {"300"},
			"Proxy-Authorization": {"Basic x"}, "Proxy-Connection": {"keep-alive"},
			"Forwarded": {"for=1.2.3.4"}, "X-Forwarded-For": {"1.2.3.4"}, "X-Forwarded-Host": {"h"},
			"X-Forwarded-Proto": {"https"}, "X-Keep": {"kept"},
		}},
		{name: "TE trailers kept", method: "GET", path: "/bucket/key", header: http.Header{"Te": {"gzip, trailers"}}},
		{name: "unparsable query", method: "GET", path: "/bucket/key?a=1;b=2&c=%zz&d=4"},
		{name: "no User-Agent", method: "GET", path: "/bucket/key", header: http.Header{"User-Agent": {""}}},
		{name: "response hop-by-hop headers", method: "GET", path: "/hop"},
		{name: "announced trailers", method: "GET", path: "/trailers"},
		{name: "unannounced trailer", method: "GET", path: "/late-trailer"},
		{name: "body of unknown length", method: "GET", path: "/stream"},
		{name: "event stream", method: "GET", path: "/events"},
		{name: "informational response", method: "GET", path: "/early-hints"},
		{name: "protocol switch nobody asked for", method: "GET", path: "/switch"},
		{name: "body broken off", method: "GET", path: "/broken"},
		{name: "error status", method: "GET", path: "/error"},
	}
	for _, tr := range transports {
		ours := &passThrough{
			transport:      tr.rt,
			buffers:        newBufferPool(8),
			rewrite:        func(out, _ *http.Request) { rewrite(out) },
			modifyResponse: func(*http.Response) error { return nil },
			errorHandler:   errorHandler,
			logf:           quiet.Printf,
		}
		for _, c := range cases {
			t.Run(tr.name+"/"+c.name, func(t *testing.T) {
				want := runForward(t, reference, seen, c.method, c.path, c.header, c.body)
				got := runForward(t, ours, seen, c.method, c.path, c.header, c.body)
				if diff := compareExchanges(got, want); diff != "" {
					t.Errorf("passThrough and httputil.ReverseProxy differ:\n%s", diff)
				}
			})
		}
	}
}

// h1Split sends what h1client handles through it and the rest through
// net/http's Transport, as the backend client's transport does.
type h1Split struct{ direct *h1client.Client }

func (t h1Split) RoundTrip(r *http.Request) (*http.Response, error) {
	if h1client.Handles(r) {
		return t.direct.RoundTrip(r)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func compareExchanges(got, want forwardExchange) string {
	var diffs []string
	check := func(what string, g, w any) {
		if gs, ws := fmt.Sprint(g), fmt.Sprint(w); gs != ws {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", what, gs, ws))
		}
	}
	check("backend method", got.backend.method, want.backend.method)
	check("backend host", got.backend.host, want.backend.host)
	check("backend URI", got.backend.uri, want.backend.uri)
	check("backend header", sortedHeader(got.backend.header), sortedHeader(want.backend.header))
	check("backend body", got.backend.body, want.backend.body)
	check("status", got.status, want.status)
	check("header", sortedHeader(got.header), sortedHeader(want.header))
	check("trailer", sortedHeader(got.trailer), sortedHeader(want.trailer))
	check("body", got.body, want.body)
	check("body error", got.bodyErr, want.bodyErr)
	check("request error", got.requestErr, want.requestErr)
	return strings.Join(diffs, "\n")
}

// sortedHeader renders h with its names sorted and each name's values, and
// a Trailer header's names, in a stable order.
func sortedHeader(h http.Header) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		vs := h[k]
		if k == "Trailer" {
			var names []string
			for _, v := range vs {
				for n := range strings.SplitSeq(v, ",") {
					names = append(names, strings.TrimSpace(n))
				}
			}
			slices.Sort(names)
			vs = names
		}
		fmt.Fprintf(&b, "%s=%q ", k, vs)
	}
	return b.String()
}

// TestPassThroughStreamsBodyOfUnknownLength requires the client to get
// each write of a body of unknown length while the backend still holds the
// rest back.
func TestPassThroughStreamsBodyOfUnknownLength(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "second\n")
	}))
	defer backend.Close()
	defer close(release)
	target, _ := url.Parse(backend.URL)
	front := httptest.NewServer(&passThrough{
		transport: http.DefaultTransport,
		buffers:   newBufferPool(1024),
		rewrite: func(out, _ *http.Request) {
			out.URL.Scheme, out.URL.Host, out.Host = target.Scheme, target.Host, ""
		},
		modifyResponse: func(*http.Response) error { return nil },
		errorHandler:   func(w http.ResponseWriter, _ *http.Request, err error) { t.Error(err) },
		logf:           t.Logf,
	})
	defer front.Close()
	client := front.Client()
	client.Timeout = 10 * time.Second // the first line never arriving fails the test
	resp, err := client.Get(front.URL + "/bucket/key")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line: %q, %v; want it before the backend sends the rest", line, err)
	}
}
