//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestNewerRecordsAreRefusedNotMisread plays what a gateway of this
// release meets when a newer release has written state it does not read:
// one upload's session record carries a newer layout version, another's a
// field this release's layout lacks. Every call on those uploads is
// answered 503 ServiceUnavailable naming the record and the versions, and
// leaves the records as they were; a reclaimer pass, although one upload
// is abandoned past the grace, stops naming the record and marks and
// deletes nothing, and the stop is counted. Once the records are of this
// release's layout again, the same calls and passes go through.
func TestNewerRecordsAreRefusedNotMisread(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"reclaim": map[string]any{"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h",
			"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1},
	}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	awaitLeading(t, e.Gateway)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	store := newSessionStore(t, e)
	bucket := e.Bucket(t)

	const newerKey, fieldKey = "newer/version.bin", "newer/field.bin"
	newerID := createUpload(t, sdk, bucket, newerKey)
	mustUploadPart(t, sdk, bucket, newerKey, newerID, 1, smallPart())
	fieldID := createUpload(t, sdk, bucket, fieldKey)
	abandonedAt := time.Now()

	// A newer release's records: the same session with the version
	// raised, and one with a field added.
	originals := map[string][]byte{}
	var newerRev, fieldRev int64
	originals[newerID], newerRev = rewriteSession(t, store, bucket, newerID, map[string]any{"v": 2})
	originals[fieldID], fieldRev = rewriteSession(t, store, bucket, fieldID, map[string]any{"retention_class": "archive"})

	requireRefusedAsNewer(t, sdk, bucket, newerKey, newerID, fieldKey, fieldID)
	for id, rev := range map[string]int64{newerID: newerRev, fieldID: fieldRev} {
		if _, _, modRev, ok := store.lookup(t, bucket, id); !ok || modRev != rev {
			t.Errorf("session %s: mod revision %d (found %v), want %d: a refused call changed it", id, modRev, ok, rev)
		}
	}

	time.Sleep(time.Until(abandonedAt.Add(reclaimGrace + 200*time.Millisecond)))
	code, out, errOut := sweepgateCmd(t, admin, "reclaim", "run", "--json")
	var rep reclaim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code == 0 {
		t.Fatalf("reclaim run over a newer release's records: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if !strings.Contains(rep.Stopped, "newer sweepgate release") || !strings.Contains(rep.Stopped, "session record") || rep.Acted != (reclaim.Acted{}) {
		t.Fatalf("pass %d over a newer release's records: stopped %q, acted %+v", rep.Pass, rep.Stopped, rep.Acted)
	}
	if got := backendPartNumbers(t, direct, bucket, newerKey, newerID); len(got) != 1 {
		t.Fatalf("MinIO holds parts %v of the upload with the newer record, want its one part", got)
	}
	metrics, err := e.Gateway.Metrics()
	if err != nil || !strings.Contains(metrics, "sweepgate_reclaim_newer_record_stops_total 1") {
		t.Errorf("the stopped pass is not counted in sweepgate_reclaim_newer_record_stops_total (%v)", err)
	}

	// This release's layout again: the calls and the pass go through.
	for id, raw := range originals {
		if _, err := store.cli.Put(t.Context(), store.sessionKey(bucket, id), string(raw)); err != nil {
			t.Fatal(err)
		}
	}
	mustUploadPart(t, sdk, bucket, fieldKey, fieldID, 1, smallPart())
	if rep := runPass(t, admin); rep.Stopped != "" {
		t.Fatalf("pass %d over this release's records stopped: %q", rep.Pass, rep.Stopped)
	}

	requirePublishedRelease(t, store)

	requireNewerSchemaRefused(t, e, sdk, store, admin, bucket)
}

// rewriteSession rewrites an upload's session record as a newer release
// might have written it, with change applied to its fields. It returns
// the original value and the revision of the rewrite.
func rewriteSession(t *testing.T, store *sessionStore, bucket, uploadID string, change map[string]any) ([]byte, int64) {
	t.Helper()
	_, raw, _, _ := store.lookup(t, bucket, uploadID)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range change {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	resp, err := store.cli.Put(t.Context(), store.sessionKey(bucket, uploadID), string(b))
	if err != nil {
		t.Fatal(err)
	}
	return raw, resp.Header.Revision
}

// requireRefusedAsNewer checks that calls on the upload whose session has
// a newer version, and on the one whose session has an unknown field, are
// each answered ServiceUnavailable naming the record and what is newer.
func requireRefusedAsNewer(t *testing.T, sdk *s3.Client, bucket, newerKey, newerID, fieldKey, fieldID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name, want string
		call       func() error
	}{
		{"UploadPart, newer version", "has layout version 2; this gateway reads versions 1 to 1", func() error {
			_, err := uploadPart(ctx, sdk, bucket, newerKey, newerID, 2, smallPart())
			return err
		}},
		{"ListParts, newer version", "has layout version 2", func() error {
			_, err := sdk.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(newerKey), UploadId: aws.String(newerID)})
			return err
		}},
		{"AbortMultipartUpload, newer version", "has layout version 2", func() error {
			_, err := sdk.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(newerKey), UploadId: aws.String(newerID)})
			return err
		}},
		{"UploadPart, unknown field", "has a field (retention_class)", func() error {
			_, err := uploadPart(ctx, sdk, bucket, fieldKey, fieldID, 1, smallPart())
			return err
		}},
	} {
		err := c.call()
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ServiceUnavailable" ||
			!strings.Contains(api.ErrorMessage(), "session record") || !strings.Contains(api.ErrorMessage(), c.want) {
			t.Errorf("%s = %v; want ServiceUnavailable naming the session record and %q", c.name, err, c.want)
		}
	}
}

