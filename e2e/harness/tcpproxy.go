package harness

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// TCPProxy forwards every TCP connection it accepts on a loopback port to
// one target, byte for byte, whatever the protocol (etcd's gRPC, which a
// FaultProxy cannot carry), and can cut the path like a network partition:
//
//   - Cut: from then on no byte is carried in either direction on the
//     connections it holds; they stay open, their bytes are held (never
//     delivered, never answered with a reset), as when packets are dropped.
//     A connection accepted while cut is held the same way: nothing of it
//     reaches the target. Bytes already read from a connection when Cut is
//     called may still be delivered, as packets in flight would be.
//   - Restore: every connection held during the cut is closed, so that its
//     client notices and connects again, and new connections are forwarded
//     again.
//
// A connection whose target cannot be reached is closed at once, as a
// refused connection would be.
type TCPProxy struct {
	// Addr is the proxy's host:port.
	Addr string
	// URL is the target's URL with the proxy's address in place of the
	// target's (http://ADDR for an http:// target, ADDR for a host:port
	// one): what a client of the target is given instead.
	URL string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	conns  map[*tcpConn]struct{}
	nconns int
	closed bool
}

// tcpConn is one client connection and its connection to the target.
type tcpConn struct {
	client net.Conn
	// held is set (under the proxy's lock) when a cut catches the
	// connection: it never carries a byte again.
	held bool
	done chan struct{} // closed by close

	mu       sync.Mutex
	upstream net.Conn // nil until dialled
	closed   bool
}

// close closes both sides, once.
func (c *tcpConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.done)
	c.client.Close()
	if c.upstream != nil {
		c.upstream.Close()
	}
}

// setUpstream records the connection to the target; false (and the
// connection closed) when c was closed meanwhile.
func (c *tcpConn) setUpstream(u net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		u.Close()
		return false
	}
	c.upstream = u
	return true
}

// StartTCPProxy starts a proxy to target (host:port, or a URL with a host)
// on a free loopback port; t.Cleanup closes it.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	p, err := NewTCPProxy(target)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// NewTCPProxy starts a proxy to target; Close stops it.
func NewTCPProxy(target string) (*TCPProxy, error) {
	addr, scheme := target, ""
	if u, err := url.Parse(target); err == nil && u.Scheme != "" && u.Host != "" {
		addr, scheme = u.Host, u.Scheme
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("tcp proxy target %q: want host:port or SCHEME://host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcp proxy: listen: %w", err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), URL: ln.Addr().String(), target: addr, ln: ln, conns: map[*tcpConn]struct{}{}}
	if scheme != "" {
		p.URL = scheme + "://" + p.Addr
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Cut stops carrying bytes on every connection, held open, and holds new
// ones the same way, until Restore. Cutting a cut proxy does nothing.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.held = true
	}
}

// Restore ends a cut: the connections it held are closed, and connections
// made from now on are forwarded. Restoring a proxy that is not cut does
// nothing.
func (p *TCPProxy) Restore() {
	p.mu.Lock()
	if !p.cut {
		p.mu.Unlock()
		return
	}
	p.cut = false
	held := make([]*tcpConn, 0, len(p.conns))
	for c := range p.conns {
		if c.held {
			held = append(held, c)
		}
	}
	p.mu.Unlock()
	for _, c := range held {
		c.close()
	}
}

// IsCut reports whether the proxy is cut.
func (p *TCPProxy) IsCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// Connections returns how many client connections the proxy accepted.
func (p *TCPProxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nconns
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *TCPProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	all := make([]*tcpConn, 0, len(p.conns))
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.close()
	}
	p.wg.Wait()
}

// holds reports whether c is held by a cut: the one now, or one that
// Restore ended but has not closed c yet.
func (p *TCPProxy) holds(c *tcpConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.held
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := &tcpConn{client: client, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.nconns++
		c.held = p.cut
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve carries one connection until either side closes it, a cut holds
// it and Restore closes it, or the proxy closes.
func (p *TCPProxy) serve(c *tcpConn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.close()
	}()
	if p.holds(c) {
		// Accepted while cut: nothing reaches the target.
		<-c.done
		return
	}
	upstream, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !c.setUpstream(upstream) {
		// Closed (by Close or a Restore) while dialling.
		return
	}
	ends := make(chan struct{}, 2)
	go func() { p.pump(c, upstream, c.client); ends <- struct{}{} }()
	go func() { p.pump(c, c.client, upstream); ends <- struct{}{} }()
	// Either direction ending (EOF, an error, a cut held until Restore)
	// ends the connection; then both pumps are waited for.
	running := 2
	select {
	case <-ends:
		running--
	case <-c.done:
	}
	c.close()
	for ; running > 0; running-- {
		<-ends
	}
}

// pump copies src to dst until src ends or the proxy is cut. Once cut,
// what it read is dropped and it waits for the connection to be closed:
// neither bytes nor the end of src (a close) get through a cut.
func (p *TCPProxy) pump(c *tcpConn, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.holds(c) {
			<-c.done
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
