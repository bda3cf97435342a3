package backend

import (
	"errors"
	"fmt"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

// DefaultIdentity names the identity of backend.access_key and
// backend.secret_key: the one a client credential without a backend
// identity, and the background work unless told otherwise, are signed with.
const DefaultIdentity = "default"

// DefaultRegion is the region backend requests are signed for when none is
// configured.
const DefaultRegion = "us-east-1"

// Key is the access key and secret of one backend identity.
type Key struct {
	AccessKey, SecretKey string
}

// Identities are the backend identities requests are signed with, by name,
// and the one that signs the calls made outside a client request. A set is
// never changed once built.
type Identities struct {
	signers    map[string]*sigv4.Signer
	background *sigv4.Signer
}

// NewIdentities builds the identities of keys, signing for region
// (DefaultRegion when empty). background names the identity of the calls
// made outside a client request; "" is DefaultIdentity. It refuses a set
// without DefaultIdentity, an identity without a name, key or secret, and a
// background identity that is not in keys. Signers of reuse whose key did
// not change are kept, so their derived keys stay cached.
func NewIdentities(keys map[string]Key, background, region string, reuse *Identities) (*Identities, error) {
	if region == "" {
		region = DefaultRegion
	}
	if _, ok := keys[DefaultIdentity]; !ok {
		return nil, fmt.Errorf("backend identity %q (backend.access_key, backend.secret_key) is required", DefaultIdentity)
	}
	ids := &Identities{signers: make(map[string]*sigv4.Signer, len(keys))}
	for name, key := range keys {
		switch {
		case name == "":
			return nil, errors.New("a backend identity has no name")
		case key.AccessKey == "" || key.SecretKey == "":
			return nil, fmt.Errorf("backend identity %q: access key and secret key are required", name)
		}
		if s := reuse.Signer(name); s != nil && s.AccessKey == key.AccessKey && s.SecretKey == key.SecretKey && s.Region == region {
			ids.signers[name] = s
			continue
		}
		ids.signers[name] = &sigv4.Signer{AccessKey: key.AccessKey, SecretKey: key.SecretKey, Region: region, Service: "s3"}
	}
	if background == "" {
		background = DefaultIdentity
	}
	if ids.background = ids.signers[background]; ids.background == nil {
		return nil, fmt.Errorf("background backend identity %q is not configured", background)
	}
	return ids, nil
}

// Signer returns the signer of the identity name; nil when there is none
// (or ids is nil).
func (ids *Identities) Signer(name string) *sigv4.Signer {
	if ids == nil {
		return nil
	}
	return ids.signers[name]
}

// Background returns the signer of the calls made outside a client request.
func (ids *Identities) Background() *sigv4.Signer { return ids.background }
