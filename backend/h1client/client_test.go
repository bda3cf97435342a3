//go:build integration

package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// backend is a MinIO with one bucket holding a small and a large object.
type backend struct {
	m      *harness.MinIO
	signer *sigv4.Signer
	small  []byte
	large  []byte
}

func startBackend(t *testing.T, env ...string) *backend {
	t.Helper()
	m := harness.StartMinIO(t, env...)
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := mc.MakeBucket(ctx, "bkt", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &backend{
		m:      m,
		signer: &sigv4.Signer{AccessKey: m.AccessKey, SecretKey: m.SecretKey, Region: m.Region, Service: "s3"},
		small:  bytes.Repeat([]byte("s"), 4<<10),
		large:  bytes.Repeat([]byte("L"), 8<<20),
	}
	for key, data := range map[string][]byte{"small": b.small, "large": b.large} {
		if _, err := mc.PutObject(ctx, "bkt", key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// request returns a signed request for an object of the bucket.
func (b *backend) request(t *testing.T, ctx context.Context, method, key string, header http.Header) *http.Request {
	t.Helper()
	u, err := url.Parse(b.m.Endpoint + "/bkt/" + key)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vv := range header {
		req.Header[k] = vv
	}
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	b.signer.Sign(req, emptySHA256, time.Now())
	return req
}

// countingClient returns a Client that counts the connections it dials.
func countingClient() (*Client, *atomic.Int32) {
	c := New(Options{})
	var dials atomic.Int32
	dial := c.dial
	c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	return c, &dials
}

func (c *Client) idleCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.idle {
		n += len(l)
	}
	return n
}

func readAll(t *testing.T, res *http.Response) []byte {
	t.Helper()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	res.Body.Close()
	return data
}

// TestClientPoolsConnections: a connection is reused only after a response
// read to its end that allows it.
func TestClientPoolsConnections(t *testing.T) {
	b := startBackend(t)

	t.Run("GET read to its end and HEAD with Content-Length reuse one connection", func(t *testing.T) {
		c, dials := countingClient()
		for range 3 {
			res, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "small", nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, res); res.StatusCode != 200 || !bytes.Equal(got, b.small) {
				t.Fatalf("GET: status %d, %d bytes", res.StatusCode, len(got))
			}
			res, err = c.RoundTrip(b.request(t, t.Context(), http.MethodHead, "small", nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, res); res.StatusCode != 200 || res.ContentLength != int64(len(b.small)) || len(got) != 0 {
				t.Fatalf("HEAD: status %d, Content-Length %d, %d body bytes", res.StatusCode, res.ContentLength, len(got))
			}
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("dialled %d connections for 6 requests in a row, want 1", n)
		}
		if n := c.idleCount(); n != 1 {
			t.Errorf("%d idle connections, want 1", n)
		}
	})

	t.Run("a body closed before its end ends its connection", func(t *testing.T) {
		c, dials := countingClient()
		res, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "large", nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(res.Body, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if n := c.idleCount(); n != 0 {
			t.Fatalf("%d idle connections after an unfinished body, want 0", n)
		}
		res, err = c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "small", nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, res); !bytes.Equal(got, b.small) {
			t.Fatalf("GET after an unfinished body: %d bytes", len(got))
		}
		if n := dials.Load(); n != 2 {
			t.Errorf("dialled %d connections, want 2", n)
		}
	})

	t.Run("a Connection: close answer is not pooled", func(t *testing.T) {
		c, dials := countingClient()
		for range 2 {
			res, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "small", http.Header{"Connection": {"close"}}))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Close {
				t.Fatalf("MinIO's answer to Connection: close does not close")
			}
			if got := readAll(t, res); !bytes.Equal(got, b.small) {
				t.Fatalf("GET: %d bytes", len(got))
			}
			if n := c.idleCount(); n != 0 {
				t.Fatalf("%d idle connections after a Connection: close answer, want 0", n)
			}
		}
		if n := dials.Load(); n != 2 {
			t.Errorf("dialled %d connections, want 2", n)
		}
	})

	t.Run("an error answer with a body is read and pooled", func(t *testing.T) {
		c, dials := countingClient()
		for range 2 {
			res, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "missing", nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, res); res.StatusCode != 404 || !strings.Contains(string(got), "NoSuchKey") {
				t.Fatalf("GET missing: status %d, body %q", res.StatusCode, got)
			}
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("dialled %d connections, want 1", n)
		}
	})
}

