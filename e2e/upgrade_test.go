//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestUpgradeBesidePreviousRelease runs a rolling upgrade's middle: the
// previous release (the newest CHANGELOG.md entry before VERSION, built
// from its recorded commit in a git worktree) and this tree's binary
// serve side by side on one etcd and one MinIO. Each publishes its own
// release; an upload begun through one is completed, and another aborted,
// through the other; a pass led by the new binary marks an abandoned
// upload, and once it stops, a pass led by the previous release deletes
// it and keeps a live one; and the previous release refuses a session
// record of a newer layout instead of reading it.
func TestUpgradeBesidePreviousRelease(t *testing.T) {
	t.Parallel()
	w := startBesidePreviousRelease(t, map[string]any{"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h", "election_ttl": "2s",
		"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1})
	prev, newGw, oldGw, store, bucket := w.prev, w.newGw, w.oldGw, w.store, w.bucket
	newSDK, oldSDK, direct := w.newSDK, w.oldSDK, w.direct

	requireReleases(t, store, sweepgate.Version(), prev.Version)

	// Begun through the previous release, completed through the new.
	const crossed, aborted = "upgrade/crossed.bin", "upgrade/aborted.bin"
	id := createUpload(t, oldSDK, bucket, crossed)
	part := mustUploadPart(t, oldSDK, bucket, crossed, id, 1, smallPart())
	if _, err := completeUpload(t.Context(), newSDK, bucket, crossed, id, []s3types.CompletedPart{part}); err != nil {
		t.Fatalf("complete through %s of an upload begun through %s: %v", sweepgate.Version(), prev.Version, err)
	}
	sum := sha256.Sum256(bytes.Repeat([]byte("p"), 4096))
	requireObjectSum(t, direct, bucket, crossed, hex.EncodeToString(sum[:]), 4096)
	// Begun through the new, aborted through the previous release.
	id = createUpload(t, newSDK, bucket, aborted)
	mustUploadPart(t, newSDK, bucket, aborted, id, 1, smallPart())
	if err := abortUpload(t.Context(), oldSDK, bucket, aborted, id); err != nil {
		t.Fatalf("abort through %s of an upload begun through %s: %v", prev.Version, sweepgate.Version(), err)
	}
	requireUploadGone(t, direct, bucket, aborted, id)

	// Passes led by either.
	const abandonedKey, liveKey = "upgrade/abandoned.bin", "upgrade/live.bin"
	abandoned := createUpload(t, oldSDK, bucket, abandonedKey)
	mustUploadPart(t, oldSDK, bucket, abandonedKey, abandoned, 1, smallPart())
	live := createUpload(t, newSDK, bucket, liveKey)
	time.Sleep(reclaimGrace + 200*time.Millisecond)
	mustUploadPart(t, newSDK, bucket, liveKey, live, 1, smallPart())
	if rep := runPass(t, newGw.AdminEndpoint); rep.Acted.Marked.Sessions != 1 || rep.Acted.Deleted.Sessions != 0 {
		t.Fatalf("pass %d led by %s: marked %+v, deleted %+v; want the abandoned upload marked", rep.Pass, sweepgate.Version(), rep.Acted.Marked, rep.Acted.Deleted)
	}
	store.requireState(t, bucket, abandoned, "expired")
	newGw.Stop()
	awaitLeading(t, oldGw)
	mustUploadPart(t, oldSDK, bucket, liveKey, live, 2, smallPart())
	// The elapsed clock counts only time one leader measured between its
	// own passes, so the new leader's passes delete once delete_after has
	// passed on its clock too.
	eventually(t, 30*time.Second, func() (bool, string) {
		time.Sleep(300 * time.Millisecond)
		rep := runPass(t, oldGw.AdminEndpoint)
		return rep.Acted.Deleted.Sessions == 1, fmt.Sprintf("pass %d led by %s: stopped %q, marked %+v, deleted %+v", rep.Pass, prev.Version, rep.Stopped, rep.Acted.Marked, rep.Acted.Deleted)
	})
	requireUploadGone(t, direct, bucket, abandonedKey, abandoned)
	if got := backendPartNumbers(t, direct, bucket, liveKey, live); len(got) != 2 {
		t.Fatalf("the live upload has parts %v on MinIO, want both", got)
	}

	// A record of a newer layout: the previous release refuses it.
	rewriteSession(t, store, bucket, live, map[string]any{"v": 2})
	_, err := uploadPart(t.Context(), oldSDK, bucket, liveKey, live, 3, smallPart())
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ServiceUnavailable" || !strings.Contains(api.ErrorMessage(), "has layout version 2") {
		t.Fatalf("UploadPart through %s of an upload whose session has layout version 2: %v; want ServiceUnavailable naming it", prev.Version, err)
	}
}

// besideWorld is this tree's binary and the previous release serving side
// by side on one external etcd and one MinIO, the new one leading the
// reclaimer.
type besideWorld struct {
	prev                   harness.Release
	m                      *harness.MinIO
	newGw, oldGw           *harness.Gateway
	newSDK, oldSDK, direct *s3.Client
	store                  *sessionStore
	bucket                 string
}

// startBesidePreviousRelease builds the previous release (the newest
// CHANGELOG.md entry before VERSION, from its recorded commit) and starts
// it beside this tree's binary, both with the reclaim settings given. It
// skips in direct mode (SWEEPGATE_E2E_TARGET=minio), where there is no
// gateway to test; make test never sets it.
func startBesidePreviousRelease(t *testing.T, reclaimCfg map[string]any) *besideWorld {
	t.Helper()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	harness.SkipInShardMode(t, "the previous release has no etcd.shards")
	w := &besideWorld{prev: harness.PreviousRelease(t)}
	oldBin := harness.BuildRelease(t, w.prev)
	cluster := harness.StartEtcdCluster(t, 1)
	w.m = harness.StartMinIO(t)
	opts := harness.Options{EtcdEndpoints: cluster.Endpoints(), Config: map[string]any{"reclaim": reclaimCfg}}
	// As in an upgrade, the previous release serves the keyspace first, so
	// this tree's binary finds a live gateway that reads schema 1 only and
	// leaves the keyspace in schema 1 (a new, empty keyspace would start in
	// its own schema). That first gateway does not campaign, so that this
	// tree's leads; one that does takes its place once it leads.
	first := harness.Options{EtcdEndpoints: cluster.Endpoints(), Binary: oldBin,
		Config: map[string]any{"reclaim": map[string]any{"enabled": false}}}
	oldFirst := harness.StartGateway(t, w.m, first)
	w.newGw = harness.StartGateway(t, w.m, opts)
	awaitLeading(t, w.newGw)
	opts.Binary = oldBin
	w.oldGw = harness.StartGateway(t, w.m, opts)
	oldFirst.Stop()
	newEnv, oldEnv := gatewayEnv(w.m, w.newGw), gatewayEnv(w.m, w.oldGw)
	w.newSDK, w.oldSDK, w.direct = newEnv.SDK(t), oldEnv.SDK(t), newEnv.DirectSDK(t)
	w.store = &sessionStore{cli: cluster.Client(t), prefix: etcdPrefix}
	w.bucket = newEnv.Bucket(t)
	return w
}

// gatewayEnv is the test environment of one of several gateways on m.
func gatewayEnv(m *harness.MinIO, g *harness.Gateway) *harness.Env {
	return &harness.Env{MinIO: m, Gateway: g, Endpoint: g.Endpoint, TLSEndpoint: g.TLSEndpoint, TLSConfig: g.TLSConfig(),
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Region: m.Region}
}

// requireReleases checks that the live gateways publish exactly the
// releases want, each with the keyspace schemas it reads.
func requireReleases(t *testing.T, store *sessionStore, want ...string) {
	t.Helper()
	resp, err := store.cli.Get(t.Context(), etcdPrefix+"gateways/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, kv := range resp.Kvs {
		var g etcdstore.GatewayClock
		if err := etcdstore.DecodeKV(etcdstore.GatewayRecord, kv, &g); err != nil {
			t.Fatalf("gateway record %s: %v", kv.Key, err)
		}
		if g.Schema < 1 {
			t.Errorf("gateway %s (release %q) publishes no keyspace schema", g.ID, g.Release)
		}
		got[g.Release] = true
	}
	for _, r := range want {
		if !got[r] {
			t.Errorf("no live gateway publishes release %s; published: %v", r, got)
		}
	}
}
