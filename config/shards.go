package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// DefaultShard names the one store of a configuration without etcd.shards,
// and is the name shard lists refer to it by in logs and metrics.
const DefaultShard = "default"

// EtcdShard is one etcd cluster of etcd.shards and the buckets whose state
// it keeps. Empty Prefix and TLS or authentication fields take etcd.prefix,
// etcd.ca_file, etcd.cert_file, etcd.key_file, etcd.username and
// etcd.password_file (Config.Shards fills them).
type EtcdShard struct {
	Name      string
	Endpoints []string
	Prefix    string
	Buckets   []string

	CAFile, CertFile, KeyFile string
	Username, PasswordFile    string
}

// String names the shard with its endpoints and buckets, never its
// password file's content.
func (s EtcdShard) String() string {
	return s.Name + "=" + strings.Join(s.Endpoints, ";") + "{" + strings.Join(s.Buckets, " ") + "}"
}

// Sharded reports whether etcd.shards lists clusters: then state is kept in
// several stores, each bucket's in one.
func (c *Config) Sharded() bool { return len(c.Etcd.Shards) > 0 }

// Shards returns the stores of c, the default one first, with their
// defaults filled. Without etcd.shards it is the one store named
// DefaultShard over etcd.endpoints (empty: the embedded etcd) and
// etcd.prefix, which holds every bucket.
func (c *Config) Shards() []EtcdShard {
	e := c.Etcd
	if !c.Sharded() {
		return []EtcdShard{{Name: DefaultShard, Endpoints: e.Endpoints, Prefix: e.Prefix,
			CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile, Username: e.Username, PasswordFile: e.PasswordFile}}
	}
	out := make([]EtcdShard, len(e.Shards))
	for i, s := range e.Shards {
		s.Endpoints = slices.Clone(s.Endpoints)
		s.Buckets = slices.Clone(s.Buckets)
		fill := func(v *string, def string) {
			if *v == "" {
				*v = def
			}
		}
		fill(&s.Prefix, e.Prefix)
		if s.Prefix != "" && !strings.HasSuffix(s.Prefix, "/") {
			s.Prefix += "/"
		}
		fill(&s.CAFile, e.CAFile)
		fill(&s.CertFile, e.CertFile)
		fill(&s.KeyFile, e.KeyFile)
		fill(&s.Username, e.Username)
		fill(&s.PasswordFile, e.PasswordFile)
		out[i] = s
	}
	return out
}

// ShardOf names the shard the configuration puts bucket on: the shard that
// lists it, else the default one (the first).
func (c *Config) ShardOf(bucket string) string {
	for _, s := range c.Etcd.Shards {
		if slices.Contains(s.Buckets, bucket) {
			return s.Name
		}
	}
	if c.Sharded() {
		return c.Etcd.Shards[0].Name
	}
	return DefaultShard
}

// ShardCredentials reads the TLS and authentication files of one shard
// (from Shards) as EtcdCredentials does for etcd.endpoints.
func ShardCredentials(s EtcdShard) (etcdstore.Credentials, error) {
	var creds etcdstore.Credentials
	if s.CAFile != "" || s.CertFile != "" || slices.ContainsFunc(s.Endpoints, secureEndpoint) {
		creds.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	where := "etcd.shards " + s.Name
	if s.CAFile != "" {
		pool, err := readCAFile(where+" ca_file", s.CAFile)
		if err != nil {
			return creds, err
		}
		creds.TLS.RootCAs = pool
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return creds, fmt.Errorf("%s cert_file and key_file: %w", where, err)
		}
		creds.TLS.Certificates = []tls.Certificate{cert}
	}
	if s.Username != "" {
		pw, err := readSecretFile("password file", s.PasswordFile)
		if err != nil {
			return creds, fmt.Errorf("%s password_file: %w", where, err)
		}
		creds.Username, creds.Password = s.Username, pw
	}
	return creds, nil
}

func secureEndpoint(ep string) bool {
	return strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://")
}

