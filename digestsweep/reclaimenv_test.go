//go:build integration

package digestsweep_test

import (
	"testing"

	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// digestEnv is a test world with the CAS bucket and a reclaimer
// configuration that sweeps it (reclaimtest.DigestEnv): the digest sweep
// runs as it runs in sweepgate, in the passes of an elected
// reclaim.Reclaimer, against a real MinIO and etcd.
type digestEnv struct {
	*reclaimtest.DigestEnv
	// blobs is the digest service of the gateway gatewayClient serves,
	// nil before.
	blobs *digests.Service
}

func newDigestEnv(t *testing.T) *digestEnv {
	return &digestEnv{DigestEnv: reclaimtest.NewDigestEnv(t)}
}
