package clientip

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// pipeListener hands out one end of a net.Pipe whose remote address is
// peer: a connection from any address, with no socket.
type pipeListener struct {
	conns chan net.Conn
}

func (l *pipeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l *pipeListener) Close() error   { return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

type addrConn struct {
	net.Conn
	peer net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.peer }

// SetReadDeadline sets the pipe's deadline; unlike a pipe, and like a TCP
// socket, it does not fail once the other end has closed.
func (c addrConn) SetReadDeadline(t time.Time) error {
	_ = c.Conn.SetReadDeadline(t)
	return nil
}

// dial returns the server's accepted connection from peer and the
// client's end, after the client has written first (in the background).
func dial(t *testing.T, l *Listener, peer string, first []byte) (net.Conn, net.Conn) {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	pl := l.Listener.(*pipeListener)
	pl.conns <- addrConn{Conn: server, peer: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(peer))}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if first != nil {
		go client.Write(first)
	}
	return c, client
}

func newTestListener(t *testing.T, trusted ...string) (*Listener, *[]error) {
	tr, err := ParseTrusted(trusted)
	if err != nil {
		t.Fatal(err)
	}
	var refused []error
	return &Listener{
		Listener:      &pipeListener{conns: make(chan net.Conn, 1)},
		Trusted:       func() Trusted { return tr },
		HeaderTimeout: time.Minute,
		Refused:       func(_ net.Addr, err error) { refused = append(refused, err) },
	}, &refused
}

func TestListenerTrustedHeader(t *testing.T) {
	l, refused := newTestListener(t, "10.0.0.0/8")
	c, _ := dial(t, l, "10.0.0.1:4000", []byte("PROXY TCP4 192.0.2.1 10.0.0.1 5000 9000\r\nGET / HTTP/1.1\r\n\r\n"))
	if got := c.RemoteAddr().String(); got != "192.0.2.1:5000" {
		t.Errorf("RemoteAddr = %s, want the header's source 192.0.2.1:5000", got)
	}
	buf := make([]byte, len("GET / HTTP/1.1\r\n\r\n"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "GET / HTTP/1.1\r\n\r\n" {
		t.Errorf("the bytes after the header: %q, %v", buf, err)
	}
	if len(*refused) != 0 {
		t.Errorf("refused: %v", *refused)
	}
}

func TestListenerTrustedWithoutHeader(t *testing.T) {
	l, refused := newTestListener(t, "10.0.0.0/8")
	c, _ := dial(t, l, "10.0.0.1:4000", []byte("GET / HTTP/1.1\r\n\r\n"))
	if got := c.RemoteAddr().String(); got != "10.0.0.1:4000" {
		t.Errorf("RemoteAddr = %s, want the peer's", got)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "GET /" {
		t.Errorf("the first bytes: %q, %v", buf, err)
	}
	if len(*refused) != 0 {
		t.Errorf("refused: %v", *refused)
	}
}

func TestListenerUntrustedHeaderRefused(t *testing.T) {
	for _, header := range [][]byte{
		[]byte("PROXY TCP4 10.0.0.7 10.0.0.1 5000 9000\r\nGET / HTTP/1.1\r\n\r\n"),
		append(v2Inet("10.0.0.7", "10.0.0.1", 5000, 9000), "GET / HTTP/1.1\r\n\r\n"...),
	} {
		l, refused := newTestListener(t, "10.0.0.0/8")
		c, _ := dial(t, l, "192.0.2.1:4000", header)
		if got := c.RemoteAddr().String(); got != "192.0.2.1:4000" {
			t.Errorf("RemoteAddr = %s, want the peer's own", got)
		}
		if _, err := c.Read(make([]byte, 10)); !errors.Is(err, ErrUntrustedHeader) {
			t.Errorf("Read: %v, want ErrUntrustedHeader", err)
		}
		if len(*refused) != 1 {
			t.Errorf("refused: %v", *refused)
		}
	}
}

func TestListenerMalformedHeaderRefused(t *testing.T) {
	l, refused := newTestListener(t, "10.0.0.0/8")
	c, _ := dial(t, l, "10.0.0.1:4000", []byte("PROXY TCP4 nonsense\r\nGET / HTTP/1.1\r\n\r\n"))
	if _, err := c.Read(make([]byte, 10)); err == nil {
		t.Error("a malformed header was served")
	}
	if len(*refused) != 1 {
		t.Errorf("refused: %v", *refused)
	}
}

// TestListenerSilentConnection checks that a connection that sends
// nothing is refused once HeaderTimeout has passed, rather than holding
// the goroutine that serves it. net.Pipe honours read deadlines, so the
// wait ends without the test sleeping.
func TestListenerSilentConnection(t *testing.T) {
	l, refused := newTestListener(t, "10.0.0.0/8")
	l.HeaderTimeout = time.Nanosecond
	c, _ := dial(t, l, "10.0.0.1:4000", nil)
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Read of a silent connection: %v, want a deadline error", err)
	}
	if len(*refused) != 1 {
		t.Errorf("refused: %v", *refused)
	}
}

// TestListenerClosedEmpty: a connection closed before its first byte (a
// TCP health check) is not reported as refused.
func TestListenerClosedEmpty(t *testing.T) {
	l, refused := newTestListener(t, "10.0.0.0/8")
	c, client := dial(t, l, "10.0.0.1:4000", nil)
	client.Close()
	if _, err := c.Read(make([]byte, 10)); err == nil {
		t.Error("Read of a closed connection succeeded")
	}
	if len(*refused) != 0 {
		t.Errorf("refused: %v", *refused)
	}
}
