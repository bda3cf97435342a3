//go:build integration

package h1client

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
)

// tcpSink is a TCP connection whose other end collects what is written to
// it: the writer net/http's server hands a body to.
type tcpSink struct {
	conn *net.TCPConn
	got  chan []byte
}

func newTCPSink(t *testing.T) *tcpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The listener closes once it accepted: closed before, it would reset
	// the connection still waiting in its queue.
	t.Cleanup(func() { ln.Close() })
	s := &tcpSink{got: make(chan []byte, 1)}
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			s.got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		s.got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s.conn = c.(*net.TCPConn)
	return s
}

// received closes the sink's writing end and returns what arrived.
func (s *tcpSink) received() []byte {
	s.conn.Close()
	return <-s.got
}

// TestBodyWriteToHandsOverTheConnection: WriteTo sends a body of known
// length to a TCP connection whole, after any part read with Read, and
// frees the connection for the next request.
func TestBodyWriteToHandsOverTheConnection(t *testing.T) {
	b := startBackend(t)
	c, dials := countingClient()
	for _, readFirst := range []int{0, 1000, len(b.large) - 10} {
		res, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "large", nil))
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, readFirst)
		if _, err := io.ReadFull(res.Body, head); err != nil {
			t.Fatal(err)
		}
		sink := newTCPSink(t)
		n, err := res.Body.(io.WriterTo).WriteTo(sink.conn)
		if err != nil || n != int64(len(b.large)-readFirst) {
			t.Fatalf("after %d bytes read: WriteTo wrote %d, %v; want %d", readFirst, n, err, len(b.large)-readFirst)
		}
		if got := append(head, sink.received()...); !bytes.Equal(got, b.large) {
			t.Fatalf("after %d bytes read: the sink got %d bytes, not the object's %d", readFirst, len(got), len(b.large))
		}
		res.Body.Close()
		if n := c.idleCount(); n != 1 {
			t.Fatalf("after %d bytes read: %d idle connections after WriteTo, want 1", readFirst, n)
		}
	}
	res, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "small", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, res); !bytes.Equal(got, b.small) {
		t.Fatalf("GET after WriteTo: %d bytes", len(got))
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialled %d connections for 4 requests in a row, want 1", n)
	}
}
