//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The shards test's settings: a short grace so that each shard's
// reclaimer has an abandoned upload to abort during the test.
const (
	shGrace       = 3 * time.Second
	shDeleteAfter = time.Second
	shPhase       = 60 * time.Second
)

// shard is one shard of the test: its etcd (one member of its own), its
// bucket and the sessions it keeps.
type shard struct {
	name   string
	etcd   *harness.EtcdCluster
	bucket string
	store  *sessionStore
	// proxies are each gateway's link to the shard's etcd, for shard logs
	// only (nil for the others).
	proxies []*harness.TCPProxy
}

// TestShards runs two gateways over three etcd shards, each a one-member
// cluster of its own, with a bucket on each: multipart uploads complete on
// every shard with their sessions in that shard's etcd only and the
// bucket's entry in the default shard's directory; a digest layout on a
// non-default shard records its references there; each shard has its own
// reclaimer leader and term, and each shard's abandoned upload is aborted
// in its own shard's term; with one gateway cut from one shard's etcd,
// that shard's election goes to the other gateway while the first keeps
// the default shard, and both shards' passes run at once, each on its
// leader in its own term; with one shard's etcd killed the other shards'
// multipart uploads and passes go on while the killed shard's are refused
// with SlowDown; and a configuration that puts a bucket on another shard
// than its stored assignment is refused at start, naming the move.
func TestShards(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	m, shards, gateways, clients, direct := shStart(t)
	ctx := t.Context()
	reg := shards[2].bucket
	// An upload made on MinIO behind the gateways' back, in the logs
	// shard's bucket: an orphan for that shard's reclaimer alone, since no
	// other shard's reclaimer lists that bucket.
	orphan, err := direct.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(shards[1].bucket), Key: aws.String("orphan")})
	if err != nil {
		t.Fatalf("CreateMultipartUpload on MinIO: %v", err)
	}

	// A multipart upload on each shard, its session in that shard only,
	// and the bucket's entry in the default shard's directory.
	done := map[string]string{}
	for i, sh := range shards {
		id := shMultipart(t, clients[i%2], sh.bucket, "done.bin")
		done[sh.name] = id
		for _, other := range shards {
			_, _, _, found := other.store.lookup(t, sh.bucket, id)
			if found != (other == sh) {
				t.Errorf("session of %s's upload in shard %s: %v", sh.name, other.name, found)
			}
		}
		if got := shDirectory(t, shards[0], sh.bucket); got != sh.name {
			t.Errorf("shard directory entry of %s = %q, want %s", sh.bucket, got, sh.name)
		}
	}

	shLayout(t, shards, clients, gateways[0])

	// Each shard has one leader, in its own election, and each shard's
	// abandoned upload is aborted in its own shard's term.
	terms, leaders := shLeaders(t, gateways, shards)
	if terms["main"] == terms["logs"] || terms["logs"] == terms["reg"] || terms["main"] == terms["reg"] {
		t.Fatalf("the shards' terms do not tell them apart: %v", terms)
	}
	abandoned := map[*shard]string{}
	for _, sh := range shards {
		abandoned[sh] = shAbandon(t, clients[1], sh.bucket, "abandoned.bin")
	}
	for _, sh := range shards {
		term := shAwaitAborted(t, sh, abandoned[sh])
		if term != terms[sh.name] {
			t.Errorf("shard %s's abandoned upload was aborted in term %d; the shard's own election is in term %d (all terms: %v)", sh.name, term, terms[sh.name], terms)
		}
	}
	// The admin API and the commands act on each shard's own state.
	shAdmin(t, gateways, shards, leaders, terms, done)
	// An orphan's deletion goes to the shard of its bucket, on every
	// gateway: the logs shard's reclaimer, which holds it.
	shOrphanOnItsShard(t, gateways, shards, aws.ToString(orphan.UploadId))

	// Many passes later, only the logs shard's reclaimer holds the orphan.
	for _, sh := range shards {
		s, _ := readMetrics(t, gateways[leaders[sh.name]])
		held, _ := s.series("sweepgate_reclaim_orphans_held", "shard", sh.name)
		if want := sh.name == "logs"; (held > 0) != want {
			t.Errorf("shard %s's reclaimer holds %v orphans; want one only in shard logs, whose bucket has it", sh.name, held)
		}
	}

	// The shards' passes on different gateways at once.
	terms, leaders = shSplitLeaders(t, gateways, clients, shards, terms, leaders)
	t.Logf("after the split: terms %v, leaders %v", terms, leaders)

	// One shard's etcd dies: the others' uploads and passes go on.
	logs := shards[1]
	logs.etcd.Kill(0)
	for _, sh := range []*shard{shards[0], shards[2]} {
		shMultipart(t, clients[0], sh.bucket, "during-outage.bin")
		id := shAbandon(t, clients[1], sh.bucket, "abandoned-during-outage.bin")
		shAwaitAborted(t, sh, id)
	}
	_, err = clients[0].CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(logs.bucket), Key: aws.String("refused")})
	if code := apiErrorCode(err); code != "SlowDown" {
		t.Errorf("CreateMultipartUpload on the killed shard: %v (code %q), want SlowDown", err, code)
	}
	shRequireShardDown(t, gateways[0], "logs")
	logs.etcd.Restart(0)

	// The default shard's etcd dies: buckets whose directory entry the
	// gateways hold keep their uploads.
	shards[0].etcd.Kill(0)
	shMultipart(t, clients[1], reg, "default-shard-down.bin")
	shards[0].etcd.Restart(0)

	shRefusedStart(t, m, shards)
}

