package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/sweepgate/sweepgate/backend/h1client"
)

// readFromSpy records what the proxy hands its response writer's ReadFrom.
type readFromSpy struct {
	http.ResponseWriter
	srcs []string
}

func (s *readFromSpy) ReadFrom(src io.Reader) (int64, error) {
	desc := fmt.Sprintf("%T", src)
	if lr, ok := src.(*io.LimitedReader); ok {
		desc += fmt.Sprintf(" of %T", lr.R)
	}
	s.srcs = append(s.srcs, desc)
	return s.ResponseWriter.(io.ReaderFrom).ReadFrom(src)
}

// TestPassThroughHandsClientTheBackendConnection: a backend body of known
// length reaches the client's response writer as the backend connection
// itself, limited to the body, so that net/http's server can move it with
// splice; the client gets every byte and the request's log counts them.
func TestPassThroughHandsClientTheBackendConnection(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
	}))
	defer backend.Close()
	target, _ := url.Parse(backend.URL)
	proxy := &passThrough{
		transport: h1client.New(h1client.Options{}),
		buffers:   newBufferPool(copyBufferSize),
		rewrite: func(out, _ *http.Request) {
			out.URL.Scheme, out.URL.Host, out.Host = target.Scheme, target.Host, ""
		},
		modifyResponse: func(*http.Response) error { return nil },
		errorHandler:   func(w http.ResponseWriter, _ *http.Request, err error) { t.Error(err) },
		logf:           t.Logf,
	}
	type served struct {
		srcs  []string
		bytes int64
	}
	done := make(chan served, 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spy := &readFromSpy{ResponseWriter: w}
		rec := &responseRecorder{ResponseWriter: spy, bodyUnread: func() bool { return false }}
		proxy.ServeHTTP(rec, r)
		done <- served{spy.srcs, rec.bytes}
	}))
	defer front.Close()
	for i := range 2 { // the second on the pooled backend connection
		resp, err := front.Client().Get(front.URL + "/bucket/key")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("GET %d: %d bytes, %v; want the backend's %d", i, len(got), err, len(body))
		}
		s := <-done
		want := fmt.Sprintf("%T of %T", &io.LimitedReader{}, &net.TCPConn{})
		if len(s.srcs) != 1 || s.srcs[0] != want {
			t.Errorf("GET %d: the response writer's ReadFrom got %q, want one %s", i, s.srcs, want)
		}
		if s.bytes != int64(len(body)) {
			t.Errorf("GET %d: the request's log counts %d bytes, want %d", i, s.bytes, len(body))
		}
	}
}
