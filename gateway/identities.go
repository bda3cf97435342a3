package gateway

import (
	"errors"
	"fmt"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

// Keys is the gateway's key material, installed whole by SetKeys: the
// client credentials the verifier accepts and the backend identities their
// requests are signed with.
type Keys struct {
	// Clients are the keys clients sign with. Each one's Backend names the
	// identity its requests are signed with; "" means
	// backend.DefaultIdentity.
	Clients []sigv4.Credential
	// Identities are the backend identities, installed in the backend
	// client with the clients.
	Identities *backend.Identities
}

// keySet is one installed Keys, never changed once built: a request keeps
// the set it started with, whatever SetKeys installs meanwhile, and is
// signed with the identity its credential names in that set.
type keySet struct {
	verifier   *sigv4.Verifier
	identities *backend.Identities
}

// SetKeys checks k and installs it for every request that starts after it
// returns; requests under way finish with the keys they started with. On
// an error nothing changes. It refuses keys in which a client credential
// names an identity that is not configured, a key or secret is empty, an
// access key is listed twice, or no client credential is left. It is safe
// to call at any time, from any goroutine (a reload calls it with keys
// built from a freshly loaded configuration).
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
// it, having changed nothing. Installing puts the identities in the
// backend client too, for the calls made outside a client request.
func (g *Gateway) PrepareKeys(k Keys) (install func(), err error) {
	ks, err := g.newKeySet(k)
	if err != nil {
		return nil, err
	}
	return func() {
		g.backend.SetIdentities(ks.identities)
		g.keys.Store(ks)
	}, nil
}

// newKeySet builds the key set of k.
func (g *Gateway) newKeySet(k Keys) (*keySet, error) {
	if k.Identities == nil {
		return nil, errors.New("no backend identities configured")
	}
	if len(k.Clients) == 0 {
		return nil, errors.New("no client credentials configured: nobody could sign in")
	}
	clients := make([]sigv4.Credential, len(k.Clients))
	seen := make(map[string]bool, len(k.Clients))
	for i, c := range k.Clients {
		if c.Backend == "" {
			c.Backend = backend.DefaultIdentity
		}
		switch {
		case c.AccessKey == "" || c.SecretKey == "":
			return nil, fmt.Errorf("client credential %d: access key and secret key are required", i+1)
		case seen[c.AccessKey]:
			return nil, fmt.Errorf("client access key %q is listed twice", c.AccessKey)
		case k.Identities.Signer(c.Backend) == nil:
			return nil, fmt.Errorf("client access key %q names backend identity %q, which is not configured", c.AccessKey, c.Backend)
		}
		seen[c.AccessKey] = true
		clients[i] = c
	}
	return &keySet{
		identities: k.Identities,
		verifier: &sigv4.Verifier{
			Credentials: sigv4.NewStaticCredentials(clients...),
			Region:      g.verify.region,
			MaxSkew:     g.verify.maxSkew,
			Now:         g.now,
		},
	}, nil
}
