//go:build e2e

package e2e

// The client's address behind trusted proxies: X-Forwarded-For from an
// HTTP reverse proxy, the PROXY protocol from a TCP load balancer, and
// MinIO's aws:SourceIp conditions holding for that address.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// proxyAddr is the loopback address the trusted proxies connect from
// (trusted_proxies); the test's direct clients connect from 127.0.0.1,
// which is not trusted. allowedClient is the client address the MinIO
// policy allows, otherClient one it does not.
const (
	proxyAddr     = "127.0.0.2"
	allowedClient = "203.0.113.7"
	otherClient   = "198.51.100.9"
)

// sourceIPPolicy is the documented policy (docs/deployment.md, "Behind a
// load balancer"): reads and writes in bucket, only from client's address.
func sourceIPPolicy(bucket, client string) string {
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",` +
		`"Action":["s3:GetObject","s3:PutObject","s3:AbortMultipartUpload"],` +
		`"Resource":["arn:aws:s3:::` + bucket + `/*"],` +
		`"Condition":{"IpAddress":{"aws:SourceIp":["` + client + `/32"]}}}]}`
}

// proxyDialer dials from proxyAddr, as the trusted proxies do.
var proxyDialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(proxyAddr)}, Timeout: 5 * time.Second}

// xffProxy is an HTTP reverse proxy on loopback in front of the gateway,
// connecting from proxyAddr: it appends the address of the client it
// stands for (client, which the test sets) to X-Forwarded-For, as a load
// balancer appends the address its client connected from.
type xffProxy struct {
	URL    string
	client atomic.Pointer[string]
}

func startXFFProxy(t *testing.T, gateway string) *xffProxy {
	t.Helper()
	target, err := url.Parse(gateway)
	if err != nil {
		t.Fatal(err)
	}
	p := &xffProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the signature covers the host
			if prior := r.In.Header.Values("X-Forwarded-For"); len(prior) > 0 {
				r.Out.Header["X-Forwarded-For"] = []string{strings.Join(prior, ", ") + ", " + *p.client.Load()}
			} else {
				r.Out.Header.Set("X-Forwarded-For", *p.client.Load())
			}
		},
		Transport: &http.Transport{DialContext: proxyDialer.DialContext},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	p.URL = "http://" + l.Addr().String()
	return p
}

// proxyProtocolClient returns a client whose every connection comes from
// proxyAddr (or, with untrusted, from 127.0.0.1) and starts with a PROXY
// protocol header naming src as its source: version 2 when v2 is set,
// version 1 otherwise.
func proxyProtocolClient(src string, v2, untrusted bool) *http.Client {
	d := proxyDialer
	if untrusted {
		d = &net.Dialer{Timeout: 5 * time.Second}
	}
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			dst := c.RemoteAddr().(*net.TCPAddr).AddrPort()
			if _, err := c.Write(proxyHeader(netip.MustParseAddrPort(src+":40000"), dst, v2)); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
	}}
}

// proxyHeader renders a PROXY protocol header for a TCP over IPv4
// connection from src to dst.
func proxyHeader(src, dst netip.AddrPort, v2 bool) []byte {
	if !v2 {
		return fmt.Appendf(nil, "PROXY TCP4 %s %s %d %d\r\n", src.Addr(), dst.Addr(), src.Port(), dst.Port())
	}
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c")
	b = append(b, src.Addr().AsSlice()...)
	b = append(b, dst.Addr().AsSlice()...)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	return binary.BigEndian.AppendUint16(b, dst.Port())
}

