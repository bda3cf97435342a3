package config

import (
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sweepgate/sweepgate/backend"
)

// BackendIdentity is a named backend key (backend.identities) that client
// credentials name to have their requests signed with it, so that the
// backend's policy for that key applies to them. backend.access_key and
// backend.secret_key are the identity named backend.DefaultIdentity.
type BackendIdentity struct {
	Name      string
	AccessKey string
	SecretKey Secret
	// SecretKeyFile names a file whose content, surrounding whitespace
	// trimmed, is the secret; Validate reads it into SecretKey.
	SecretKeyFile string
}

// parseIdentity parses the flag form NAME:ACCESS_KEY:SECRET. Neither the
// name nor the access key may contain ':', so the secret is the rest.
func parseIdentity(v string) (BackendIdentity, error) {
	name, rest, ok1 := strings.Cut(v, ":")
	ak, secret, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || name == "" || ak == "" || secret == "" {
		return BackendIdentity{}, fmt.Errorf("backend identity %q: want NAME:ACCESS_KEY:SECRET", redactIdentity(v))
	}
	return BackendIdentity{Name: name, AccessKey: ak, SecretKey: Secret(secret)}, nil
}

// redactIdentity keeps the name and access key of an identity in the flag
// form, so that an error about it never prints its secret.
func redactIdentity(v string) string {
	name, rest, _ := strings.Cut(v, ":")
	ak, _, ok := strings.Cut(rest, ":")
	if !ok {
		return name + ":" + redacted
	}
	return name + ":" + ak + ":" + redacted
}

// identities reads backend.identities from YAML: a list of {name,
// access_key, secret_key or secret_key_file}.
func (w *yamlWalker) identities(n *yaml.Node) ([]BackendIdentity, bool) {
	if n.Kind != yaml.SequenceNode {
		w.errorf(n, "backend.identities must be a list of {name, access_key, secret_key, secret_key_file}")
		return nil, false
	}
	out := make([]BackendIdentity, 0, len(n.Content))
	for _, item := range n.Content {
		fields, ok := w.plainMapping("backend.identities", item, []string{"name", "access_key", "secret_key", "secret_key_file"})
		if !ok {
			return nil, false
		}
		id := BackendIdentity{Name: fields["name"], AccessKey: fields["access_key"], SecretKey: Secret(fields["secret_key"]), SecretKeyFile: fields["secret_key_file"]}
		if id.Name == "" || id.AccessKey == "" {
			w.errorf(item, "backend.identities: name and access_key are required")
			return nil, false
		}
		if (id.SecretKey == "") == (id.SecretKeyFile == "") {
			w.errorf(item, "backend.identities: identity %s needs secret_key or secret_key_file, not both", id.Name)
			return nil, false
		}
		out = append(out, id)
	}
	return out, true
}

// credential reads one item of credentials from YAML.
func (w *yamlWalker) credential(n *yaml.Node) (Credential, bool) {
	fields, ok := w.plainMapping("credentials", n, []string{"access_key", "secret_key", "principal", "backend"})
	if !ok {
		return Credential{}, false
	}
	cr := Credential{AccessKey: fields["access_key"], SecretKey: Secret(fields["secret_key"]), Principal: fields["principal"], Backend: fields["backend"]}
	if cr.AccessKey == "" || cr.SecretKey == "" {
		w.errorf(n, "credentials: access_key and secret_key are required")
		return Credential{}, false
	}
	return cr, true
}

// plainMapping reads a mapping of plain strings whose keys are all in
// known, each at most once.
func (w *yamlWalker) plainMapping(key string, n *yaml.Node, known []string) (map[string]string, bool) {
	if n.Kind != yaml.MappingNode || n.Anchor != "" {
		w.errorf(n, "%s: each item must be a mapping with %s", key, strings.Join(known, ", "))
		return nil, false
	}
	fields := make(map[string]string)
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch _, seen := fields[k.Value]; {
		case k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.Anchor != "":
			w.errorf(k, "%s: keys and values must be plain strings", key)
			ok = false
		case seen:
			w.errorf(k, "%s: %s is set twice", key, k.Value)
			ok = false
		case !contains(known, k.Value):
			w.errorf(k, "%s: unknown key %s (want %s)", key, k.Value, strings.Join(known, ", "))
			ok = false
		default:
			fields[k.Value] = v.Value
		}
	}
	return fields, ok
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// validateIdentities reads the backend identities' secret files and
// checks the identities and every name of one: each credential's backend,
// reclaim.backend_identity, and the buckets of reclaim.buckets.
func (c *Config) validateIdentities() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	known := map[string]bool{backend.DefaultIdentity: true}
	for i := range c.Backend.Identities {
		id := &c.Backend.Identities[i]
		switch {
		case id.Name == "" || strings.ContainsAny(id.Name, ":, \t\r\n"):
			bad("backend.identities", "entry %d: the name %q must be non-empty, without ':', ',' or spaces", i+1, id.Name)
		case id.Name == backend.DefaultIdentity:
			bad("backend.identities", "%q names backend.access_key and backend.secret_key; choose another name", id.Name)
		case known[id.Name]:
			bad("backend.identities", "%q is listed twice", id.Name)
		}
		known[id.Name] = true
		if err := checkAccessKey(id.AccessKey); err != nil || id.AccessKey == "" {
			bad("backend.identities", "%s: access key %q must be non-empty, without '/', ':', ',' or spaces", id.Name, id.AccessKey)
		}
		if id.SecretKey == "" && id.SecretKeyFile != "" {
			b, err := os.ReadFile(id.SecretKeyFile)
			if err != nil {
				bad("backend.identities", "%s: secret_key_file: %v", id.Name, err)
				continue
			}
			id.SecretKey = Secret(strings.TrimSpace(string(b)))
			if id.SecretKey == "" {
				bad("backend.identities", "%s: secret_key_file %s is empty", id.Name, id.SecretKeyFile)
			}
		} else if id.SecretKey == "" {
			bad("backend.identities", "%s: secret key is empty", id.Name)
		}
	}
	for _, cr := range c.Credentials {
		if cr.Backend != "" && !known[cr.Backend] {
			bad("credentials", "access key %q names backend identity %q, which backend.identities does not list", cr.AccessKey, cr.Backend)
		}
	}
	if !known[c.Reclaim.BackendIdentity] {
		bad("reclaim.backend_identity", "%q is not a backend identity (%s, or a name in backend.identities)", c.Reclaim.BackendIdentity, backend.DefaultIdentity)
	}
	for _, b := range c.Reclaim.Buckets {
		if err := checkBucket(b); err != nil {
			bad("reclaim.buckets", "%v", err)
		}
	}
	return errs
}
