// Package cas describes content-addressed storage kept on the backend: the
// namespaces whose object keys carry a digest (blobs) and the reference
// sources whose objects name digests (manifests, link or pointer files). It
// finds the digest in a blob's key and the digests in a reference object's
// body, and nothing else: recording references is etcdstore's, deciding
// what to delete is reclaim's.
//
// A digest is written "<algorithm>:<lower-case hex>", such as
// "sha256:9f86d081...", whatever the layout it was found in.
package cas

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"slices"
	"strings"
)

// The defaults match a registry-like layout: blobs under blobs/sha256/<hex>
// and JSON manifests that name "sha256:<hex>" digests. The source pattern
// also finds the digests of Git LFS pointer files ("oid sha256:<hex>").
const (
	DefaultNamespacePattern = `^(?P<hex>[0-9a-f]{64})$`
	DefaultSourcePattern    = `(?P<algo>sha256):(?P<hex>[0-9a-f]{64})`
	DefaultAlgorithm        = "sha256"
	DefaultMaxBody          = 4 << 20
)

// MaxDigestsPerObject is the most digests one reference object may name.
// Its references are recorded in one etcd transaction, which etcd limits to
// 128 operations (old references removed, new ones written, revision
// shards advanced); an object naming more is refused, never recorded in part.
const MaxDigestsPerObject = 50

// ErrTooManyDigests says a reference object names more digests than
// MaxDigestsPerObject.
var ErrTooManyDigests = fmt.Errorf("cas: the object names more than %d digests", MaxDigestsPerObject)

// algorithms are the digest algorithms and their hex lengths. Only these
// can be verified on write.
var algorithms = map[string]func() hash.Hash{"sha256": sha256.New}

// Namespace is a bucket prefix whose object keys carry the digest of their
// content.
type Namespace struct {
	// Name identifies the namespace in logs and reports.
	Name   string
	Bucket string
	// Prefix starts every key of the namespace; Pattern sees the rest.
	Prefix string
	// Pattern matches the part of a key after Prefix and captures the
	// digest's hex in the group "hex" (and its algorithm in "algo", or
	// Algorithm applies).
	Pattern   *regexp.Regexp
	Algorithm string
	// Verify makes the gateway refuse (BadDigest) a blob whose content does
	// not hash to the digest in its key.
	Verify bool
	// Content, when set (ContentManifests), says the namespace's blobs may
	// name further digests in their bodies: the gateway records what a
	// blob names as it is written, and the rebuild reads blobs written
	// around it (see ContentSource).
	Content string
	// KeyTemplate builds the key of a digest's blob after Prefix (KeyOf):
	// "{hex}" stands for the digest's hex, "{hex2}" for its first two
	// digits. Empty when the pattern is not one whose keys can be built
	// (a custom pattern): then no blob of the namespace can be confirmed.
	KeyTemplate string
	// ConfirmBlobs makes a write of a blob with content (a manifest) that
	// names a digest whose blob is not stored fail (see
	// Source.ConfirmBlobs).
	ConfirmBlobs bool
}

// Source is a bucket prefix whose objects name digests in their bodies.
type Source struct {
	// Name identifies the source in logs and reports.
	Name   string
	Bucket string
	Prefix string
	// Pattern finds digests in a body: each match's "hex" group (and "algo"
	// group, or Algorithm) names one.
	Pattern   *regexp.Regexp
	Algorithm string
	// MaxBody is the largest body that is parsed. A larger object in the
	// source is refused, since its references could not be recorded whole.
	MaxBody int64
	// Keys, when set, narrows the source to the keys whose part after
	// Prefix it matches (a registry keeps upload data next to its link
	// files, for example); other keys under Prefix are plain objects.
	Keys *regexp.Regexp
	// Kind is KindRoot (its objects keep what they name), KindCache (they
	// keep nothing) or KindContent (a content namespace's own blobs).
	Kind string
	// ConfirmBlobs makes the gateway confirm, once a write's references
	// are recorded, that every blob it names is stored in a namespace, and
	// refuse the write (BlobNotStored, nothing stored) when one is not.
	// Off for producers that write a reference before its blob.
	ConfirmBlobs bool
	// namespace is the content namespace a KindContent source reads.
	namespace *Namespace
}

