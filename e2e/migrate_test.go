//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate"
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestMigrationBesidePreviousRelease runs the migration to this release's
// keyspace schema while the previous release and this tree's binary serve
// side by side on one etcd and one MinIO. Before it, both write part
// records the previous release reads. The plan names the older gateway
// and changes nothing, and the run refuses while it is live; forced, it
// runs under the leader's term while both serve. Afterwards the parts
// written before read back unchanged in the new layout, this release
// writes the new layout and completes an upload whose parts both releases
// wrote, with the right bytes; the previous release refuses every request
// that writes state instead of misreading the new records, and serves
// plain calls; a pass stops while it is live and runs once it is gone;
// and a second run only checks.
func TestMigrationBesidePreviousRelease(t *testing.T) {
	t.Parallel()
	w := startBesidePreviousRelease(t, map[string]any{"grace": reclaimGrace.String(), "interval": "1h", "election_ttl": "2s"})
	prev, newGw, oldGw, store, bucket := w.prev, w.newGw, w.oldGw, w.store, w.bucket
	newSDK, oldSDK, direct := w.newSDK, w.oldSDK, w.direct
	admin := newGw.AdminEndpoint

	// Before the migration both releases write the layout both read.
	const key = "migrate/across.bin"
	id := createUpload(t, oldSDK, bucket, key)
	done := []s3types.CompletedPart{
		mustUploadPart(t, oldSDK, bucket, key, id, 1, partOf('a', minPartSize)),
		mustUploadPart(t, newSDK, bucket, key, id, 2, partOf('b', minPartSize)),
	}
	before := sessionParts(t, admin, bucket, id)
	requirePartLayouts(t, store, id, map[int]int{1: 1, 2: 1})

	requireMigrationHeldBack(t, store, admin, prev, id)

	// Forced, it runs while both serve.
	var res adminapi.MigrationResult
	decodeJSON(t, mustSweepgate(t, 0, admin, "migrate", "--apply", "--force", "--principal", "e2e", "--json"), &res)
	if res.From != 1 || res.To != etcdstore.SchemaVersion || len(res.Steps) != 1 || res.Steps[0].Rewritten < 2 || res.Term == 0 {
		t.Fatalf("migration %+v; want schema 1 to %d with both parts rewritten under a term", res, etcdstore.SchemaVersion)
	}
	requireStoredSchema(t, store, 2)
	requirePartLayouts(t, store, id, map[int]int{1: 2, 2: 2})
	if after := sessionParts(t, admin, bucket, id); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the parts read back after the migration as %+v; before it they were %+v", after, before)
	}

	// This release writes the new layout (once it has read the schema,
	// within a second) and completes the upload.
	eventually(t, 15*time.Second, func() (bool, string) {
		mustUploadPart(t, newSDK, bucket, key, id, 3, partOf('c', 4096))
		return partLayout(t, store, id, 3) == 2, "part 3 is still written in layout 1"
	})
	done = append(done, mustUploadPart(t, newSDK, bucket, key, id, 3, partOf('c', 4096)))
	if _, err := completeUpload(t.Context(), newSDK, bucket, key, id, done); err != nil {
		t.Fatalf("complete after the migration: %v", err)
	}
	sum := sha256.New()
	sum.Write(bytes.Repeat([]byte{'a'}, minPartSize))
	sum.Write(bytes.Repeat([]byte{'b'}, minPartSize))
	sum.Write(bytes.Repeat([]byte{'c'}, 4096))
	requireObjectSum(t, direct, bucket, key, hex.EncodeToString(sum.Sum(nil)), 2*minPartSize+4096)

	live := requireStateRefusedBy(t, prev, oldSDK, newSDK, bucket, key)

	// Passes stop while the previous release is live, and run once it is
	// gone.
	code, out, _ := sweepgateCmd(t, admin, "reclaim", "run", "--json")
	if code == 0 || !strings.Contains(out, "sweepgate "+prev.Version) {
		t.Fatalf("a pass beside %s in schema 2: exit %d\n%s\nwant it stopped naming that gateway", prev.Version, code, out)
	}
	oldGw.Stop()
	eventually(t, 30*time.Second, func() (bool, string) {
		code, out, _ := sweepgateCmd(t, admin, "reclaim", "run", "--json")
		return code == 0, fmt.Sprintf("a pass after %s stopped: exit %d\n%s", prev.Version, code, out)
	})

	// A second run only checks.
	decodeJSON(t, mustSweepgate(t, 0, admin, "migrate", "--apply", "--principal", "e2e", "--json"), &res)
	if len(res.Steps) != 0 || res.Check == nil || res.Check.Rewritten != 0 {
		t.Fatalf("second migration %+v; want only a check that rewrites nothing", res)
	}
	requirePartLayouts(t, store, live, map[int]int{1: 2})
}

// minPartSize is S3's smallest part but the last.
const minPartSize = 5 << 20

// partOf is a part of size bytes c.
func partOf(c byte, size int) *io.SectionReader {
	b := bytes.Repeat([]byte{c}, size)
	return io.NewSectionReader(bytes.NewReader(b), 0, int64(len(b)))
}

func isUnavailable(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ServiceUnavailable"
}