// requirePublishedRelease checks that the gateway publishes its release
// and the keyspace schemas it reads with its clock, which the reclaimer's
// schema gate reads.
func requirePublishedRelease(t *testing.T, store *sessionStore) {
	t.Helper()
	resp, err := store.cli.Get(t.Context(), etcdPrefix+"gateways/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("no gateway record in etcd (%v)", err)
	}
	for _, kv := range resp.Kvs {
		var g etcdstore.GatewayClock
		if err := etcdstore.DecodeKV(etcdstore.GatewayRecord, kv, &g); err != nil {
			t.Fatalf("gateway record %s: %v", kv.Key, err)
		}
		if g.Release != sweepgate.Version() || g.Schema != etcdstore.SchemaVersion || g.SchemaMin != etcdstore.MinSchemaVersion {
			t.Errorf("gateway record %s publishes release %q, schemas %d to %d; want %q, %d to %d",
				kv.Key, g.Release, g.SchemaMin, g.Schema, sweepgate.Version(), etcdstore.MinSchemaVersion, etcdstore.SchemaVersion)
		}
	}
}

// requireNewerSchemaRefused stores the keyspace schema after the newest
// this release reads: passes stop before reading anything, requests that
// would write state are refused while the rest are served, and with the
// schema record gone both go through again.
func requireNewerSchemaRefused(t *testing.T, e *harness.Env, sdk *s3.Client, store *sessionStore, admin, bucket string) {
	t.Helper()
	// A keyspace a newer release migrated: passes stop before reading it.
	later := etcdstore.SchemaVersion + 1
	schemaKey := etcdPrefix + "schema"
	if _, err := store.cli.Put(t.Context(), schemaKey, fmt.Sprintf(`{"v":1,"schema":%d,"by":"a newer release"}`, later)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := sweepgateCmd(t, admin, "reclaim", "run", "--json")
	var rep reclaim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code == 0 {
		t.Fatalf("reclaim run in schema %d: exit %d, %v\n%s\n%s", later, code, err, out, errOut)
	}
	if !strings.Contains(rep.Stopped, fmt.Sprintf("the keyspace is in schema %d", later)) || rep.Acted != (reclaim.Acted{}) {
		t.Fatalf("pass %d in schema %d: stopped %q, acted %+v", rep.Pass, later, rep.Stopped, rep.Acted)
	}
	if metrics, err := e.Gateway.Metrics(); err != nil || !strings.Contains(metrics, "sweepgate_reclaim_schema_stops_total 1") {
		t.Errorf("the stop is not counted in sweepgate_reclaim_schema_stops_total (%v)", err)
	}
	// The gateway refuses what would write state, and serves the rest.
	eventually(t, 15*time.Second, func() (bool, string) {
		_, err := sdk.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("schema2/new.bin")})
		var api smithy.APIError
		return errors.As(err, &api) && api.ErrorCode() == "ServiceUnavailable" && strings.Contains(api.ErrorMessage(), fmt.Sprintf("keyspace schema %d", later)),
			fmt.Sprintf("CreateMultipartUpload in schema %d: %v", later, err)
	})
	if _, err := sdk.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("schema2/plain.txt"), Body: strings.NewReader("plain")}); err != nil {
		t.Errorf("a plain PUT in schema %d: %v", later, err)
	}
	if _, err := store.cli.Delete(t.Context(), schemaKey); err != nil {
		t.Fatal(err)
	}
	if rep := runPass(t, admin); rep.Stopped != "" {
		t.Fatalf("pass %d in schema 1 again stopped: %q", rep.Pass, rep.Stopped)
	}
	eventually(t, 15*time.Second, func() (bool, string) {
		_, err := sdk.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("schema1/new.bin")})
		return err == nil, fmt.Sprintf("CreateMultipartUpload in schema 1 again: %v", err)
	})
}
