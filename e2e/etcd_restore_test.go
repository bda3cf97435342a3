//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// restoreClearWithin bounds how long the passes after a restore may take
// to clear its mark: the gateway's next clock record and a rebuild.
const restoreClearWithin = 30 * time.Second

// TestEtcdRestoredFromSnapshot runs the runbook's restore of etcd on a
// real etcd member under one gateway: a snapshot through the Maintenance
// API, then more pushes and an upload, then the gateway stopped, etcd
// restored from the snapshot with etcdutl's restore (revision bump,
// compaction mark) and started on the restored data, and the gateway
// started again. Its leader finds the backend's witness ahead of etcd's,
// and no pass deletes anything live: every blob a manifest written after
// the snapshot names stays stored, and the upload made after the snapshot
// (whose session the restore lost) is held as an orphan, not aborted.
// Once every gateway published its clock and a rebuild started after the
// mark finished, the mark is cleared and a blob nothing names is reclaimed
// again.
func TestEtcdRestoredFromSnapshot(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	harness.SkipInShardMode(t, "it restores the one etcd from a snapshot")
	etcd := harness.StartEtcdCluster(t, 1)
	bucket := harness.BucketName(t)
	e := startRestoreGateway(t, etcd, bucket)
	admin := e.Gateway.AdminEndpoint
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	ctx := t.Context()
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	awaitLeading(t, e.Gateway)
	putManifest := func(key string, body []byte) {
		t.Helper()
		if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("manifests/" + key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("manifest %s: %v", key, err)
		}
	}

	// Before the snapshot: blobs 0 and 1 named by a manifest, blob 2 by
	// nothing.
	blobs := pushLayers(t, sdk, bucket, 5)
	putManifest("before", ociManifest(blobs, 0, 1))
	witnessKey := reclaim.DefaultWitnessKey(etcdPrefix)
	cli := etcd.Client(t)
	awaitWitness(t, cli, direct, bucket, witnessKey, 1)
	snap := etcd.Snapshot(t)
	// etcd's seq now, at least the snapshot's: a round past it is one the
	// snapshot does not hold.
	seen := awaitWitness(t, cli, direct, bucket, witnessKey, 0)

	// After it: blobs 3 and 4 named by a manifest, an upload with a part,
	// and witness rounds the snapshot does not hold.
	putManifest("after", ociManifest(blobs, 3, 4))
	const afterKey = "uploads/after.bin"
	afterID := createUpload(t, sdk, bucket, afterKey)
	mustUploadPart(t, sdk, bucket, afterKey, afterID, 1, smallPart())
	awaitWitness(t, cli, direct, bucket, witnessKey, seen+1)

	e.Gateway.Stop()
	etcd.RestoreFrom(t, snap, 1_000_000)
	e.Gateway.Restart()
	awaitLeading(t, e.Gateway)
	time.Sleep(max(digestPlacementGrace, reclaimGrace) + 200*time.Millisecond)

	live := func(when string) {
		t.Helper()
		requireLayersPresent(t, direct, bucket, blobs, when, 0, 1, 3, 4)
		if ids := backendUploads(t, direct, bucket); !slices.Contains(ids, afterID) {
			t.Fatalf("%s: the upload made after the snapshot was aborted", when)
		}
	}
	rep := restorePass(t, admin)
	if !strings.Contains(rep.Restored, "restored from a snapshot") || rep.Acted.Deleted.Sessions != 0 || rep.Digests == nil || rep.Digests.Deleted != 0 {
		t.Fatalf("first pass after the restore: restored %q, acted %+v, digests %+v", rep.Restored, rep.Acted, rep.Digests)
	}
	live("first pass after the restore")
	if !strings.Contains(rep.Digests.Kept, "restored") {
		t.Errorf("the digest sweep's report does not say it kept everything for the restore: kept %q", rep.Digests.Kept)
	}

	// Passes until the mark is cleared and two more, the last ones free
	// to delete: nothing live goes, the upload stays an orphan, and blob
	// 2, which nothing names, is reclaimed again.
	// The mark waits for the gateway's next clock record (written every
	// second) and a rebuild, so passes are run until then, a moment apart,
	// within a bound of time rather than of passes, which take a few
	// milliseconds on a quiet machine.
	cleared := 0
	for deadline := time.Now().Add(restoreClearWithin); cleared < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the restore mark was not cleared within %v (last pass %d): %s", restoreClearWithin, rep.Pass, rep.Restored)
		}
		rep = restorePass(t, admin)
		live(fmt.Sprintf("pass %d after the restore", rep.Pass))
		if rep.Stopped != "" {
			t.Fatalf("pass %d stopped: %s", rep.Pass, rep.Stopped)
		}
		if rep.Restored == "" {
			cleared++
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if rep.Totals.Orphans != 1 {
		t.Errorf("the upload made after the snapshot is not held as an orphan: %+v", rep.Totals)
	}
	if layerPresent(t, direct, bucket, blobs, 2) {
		t.Errorf("the blob nothing names was not reclaimed once the restore mark was cleared")
	}
	if st := restoreMark(t, admin); st == nil || st.Cleared == nil {
		t.Errorf("status after the passes: restore mark %+v, want a cleared one", st)
	}
}