// shRefusedStart starts serve with a configuration that puts the logs
// shard's bucket on shard reg: it must refuse, naming the move.
func shRefusedStart(t *testing.T, m *harness.MinIO, shards []*shard) {
	t.Helper()
	// A configuration that puts the logs bucket on shard reg contradicts
	// the directory: serve refuses to start and names the move.
	moved := fmt.Sprintf("[{name: main, endpoints: [%s]}, {name: logs, endpoints: [%s]}, {name: reg, endpoints: [%s], buckets: [%s, %s]}]",
		shards[0].etcd.Endpoint(0), shards[1].etcd.Endpoint(0), shards[2].etcd.Endpoint(0), shards[2].bucket, shards[1].bucket)
	code, _, stderr := runSweepgate(t, nil, "serve", "--backend-endpoint", m.Endpoint, "--backend-access-key", m.AccessKey,
		"--backend-secret-key", m.SecretKey, "--listen", "127.0.0.1:0", "--tls-listen", "", "--admin-listen", "", "--etcd-shards", moved,
		"--etcd-embedded-data-dir", t.TempDir())
	want := fmt.Sprintf("bucket %s: its state is on shard logs (shard directory), but etcd.shards puts it on shard reg", shards[1].bucket)
	if code == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "sweepgate shards move "+shards[1].bucket+" --to reg") {
		t.Errorf("serve with a contradicting configuration: exit %d, want an error containing %q and the move command\n%s", code, want, stderr)
	}
}

// shLayout checks that the digest layout's state is on its shard, reg:
// the references a manifest names, the blob they protect, and a plane's
// frontier reported through g's admin API.
func shLayout(t *testing.T, shards []*shard, clients []*s3.Client, g *harness.Gateway) {
	t.Helper()
	ctx, reg := t.Context(), shards[2].bucket
	// The digest layout lives on shard reg: its references are recorded
	// there and nowhere else.
	blob := []byte("a blob on the reg shard")
	digest, blobKey := casBlobKey(blob)
	if _, err := clients[0].PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(reg), Key: aws.String(blobKey), Body: bytes.NewReader(blob)}); err != nil {
		t.Fatalf("PUT blob: %v", err)
	}
	manifest := []byte(`{"layers":["` + digest + `"]}`)
	if _, err := clients[1].PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(reg), Key: aws.String("manifests/m1"), Body: bytes.NewReader(manifest)}); err != nil {
		t.Fatalf("PUT manifest: %v", err)
	}
	for _, sh := range shards {
		n := shCount(t, sh, etcdPrefix+"refs/"+url.PathEscape(digest)+"/")
		if (n > 0) != (sh.name == "reg") {
			t.Errorf("references of the manifest's digest in shard %s: %d", sh.name, n)
		}
	}
	// The layout's blob is protected by the reference on its shard.
	if _, err := clients[0].DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(reg), Key: aws.String(blobKey)}); err == nil {
		t.Error("DELETE of a referenced blob on the reg shard succeeded")
	}

	// A plane's frontier goes where the layout's sweep reads it: shard reg.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.AdminEndpoint+"/admin/v1/frontiers/backup", strings.NewReader(`{"revision": 1}`))
	req.Header.Set("Authorization", "Bearer "+g.AdminToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /admin/v1/frontiers/backup = %d", resp.StatusCode)
	}
	for _, sh := range shards {
		if n := shCount(t, sh, etcdPrefix+"frontiers/"); (n > 0) != (sh.name == "reg") {
			t.Errorf("frontier records in shard %s: %d; want them in the layout's shard reg only", sh.name, n)
		}
	}
}

