package cas

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Kinds of reference source.
const (
	// KindRoot is a source whose objects keep the blobs they name: a
	// registry's tag and revision links, Git LFS pointers, manifests kept
	// apart from the blobs. It is the default.
	KindRoot = "root"
	// KindCache is a source whose objects name blobs without keeping them
	// (a registry's per-repository layer links, an index of what was ever
	// pushed): the gateway records nothing for them, and they are plain
	// objects to every other rule.
	KindCache = "cache"
	// KindContent is the source a content namespace reads its own blobs
	// as (Layout.ContentSources): a blob's body names further digests,
	// kept for as long as that blob is stored.
	KindContent = "content"
)

// ContentManifests is the Namespace.Content of a namespace whose blobs may
// be OCI or Docker image manifests and indexes: a blob that parses as one
// names its config and layers (an image manifest) or its child manifests
// (an index), and keeps them while it is stored itself. These are the
// references a registry's own garbage collector follows from a manifest;
// a manifest's subject is not one (a referrer does not keep its subject).
const ContentManifests = "manifests"

// DefaultContentLimit is the largest blob of a content namespace read as
// content: the largest manifest a registry accepts (CNCF distribution's
// limit). A larger blob is never a manifest, so it names nothing.
const DefaultContentLimit = 4 << 20

// descriptor is the part of an OCI content descriptor a reference needs.
type descriptor struct {
	Digest string `json:"digest"`
}

// manifest is the union of the OCI image manifest, the OCI image index,
// and Docker's schema 2 manifest and manifest list, as far as they name
// other content.
type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	Config        *descriptor  `json:"config"`
	Layers        []descriptor `json:"layers"`
	Manifests     []descriptor `json:"manifests"`
}

// ParseManifest returns the digests a manifest or index body names (its
// config and layers, or its child manifests), sorted and without repeats,
// and false when body is not one: not a JSON object, not schema version 2,
// or naming nothing. Descriptors whose digest is not of a known algorithm
// are left out: no namespace could hold their blob. It fails with
// ErrTooManyDigests past MaxDigestsPerObject.
func ParseManifest(body []byte) ([]string, bool, error) {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return nil, false, nil
	}
	var m manifest
	if json.Unmarshal(body, &m) != nil || m.SchemaVersion != 2 {
		return nil, false, nil
	}
	named := slices.Concat(m.Layers, m.Manifests)
	if m.Config != nil {
		named = append(named, *m.Config)
	}
	var out []string
	for _, d := range named {
		if Valid(d.Digest) && !slices.Contains(out, d.Digest) {
			out = append(out, d.Digest)
		}
	}
	if len(out) == 0 {
		return nil, false, nil
	}
	if len(out) > MaxDigestsPerObject {
		return nil, false, ErrTooManyDigests
	}
	slices.Sort(out)
	return out, true, nil
}

// ContentSource returns the source the namespace's blobs are read as when
// it has content, and false when it has none: the namespace's own prefix
// and keys, its blobs parsed as manifests up to DefaultContentLimit.
func (n *Namespace) ContentSource() (Source, bool) {
	if n.Content == "" {
		return Source{}, false
	}
	return Source{
		Name: n.Name, Bucket: n.Bucket, Prefix: n.Prefix, Kind: KindContent,
		Algorithm: n.Algorithm, MaxBody: DefaultContentLimit, namespace: n,
	}, true
}

// ContentSources returns the content sources of every namespace with
// content (see Namespace.ContentSource).
func (l *Layout) ContentSources() []Source {
	if l == nil {
		return nil
	}
	var out []Source
	for i := range l.Namespaces {
		if s, ok := l.Namespaces[i].ContentSource(); ok {
			out = append(out, s)
		}
	}
	return out
}

// RootSources returns the sources whose objects keep what they name: every
// source but the caches.
func (l *Layout) RootSources() []Source {
	if l == nil {
		return nil
	}
	var out []Source
	for _, s := range l.Sources {
		if s.Kind != KindCache {
			out = append(out, s)
		}
	}
	return out
}

// RebuildSources returns every source whose objects the rebuild reads:
// the root sources and the content sources.
func (l *Layout) RebuildSources() []Source {
	return append(l.RootSources(), l.ContentSources()...)
}

// HasReferences reports whether bucket/key may have references recorded
// for it: an object of a root source, or a blob of a content namespace.
// Its delete moves them to the trash.
func (l *Layout) HasReferences(bucket, key string) bool {
	if l.Source(bucket, key) != nil {
		return true
	}
	ns, _, ok := l.Namespace(bucket, key)
	return ok && ns.Content != ""
}
