package h1client

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestBodyWriteToShortBody: a server that ends a body before its
// Content-Length makes WriteTo fail with io.ErrUnexpectedEOF, having
// written what arrived, and the connection is not kept.
func TestBodyWriteToShortBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		_, _ = c.Read(buf) // the request
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"+string(bytes.Repeat([]byte("x"), 60)))
	}()
	c := New(Options{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ln.Addr().String()+"/b/k", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	n, err := res.Body.(io.WriterTo).WriteTo(&got)
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != 60 || got.Len() != 60 {
		t.Fatalf("WriteTo of a body broken off at 60 of 100 bytes: %d bytes, %v; want 60, %v", n, err, io.ErrUnexpectedEOF)
	}
	res.Body.Close()
	c.mu.Lock()
	idle := len(c.idle[ln.Addr().String()])
	c.mu.Unlock()
	if idle != 0 {
		t.Errorf("%d idle connections after a broken body, want 0", idle)
	}
}