// startRestoreGateway starts MinIO and a gateway over etcd, with a
// digest layout in bucket and every breaker fraction at 1 (the test's few
// blobs and uploads are its whole plan).
func startRestoreGateway(t *testing.T, etcd *harness.EtcdCluster, bucket string) *harness.Env {
	t.Helper()
	return harness.Start(t, harness.Options{
		EtcdEndpoints: etcd.Endpoints(),
		Config: map[string]any{
			"digests": map[string]any{
				"namespaces": []string{bucket + "/blobs/sha256/"}, "sources": []string{bucket + "/manifests/"},
				"placement_grace": digestPlacementGrace.String(), "max_delete_fraction": 1, "max_mark_fraction": 1,
			},
			"reclaim": map[string]any{"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h", "election_ttl": "2s",
				"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1},
		},
	})
}

// awaitWitness waits until the backend's copy of the restore witness is at
// seq at least least (and at least 1: a round has completed), and returns
// the seq of etcd's copy read after it.
func awaitWitness(t *testing.T, cli *clientv3.Client, direct *s3.Client, bucket, key string, least int64) int64 {
	t.Helper()
	var seq int64
	eventually(t, 20*time.Second, func() (bool, string) {
		out, err := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return false, fmt.Sprintf("backend witness: %v", err)
		}
		body, _ := io.ReadAll(out.Body)
		out.Body.Close()
		b, err := etcdstore.UnmarshalWitness("backend witness", body)
		if err != nil {
			return false, err.Error()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, etcdPrefix+"reclaim/witness")
		if err != nil || len(resp.Kvs) == 0 {
			return false, fmt.Sprintf("etcd witness: %v", err)
		}
		w, err := etcdstore.UnmarshalWitness(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
		if err != nil {
			return false, err.Error()
		}
		seq = w.Seq
		return b.Seq >= least && b.Seq > 0 && w.Seq >= b.Seq, fmt.Sprintf("witness backend seq %d, etcd seq %d, want at least %d", b.Seq, w.Seq, least)
	})
	return seq
}

// restoreMark reads the restore mark from the reclaim status.
func restoreMark(t *testing.T, admin string) *struct {
	Cleared *time.Time `json:"cleared"`
} {
	t.Helper()
	out := mustSweepgate(t, 0, admin, "reclaim", "status", "--json")
	var st struct {
		Restored *struct {
			Cleared *time.Time `json:"cleared"`
		} `json:"restored"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("reclaim status --json: %v\n%s", err, out)
	}
	return st.Restored
}

// restorePass runs a pass like runPass, also when it was refused (exit
// status 4), as every pass is while the restore mark stands.
func restorePass(t *testing.T, admin string) reclaim.Report {
	t.Helper()
	code, out, errOut := sweepgateCmd(t, admin, "reclaim", "run", "--json")
	if code != 0 && code != 4 {
		t.Fatalf("sweepgate reclaim run --json: exit %d\n%s\n%s", code, out, errOut)
	}
	var rep reclaim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reclaim run --json: %v\n%s", err, out)
	}
	if code == 4 && rep.Restored == "" {
		t.Fatalf("pass %d refused, not for the restore: %s", rep.Pass, rep.Refused)
	}
	return rep
}