func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// sessionParts is what `sweepgate sessions show` says of an upload's
// recorded parts.
func sessionParts(t *testing.T, admin, bucket, uploadID string) []adminapi.Part {
	t.Helper()
	var d adminapi.SessionDetail
	decodeJSON(t, mustSweepgate(t, 0, admin, "sessions", "show", bucket, uploadID, "--json"), &d)
	return d.Parts
}

// partLayout is the layout the record of an upload's part is stored in.
func partLayout(t *testing.T, store *sessionStore, uploadID string, n int) int {
	t.Helper()
	resp, err := store.cli.Get(t.Context(), fmt.Sprintf("%s%05d", store.partsPrefix(uploadID), n))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("part %d of %s: %v", n, uploadID, err)
	}
	p, err := etcdstore.DecodePart(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return p.Version
}

// requirePartLayouts checks the layouts an upload's part records are
// stored in, by part number.
func requirePartLayouts(t *testing.T, store *sessionStore, uploadID string, want map[int]int) {
	t.Helper()
	resp, err := store.cli.Get(t.Context(), store.partsPrefix(uploadID), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for _, kv := range resp.Kvs {
		p, err := etcdstore.DecodePart(string(kv.Key), kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		got[p.Number] = p.Version
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("part layouts of %s: %v, want %v", uploadID, got, want)
	}
}

func requireStoredSchema(t *testing.T, store *sessionStore, want int) {
	t.Helper()
	resp, err := store.cli.Get(t.Context(), etcdPrefix+"schema")
	if err != nil {
		t.Fatal(err)
	}
	got := 1
	if len(resp.Kvs) > 0 {
		var r etcdstore.SchemaRecord
		if err := etcdstore.DecodeKV(etcdstore.SchemaRecordKind, resp.Kvs[0], &r); err != nil {
			t.Fatal(err)
		}
		got = r.Schema
	}
	if got != want {
		t.Fatalf("stored schema %d, want %d (release %s)", got, want, sweepgate.Version())
	}
}

// requireMigrationHeldBack checks that the plan names the gateway of the
// previous release, that the run refuses while it is live, and that
// neither changed anything.
func requireMigrationHeldBack(t *testing.T, store *sessionStore, admin string, prev harness.Release, id string) {
	t.Helper()
	// The plan names the older gateway; the run refuses while it is live.
	var plan adminapi.MigrationPlan
	decodeJSON(t, mustSweepgate(t, 0, admin, "migrate", "--json"), &plan)
	if plan.Stored != 1 || plan.Target != etcdstore.SchemaVersion || len(plan.Steps) != 1 || plan.Steps[0].Rewritten != 2 ||
		len(plan.Blocked) != 1 || plan.Blocked[0].Release != prev.Version {
		t.Fatalf("plan %+v; want one step rewriting 2 parts, held back by the gateway of %s", plan, prev.Version)
	}
	code, _, errOut := sweepgateCmd(t, admin, "migrate", "--apply", "--principal", "e2e")
	if code != 4 || !strings.Contains(errOut, "sweepgate "+prev.Version) {
		t.Fatalf("migrate --apply beside %s: exit %d, %s; want 4 naming it", prev.Version, code, errOut)
	}
	requireStoredSchema(t, store, 1)
	requirePartLayouts(t, store, id, map[int]int{1: 1, 2: 1})
}

// requireStateRefusedBy checks that the previous release refuses, after
// the migration, what would write state (a create, a part of an upload
// begun through this release), and serves plain calls (a PUT, a GET of
// key read whole); it returns the upload begun through this release.
func requireStateRefusedBy(t *testing.T, prev harness.Release, oldSDK, newSDK *s3.Client, bucket, key string) string {
	t.Helper()
	// The previous release refuses what would write state, and serves the
	// rest.
	eventually(t, 15*time.Second, func() (bool, string) {
		_, err := oldSDK.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("migrate/old.bin")})
		var api smithy.APIError
		return errors.As(err, &api) && api.ErrorCode() == "ServiceUnavailable" && strings.Contains(api.ErrorMessage(), "keyspace schema 2"),
			fmt.Sprintf("CreateMultipartUpload through %s after the migration: %v", prev.Version, err)
	})
	live := createUpload(t, newSDK, bucket, "migrate/live.bin")
	mustUploadPart(t, newSDK, bucket, "migrate/live.bin", live, 1, partOf('d', 4096))
	if _, err := uploadPart(t.Context(), oldSDK, bucket, "migrate/live.bin", live, 2, partOf('e', 4096)); !isUnavailable(err) {
		t.Fatalf("UploadPart through %s after the migration: %v; want ServiceUnavailable", prev.Version, err)
	}
	if _, err := oldSDK.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("migrate/plain.txt"), Body: strings.NewReader("plain")}); err != nil {
		t.Fatalf("a plain PUT through %s after the migration: %v", prev.Version, err)
	}
	got, err := oldSDK.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("a GET through %s after the migration: %v", prev.Version, err)
	}
	n, err := io.Copy(io.Discard, got.Body)
	got.Body.Close()
	if err != nil || n != 2*minPartSize+4096 {
		t.Fatalf("a GET through %s after the migration read %d bytes: %v", prev.Version, n, err)
	}
	return live
}