// shOrphanOnItsShard asks every gateway to delete the orphan in the logs
// shard's bucket without confirming: each previews the deletion of the
// orphan the logs shard's reclaimer holds (the default shard's would
// refuse an upload of another shard's bucket); nothing is deleted, and no
// shard has a session for it.
func shOrphanOnItsShard(t *testing.T, gateways []*harness.Gateway, shards []*shard, uploadID string) {
	t.Helper()
	ref := fmt.Sprintf(`{"refs": [{"bucket": %q, "key": "orphan", "upload_id": %q}], "principal": "op"}`, shards[1].bucket, uploadID)
	for i, g := range gateways {
		code, body := shAdminCall(t, g, http.MethodPost, "/admin/v1/reclaim/orphans/delete", ref)
		var del adminapi.OrphanDeletion
		if code != http.StatusConflict || json.Unmarshal(body, &del) != nil || del.Error == nil || del.Error.Code != adminapi.CodeNotConfirmed ||
			len(del.Results) != 1 || del.Results[0].Outcome != "would delete (not confirmed)" || del.Deleted != 0 {
			t.Errorf("unconfirmed delete of shard logs' orphan on gateway %d = %d %s", i, code, body)
		}
	}
	for _, sh := range shards {
		if _, _, _, found := sh.store.lookup(t, shards[1].bucket, uploadID); found {
			t.Errorf("shard %s has a session for the orphan", sh.name)
		}
	}
}

// shRequireShardDown checks that g reports shard name's etcd down, and
// only it: /etcdz names it, and sweepgate_etcd_available says 0 for it
// and 1 for the others.
func shRequireShardDown(t *testing.T, g *harness.Gateway, name string) {
	t.Helper()
	eventually(t, shPhase, func() (bool, string) {
		resp, err := http.Get(g.AdminEndpoint + "/etcdz")
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "shard "+name+":") || strings.Count(string(body), "shard ") != 1 {
			return false, fmt.Sprintf("/etcdz = %d %s", resp.StatusCode, body)
		}
		return true, ""
	})
	s, _ := readMetrics(t, g)
	for _, sh := range []string{"main", "logs", "reg"} {
		v, ok := s.series("sweepgate_etcd_available", "shard", sh)
		if want := sh != name; !ok || (v == 1) != want {
			t.Errorf("sweepgate_etcd_available{shard=%q} = %v (exported %v)", sh, v, ok)
		}
	}
}

// shMultipart uploads and completes a two-part upload and returns its id.
func shMultipart(t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	ctx := t.Context()
	out, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s/%s: %v", bucket, key, err)
	}
	id := aws.ToString(out.UploadId)
	first := mustUploadPart(t, c, bucket, key, id, 1, harness.NewData(1, mnPartSize).Section(0, mnPartSize))
	second := mustUploadPart(t, c, bucket, key, id, 2, smallPart())
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{first, second}}}); err != nil {
		t.Fatalf("CompleteMultipartUpload %s/%s: %v", bucket, key, err)
	}
	return id
}

// shAbandon begins an upload with one part and leaves it.
func shAbandon(t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s/%s: %v", bucket, key, err)
	}
	id := aws.ToString(out.UploadId)
	mustUploadPart(t, c, bucket, key, id, 1, smallPart())
	return id
}

// shAwaitAborted waits until sh's reclaimer has aborted the upload and
// returns the term it aborted it in.
func shAwaitAborted(t *testing.T, sh *shard, id string) int64 {
	t.Helper()
	var term int64
	eventually(t, shPhase, func() (bool, string) {
		rec, raw, _, found := sh.store.lookup(t, sh.bucket, id)
		if !found || rec.State != "aborted" {
			return false, fmt.Sprintf("shard %s's abandoned upload is %q: %s", sh.name, rec.State, rec.path())
		}
		term = mnAbortTerm(t, raw)
		return true, ""
	})
	return term
}