// SetKeys narrows the source to the keys whose part after Prefix matches
// pattern; an empty pattern takes every key under Prefix.
func (s *Source) SetKeys(pattern string) error {
	if pattern == "" {
		s.Keys = nil
		return nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("cas: source %s key pattern: %w", s.Name, err)
	}
	s.Keys = re
	return nil
}

// NewNamespace returns a namespace, filling in the default pattern and
// algorithm for empty ones.
func NewNamespace(name, bucket, prefix, pattern string, verify bool) (Namespace, error) {
	if bucket == "" {
		return Namespace{}, errors.New("cas: a namespace needs a bucket")
	}
	if pattern == "" {
		pattern = DefaultNamespacePattern
	}
	re, err := compile(pattern)
	if err != nil {
		return Namespace{}, fmt.Errorf("cas: namespace %s pattern: %w", bucket+"/"+prefix, err)
	}
	if name == "" {
		name = bucket + "/" + prefix
	}
	ns := Namespace{Name: name, Bucket: bucket, Prefix: prefix, Pattern: re, Algorithm: DefaultAlgorithm, Verify: verify}
	if pattern == DefaultNamespacePattern {
		ns.KeyTemplate = "{hex}"
	}
	return ns, nil
}

// KeyOf returns the key of digest's blob in the namespace, and false when
// the namespace cannot build one (no KeyTemplate, another algorithm).
func (n *Namespace) KeyOf(digest string) (string, bool) {
	algo, hex, ok := strings.Cut(digest, ":")
	if !ok || n.KeyTemplate == "" || algo != n.Algorithm || len(hex) < 2 {
		return "", false
	}
	key := n.Prefix + strings.NewReplacer("{hex2}", hex[:2], "{hex}", hex).Replace(n.KeyTemplate)
	if d, ok := n.Digest(key); !ok || d != digest {
		return "", false
	}
	return key, true
}

// BlobPlace is where a digest's blob is stored when it is.
type BlobPlace struct{ Bucket, Key string }

// BlobPlaces returns the places of digest's blob in every namespace that
// can build its key.
func (l *Layout) BlobPlaces(digest string) []BlobPlace {
	if l == nil {
		return nil
	}
	var out []BlobPlace
	for i := range l.Namespaces {
		if key, ok := l.Namespaces[i].KeyOf(digest); ok {
			out = append(out, BlobPlace{Bucket: l.Namespaces[i].Bucket, Key: key})
		}
	}
	return out
}

// ConfirmsBlobs reports whether a write of bucket/key that names digests
// must find every named blob stored (Source.ConfirmBlobs, or
// Namespace.ConfirmBlobs for a blob with content).
func (l *Layout) ConfirmsBlobs(bucket, key string) bool {
	if l == nil {
		return false
	}
	if ns, _, ok := l.Namespace(bucket, key); ok {
		return ns.Content != "" && ns.ConfirmBlobs
	}
	src := l.Source(bucket, key)
	return src != nil && src.ConfirmBlobs
}

// NewSource returns a reference source, filling in the default pattern,
// algorithm and body limit for empty ones.
func NewSource(name, bucket, prefix, pattern string, maxBody int64) (Source, error) {
	if bucket == "" {
		return Source{}, errors.New("cas: a reference source needs a bucket")
	}
	if pattern == "" {
		pattern = DefaultSourcePattern
	}
	re, err := compile(pattern)
	if err != nil {
		return Source{}, fmt.Errorf("cas: source %s pattern: %w", bucket+"/"+prefix, err)
	}
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	if name == "" {
		name = bucket + "/" + prefix
	}
	return Source{Name: name, Bucket: bucket, Prefix: prefix, Pattern: re, Algorithm: DefaultAlgorithm, MaxBody: maxBody, Kind: KindRoot}, nil
}

