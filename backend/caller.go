package backend

import (
	"context"
	"errors"
	"time"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

// Caller is the client request a backend call is made for. The gateway
// attaches one to a request's context before anything can call the backend
// for it, and sets Signer once the request's signature is verified; its
// fields are not changed after that.
type Caller struct {
	// Signer signs the calls with the client's backend identity; nil until
	// the request is verified, and a call made then is refused
	// (ErrNotAuthenticated).
	Signer *sigv4.Signer
	// RequestID is the gateway's id of the request, sent to the backend in
	// RequestIDHeader so that its logs tie each call to the request.
	RequestID string
	// ClientAddr is the address of the client the request came from, as
	// the gateway resolved it (package clientip); empty when unknown. Every
	// call made for the request carries it to the backend in
	// ClientAddrHeader, which is where MinIO takes aws:SourceIp from.
	ClientAddr string
	// Done, when set, is called after each call made through Client.RoundTrip
	// (the services' calls; the proxy's go through Client.Transport) with
	// how long it took and, when it was answered, the backend's request id.
	Done func(elapsed time.Duration, backendRequestID string)
}

type callerKey struct{}

// WithCaller returns ctx carrying c: calls made under it are made for c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller ctx carries, or nil for background work.
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// ErrNotAuthenticated refuses a backend call made for a client request
// before its signature was verified: there is no identity to sign it with.
var ErrNotAuthenticated = errors.New("backend: call for a request that is not authenticated")

// RequestIDHeader carries the gateway's request id on every backend call
// made for a client request. A client's own value is never passed on.
const RequestIDHeader = "X-Sweepgate-Request-Id"

// ClientAddrHeader carries the client's address (Caller.ClientAddr) on
// every backend call made for a client request: MinIO reads X-Forwarded-For
// first of the headers it takes a request's source address from
// (aws:SourceIp in policy conditions), and its first entry. The transport
// sets it, after removing every header MinIO reads a source address from
// (connectionHeaders), so a client's own never reaches the backend.
const ClientAddrHeader = "X-Forwarded-For"

// connectionHeaders are the headers in which a proxy tells MinIO about the
// client's connection: those it takes a request's source address from, in
// the order it reads them, and the scheme and host it writes into response
// URLs. The transport removes every one from every backend call: what the
// backend is told about the connection comes from the gateway alone.
var connectionHeaders = []string{"X-Forwarded-For", "X-Real-Ip", "Forwarded", "X-Forwarded-Host", "X-Forwarded-Proto"}

// ClientAddr returns the client address of the request ctx serves, or ""
// for background work, for the log and audit lines of what it causes.
func ClientAddr(ctx context.Context) string {
	if c := CallerFrom(ctx); c != nil {
		return c.ClientAddr
	}
	return ""
}
