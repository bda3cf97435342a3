//go:build bench

package bench

// A TCP relay as the floor of BenchmarkRegistryPull's references: it
// accepts a connection, dials MinIO and copies the bytes both ways (with
// splice, as Go's TCPConn.ReadFrom does on Linux). It parses nothing, so
// what it costs a pull is what a process in the path costs on this
// machine before any HTTP server, signature or log line: the least any
// proxy hop can cost, sweepgate's included. A client signs for the
// relay's host, which reaches MinIO unchanged in the Host header, so MinIO
// accepts the signature.

import (
	"fmt"
	"io"
	"net"
	"os"
)

// tcpRelayChildEnv makes this test binary a TCP relay to the host:port it
// holds (see init).
const tcpRelayChildEnv = "SWEEPGATE_BENCH_TCP_RELAY_CHILD"

func init() {
	target, ln := listenAsChild(tcpRelayChildEnv)
	if ln == nil {
		return
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "relay child: %v\n", err)
			os.Exit(2)
		}
		go relayConn(c.(*net.TCPConn), target)
	}
}

// relayConn copies c to a new connection to target and back until both
// directions end; each direction's end is passed on as a half close.
func relayConn(c *net.TCPConn, target string) {
	defer c.Close()
	nc, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	u := nc.(*net.TCPConn)
	defer u.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, c)
		_ = u.CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, u)
	_ = c.CloseWrite()
	<-done
}
