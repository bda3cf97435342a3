package gateway

import (
	"bytes"
	"context"
	"fmt"

	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3err"
)

// SessionsConfig turns on sweepgate's multipart sessions: the multipart calls
// are served by a multipart.Service that keeps their state in etcd.
type SessionsConfig struct {
	Store *etcdstore.Store
	// EnforceOwnership limits each upload to the principal that created it
	// and the AdminPrincipals.
	EnforceOwnership bool
	AdminPrincipals  []string
	// IdempotencyRetention is how long an Idempotency-Key's outcome is kept.
	IdempotencyRetention time.Duration
	// CompleteHold: see multipart.Config.
	CompleteHold time.Duration
	// Fault lets tests stop the process at a named point (multipart.Fault*).
	Fault func(point string)
}

// Sessions returns the multipart session service, or nil when sessions are
// off. The reconciler runs through it.
func (g *Gateway) Sessions() *multipart.Service { return g.sessions }

// Backend returns the gateway's signed connection to the backend, for
// components that call it outside a client request (the reclaimer): a call
// whose context carries no client request is signed with the background
// identity of the key set installed when it is sent.
func (g *Gateway) Backend() multipart.Backend { return g.backendClient }

// backendClient is the gateway's signed connection to the backend, in the
// form the multipart service asks for.
type backendClient struct {
	endpoint  *url.URL
	transport http.RoundTripper
	// observe, when set, records the duration of a call made for a client
	// request.
	observe func(Operation, time.Duration)
}

// NewRequest builds a path-style backend request with no body.
func (b *backendClient) NewRequest(ctx context.Context, method, bucket, key string, query url.Values) (*http.Request, error) {
	path, rawPath := backendPath(Route{Bucket: bucket, Key: key})
	u := *b.endpoint
	u.Path, u.RawPath = path, rawPath
	u.RawQuery = query.Encode()
	return http.NewRequestWithContext(ctx, method, u.String(), nil)
}

// RoundTrip signs and sends a backend request. For a client's request (the
// session service's calls), it notes the backend's request id for the
// request's log line, since the answer's error document will carry the
// gateway's id instead.
func (b *backendClient) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := b.transport.RoundTrip(req)
	r := requestFrom(req.Context())
	if r != nil && b.observe != nil {
		// The session service's backend calls on behalf of a client
		// request are timed under that request's operation, as the
		// proxy's are.
		b.observe(r.route.Operation, time.Since(start))
	}
	if err == nil && r != nil {
		r.setBackendRequestID(resp.Header.Get("X-Amz-Request-Id"))
	}
	return resp, err
}

// hopByHop are the connection-level request headers that are not forwarded.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// errBodyTooLarge refuses a request body the gateway must read whole (a
// CompleteMultipartUpload document) when it is larger than it may be.
var errBodyTooLarge = &s3err.Error{Code: "MaxMessageLengthExceeded", Message: "Your request was too big.", HTTPStatus: http.StatusBadRequest}

// serveMultipart hands a multipart call to the session service, with the
// means to read and forward its verified body.
func (g *Gateway) serveMultipart(w http.ResponseWriter, r *http.Request, req *request) {
	q := r.URL.Query()
	payload := req.auth.Payload
	call := &multipart.Call{
		Op:             multipart.Op(req.route.Operation),
		Bucket:         req.route.Bucket,
		Key:            req.route.Key,
		UploadID:       q.Get("uploadId"),
		PartNumber:     q.Get("partNumber"),
		Principal:      req.auth.Principal,
		RequestID:      req.id,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Resource:       r.URL.Path,
		Header:         r.Header,
		Observe:        payload.Observe,
		PayloadErr:     payload.Err,
		ReadBody: func(limit int64) ([]byte, error) {
			b, err := io.ReadAll(io.LimitReader(payload.Body(), limit+1))
			if err != nil {
				return nil, err
			}
			if int64(len(b)) > limit {
				return nil, errBodyTooLarge
			}
			return b, nil
		},
		BackendRequest: func(body []byte) (*http.Request, error) {
			return g.backendRequest(r, req, body)
		},
	}
	g.sessions.Serve(r.Context(), w, call)
}

// backendRequest builds the backend request for a client request that the
// session service forwards: the client's payload as verified, or body.
func (g *Gateway) backendRequest(in *http.Request, req *request, body []byte) (*http.Request, error) {
	out := in.Clone(in.Context())
	out.RequestURI = ""
	out.Close = false
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	g.addressBackend(out, in, req)
	// The session service reads some answers itself (XML it parses and may
	// rewrite): they must not come back compressed.
	out.Header.Del("Accept-Encoding")
	outbound := req.auth.Payload.Outbound()
	if body == nil {
		if err := outbound.Apply(out); err != nil {
			return nil, err
		}
		return out, nil
	}
	for _, h := range outbound.Remove {
		out.Header.Del(h)
	}
	out.TransferEncoding = nil
	out.Header.Del("Content-Length")
	out.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	out.ContentLength = int64(len(body))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = nil
	if len(body) == 0 {
		out.Body = http.NoBody
	}
	return out, nil
}

// NewBackendClient returns a connection to an S3 backend that signs every
// request with accessKey, in the form the multipart service uses, for
// callers outside a Gateway (tests, tools).
func NewBackendClient(endpoint, region, accessKey, secretKey string) (multipart.Backend, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("backend endpoint %q: want an http:// or https:// URL", endpoint)
	}
	if region == "" {
		region = DefaultRegion
	}
	signer := fixedSigner(BackendKey{AccessKey: accessKey, SecretKey: secretKey}, region)
	return &backendClient{endpoint: u, transport: newBackendTransport(signer, time.Now, nil)}, nil
}
