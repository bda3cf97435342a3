//go:build integration

package gateway

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// TestUploadPartCommits: the etcd commits an UploadPart through the
// gateway makes on its upload's keys. In keyspace schema 1 two: the one
// that records it in flight (its own record, and the activity key) before
// its bytes go to the backend, and the one that ends it, which removes
// that record and records the part. From schema 2 the parts of a burst on
// one gateway share one lingering in-flight record: the first part writes
// it, each part's end is one commit that writes its part record alone, and
// the record is deleted once, after the linger: N parts make N + 2
// commits. When the client has its answer, the part's record is stored in
// the layout of the schema the store writes.
func TestUploadPartCommits(t *testing.T) {
	t.Parallel()
	m := harness.StartMinIO(t)
	direct, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "partcommits"
	if err := direct.MakeBucket(t.Context(), bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	_, cli := etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/partcommits/")
	if err != nil {
		t.Fatal(err)
	}
	store := etcdstore.NewStore(cli, keys)
	timers := &reclaimtest.Timers{}
	g := newTestGateway(t, testParts{Endpoint: m.Endpoint, Region: m.Region, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Sessions: &multipart.Config{Store: store, AfterFunc: timers.After}},
		Config{Credentials: []sigv4.Credential{{AccessKey: "client", SecretKey: "client-secret-1", Principal: "client"}}})
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	c, err := harness.NewMinioGo(srv.URL, m.Region, "client", "client-secret-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	core := minio.Core{Client: c}
	ctx := t.Context()
	id, err := core.NewMultipartUpload(ctx, bucket, "object", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}

	total := map[int]int{}
	for _, schema := range []int{1, 2} {
		if schema == 2 {
			// A keyspace migrated to schema 2, as the gateway's schema check
			// finds it.
			if _, err := cli.Put(ctx, keys.Schema(), `{"v":1,"schema":2}`); err != nil {
				t.Fatal(err)
			}
			if err := etcdstore.NewSchemaCheck(store, nil).Check(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for n := 1; n <= 3; n++ {
			part := (schema-1)*3 + n
			start, err := cli.Get(ctx, keys.Schema())
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			watch := cli.Watch(wctx, keys.Root(), clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))
			body := bytes.Repeat([]byte{byte('a' + part)}, 1024)
			up, err := core.PutObjectPart(ctx, bucket, "object", id, part, bytes.NewReader(body), int64(len(body)), minio.PutObjectPartOptions{})
			if err != nil {
				t.Fatalf("schema %d, part %d: %v", schema, part, err)
			}
			requireRecorded(t, store, cli, id, schema, part, up.ETag)
			// The commits that touched the upload's keys: a part's end is
			// committed before the answer, so the watch has them all once
			// it has the part record's put.
			commits, writes := commitsUntil(t, watch, id, keys.Part(id, part))
			cancel()
			// The writes are the history a part leaves: in schema 1 the
			// activity key twice, the in-flight record's put and delete and
			// the part record; from schema 2 no activity key, and the
			// in-flight record's put by the first part only.
			wantCommits, wantWrites := 2, 5
			if schema == 2 {
				wantCommits, wantWrites = 1, 1
				if n == 1 {
					wantCommits, wantWrites = 2, 2
				}
			}
			if len(commits) != wantCommits || writes != wantWrites {
				t.Errorf("schema %d, part %d: %d etcd commits writing %d keys on the upload's keys, want %d commits writing %d", schema, part, len(commits), writes, wantCommits, wantWrites)
			}
			total[schema] += len(commits)
		}
		if schema == 1 {
			continue
		}
		// The linger ends: the record is deleted, in one more commit.
		lingerEnds(t, cli, keys, id, timers)
		total[schema]++
	}
	// Three parts: in schema 1 six commits, from schema 2 three plus the
	// record's put and its delete.
	if total[1] != 6 || total[2] != 3+2 {
		t.Errorf("commits for three parts: %d in schema 1, %d in schema 2; want 6 and 5", total[1], total[2])
	}
}

// requireRecorded checks what etcd holds once the client has the answer to
// part of the upload id: its part record, in the layout of schema, and the
// in-flight records: none in schema 1, where the part's own went with its
// end; from schema 2 the upload's, which lingers.
func requireRecorded(t *testing.T, store *etcdstore.Store, cli *clientv3.Client, id string, schema, part int, etag string) {
	t.Helper()
	ctx := t.Context()
	parts, err := store.ListParts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rec := parts[len(parts)-1]
	if len(parts) != part || rec.Number != part || strings.Trim(rec.ETag, `"`) != strings.Trim(etag, `"`) || rec.Size != 1024 || rec.Version != etcdstore.PartLayout(schema) {
		t.Fatalf("schema %d, part %d: recorded %+v (of %d); want it in layout %d with ETag %q", schema, part, rec, len(parts), etcdstore.PartLayout(schema), etag)
	}
	if resp, err := cli.Get(ctx, store.Keys().InFlight(id), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != int64(schema-1) {
		t.Fatalf("schema %d, part %d: %v records in flight after the answer (%v), want %d", schema, part, resp.Count, err, schema-1)
	}
}

// commitsUntil counts the commits and the writes on the upload id's keys
// that watch reports, up to the one that writes lastKey.
func commitsUntil(t *testing.T, watch clientv3.WatchChan, id, lastKey string) (commits map[int64]bool, writes int) {
	t.Helper()
	commits = map[int64]bool{}
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case wr := <-watch:
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				if strings.Contains(k, url.PathEscape(id)) {
					commits[ev.Kv.ModRevision] = true
					writes++
				}
				seen = seen || k == lastKey
			}
		case <-deadline:
			t.Fatalf("the watch never saw %s", lastKey)
		}
	}
	return commits, writes
}

// lingerEnds fires the pending removal of the upload id's lingering
// in-flight record and checks that it deleted the record in one commit.
func lingerEnds(t *testing.T, cli *clientv3.Client, keys etcdstore.Keys, id string, timers *reclaimtest.Timers) {
	t.Helper()
	ctx := t.Context()
	start, err := cli.Get(ctx, keys.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if fired := timers.Fire(); fired != 1 {
		t.Fatalf("%d removals were pending after the parts, want 1", fired)
	}
	resp, err := cli.Get(ctx, keys.InFlight(id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%v records in flight after the linger (%v), want none", resp.Count, err)
	}
	hist, err := cli.Get(ctx, keys.Root(), clientv3.WithPrefix(), clientv3.WithMinModRev(start.Header.Revision+1))
	if err != nil {
		t.Fatal(err)
	}
	if hist.Header.Revision != start.Header.Revision+1 || len(hist.Kvs) != 0 {
		t.Errorf("the linger's end made %d revisions, want one (the record's delete)", hist.Header.Revision-start.Header.Revision)
	}
}