// validateShards checks etcd.shards: it replaces etcd.endpoints, names
// each shard once, gives each endpoints and a valid prefix, lists a bucket
// on one shard at most, and keeps the digest layout's buckets on one
// shard, since its references, tombstones and guards are written in one
// transaction with each other.
func (c *Config) validateShards() []error {
	if !c.Sharded() {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe("etcd.shards"), fmt.Sprintf(format, args...)))
	}
	if len(c.Etcd.Endpoints) > 0 {
		bad("set together with etcd.endpoints; with shards every cluster is listed in etcd.shards (the first is the default shard), and etcd.endpoints must be empty")
	}
	names := make(map[string]bool)
	owner := make(map[string]string)
	for i, s := range c.Shards() {
		where := fmt.Sprintf("shard %d (%s)", i+1, s.Name)
		switch {
		case s.Name == "":
			bad("shard %d: name is required", i+1)
		case !shardName(s.Name):
			bad("%s: a name is letters, digits, '-' and '_'", where)
		case names[s.Name]:
			bad("%s: the name is used twice", where)
		}
		names[s.Name] = true
		if len(s.Endpoints) == 0 {
			bad("%s: endpoints are required", where)
		}
		for _, ep := range s.Endpoints {
			if err := checkEtcdEndpoint(ep); err != nil {
				bad("%s: endpoint %q: %v", where, ep, err)
			}
			if (s.CAFile != "" || s.CertFile != "" || s.Username != "") && !secureEndpoint(ep) {
				bad("%s: endpoint %q: TLS or a password is configured, so every endpoint must be https://", where, ep)
			}
		}
		if _, err := etcdstore.NewKeys(s.Prefix); err != nil {
			bad("%s: prefix: %v", where, err)
		}
		if (s.CertFile == "") != (s.KeyFile == "") {
			bad("%s: cert_file and key_file go together", where)
		}
		if (s.Username == "") != (s.PasswordFile == "") {
			bad("%s: username and password_file go together", where)
		}
		for _, b := range s.Buckets {
			if err := checkBucket(b); err != nil {
				bad("%s: bucket %q: %v", where, b, err)
			}
			if other, dup := owner[b]; dup {
				bad("bucket %s is listed on shard %s and on shard %s; a bucket belongs to one shard", b, other, s.Name)
				continue
			}
			owner[b] = s.Name
		}
	}
	return append(errs, c.validateLayoutShard()...)
}

// validateLayoutShard refuses a digest layout whose buckets the shards
// split.
func (c *Config) validateLayoutShard() []error {
	var places []string // "bucket (setting)"
	add := func(bucket, setting string) {
		if bucket != "" {
			places = append(places, bucket+"\x00"+setting)
		}
	}
	for _, n := range c.Digests.Namespaces {
		add(n.Bucket, "digests.namespaces")
	}
	for _, s := range c.Digests.Sources {
		add(s.Bucket, "digests.sources")
	}
	if c.Digests.PresetStorage != "" {
		bucket, _, _ := strings.Cut(c.Digests.PresetStorage, "/")
		add(bucket, "digests.preset_storage")
	}
	var first, firstShard string
	for _, p := range places {
		bucket, setting, _ := strings.Cut(p, "\x00")
		shard := c.ShardOf(bucket)
		if first == "" {
			first, firstShard = bucket+" ("+setting+")", shard
			continue
		}
		if shard != firstShard {
			return []error{fmt.Errorf("%s: the digest layout spans shards: bucket %s is on shard %s but bucket %s (%s) is on shard %s; a layout's namespaces and sources must be on one shard",
				describe("etcd.shards"), first, firstShard, bucket, setting, shard)}
		}
	}
	return nil
}

// InLayout reports whether bucket holds a namespace or source of the
// digest layout (digests.namespaces, digests.sources, digests.preset_storage).
func (c *Config) InLayout(bucket string) bool {
	for _, n := range c.Digests.Namespaces {
		if n.Bucket == bucket {
			return true
		}
	}
	for _, s := range c.Digests.Sources {
		if s.Bucket == bucket {
			return true
		}
	}
	b, _, _ := strings.Cut(c.Digests.PresetStorage, "/")
	return c.Digests.PresetStorage != "" && b == bucket
}

