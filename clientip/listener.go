package clientip

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Listener accepts connections that may start with a PROXY protocol
// header. A connection from a trusted proxy that starts with one stands
// for the source address the header names (RemoteAddr); a connection from
// a trusted proxy without one stands for the proxy itself. A connection
// from any other address that starts with one is refused: it is closed
// before a byte of it is served. Accept never waits for a header: a
// connection reads its first bytes when it is first read or asked for its
// RemoteAddr, in the goroutine that serves it, for at most HeaderTimeout.
type Listener struct {
	net.Listener
	// Trusted returns the trusted proxies now; it is asked once per
	// connection.
	Trusted func() Trusted
	// HeaderTimeout bounds the wait for a connection's first bytes and
	// its header: a connection that stays silent longer is refused.
	HeaderTimeout time.Duration
	// Refused, when set, is told of every refused connection but those
	// closed before their first byte.
	Refused func(peer net.Addr, err error)
}

// Accept returns the next connection, whose header is read on first use.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &proxyConn{Conn: c, l: l}, nil
}

// proxyConn is a connection whose PROXY header, if it has one, is read
// before anything else.
type proxyConn struct {
	net.Conn
	l      *Listener
	once   sync.Once
	br     *bufio.Reader // holds the bytes read past the header
	remote net.Addr
	err    error
}

// errClosedEmpty is a connection closed before it sent a byte, such as a
// load balancer's TCP health check: there is nothing to refuse.
var errClosedEmpty = errors.New("proxy protocol: connection closed before its first byte")

// ErrUntrustedHeader refuses a PROXY header from an address that is not a
// trusted proxy.
var ErrUntrustedHeader = errors.New("proxy protocol: header from an address that is not a trusted proxy")

func (c *proxyConn) init() {
	c.once.Do(func() {
		c.remote = c.Conn.RemoteAddr()
		if err := c.readHeader(); err != nil {
			c.err = err
			if c.l.Refused != nil && !errors.Is(err, errClosedEmpty) {
				c.l.Refused(c.Conn.RemoteAddr(), err)
			}
			c.Conn.Close()
		}
	})
}

func (c *proxyConn) readHeader() error {
	if c.l.HeaderTimeout > 0 {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.l.HeaderTimeout)); err != nil {
			return err
		}
	}
	c.br = bufio.NewReaderSize(c.Conn, 256)
	prefix, err := c.br.Peek(5)
	if len(prefix) == 0 && errors.Is(err, io.EOF) {
		return errClosedEmpty
	}
	if len(prefix) == 0 || (err != nil && HasHeader(prefix)) {
		return fmt.Errorf("proxy protocol: reading the first bytes: %w", err)
	}
	if !HasHeader(prefix) {
		return c.Conn.SetReadDeadline(time.Time{})
	}
	peer := PeerAddr(c.remote.String())
	if !c.l.Trusted().Contains(peer) {
		return ErrUntrustedHeader
	}
	h, err := ReadHeader(c.br)
	if err != nil {
		return err
	}
	if h.Source.IsValid() {
		c.remote = net.TCPAddrFromAddrPort(h.Source)
	}
	return c.Conn.SetReadDeadline(time.Time{})
}

// Read reads the connection's bytes after its header.
func (c *proxyConn) Read(p []byte) (int, error) {
	c.init()
	if c.err != nil {
		return 0, c.err
	}
	if c.br != nil {
		if c.br.Buffered() > 0 {
			return c.br.Read(p)
		}
		c.br = nil // the header's buffer is drained: read directly
	}
	return c.Conn.Read(p)
}

// RemoteAddr is the client's address: the header's source, when a
// trusted proxy sent one, and the peer's otherwise.
func (c *proxyConn) RemoteAddr() net.Addr {
	c.init()
	return c.remote
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one it answered.
func (c *proxyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