// TestClientHonoursContext: cancelling a request's context ends it, and
// its connection, wherever it is.
func TestClientHonoursContext(t *testing.T) {
	b := startBackend(t)

	t.Run("a context cancelled mid-body ends the read and the connection", func(t *testing.T) {
		c, _ := countingClient()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		res, err := c.RoundTrip(b.request(t, ctx, http.MethodGet, "large", nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(res.Body, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		cancel()
		n, err := io.Copy(io.Discard, res.Body)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: %d more bytes, error %v, want context.Canceled", n, err)
		}
		if 1000+n >= int64(len(b.large)) {
			t.Fatalf("the whole body arrived after the cancel")
		}
		res.Body.Close()
		if n := c.idleCount(); n != 0 {
			t.Errorf("%d idle connections after a cancelled body, want 0", n)
		}
	})

	t.Run("a cancelled context fails the request", func(t *testing.T) {
		c, _ := countingClient()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := c.RoundTrip(b.request(t, ctx, http.MethodGet, "small", nil)); !errors.Is(err, context.Canceled) {
			t.Fatalf("RoundTrip with a cancelled context: %v, want context.Canceled", err)
		}
	})

}

// TestClientRetriesStaleConnection: MinIO closes connections left idle
// longer than its idle timeout; the next GET, given one of them from the
// pool, is sent again on a new connection, not on the other stale one.
func TestClientRetriesStaleConnection(t *testing.T) {
	b := startBackend(t, "MINIO_IDLE_TIMEOUT=1s")
	c, dials := countingClient()
	// Two responses open at once: two connections, both pooled after.
	first, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "small", nil))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "small", nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, first)
	readAll(t, second)
	c.mu.Lock()
	var pooled []*conn
	for _, l := range c.idle {
		pooled = append(pooled, l...)
	}
	c.mu.Unlock()
	if len(pooled) != 2 {
		t.Fatalf("%d pooled connections, want 2", len(pooled))
	}
	// Wait until MinIO has closed both: a read sees EOF.
	deadline := time.Now().Add(30 * time.Second)
	for _, cn := range pooled {
		for {
			cn.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := cn.br.Peek(1); err == io.EOF {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("MinIO did not close the idle connection: %v", err)
			}
		}
		cn.nc.SetReadDeadline(time.Time{})
		cn.br.Reset(cn.nc)
	}
	res, err := c.RoundTrip(b.request(t, t.Context(), http.MethodGet, "small", nil))
	if err != nil {
		t.Fatalf("GET on a connection MinIO had closed: %v", err)
	}
	if got := readAll(t, res); !bytes.Equal(got, b.small) {
		t.Fatalf("GET: %d bytes", len(got))
	}
	if n := dials.Load(); n != 3 {
		t.Errorf("dialled %d connections, want 3", n)
	}
}

// TestClientDropsSwitchedConnection: a connection that answered 101
// Switching Protocols no longer speaks HTTP/1.1 and is never pooled. MinIO
// never switches protocol, so a bare TCP server answers here.
func TestClientDropsSwitchedConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := http.ReadRequest(bufio.NewReader(nc)); err != nil {
			return
		}
		io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(io.Discard, nc)
	}()
	c, _ := countingClient()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+l.Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", res.StatusCode)
	}
	if n := c.idleCount(); n != 0 {
		t.Errorf("%d idle connections after a protocol switch, want 0", n)
	}
}