func compile(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	if re.SubexpIndex("hex") < 0 {
		return nil, fmt.Errorf("%q has no group named hex, such as (?P<hex>[0-9a-f]{64})", pattern)
	}
	return re, nil
}

// ParseSpec splits the short form of a namespace or source, "BUCKET/PREFIX"
// (the prefix may be empty), as flags and environment variables give it.
func ParseSpec(spec string) (bucket, prefix string, err error) {
	bucket, prefix, _ = strings.Cut(strings.TrimSpace(spec), "/")
	if bucket == "" {
		return "", "", fmt.Errorf("cas: %q: want BUCKET/PREFIX", spec)
	}
	return bucket, prefix, nil
}

// digestOf builds a digest from one match of re in s.
func digestOf(re *regexp.Regexp, algorithm string, s string, m []int) (string, bool) {
	group := func(name string) string {
		i := re.SubexpIndex(name)
		if i < 0 || m[2*i] < 0 {
			return ""
		}
		return s[m[2*i]:m[2*i+1]]
	}
	algo := group("algo")
	if algo == "" {
		algo = algorithm
	}
	d := strings.ToLower(algo) + ":" + strings.ToLower(group("hex"))
	return d, Valid(d)
}

// Valid reports whether d is a digest of a known algorithm with a hex value
// of the right length.
func Valid(d string) bool {
	algo, hexs, ok := strings.Cut(d, ":")
	newHash, known := algorithms[algo]
	if !ok || !known || len(hexs) != 2*newHash().Size() {
		return false
	}
	for _, c := range []byte(hexs) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewHash returns a hash for d's algorithm, to verify content against it.
func NewHash(d string) (hash.Hash, bool) {
	algo, _, _ := strings.Cut(d, ":")
	newHash, ok := algorithms[algo]
	if !ok {
		return nil, false
	}
	return newHash(), true
}

// Digest returns the digest that key carries, and false when key is not a
// blob of the namespace.
func (n *Namespace) Digest(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, n.Prefix)
	if !ok {
		return "", false
	}
	m := n.Pattern.FindStringSubmatchIndex(rest)
	if m == nil || m[0] != 0 || m[1] != len(rest) {
		return "", false
	}
	return digestOf(n.Pattern, n.Algorithm, rest, m)
}

// Contains reports whether key lies in the namespace's prefix.
func (n *Namespace) Contains(key string) bool { return strings.HasPrefix(key, n.Prefix) }

// Contains reports whether key is an object of the source: under its
// prefix and, when Keys is set, matching it; for a content source, a blob
// of its namespace.
func (s *Source) Contains(key string) bool {
	if s.namespace != nil {
		_, ok := s.namespace.Digest(key)
		return ok
	}
	rest, ok := strings.CutPrefix(key, s.Prefix)
	return ok && (s.Keys == nil || s.Keys.MatchString(rest))
}

// Extract returns the digests that body names, sorted and without repeats.
// It fails with ErrTooManyDigests past MaxDigestsPerObject, so that a
// caller never records part of an object's references.
func (s *Source) Extract(body []byte) ([]string, error) {
	if s.Kind == KindContent {
		digests, _, err := ParseManifest(body)
		return digests, err
	}
	var out []string
	seen := make(map[string]bool)
	for _, m := range s.Pattern.FindAllSubmatchIndex(body, -1) {
		d, ok := digestOf(s.Pattern, s.Algorithm, string(body[m[0]:m[1]]), shift(m, m[0]))
		if !ok || seen[d] {
			continue
		}
		if len(out) == MaxDigestsPerObject {
			return nil, ErrTooManyDigests
		}
		seen[d] = true
		out = append(out, d)
	}
	slices.Sort(out)
	return out, nil
}

// shift makes the submatch indexes m relative to offset.
func shift(m []int, offset int) []int {
	out := make([]int, len(m))
	for i, v := range m {
		if v >= 0 {
			v -= offset
		}
		out[i] = v
	}
	return out
}

