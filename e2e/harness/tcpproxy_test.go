package harness

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer accepts connections on loopback and echoes what each sends;
// it counts the connections it accepted.
func echoServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), &accepted
}

// roundTrip writes msg on c and reads as many bytes back within wait.
func roundTrip(c net.Conn, msg string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, len(msg))
	n, err := io.ReadFull(c, buf)
	return string(buf[:n]), err
}

func TestTCPProxyCutHoldsAndRestoreCloses(t *testing.T) {
	target, accepted := echoServer(t)
	p := StartTCPProxy(t, "http://"+target)
	if p.URL != "http://"+p.Addr {
		t.Fatalf("URL %q, want http://%s", p.URL, p.Addr)
	}
	before, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if got, err := roundTrip(before, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Cut()
	if !p.IsCut() {
		t.Fatal("IsCut is false after Cut")
	}
	// A held connection carries nothing and is not reset: the read times
	// out.
	if got, err := roundTrip(before, "lost", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("held connection read %q, %v; want a timeout", got, err)
	}
	// A connection made while cut is accepted, and nothing of it reaches
	// the target.
	n := accepted.Load()
	during, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatalf("dial while cut: %v", err)
	}
	defer during.Close()
	if got, err := roundTrip(during, "void", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection made while cut read %q, %v; want a timeout", got, err)
	}
	if accepted.Load() != n {
		t.Fatal("a connection made while cut reached the target")
	}

	p.Restore()
	// Both held connections are closed: a read ends at once.
	for name, c := range map[string]net.Conn{"held": before, "made while cut": during} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 16)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s connection after Restore: read %v, want it closed", name, err)
		}
	}
	after, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got, err := roundTrip(after, "again", 5*time.Second); err != nil || got != "again" {
		t.Fatalf("after Restore: %q, %v", got, err)
	}
	if p.Connections() != 3 {
		t.Fatalf("Connections %d, want 3", p.Connections())
	}
}

// A connection its client closes ends on the proxy too, and Close does
// not wait for it.
func TestTCPProxyClientCloseEndsConnection(t *testing.T) {
	target, _ := echoServer(t)
	p, err := NewTCPProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(c, "bye", 5*time.Second); err != nil || got != "bye" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	c.Close()
	done := make(chan struct{})
	go func() {
		p.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits 10s after the client closed its connection")
	}
}

func TestTCPProxyUnreachableTargetCloses(t *testing.T) {
	ports := ReservePorts(t, 1)
	p := StartTCPProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %v, want the connection closed", err)
	}
}

// TestTCPProxyTargetCloses: a connection the target closes is closed to
// its client too, and Close returns once its client has gone.
func TestTCPProxyTargetCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	p, err := NewTCPProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read from a connection the target closed: %v, want EOF", err)
	}
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the target closed a connection")
	}
}
