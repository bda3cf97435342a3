package backend

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

// Config is what a Client needs to know.
type Config struct {
	// Endpoint is the URL of the backing S3 server, e.g.
	// http://127.0.0.1:9100.
	Endpoint string
	// RootCAs are the certificate authorities an https backend's
	// certificate must chain to; nil uses the system's roots.
	RootCAs *x509.CertPool
	// Identities sign the calls until SetIdentities installs others.
	Identities *Identities
	// Now is the clock signatures are dated by; time.Now when nil.
	Now func() time.Time
	// Tracer, when set, makes a client span of every call made under a
	// span (a request's, a reclaimer pass's) and sends the backend that
	// span's traceparent; nil makes none and sends no traceparent.
	Tracer trace.Tracer
}

// Client is the signed connection to the backend. It is safe for
// concurrent use.
type Client struct {
	endpoint   *url.URL
	identities atomic.Pointer[Identities]
	// transport signs each request with the identity its context asks for
	// (signer) and sends it.
	transport *signingTransport
	// check sends the readiness check's calls, with a time limit of its own.
	check *http.Client
}

// New returns the client of cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("backend endpoint %q: want an http:// or https:// URL", cfg.Endpoint)
	}
	if cfg.Identities == nil {
		return nil, fmt.Errorf("backend: no identities to sign with")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Client{endpoint: u}
	c.identities.Store(cfg.Identities)
	c.transport = &signingTransport{base: newTransport(cfg.RootCAs), signer: c.signer, now: cfg.Now, tracer: cfg.Tracer, host: u.Host}
	c.check = &http.Client{Transport: c.transport, Timeout: 10 * time.Second}
	return c, nil
}

// NewStatic returns a client that signs every call with one key, for
// callers that serve no clients (tools, tests).
func NewStatic(endpoint, region, accessKey, secretKey string) (*Client, error) {
	ids, err := NewIdentities(map[string]Key{DefaultIdentity: {AccessKey: accessKey, SecretKey: secretKey}}, "", region, nil)
	if err != nil {
		return nil, err
	}
	return New(Config{Endpoint: endpoint, Identities: ids})
}

// Identities returns the identities installed now.
func (c *Client) Identities() *Identities { return c.identities.Load() }

// SetIdentities installs ids for every call sent after it returns.
func (c *Client) SetIdentities(ids *Identities) { c.identities.Store(ids) }

// signer picks the signer of a call: its Caller's, when its context
// carries one, and the background identity otherwise.
func (c *Client) signer(req *http.Request) (*sigv4.Signer, error) {
	if caller := CallerFrom(req.Context()); caller != nil {
		if caller.Signer == nil {
			return nil, ErrNotAuthenticated
		}
		return caller.Signer, nil
	}
	return c.identities.Load().Background(), nil
}

// Transport returns the transport that signs and sends a prepared request
// (Address points it at the backend), for a proxy that streams the answer
// itself.
func (c *Client) Transport() http.RoundTripper { return c.transport }

// Address points u at the backend's path-style address of bucket and key.
func (c *Client) Address(u *url.URL, bucket, key string) {
	u.Scheme, u.Host = c.endpoint.Scheme, c.endpoint.Host
	u.Path, u.RawPath = Path(bucket, key)
}

// NewRequest builds a path-style request to the backend with no body.
func (c *Client) NewRequest(ctx context.Context, method, bucket, key string, query url.Values) (*http.Request, error) {
	u := *c.endpoint
	c.Address(&u, bucket, key)
	u.RawQuery = query.Encode()
	return http.NewRequestWithContext(ctx, method, u.String(), nil)
}

// RoundTrip signs and sends a request. For a call made for a client
// request, it reports the call's duration and the backend's request id to
// the Caller (Caller.Done), since the answer the client gets carries the
// gateway's id instead.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := c.transport.RoundTrip(req)
	if caller := CallerFrom(req.Context()); caller != nil && caller.Done != nil {
		id := ""
		if err == nil {
			id = resp.Header.Get("X-Amz-Request-Id")
		}
		caller.Done(time.Since(start), id)
	}
	return resp, err
}

// Path is the path-style path of bucket and key on the backend, as
// (decoded, escaped). The escaped form encodes every byte but the
// unreserved characters and '/', which is how S3 and its signature expect
// a path. An empty bucket is the service root.
func Path(bucket, key string) (string, string) {
	if bucket == "" {
		return "/", "/"
	}
	p := "/" + bucket
	if key != "" {
		p += "/" + key
	}
	return p, EscapePath(p)
}

// EscapePath percent-encodes s as an S3 object path: every byte except
// A-Z a-z 0-9 - . _ ~ and / becomes %XX.
func EscapePath(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