// TestClientAddressBehindProxies runs a gateway that trusts proxyAddr and
// reads PROXY headers, with a credential whose backend identity is a MinIO
// user whose policy allows only allowedClient (aws:SourceIp): requests
// from allowedClient through either kind of trusted proxy are allowed,
// from any other address denied by MinIO, and no client can claim
// allowedClient itself, with forwarding headers sent directly or through
// the proxy, or with a PROXY header from an untrusted address. The
// request log and the audit line name the client's address.
func TestClientAddressBehindProxies(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	ctx := t.Context()
	bucket, g, e, direct := startSourceIPGateway(t)
	xff := startXFFProxy(t, g.Endpoint)
	put := func(t *testing.T, c *http.Client, endpoint, key string, header ...string) *http.Response {
		t.Helper()
		req := signed(t, e, newRequest(t, http.MethodPut, objectURL(g.Endpoint, bucket, key), []byte("by "+key)), harness.UnsignedPayload)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1]) // unsigned, as a client adds them
		}
		u, _ := url.Parse(endpoint)
		// The connection goes there; Host stays the gateway's.
		req.URL.Scheme, req.URL.Host = u.Scheme, u.Host
		return do(t, c, req)
	}
	allowed := func(t *testing.T, resp *http.Response, key string) {
		t.Helper()
		requireStatus(t, resp, http.StatusOK)
		out, err := direct.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s on MinIO: %v", key, err)
		}
		defer out.Body.Close()
		if b, _ := io.ReadAll(out.Body); string(b) != "by "+key {
			t.Fatalf("%s on MinIO holds %q", key, b)
		}
	}
	denied := func(t *testing.T, resp *http.Response, key string) {
		t.Helper()
		requireRefusal(t, resp, "403 AccessDenied")
		requireAbsent(t, direct, bucket, key)
	}
	plain := &http.Client{}

	t.Run("X-Forwarded-For", func(t *testing.T) {
		xff.client.Store(ptr(allowedClient))
		allowed(t, put(t, plain, xff.URL, "xff-allowed"), "xff-allowed")
		xff.client.Store(ptr(otherClient))
		denied(t, put(t, plain, xff.URL, "xff-other"), "xff-other")
		// The client's own entry is left of the proxy's, which names it.
		denied(t, put(t, plain, xff.URL, "xff-spoof", "X-Forwarded-For", allowedClient), "xff-spoof")
	})
	t.Run("PROXY protocol", func(t *testing.T) {
		for _, v2 := range []bool{false, true} {
			key := fmt.Sprintf("pp-v2-%t", v2)
			allowed(t, put(t, proxyProtocolClient(allowedClient, v2, false), g.Endpoint, key), key)
			denied(t, put(t, proxyProtocolClient(otherClient, v2, false), g.Endpoint, key+"-other"), key+"-other")
		}
		// A bodiless GET goes to MinIO by another client of the gateway's
		// (backend/h1client), with the same header.
		getFrom := func(src string) *http.Response {
			req := newRequest(t, http.MethodGet, objectURL(g.Endpoint, bucket, "pp-v2-true"), nil)
			return do(t, proxyProtocolClient(src, true, false), signed(t, e, req, harness.EmptySHA256))
		}
		if b := requireStatus(t, getFrom(allowedClient), http.StatusOK); string(b) != "by pp-v2-true" {
			t.Errorf("GET from %s: %q", allowedClient, b)
		}
		requireRefusal(t, getFrom(otherClient), "403 AccessDenied")
		// The HTTPS listener reads the header before the TLS handshake.
		tlsClient := proxyProtocolClient(allowedClient, false, false)
		tlsClient.Transport.(*http.Transport).TLSClientConfig = g.TLSConfig()
		allowed(t, put(t, tlsClient, g.TLSEndpoint, "pp-tls"), "pp-tls")
	})
	t.Run("untrusted", func(t *testing.T) {
		// Directly, from 127.0.0.1, with every header MinIO reads an
		// address from.
		denied(t, put(t, plain, g.Endpoint, "direct-spoof", "X-Forwarded-For", allowedClient,
			"X-Real-Ip", allowedClient, "Forwarded", "for="+allowedClient), "direct-spoof")
		// A PROXY header from an address that is not a trusted proxy: the
		// connection is refused before any request.
		for _, v2 := range []bool{false, true} {
			req := signed(t, e, newRequest(t, http.MethodPut, objectURL(g.Endpoint, bucket, "pp-untrusted"), []byte("x")), harness.UnsignedPayload)
			if resp, err := proxyProtocolClient(allowedClient, v2, true).Do(req); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Fatalf("a PROXY header from 127.0.0.1 was served: %s %s", resp.Status, body)
			}
		}
		requireAbsent(t, direct, bucket, "pp-untrusted")
	})
	t.Run("log and audit", func(t *testing.T) { logNamesClient(t, g, e.Region, bucket) })
}

func ptr[T any](v T) *T { return &v }

// requireLogLine waits for the gateway's JSON log line that match selects
// and checks that its attribute key is want.
func requireLogLine(t *testing.T, g *harness.Gateway, match func(map[string]any) bool, key, want string) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		logs, err := os.ReadFile(g.LogFile)
		if err != nil {
			return false, err.Error()
		}
		sc := bufio.NewScanner(bytes.NewReader(logs))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) != nil || !match(l) {
				continue
			}
			if got := fmt.Sprint(l[key]); got != want {
				t.Fatalf("log line %s: %s is %q, want %q", sc.Bytes(), key, got, want)
			}
			return true, ""
		}
		return false, "no such log line yet"
	})
}

// logNamesClient creates and aborts an upload from allowedClient behind
// the PROXY protocol, by the credential that owns it, and checks that the
// abort's audit line and its request line name allowedClient.
func logNamesClient(t *testing.T, g *harness.Gateway, region, bucket string) {
	ctx := t.Context()
	c := harness.NewS3Client(g.Endpoint, region, "ipc", "ipc-secret-12345", proxyProtocolClient(allowedClient, true, false).Transport, true)
	id := createUpload(t, c, bucket, "aborted")
	if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("aborted"), UploadId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	requireLogLine(t, g, func(l map[string]any) bool {
		return l["msg"] == "audit" && l["action"] == "abort_upload" && strings.Contains(fmt.Sprint(l["what"]), id)
	}, "client", allowedClient)
	requireLogLine(t, g, func(l map[string]any) bool {
		return l["msg"] == "request" && l["op"] == "AbortMultipartUpload"
	}, "client", allowedClient)
}

// startSourceIPGateway starts MinIO with a user whose policy allows only
// allowedClient (aws:SourceIp) on a new bucket, and a gateway that trusts
// proxyAddr (X-Forwarded-For and the PROXY protocol) and signs its one
// client credential's requests as that user.
func startSourceIPGateway(t *testing.T) (bucket string, g *harness.Gateway, e *harness.Env, direct *s3.Client) {
	t.Helper()
	m := harness.StartMinIO(t)
	ctx := t.Context()
	bucket = harness.BucketName(t)
	if err := m.AddUser(ctx, "iponly", "iponly-secret-1", sourceIPPolicy(bucket, allowedClient)); err != nil {
		t.Fatal(err)
	}
	g = harness.StartGateway(t, m, harness.Options{Config: map[string]any{
		"trusted_proxies": []string{proxyAddr + "/32"},
		"proxy_protocol":  true,
		"backend": map[string]any{"identities": []map[string]any{
			{"name": "iponly", "access_key": "iponly", "secret_key": "iponly-secret-1"},
		}},
		"credentials": []map[string]any{{"access_key": "ipc", "secret_key": "ipc-secret-12345", "backend": "iponly"}},
	}})
	e = &harness.Env{MinIO: m, Gateway: g, Endpoint: g.Endpoint, AccessKey: "ipc", SecretKey: "ipc-secret-12345", Region: m.Region}
	direct = e.DirectSDK(t)
	if _, err := direct.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return bucket, g, e, direct
}
