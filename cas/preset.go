package cas

import (
	"fmt"
	"strings"
)

// PresetDistribution names the layout of CNCF distribution's registry
// storage (its S3 driver), for Preset.
const PresetDistribution = "distribution"

// distributionRoot is where distribution keeps its data under the
// driver's root directory.
const distributionRoot = "docker/registry/v2/"

// The key patterns of distribution's layout, after its repositories/
// prefix (a repository name may hold slashes but no path component that
// starts with an underscore).
const (
	// Roots: a manifest revision link and a tag's current link. These are
	// what the registry's garbage collector marks from (the revisions;
	// a tag's current link names a revision of its repository).
	distributionRootKeys = `/_manifests/(revisions/sha256/[0-9a-f]{64}|tags/[^/]+/current)/link$`
	// Caches: a repository's layer links (every blob ever pushed to it)
	// and a tag's history of the manifests it named. The garbage
	// collector keeps no blob for them.
	distributionCacheKeys = `/(_layers/sha256/[0-9a-f]{64}|_manifests/tags/[^/]+/index/sha256/[0-9a-f]{64})/link$`
	// Blobs: blobs/sha256/<first two hex digits>/<hex>/data.
	distributionBlobKeys = `^[0-9a-f]{2}/(?P<hex>[0-9a-f]{64})/data$`
)

// Preset returns the named layout for the storage at bucket/root (root is
// the storage driver's root directory, "" for none). The only preset is
// PresetDistribution: its blobs are a verified content namespace whose
// manifests and indexes name their content; its tag and revision links are
// a root source; its layer links and tag histories a cache. maxBody is the
// roots' parse limit (0 for DefaultMaxBody).
func Preset(name, bucket, root string, maxBody int64) (Layout, error) {
	if name != PresetDistribution {
		return Layout{}, fmt.Errorf("cas: preset %q: the only preset is %q", name, PresetDistribution)
	}
	if root != "" && !strings.HasSuffix(root, "/") {
		root += "/"
	}
	base := strings.TrimPrefix(root, "/") + distributionRoot
	ns, err := NewNamespace("registry-blobs", bucket, base+"blobs/sha256/", distributionBlobKeys, true)
	if err != nil {
		return Layout{}, err
	}
	ns.Content = ContentManifests
	ns.KeyTemplate = "{hex2}/{hex}/data"
	// A registry writes a manifest after the blobs it names, and may take
	// a blob it remembers (a descriptor cache) for stored: every write that
	// names blobs must find them stored.
	ns.ConfirmBlobs = true
	roots, err := NewSource("registry-roots", bucket, base+"repositories/", "", maxBody)
	if err == nil {
		err = roots.SetKeys(distributionRootKeys)
	}
	if err != nil {
		return Layout{}, err
	}
	roots.ConfirmBlobs = true
	caches, err := NewSource("registry-caches", bucket, base+"repositories/", "", maxBody)
	if err == nil {
		err = caches.SetKeys(distributionCacheKeys)
	}
	if err != nil {
		return Layout{}, err
	}
	caches.Kind = KindCache
	l := Layout{Namespaces: []Namespace{ns}, Sources: []Source{roots, caches}}
	return l, l.Validate()
}