// shDirectory reads bucket's entry in the default shard's directory.
func shDirectory(t *testing.T, def *shard, bucket string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := def.store.cli.Get(ctx, etcdPrefix+"shards/buckets/"+url.PathEscape(bucket))
	if err != nil {
		t.Fatalf("read the shard directory: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// shCount counts the keys under prefix in sh's etcd.
func shCount(t *testing.T, sh *shard, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := sh.store.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count %s in shard %s: %v", prefix, sh.name, err)
	}
	return resp.Count
}

// shLeaders waits until each shard has exactly one leader among the
// gateways (sweepgate_reclaim_leading with the shard's label) and returns
// each shard's term as its leader reports it.
func shLeaders(t *testing.T, gateways []*harness.Gateway, shards []*shard) (terms map[string]int64, leader map[string]int) {
	t.Helper()
	terms, leader = map[string]int64{}, map[string]int{}
	eventually(t, shPhase, func() (bool, string) {
		for _, sh := range shards {
			leaders := 0
			for i, g := range gateways {
				s, _ := readMetrics(t, g)
				if v, _ := s.series("sweepgate_reclaim_leading", "shard", sh.name); v == 1 {
					leaders++
					leader[sh.name] = i
					term, _ := s.series("sweepgate_reclaim_term", "shard", sh.name)
					terms[sh.name] = int64(term)
				}
			}
			if leaders != 1 {
				return false, fmt.Sprintf("shard %s has %d reclaimer leaders", sh.name, leaders)
			}
		}
		return true, ""
	})
	t.Logf("reclaimer terms by shard: %v, leading gateways: %v", terms, leader)
	return terms, leader
}

// shStart starts MinIO, three one-member etcd clusters as the shards
// main (the default), logs and reg, each with a bucket, the digest layout
// on reg, and two gateways over them with short reclaim settings.
func shStart(t *testing.T) (*harness.MinIO, []*shard, []*harness.Gateway, []*s3.Client, *s3.Client) {
	t.Helper()
	m := harness.StartMinIO(t)
	base := harness.BucketName(t)
	shards := []*shard{{name: "main"}, {name: "logs"}, {name: "reg"}}
	var spec []map[string]any
	for i, sh := range shards {
		sh.etcd = harness.StartEtcdCluster(t, 1)
		sh.bucket = fmt.Sprintf("%s-%s", base, sh.name)
		sh.store = &sessionStore{cli: sh.etcd.Client(t), prefix: etcdPrefix}
		// Each shard's revisions run apart, so that its terms (the create
		// revisions of its leader keys) are its own and no other shard's.
		for j := range 25 * i {
			if _, err := sh.store.cli.Put(t.Context(), fmt.Sprintf("/elsewhere/%d", j), "x"); err != nil {
				t.Fatal(err)
			}
		}
		if sh.name == "reg" {
			// Shard reg is a keyspace of schema 1, as one an older release
			// started: its own migration moves it, and no other shard's.
			if _, err := sh.store.cli.Put(t.Context(), etcdPrefix+"schema", `{"v":1,"schema":1,"by":"the test"}`); err != nil {
				t.Fatal(err)
			}
		}
		s := map[string]any{"name": sh.name, "endpoints": sh.etcd.Endpoints()}
		if i > 0 {
			s["buckets"] = []string{sh.bucket}
		}
		spec = append(spec, s)
	}
	reg := shards[2].bucket
	opts := harness.Options{
		EtcdShards: spec,
		Config: map[string]any{
			"etcd": map[string]any{"request_timeout": "2s", "dial_timeout": "2s"},
			"reclaim": map[string]any{
				"grace": shGrace.String(), "delete_after": shDeleteAfter.String(), "interval": "1s", "election_ttl": "2s",
				"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1,
			},
			"digests": map[string]any{"namespaces": []string{reg + "/blobs/sha256/"}, "sources": []string{reg + "/manifests/"}},
		},
	}
	// Each gateway reaches shard logs' etcd through a proxy of its own.
	logs := shards[1]
	gateways := make([]*harness.Gateway, 2)
	for i := range gateways {
		p := harness.StartTCPProxy(t, logs.etcd.Endpoints()[0])
		logs.proxies = append(logs.proxies, p)
		own := opts
		own.EtcdShards = slices.Clone(spec)
		own.EtcdShards[1] = maps.Clone(spec[1])
		own.EtcdShards[1]["endpoints"] = []string{p.URL}
		gateways[i] = harness.StartGateway(t, m, own)
	}
	direct := harness.NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, mnTransport(t), true)
	clients := make([]*s3.Client, len(gateways))
	for i, g := range gateways {
		clients[i] = harness.NewS3Client(g.Endpoint, m.Region, m.AccessKey, m.SecretKey, mnTransport(t), true)
	}
	for _, sh := range shards {
		if _, err := direct.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(sh.bucket)}); err != nil {
			t.Fatalf("create bucket %s on MinIO: %v", sh.bucket, err)
		}
	}
	return m, shards, gateways, clients, direct
}
