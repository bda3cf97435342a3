package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sweepgate/sweepgate/gateway/h1client"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/s3client"
)

// emptySHA256 is the hex SHA-256 of an empty payload.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// signingTransport signs every request with a backend identity's key just
// before it is sent, so whatever prepared the request (the reverse proxy, a
// health check) only has to say which payload hash to sign with, in the
// X-Amz-Content-Sha256 header. signer picks the identity for each request
// (Gateway.backendSigner); a request it refuses is not sent.
type signingTransport struct {
	base   http.RoundTripper
	signer func(*http.Request) (*sigv4.Signer, error)
	now    func() time.Time
}

// requestIDHeader carries the gateway's request id on every backend call
// made for a client request, so that the backend's own logs and traces tie
// each call to the gateway's log line. A client's value is never passed on.
const requestIDHeader = "X-Sweepgate-Request-Id"

func (t *signingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	signer, err := t.signer(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	req.Header.Del(requestIDHeader)
	if r := requestFrom(req.Context()); r != nil {
		req.Header.Set(requestIDHeader, r.id)
	}
	payloadHash := req.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		payloadHash = emptySHA256
		req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	}
	// X-Amz-Date and Authorization are the signer's to set.
	req.Header.Del("Authorization")
	req.Header.Del("X-Amz-Date")
	signer.Sign(req, payloadHash, t.now())
	return t.base.RoundTrip(req)
}

// newBackendTransport returns the transport the gateway uses to reach the
// backend: it keeps many idle connections (clients send many small requests
// concurrently), never compresses (bytes pass through as they are), waits
// for 100-continue when the client asked for it, and signs each request
// with the signer that signer picks for it.
// roots, when not nil, are the certificate authorities an https backend's
// certificate must chain to, instead of the system's.
func newBackendTransport(signer func(*http.Request) (*sigv4.Signer, error), now func() time.Time, roots *x509.CertPool) http.RoundTripper {
	base := &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 5 * time.Second,
		DisableCompression:    true,
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
	}
	if roots != nil {
		base.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	direct := h1client.New(h1client.Options{
		DialTimeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		MaxIdlePerHost: 256, IdleTimeout: 90 * time.Second, ReadBufferSize: 64 << 10,
	})
	// The proxy hands the signer a path that is already escaped the way S3
	// wants it, and the signer signs it as it is. Its derived key is
	// cached per day.
	return &signingTransport{base: &splitTransport{direct: direct, std: base}, signer: signer, now: now}
}

// splitTransport sends bodiless GET and HEAD requests to a plain http
// backend with h1client, in the calling goroutine, and every other request
// (with a body, another method, an https backend) with net/http's
// Transport, on a pool of connections of its own. Both have the same dial,
// keep-alive and idle limits.
type splitTransport struct {
	direct *h1client.Client
	std    *http.Transport
}

func (t *splitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if h1client.Handles(req) {
		return t.direct.RoundTrip(req)
	}
	return t.std.RoundTrip(req)
}

// CloseIdleConnections closes both pools' idle connections.
func (t *splitTransport) CloseIdleConnections() {
	t.direct.CloseIdleConnections()
	t.std.CloseIdleConnections()
}

// fixedSigner signs every request with one key.
func fixedSigner(key BackendKey, region string) func(*http.Request) (*sigv4.Signer, error) {
	s := &sigv4.Signer{AccessKey: key.AccessKey, SecretKey: key.SecretKey, Region: region, Service: "s3"}
	return func(*http.Request) (*sigv4.Signer, error) { return s, nil }
}

// checkBackend proves the backend answers requests signed with the key in
// use: a ListBuckets call, or with buckets a one-key listing of each of
// them (so that a key allowed only those buckets passes), must come back
// with a status below 500, and not refuse the key itself. A listing the
// key's policy denies (AccessDenied) passes: the backend took the key, and
// the bucket is the reclaimer's report's to name (denied_buckets), not a
// reason to take the gateway out of service.
func checkBackend(ctx context.Context, client *http.Client, endpoint *url.URL, buckets []string) error {
	if len(buckets) == 0 {
		return checkBackendOnce(ctx, client, endpoint, "", nil)
	}
	for _, b := range buckets {
		if err := checkBackendOnce(ctx, client, endpoint, b, url.Values{"list-type": {"2"}, "max-keys": {"1"}}); err != nil {
			return fmt.Errorf("bucket %s: %w", b, err)
		}
	}
	return nil
}

func checkBackendOnce(ctx context.Context, client *http.Client, endpoint *url.URL, bucket string, q url.Values) error {
	u := *endpoint
	u.Path, u.RawPath = backendPath(Route{Bucket: bucket})
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("backend unreachable: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch code, _, _ := s3client.ErrorDocument(body); {
	case resp.StatusCode == http.StatusForbidden && bucket != "" && code == "AccessDenied":
		return nil
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("backend refuses the configured credentials (%s)", code)
	case resp.StatusCode >= 500:
		return fmt.Errorf("backend answered %s", resp.Status)
	}
	return nil
}
