//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestRegistryDescriptorCacheReusedLayer runs distribution with the blob
// descriptor cache of its example configuration, and a second replica on
// the same storage. An image is deleted and the passes delete its private
// layer, which both replicas have seen (the first pushed it, the second
// served it). Then each replica is asked to push a new image reusing that
// layer: they believe it is stored and skip the upload. Each push must
// either fail or leave a tag that pulls intact; a tag that does not pull is
// the failure this guards against.
func TestRegistryDescriptorCacheReusedLayer(t *testing.T) {
	t.Parallel()
	r := startRegistryUnderTestWith(t, "", true)
	replica := harness.StartRegistry(t, r.storage(true))
	base := r.layer(11, 200<<10)
	private := r.layer(12, 150<<10)
	a := r.push("a", false, base, private)
	b := r.push("b", false, base, r.layer(13, 100<<10))
	// The replica serves the image too, so its cache holds every blob.
	aOnReplica := a
	aOnReplica.Ref = replica.Ref("app", ":a")
	r.crane.RequirePullIntact(aOnReplica)
	time.Sleep(registryPlacementGrace)
	r.crane.Delete(a.ByDigest())
	gc := r.garbage(minus(a.Digests(), b.Digests()))
	r.requireReclaimed(gc, b)

	for _, reg := range []struct {
		name string
		ref  string
	}{
		{"the registry that pushed the layer", r.reg.Ref("app", ":c")},
		{"the replica that served it", replica.Ref("app", ":d")},
	} {
		p, err := r.crane.TryPushImage(reg.ref, false, base, private)
		if err != nil {
			t.Logf("push through %s reusing a deleted layer failed, as it may: %v", reg.name, err)
			if _, derr := r.crane.Run("digest", reg.ref); derr == nil {
				t.Errorf("push through %s failed, but its tag %s exists", reg.name, reg.ref)
			}
			continue
		}
		r.crane.RequirePullIntact(p)
	}
}
