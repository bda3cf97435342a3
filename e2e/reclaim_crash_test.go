//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestReclaimCrashAfterDeleteIntent kills sweepgate (through its test fault
// hook) in the pass that deletes an abandoned upload, after its "aborting"
// is recorded and before the backend abort. After a restart, the next
// pass finishes it: the upload is gone on MinIO, its session aborted, with
// one audit line for the abort; the live upload and the orphan are
// untouched.
func TestReclaimCrashAfterDeleteIntent(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	// etcd outlives the gateway, so that what the crash left can be read.
	etcd, cli := etcdtest.Start(t)
	e := harness.Start(t, harness.Options{
		EtcdEndpoints: etcd.Endpoints(),
		Config: map[string]any{
			"reclaim": map[string]any{"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h", "election_ttl": "2s",
				// One upload of three is this test's whole deletion.
				"max_delete_uploads_fraction": 1, "max_mark_fraction": 1},
			"sessions": map[string]any{"reconcile_after": "100ms"},
		},
		Env: []string{"SWEEPGATE_TEST_FAULT=" + reclaim.FaultDeleteAfterIntent},
	})
	admin := e.Gateway.AdminEndpoint
	awaitLeading(t, e.Gateway)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	store := gatewayStore(t, e.Gateway, cli)
	bucket := e.Bucket(t)
	shard := shardFlags(e.Gateway, bucket)

	const keyA, keyK, keyO = "abandoned/a.bin", "live/k.bin", "orphan/o.bin"
	idA := createUpload(t, sdk, bucket, keyA)
	mustUploadPart(t, sdk, bucket, keyA, idA, 1, smallPart())
	idK := createUpload(t, sdk, bucket, keyK)
	idO := createUpload(t, direct, bucket, keyO)
	mustUploadPart(t, direct, bucket, keyO, idO, 1, smallPart())
	abandonedAt := time.Now()
	kParts := int32(0)
	feedK := func() {
		kParts++
		mustUploadPart(t, sdk, bucket, keyK, idK, kParts, smallPart())
	}

	time.Sleep(time.Until(abandonedAt.Add(reclaimGrace + 200*time.Millisecond)))
	eventually(t, 30*time.Second, func() (bool, string) {
		feedK()
		rep := runPass(t, admin, shard...)
		return rep.Acted.Marked.Sessions == 1, fmt.Sprintf("pass %d marked %+v", rep.Pass, rep.Acted.Marked)
	})
	store.requireState(t, bucket, idA, "expired")

	// The pass that deletes A dies after recording its intent.
	eventually(t, 30*time.Second, func() (bool, string) {
		time.Sleep(200 * time.Millisecond)
		feedK()
		code, out, _ := sweepgateCmd(t, admin, append([]string{"reclaim", "run", "--json"}, shard...)...)
		return code != 0, fmt.Sprintf("the pass ended without the fault hook killing the gateway: %s", out)
	})
	if err := e.Gateway.WaitExit(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if rec := store.requireState(t, bucket, idA, "aborting"); !strings.HasSuffix(rec.path(), "expired->aborting(reclaimer)") {
		t.Fatalf("A's history after the crash: %s", rec.path())
	}
	if got := backendPartNumbers(t, direct, bucket, keyA, idA); len(got) != 1 {
		t.Fatalf("MinIO holds parts %v of A after the crash; the gateway died before aborting", got)
	}

	e.Gateway.RestartWithEnv()
	awaitLeading(t, e.Gateway)
	feedK()
	rep := runPass(t, admin, shard...)
	if rep.Stopped != "" || rep.Refused != "" {
		t.Fatalf("pass after the restart: %+v", rep)
	}
	store.waitState(t, bucket, idA, "aborted")
	requireUploadGone(t, direct, bucket, keyA, idA)
	if n := abortAuditLines(t, e.Gateway.Log(), idA); n != 1 {
		t.Errorf("%d abort_upload audit lines for A, want exactly one", n)
	}
	if got := backendPartNumbers(t, direct, bucket, keyK, idK); len(got) != int(kParts) {
		t.Errorf("MinIO holds %d parts of live upload K, want %d", len(got), kParts)
	}
	store.requireState(t, bucket, idK, "active")
	if ids := backendUploads(t, direct, bucket); !slices.Contains(ids, idO) {
		t.Errorf("the orphan is gone from MinIO")
	}
}

// abortAuditLines counts the abort_upload audit lines of a gateway log that
// name upload id.
func abortAuditLines(t *testing.T, log, id string) int {
	t.Helper()
	n := 0
	for line := range strings.SplitSeq(log, "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != "audit" || l["action"] != "abort_upload" {
			continue
		}
		if what, _ := l["what"].(string); strings.HasSuffix(what, "?uploadId="+id) {
			n++
		}
	}
	return n
}
