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
)

// TestUploadPartCommits: an UploadPart through the gateway makes two etcd
// commits on its session's keys: the one that records it in flight before
// its bytes go to the backend, and the one that ends it, which records the
// part; from keyspace schema 2 they write no activity key. When the client
// has its answer, the part's record is stored in the layout of the schema
// the store writes, and nothing of it is in flight.
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
	g := newTestGateway(t, testParts{Endpoint: m.Endpoint, Region: m.Region, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Sessions: &multipart.Config{Store: store}},
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
			parts, err := store.ListParts(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			rec := parts[len(parts)-1]
			if len(parts) != part || rec.Number != part || strings.Trim(rec.ETag, `"`) != strings.Trim(up.ETag, `"`) || rec.Size != 1024 || rec.Version != etcdstore.PartLayout(schema) {
				t.Fatalf("schema %d, part %d: recorded %+v (of %d); want it in layout %d with ETag %q", schema, part, rec, len(parts), etcdstore.PartLayout(schema), up.ETag)
			}
			if resp, err := cli.Get(ctx, keys.InFlight(id), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
				t.Fatalf("schema %d, part %d: %v records in flight after the answer (%v)", schema, part, resp.Count, err)
			}
			// The commits that touched the upload's keys: a part's end is
			// committed before the answer, so the watch has them all once
			// it has the part record's put.
			commits, writes := map[int64]bool{}, 0
			partKey := keys.Part(id, part)
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
						seen = seen || k == partKey
					}
				case <-deadline:
					t.Fatalf("schema %d, part %d: the watch never saw the part's record", schema, part)
				}
			}
			cancel()
			// The writes are the history a part leaves: in schema 1 the
			// activity key twice, the in-flight record's put and delete and
			// the part record; from schema 2 no activity key.
			wantWrites := map[int]int{1: 5, 2: 3}[schema]
			if len(commits) != 2 || writes != wantWrites {
				t.Errorf("schema %d, part %d: %d etcd commits writing %d keys on the upload's keys, want 2 commits writing %d", schema, part, len(commits), writes, wantWrites)
			}
		}
	}
}
