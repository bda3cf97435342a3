package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

// DefaultIdentity names the backend identity of Config.BackendAccessKey
// and Config.BackendSecretKey (backend.access_key and backend.secret_key):
// the one a client credential without a backend identity, and the gateway's
// own background work unless told otherwise, are signed with.
const DefaultIdentity = "default"

// BackendKey is the access key and secret of one backend identity.
type BackendKey struct {
	AccessKey, SecretKey string
}

// Keys is the gateway's key material, installed whole by SetKeys: the
// client credentials the verifier accepts and the backend identities the
// gateway signs with.
type Keys struct {
	// Clients are the keys clients sign with. Each one's Backend names the
	// identity its requests are signed with; "" means DefaultIdentity.
	Clients []sigv4.Credential
	// Backend holds the backend identities by name; DefaultIdentity must
	// be among them.
	Backend map[string]BackendKey
	// Background names the identity of every backend call made outside a
	// client request (the reconciler, the reclaimer and its digest sweep,
	// the readiness check); "" means DefaultIdentity.
	Background string
}

// keySet is one installed Keys, never changed once built: a request keeps
// the set it started with, whatever SetKeys installs meanwhile.
type keySet struct {
	verifier *sigv4.Verifier
	// signers holds a signer per backend identity; every client
	// credential's identity is in it.
	signers    map[string]*sigv4.Signer
	background *sigv4.Signer
}

// SetKeys checks k and installs it for every request that starts after it
// returns; requests under way finish with the keys they started with. On
// an error nothing changes. It refuses keys in which a client credential or
// the background names an identity that is not configured, a key or secret
// is empty, an access key is listed twice, or no client credential is left.
// It is safe to call at any time, from any goroutine (a reload calls it
// with keys built from a freshly loaded configuration).
func (g *Gateway) SetKeys(k Keys) error {
	install, err := g.PrepareKeys(k)
	if err != nil {
		return err
	}
	install()
	return nil
}

// PrepareKeys is SetKeys in two steps, for a reload that applies several
// pieces or none: it checks k as SetKeys does and returns what installs
// it, having changed nothing.
func (g *Gateway) PrepareKeys(k Keys) (install func(), err error) {
	ks, err := g.newKeySet(k, g.keys.Load())
	if err != nil {
		return nil, err
	}
	return func() { g.keys.Store(ks) }, nil
}

// newKeySet builds the key set of k, reusing old's signers for identities
// whose key did not change (their derived keys stay cached).
func (g *Gateway) newKeySet(k Keys, old *keySet) (*keySet, error) {
	if _, ok := k.Backend[DefaultIdentity]; !ok {
		return nil, fmt.Errorf("backend identity %q (backend.access_key, backend.secret_key) is required", DefaultIdentity)
	}
	if len(k.Clients) == 0 {
		return nil, errors.New("no client credentials configured: nobody could sign in")
	}
	ks := &keySet{signers: make(map[string]*sigv4.Signer, len(k.Backend))}
	for name, key := range k.Backend {
		switch {
		case name == "":
			return nil, errors.New("a backend identity has no name")
		case key.AccessKey == "" || key.SecretKey == "":
			return nil, fmt.Errorf("backend identity %q: access key and secret key are required", name)
		}
		if s := old.signer(name); s != nil && s.AccessKey == key.AccessKey && s.SecretKey == key.SecretKey {
			ks.signers[name] = s
			continue
		}
		ks.signers[name] = &sigv4.Signer{AccessKey: key.AccessKey, SecretKey: key.SecretKey, Region: g.backendRegion, Service: "s3"}
	}
	clients := make([]sigv4.Credential, len(k.Clients))
	seen := make(map[string]bool, len(k.Clients))
	for i, c := range k.Clients {
		if c.Backend == "" {
			c.Backend = DefaultIdentity
		}
		switch {
		case c.AccessKey == "" || c.SecretKey == "":
			return nil, fmt.Errorf("client credential %d: access key and secret key are required", i+1)
		case seen[c.AccessKey]:
			return nil, fmt.Errorf("client access key %q is listed twice", c.AccessKey)
		case ks.signers[c.Backend] == nil:
			return nil, fmt.Errorf("client access key %q names backend identity %q, which is not configured", c.AccessKey, c.Backend)
		}
		seen[c.AccessKey] = true
		clients[i] = c
	}
	bg := k.Background
	if bg == "" {
		bg = DefaultIdentity
	}
	if ks.background = ks.signers[bg]; ks.background == nil {
		return nil, fmt.Errorf("background backend identity %q is not configured", bg)
	}
	ks.verifier = &sigv4.Verifier{
		Credentials: sigv4.NewStaticCredentials(clients...),
		Region:      g.verify.region,
		MaxSkew:     g.verify.maxSkew,
		Now:         g.now,
	}
	return ks, nil
}

// signer returns the signer of the identity name, nil when there is none
// (or no key set).
func (ks *keySet) signer(name string) *sigv4.Signer {
	if ks == nil {
		return nil
	}
	return ks.signers[name]
}

// errNotAuthenticated refuses a backend call made for a client request
// before its signature was verified: there is no identity to sign it with.
var errNotAuthenticated = errors.New("gateway: backend call for a request that is not authenticated")

// backendSigner picks the signer of a backend request: the identity of the
// client whose request it serves, when its context carries one (the proxy's
// calls and every call a service makes while serving the request), and
// otherwise the background identity of the key set installed now. So a
// call made for a client is never signed with the background identity nor
// a background call with a client's, as long as background work never
// runs under a client request's context.
func (g *Gateway) backendSigner(r *http.Request) (*sigv4.Signer, error) {
	if req := requestFrom(r.Context()); req != nil {
		if req.signer == nil {
			return nil, errNotAuthenticated
		}
		return req.signer, nil
	}
	return g.keys.Load().background, nil
}
