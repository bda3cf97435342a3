package sigv4

// Credential is one access key the gateway accepts from clients, with the
// secret it shares with them and the principal the key acts as, which is what
// the gateway records as the owner of what the request creates. Backend
// names the backend identity the gateway signs the key's requests with;
// the verifier only passes it on (Result.Backend).
type Credential struct {
	AccessKey string
	SecretKey string
	Principal string
	Backend   string
}

// Credentials finds the secret for an access key. The verifier needs only
// this lookup, so any store (a static table, a file reloaded on change)
// can back it.
type Credentials interface {
	Lookup(accessKey string) (Credential, bool)
}

// StaticCredentials is a fixed credentials table keyed by access key, for
// configurations whose keys are known at start-up (and for tests).
type StaticCredentials map[string]Credential

// NewStaticCredentials builds a table from a list of credentials. A later
// entry with the same access key replaces an earlier one.
func NewStaticCredentials(creds ...Credential) StaticCredentials {
	m := make(StaticCredentials, len(creds))
	for _, c := range creds {
		m[c.AccessKey] = c
	}
	return m
}

// Lookup returns the credential for accessKey. An entry with an empty
// secret is treated as absent so that a half-configured key can never be
// used with an empty signing secret.
func (s StaticCredentials) Lookup(accessKey string) (Credential, bool) {
	c, ok := s[accessKey]
	if !ok || c.SecretKey == "" {
		return Credential{}, false
	}
	return c, true
}