// Layout is every namespace and source of a deployment.
type Layout struct {
	Namespaces []Namespace
	Sources    []Source
}

// Empty reports whether the layout names nothing, so that digest
// reclamation is off.
func (l *Layout) Empty() bool { return l == nil || len(l.Namespaces) == 0 && len(l.Sources) == 0 }

// Namespace returns the namespace that key of bucket lies in (nil when
// none), and the digest it carries (ok false when it lies in the prefix but
// does not match the pattern).
func (l *Layout) Namespace(bucket, key string) (ns *Namespace, digest string, ok bool) {
	if l == nil {
		return nil, "", false
	}
	for i := range l.Namespaces {
		n := &l.Namespaces[i]
		if n.Bucket == bucket && n.Contains(key) {
			d, ok := n.Digest(key)
			return n, d, ok
		}
	}
	return nil, "", false
}

// Source returns the reference source that keeps what key of bucket
// names, or nil. Sources are matched in order; a key whose first match is
// a cache is a plain object.
func (l *Layout) Source(bucket, key string) *Source {
	if l == nil {
		return nil
	}
	for i := range l.Sources {
		s := &l.Sources[i]
		if s.Bucket == bucket && s.Contains(key) {
			if s.Kind == KindCache {
				return nil
			}
			return s
		}
	}
	return nil
}

// HasBucket reports whether any namespace or source lies in bucket.
func (l *Layout) HasBucket(bucket string) bool {
	if l == nil {
		return false
	}
	for _, n := range l.Namespaces {
		if n.Bucket == bucket {
			return true
		}
	}
	for _, s := range l.Sources {
		if s.Bucket == bucket {
			return true
		}
	}
	return false
}

// Validate refuses a layout in which one key could belong to two places: a
// namespace and a source, or two of either, whose prefixes overlap in one
// bucket. Sources that each narrow their keys (Keys) may share a prefix:
// they are matched in order (Layout.Source).
func (l *Layout) Validate() error {
	type place struct {
		name, bucket, prefix string
		keyed                bool
	}
	var all []place
	for _, n := range l.Namespaces {
		all = append(all, place{"namespace " + n.Name, n.Bucket, n.Prefix, false})
	}
	for _, s := range l.Sources {
		if s.Kind != "" && s.Kind != KindRoot && s.Kind != KindCache {
			return fmt.Errorf("cas: source %s: kind %q, want %s or %s", s.Name, s.Kind, KindRoot, KindCache)
		}
		all = append(all, place{"source " + s.Name, s.Bucket, s.Prefix, s.Keys != nil})
	}
	for _, n := range l.Namespaces {
		if n.Content != "" && n.Content != ContentManifests {
			return fmt.Errorf("cas: namespace %s: content %q, want %s or none", n.Name, n.Content, ContentManifests)
		}
		if n.Content != "" && !n.Verify {
			return fmt.Errorf("cas: namespace %s has content, so it must verify its blobs: a manifest's references hold only for the content its digest names", n.Name)
		}
	}
	confirms := false
	for _, s := range l.Sources {
		confirms = confirms || s.ConfirmBlobs
	}
	for _, n := range l.Namespaces {
		confirms = confirms || n.ConfirmBlobs
	}
	if confirms {
		if len(l.Namespaces) == 0 {
			return errors.New("cas: confirm_blobs needs a namespace where the named blobs are stored")
		}
		for _, n := range l.Namespaces {
			if n.KeyTemplate == "" {
				return fmt.Errorf("cas: confirm_blobs needs every namespace to say where a digest's blob is, and namespace %s has a custom pattern: the default pattern or the preset can", n.Name)
			}
		}
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a.keyed && b.keyed {
				continue
			}
			if a.bucket == b.bucket && (strings.HasPrefix(a.prefix, b.prefix) || strings.HasPrefix(b.prefix, a.prefix)) {
				return fmt.Errorf("cas: %s and %s overlap in bucket %s (prefixes %q and %q)", a.name, b.name, a.bucket, a.prefix, b.prefix)
			}
		}
	}
	return nil
}