// LayoutShard names the shard that keeps the digest layout's state: the
// shard of its buckets (validateShards keeps them on one).
func (c *Config) LayoutShard() string {
	switch {
	case len(c.Digests.Namespaces) > 0:
		return c.ShardOf(c.Digests.Namespaces[0].Bucket)
	case len(c.Digests.Sources) > 0:
		return c.ShardOf(c.Digests.Sources[0].Bucket)
	case c.Digests.PresetStorage != "":
		bucket, _, _ := strings.Cut(c.Digests.PresetStorage, "/")
		return c.ShardOf(bucket)
	}
	return c.Shards()[0].Name
}

func shardName(n string) bool {
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return n != ""
}

// shardsText reads etcd.shards from flag or environment values: each is
// the YAML a file would hold, in flow style (a list of mappings, or one
// mapping), since a shard is a mapping with lists in it; a repeated flag
// adds its shards.
func shardsText(values []string) ([]EtcdShard, error) {
	var out []EtcdShard
	for _, v := range values {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(v), &doc); err != nil || len(doc.Content) != 1 {
			return nil, errors.New("etcd.shards: want YAML such as [{name: a, endpoints: [http://etcd-a:2379], buckets: [b1]}]")
		}
		n := doc.Content[0]
		if n.Kind == yaml.MappingNode {
			n = &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{n}, Line: n.Line, Column: n.Column}
		}
		w := yamlWalker{name: "etcd.shards"}
		shards, ok := w.shards(n)
		if !ok {
			return nil, errors.Join(w.errs...)
		}
		out = append(out, shards...)
	}
	return out, nil
}

// shards reads etcd.shards from YAML.
func (w *yamlWalker) shards(n *yaml.Node) ([]EtcdShard, bool) {
	const key = "etcd.shards"
	known := []string{"name", "endpoints", "prefix", "buckets", "ca_file", "cert_file", "key_file", "username", "password_file"}
	if n.Kind != yaml.SequenceNode {
		w.errorf(n, "%s must be a list of {%s}", key, strings.Join(known, ", "))
		return nil, false
	}
	out := make([]EtcdShard, 0, len(n.Content))
	for _, item := range n.Content {
		if item.Kind != yaml.MappingNode || item.Anchor != "" {
			w.errorf(item, "%s: each item must be a mapping with %s", key, strings.Join(known, ", "))
			return nil, false
		}
		var s EtcdShard
		seen := make(map[string]bool)
		for i := 0; i+1 < len(item.Content); i += 2 {
			k, v := item.Content[i], item.Content[i+1]
			if !slices.Contains(known, k.Value) {
				w.errorf(k, "%s: unknown key %s (want %s)", key, k.Value, strings.Join(known, ", "))
				return nil, false
			}
			if seen[k.Value] {
				w.errorf(k, "%s: %s is set twice", key, k.Value)
				return nil, false
			}
			seen[k.Value] = true
			if isNull(v) {
				continue
			}
			var ok bool
			switch k.Value {
			case "endpoints":
				s.Endpoints, ok = w.stringList(key+" endpoints", v)
			case "buckets":
				s.Buckets, ok = w.stringList(key+" buckets", v)
			default:
				if v.Kind != yaml.ScalarNode || v.Anchor != "" {
					w.errorf(v, "%s: %s must be a plain value", key, k.Value)
					return nil, false
				}
				ok = true
				*map[string]*string{"name": &s.Name, "prefix": &s.Prefix, "ca_file": &s.CAFile, "cert_file": &s.CertFile,
					"key_file": &s.KeyFile, "username": &s.Username, "password_file": &s.PasswordFile}[k.Value] = v.Value
			}
			if !ok {
				return nil, false
			}
		}
		out = append(out, s)
	}
	return out, true
}

// stringList reads a YAML list of plain strings.
func (w *yamlWalker) stringList(what string, n *yaml.Node) ([]string, bool) {
	if n.Kind != yaml.SequenceNode || n.Anchor != "" {
		w.errorf(n, "%s must be a list", what)
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		if item.Kind != yaml.ScalarNode || isNull(item) || item.Anchor != "" {
			w.errorf(item, "%s: each item must be a string", what)
			return nil, false
		}
		out = append(out, item.Value)
	}
	return out, true
}
