//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// The envelope benchmark: what one etcd cluster carries, measured on the
// embedded default (one member inside the gateway), on a three-member
// cluster of separate processes on this machine, and on three shards
// (etcd.shards: three one-member clusters of separate processes on this
// machine, one bucket on each), each behind a real gateway in front of
// MinIO:
//
//   - parts/s: UploadPart calls of 1 KiB from envelopeClients clients
//     through the gateway and directly on MinIO, in alternating rounds
//     (envelope_parts_test.go); the keyspace is new, so the gateway starts it in schema 2, where a
//     part costs one etcd commit after the first of its upload's on a
//     gateway (the in-flight record lingers), so this is where the write
//     path's limit shows; with shards, client w sends to bucket w mod 3,
//     so each shard takes a third of the clients (6, 5 and 5 of 16);
//   - database bytes per session (a CreateMultipartUpload through the
//     gateway), per part, per recorded reference and per tombstone: the
//     growth of the etcd database in use (bbolt pages, every revision
//     written, as nothing is compacted during the run) over how many were
//     written; with shards, each shard's growth over the items written to
//     that shard (references and tombstones go to the first shard, as a
//     digest layout lives in one shard);
//   - from these, how many of each fit in the backend quota (2 GiB, etcd's
//     default), and the part rate at which the history kept for the
//     compaction retention (1 h) alone fills it.
//
// References and tombstones are written straight to etcd with the keys
// and records the gateway and the reclaimer write (as BenchmarkDigestSweep
// seeds them); sessions and parts go through the gateway.
const (
	envelopeClients    = 16
	envelopeTime       = 8 * time.Second
	envelopeSessions   = 2_000
	envelopeRefs       = 100_000
	envelopeTombstones = 20_000
	envelopeRetention  = time.Hour // etcdstore.DefaultAutoCompactionRetention
	envelopeQuota      = etcdstore.DefaultQuotaBackendBytes
	// targetPartsRatio is the least UploadPart rate through the gateway
	// with its embedded member, over MinIO's alone.
	targetPartsRatio = 0.7
	// envelopeLeastPartBytes is less than a part record's key and value.
	envelopeLeastPartBytes = 100
)

// envelopeCluster is one etcd topology's figures.
type envelopeCluster struct {
	Name    string `json:"name"`
	Members int    `json:"members"`
	// Shards is the number of etcd clusters (etcd.shards), 1 without.
	Shards int `json:"shards"`
	// Schema is the keyspace schema the gateway wrote in (of the first
	// shard), read from etcd after the parts.
	Schema int `json:"schema"`
	// Parts per second through the gateway and directly on MinIO: the
	// medians of envelopeRounds alternating rounds, and the median of
	// the rounds' ratios (PartsRatios, one per pair of rounds).
	GatewayPartsPerSec float64   `json:"gateway_parts_per_s"`
	DirectPartsPerSec  float64   `json:"direct_parts_per_s"`
	PartsRatio         float64   `json:"parts_ratio"`
	PartsRatios        []float64 `json:"parts_ratios"`
	// SustainedPartsPerSec is the gateway's rate over the first
	// envelopeTime of parts, the round whose database growth gives the
	// bytes per part.
	SustainedPartsPerSec float64 `json:"sustained_gateway_parts_per_s"`
	// Creates per second through the gateway.
	CreatesPerSec float64 `json:"creates_per_s"`
	// Database bytes in use per item written (with shards, the mean of the
	// shards' figures; PerShard has each).
	BytesPerSession   float64 `json:"db_bytes_per_session"`
	BytesPerPart      float64 `json:"db_bytes_per_part"`
	BytesPerRef       float64 `json:"db_bytes_per_reference"`
	BytesPerTombstone float64 `json:"db_bytes_per_tombstone"`
	// PerShard is each shard's parts, bytes per part and bytes per session.
	PerShard []envelopeShard `json:"per_shard,omitempty"`
	// Records is the size of one session's and one part's record as
	// stored, for reading the bytes above.
	Records envelopeRecords `json:"records"`
	// Commits is the etcd commit rate of the topology without the gateway.
	Commits envelopeCommits `json:"commits"`
	// What one cluster's quota holds: live sessions (with no parts),
	// references, tombstones (one per unreferenced blob a pass judged),
	// and the sustained part rate whose history within the retention
	// fills it (per shard; the deployment's is Shards times it).
	QuotaSessions      float64 `json:"quota_sessions"`
	QuotaRefs          float64 `json:"quota_references"`
	QuotaTombstones    float64 `json:"quota_tombstones"`
	QuotaPartsPerSec   float64 `json:"quota_parts_per_s_at_retention"`
	EtcdRSSBytesPerRef float64 `json:"etcd_rss_bytes_per_reference,omitempty"`
}

// envelopeRecords is the size of the keys and values of one upload's
// session and first part record, and of MinIO's upload ID in them.
type envelopeRecords struct {
	UploadIDBytes     int `json:"upload_id_bytes"`
	SessionKeyBytes   int `json:"session_key_bytes"`
	SessionValueBytes int `json:"session_value_bytes"`
	PartKeyBytes      int `json:"part_key_bytes"`
	PartValueBytes    int `json:"part_value_bytes"`
}

// envelopeShard is one shard's share of a run.
type envelopeShard struct {
	Name            string  `json:"name"`
	Bucket          string  `json:"bucket"`
	Parts           int64   `json:"parts"`
	BytesPerPart    float64 `json:"db_bytes_per_part"`
	Sessions        int64   `json:"sessions"`
	BytesPerSession float64 `json:"db_bytes_per_session"`
}

type envelopeResult struct {
	QuotaBytes       int64             `json:"quota_bytes"`
	RetentionSeconds float64           `json:"retention_seconds"`
	Clusters         []envelopeCluster `json:"clusters"`
	Notes            []string          `json:"notes"`
}

// envelopeTopology is one topology the benchmark measures: members 0 is
// the gateway's embedded etcd, otherwise clusters of that many member
// processes, shards of them (etcd.shards when more than one).
type envelopeTopology struct {
	name    string
	members int
	shards  int
}

func BenchmarkEnvelope(b *testing.B) {
	res := envelopeResult{QuotaBytes: envelopeQuota, RetentionSeconds: envelopeRetention.Seconds()}
	res.Notes = append(res.Notes,
		"database bytes are etcd's db_size_in_use growth over the items written, every revision included (nothing is compacted during the run)",
		"the etcd members and shards run on this machine's disk and cores, as the embedded member does; on separate machines the write path's limit is the slowest member's fsync and the network round trip",
		"quota_parts_per_s_at_retention is the sustained UploadPart rate at which the parts' history within the compaction retention alone fills one cluster's quota",
		"three_shards: client w sends its parts to the bucket of shard w mod 3 (6, 5 and 5 of 16 clients); its bytes are the mean of the shards' own figures",
		"the separate member processes (three_members, three_shards) run with --unsafe-no-fsync, as the test harness starts them; only the embedded member fsyncs its WAL",
		"etcd puts: straight into etcd, not through the gateway, into every shard at once; the rate is over all shards")
	topologies := []envelopeTopology{{"embedded", 0, 1}, {"three_members", 3, 1}, {"three_shards", 1, 3}}
	for i, topo := range topologies {
		b.Run(topo.name, func(b *testing.B) {
			if len(res.Clusters) <= i {
				res.Clusters = append(res.Clusters, benchEnvelope(b, topo))
			}
			c := res.Clusters[len(res.Clusters)-1]
			b.ReportMetric(c.GatewayPartsPerSec, "parts/s")
			b.ReportMetric(c.BytesPerPart, "db-bytes/part")
			b.ReportMetric(c.BytesPerRef, "db-bytes/ref")
		})
	}
	printEnvelope(os.Stdout, &res)
	path, err := mergeResults("envelope", &res)
	if err != nil {
		b.Fatalf("%v", err)
	}
	fmt.Fprintf(os.Stdout, "results: %s\n\n", path)
}

// envShard is one etcd cluster of a topology and the bucket whose state
// it holds.
type envShard struct {
	name      string
	bucket    string
	endpoints []string
	cli       *clientv3.Client
}

func (s envShard) inUse(b *testing.B) int64 { return dbInUse(b, s.cli, s.endpoints) }

// startEnvelope starts the topology's etcd, MinIO and a gateway, and one
// bucket per shard.
func startEnvelope(b *testing.B, topo envelopeTopology) (*harness.Env, []envShard) {
	opts := harness.Options{LogLevel: "info", Config: profileConfig(nil)}
	shards := make([]envShard, topo.shards)
	base := harness.BucketName(b)
	for i := range shards {
		shards[i].name = fmt.Sprintf("s%d", i)
		shards[i].bucket = base
		if topo.members > 0 {
			shards[i].endpoints = harness.StartEtcdCluster(b, topo.members).Endpoints()
		}
		if topo.shards > 1 {
			shards[i].bucket = fmt.Sprintf("%s-%s", base, shards[i].name)
			s := map[string]any{"name": shards[i].name, "endpoints": shards[i].endpoints}
			if i > 0 {
				s["buckets"] = []string{shards[i].bucket}
			}
			opts.EtcdShards = append(opts.EtcdShards, s)
		}
	}
	if topo.shards == 1 && topo.members > 0 {
		opts.EtcdEndpoints = shards[0].endpoints
	}
	env := harness.Start(b, opts)
	env.RequireGateway(b)
	if topo.members == 0 {
		shards[0].endpoints = []string{env.Gateway.EtcdClientURL}
	}
	direct := env.DirectSDK(b)
	for i := range shards {
		if _, err := direct.CreateBucket(b.Context(), &s3.CreateBucketInput{Bucket: aws.String(shards[i].bucket)}); err != nil {
			b.Fatalf("create bucket %s on MinIO: %v", shards[i].bucket, err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: shards[i].endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			b.Fatalf("etcd client: %v", err)
		}
		b.Cleanup(func() { cli.Close() })
		shards[i].cli = cli
	}
	return env, shards
}

// benchEnvelope measures one topology.
func benchEnvelope(b *testing.B, topo envelopeTopology) envelopeCluster {
	env, shards := startEnvelope(b, topo)
	ctx := b.Context()
	res := envelopeCluster{Name: topo.name, Members: max(1, topo.members), Shards: topo.shards}
	buckets := make([]string, len(shards))
	for i, s := range shards {
		buckets[i] = s.bucket
		res.PerShard = append(res.PerShard, envelopeShard{Name: s.name, Bucket: s.bucket})
	}
	before := make([]int64, len(shards))
	mark := func() {
		for i, s := range shards {
			before[i] = s.inUse(b)
		}
	}
	grown := func(i int) float64 { return float64(shards[i].inUse(b) - before[i]) }

	mark()
	var (
		perBucket []int64
		ids       []string
	)
	gwParts := newPartsRun(b, env.SDK(b), buckets, "envelope/gateway")
	profiled := profileGateway(b, env.Gateway, "envelope-"+topo.name+"-parts", envelopeTime-time.Second)
	res.SustainedPartsPerSec = gwParts.round(b, envelopeTime)
	profiled()
	perBucket, ids = gwParts.perBucket(), gwParts.ids
	for i := range shards {
		res.PerShard[i].Parts = perBucket[i]
		res.PerShard[i].BytesPerPart = grown(i) / float64(perBucket[i])
		// A part record alone is longer than this: a shard that grew
		// less did not hold its bucket's parts.
		if res.PerShard[i].BytesPerPart < envelopeLeastPartBytes {
			b.Fatalf("shard %s grew %.0f bytes per part of its bucket %s: its parts are not in its etcd", shards[i].name, res.PerShard[i].BytesPerPart, shards[i].bucket)
		}
	}
	keys, err := etcdstore.NewKeys(etcdstore.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	res.Schema = storedSchema(b, shards[0].cli, keys)
	res.Records = recordSizes(b, shards[0].cli, keys, buckets[0], ids[0])
	directParts := newPartsRun(b, env.DirectSDK(b), buckets, "envelope/direct")
	res.GatewayPartsPerSec, res.DirectPartsPerSec, res.PartsRatio, res.PartsRatios = alternateParts(b, gwParts, directParts)

	mark()
	start := time.Now()
	gw := env.SDK(b)
	if err := inParallel(ctx, envelopeClients, envelopeSessions, func(ctx context.Context, i int) error {
		_, err := createUpload(ctx, gw, buckets[i%len(buckets)], fmt.Sprintf("envelope/session/%06d", i))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	res.CreatesPerSec = envelopeSessions / time.Since(start).Seconds()
	for i := range shards {
		n := int64(envelopeSessions / len(shards))
		if i < envelopeSessions%len(shards) {
			n++
		}
		res.PerShard[i].Sessions = n
		res.PerShard[i].BytesPerSession = grown(i) / float64(n)
		res.BytesPerPart += res.PerShard[i].BytesPerPart / float64(len(shards))
		res.BytesPerSession += res.PerShard[i].BytesPerSession / float64(len(shards))
	}
	if topo.shards == 1 {
		res.PerShard = nil
	}
	benchEnvelopeDigests(b, env, topo, shards[0], keys, &res)
	res.Commits = benchCommits(b, shards, topo.members)

	quota := float64(envelopeQuota)
	res.QuotaSessions = quota / res.BytesPerSession
	res.QuotaRefs = quota / res.BytesPerRef
	res.QuotaTombstones = quota / res.BytesPerTombstone
	res.QuotaPartsPerSec = quota / (envelopeRetention.Seconds() * res.BytesPerPart)
	return res
}

// benchEnvelopeDigests measures the bytes per reference and per tombstone,
// written straight to the shard's etcd, and the embedded member's memory
// per reference.
func benchEnvelopeDigests(b *testing.B, env *harness.Env, topo envelopeTopology, s envShard, keys etcdstore.Keys, res *envelopeCluster) {
	rss0 := memberRSS(env, topo.members)
	before := s.inUse(b)
	seedEnvelopeRefs(b, s.cli, keys, s.bucket)
	res.BytesPerRef = float64(s.inUse(b)-before) / envelopeRefs
	if rss0 > 0 {
		if rss1 := memberRSS(env, topo.members); rss1 > rss0 {
			res.EtcdRSSBytesPerRef = float64(rss1-rss0) / envelopeRefs
		}
	}
	before = s.inUse(b)
	tomb := etcdstore.MarshalRecord(etcdstore.Tombstone{Version: 1, State: etcdstore.TombstonePending,
		Bucket: s.bucket, Key: "blobs/sha256/" + strings.Repeat("0", 64), Size: 4096, Frontier: 1, RefRev: 1, Term: 1, Pass: 1})
	if err := putKeys(b.Context(), s.cli, envelopeTombstones, func(i int) (string, string) {
		return keys.Tombstone(envelopeDigest(1, i)), tomb
	}); err != nil {
		b.Fatal(err)
	}
	res.BytesPerTombstone = float64(s.inUse(b)-before) / envelopeTombstones
}

// storedSchema reads the keyspace schema from etcd (0 when none is
// stored).
func storedSchema(b *testing.B, cli *clientv3.Client, keys etcdstore.Keys) int {
	resp, err := cli.Get(b.Context(), keys.Schema())
	if err != nil {
		b.Fatalf("read the schema: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	var rec struct {
		Schema int `json:"schema"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		b.Fatalf("schema record %q: %v", resp.Kvs[0].Value, err)
	}
	return rec.Schema
}

// recordSizes reads the session and the first part record of an upload
// in bucket.
func recordSizes(b *testing.B, cli *clientv3.Client, keys etcdstore.Keys, bucket, uploadID string) envelopeRecords {
	r := envelopeRecords{UploadIDBytes: len(uploadID)}
	for _, rec := range []struct {
		key        string
		keyN, valN *int
	}{{keys.Session(bucket, uploadID), &r.SessionKeyBytes, &r.SessionValueBytes}, {keys.Part(uploadID, 1), &r.PartKeyBytes, &r.PartValueBytes}} {
		resp, err := cli.Get(b.Context(), rec.key)
		if err != nil || len(resp.Kvs) == 0 {
			b.Fatalf("read %s: %v (found %v)", rec.key, err, err == nil)
		}
		*rec.keyN, *rec.valN = len(resp.Kvs[0].Key), len(resp.Kvs[0].Value)
	}
	return r
}

// seedEnvelopeRefs writes envelopeRefs references as manifests of ten
// digests each would record them: a reference source record per manifest
// and a reference key per digest it names.
func seedEnvelopeRefs(b *testing.B, cli *clientv3.Client, keys etcdstore.Keys, bucket string) {
	at := time.Now().UTC()
	ref := etcdstore.MarshalRecord(etcdstore.Ref{Version: 1, At: at})
	manifests := envelopeRefs / refsPerManifest
	err := putKeys(b.Context(), cli, manifests, func(m int) (string, string) {
		src := etcdstore.RefSource{Version: 1, Bucket: bucket, Key: fmt.Sprintf("manifests/%08d", m), ETag: strings.Repeat("e", 32), Updated: at}
		for d := range refsPerManifest {
			src.Digests = append(src.Digests, envelopeDigest(2, m*refsPerManifest+d))
		}
		return keys.RefSource(bucket, src.Key), etcdstore.MarshalRecord(src)
	})
	if err == nil {
		err = putKeys(b.Context(), cli, envelopeRefs, func(i int) (string, string) {
			return keys.Ref(envelopeDigest(2, i), bucket, fmt.Sprintf("manifests/%08d", i/refsPerManifest)), ref
		})
	}
	if err != nil {
		b.Fatal(err)
	}
}

// envelopeDigest is a distinct sha256 digest per (space, i).
func envelopeDigest(space, i int) string {
	return fmt.Sprintf("sha256:%064x", uint64(space)<<40|uint64(i))
}

// dbInUse returns the largest database size in use among the endpoints.
func dbInUse(b *testing.B, cli *clientv3.Client, endpoints []string) int64 {
	var top int64
	for _, ep := range endpoints {
		st, err := cli.Status(b.Context(), ep)
		if err != nil {
			b.Fatalf("etcd status of %s: %v", ep, err)
		}
		top = max(top, st.DbSizeInUse)
	}
	return top
}

// memberRSS returns the resident memory of the process holding the first
// etcd member's index: the gateway for the embedded member, 0 (unknown)
// for a cluster.
func memberRSS(env *harness.Env, members int) int64 {
	if members > 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", env.Gateway.PID()))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// inParallel runs op(i) for i in [0, n) on workers goroutines and returns
// the first error.
func inParallel(ctx context.Context, workers, n int, op func(ctx context.Context, i int) error) error {
	var (
		next  atomic.Int64
		first error
		once  sync.Once
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := op(ctx, i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func printEnvelope(w io.Writer, res *envelopeResult) {
	fmt.Fprintf(w, "\netcd envelope (quota %d MiB, compaction retention %v)\n", res.QuotaBytes>>20, time.Duration(res.RetentionSeconds*float64(time.Second)))
	fmt.Fprintf(w, "%-50s", "")
	for _, c := range res.Clusters {
		fmt.Fprintf(w, " %18s", c.Name)
	}
	fmt.Fprintln(w)
	row := func(title, format string, f func(c envelopeCluster) float64) {
		rowOf(w, res.Clusters, title, format, f)
	}
	rowOf(w, res.Clusters, "shards x members", "%s", func(c envelopeCluster) string { return fmt.Sprintf("%d x %d", c.Shards, c.Members) })
	rowOf(w, res.Clusters, "keyspace schema", "%d", func(c envelopeCluster) int { return c.Schema })
	row("UploadPart 1 KiB, 16 clients, gateway", "%.0f /s", func(c envelopeCluster) float64 { return c.GatewayPartsPerSec })
	row("UploadPart 1 KiB, 16 clients, direct", "%.0f /s", func(c envelopeCluster) float64 { return c.DirectPartsPerSec })
	row("    ratio", "%.3f", func(c envelopeCluster) float64 { return c.PartsRatio })
	rowOf(w, res.Clusters, fmt.Sprintf("    target, embedded: >= %.2f", targetPartsRatio), "%s", func(c envelopeCluster) string {
		switch {
		case c.Members > 1 || c.Shards > 1:
			return "-"
		case c.PartsRatio >= targetPartsRatio:
			return "PASS"
		}
		return "BELOW"
	})
	row("UploadPart 1 KiB, gateway, sustained", "%.0f /s", func(c envelopeCluster) float64 { return c.SustainedPartsPerSec })
	row("CreateMultipartUpload, gateway", "%.0f /s", func(c envelopeCluster) float64 { return c.CreatesPerSec })
	row("db bytes per session", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerSession })
	row("db bytes per part", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerPart })
	row("db bytes per reference", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerRef })
	row("db bytes per tombstone", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerTombstone })
	row("one cluster's quota holds sessions", "%.3g", func(c envelopeCluster) float64 { return c.QuotaSessions })
	row("one cluster's quota holds references", "%.3g", func(c envelopeCluster) float64 { return c.QuotaRefs })
	row("one cluster's quota holds tombstones", "%.3g", func(c envelopeCluster) float64 { return c.QuotaTombstones })
	row("parts/s whose history fills one quota", "%.0f /s", func(c envelopeCluster) float64 { return c.QuotaPartsPerSec })
	rowOf(w, res.Clusters, "MinIO upload ID", "%d B", func(c envelopeCluster) int { return c.Records.UploadIDBytes })
	rowOf(w, res.Clusters, "session record: key + value", "%s", func(c envelopeCluster) string {
		return fmt.Sprintf("%d + %d B", c.Records.SessionKeyBytes, c.Records.SessionValueBytes)
	})
	rowOf(w, res.Clusters, "part record: key + value", "%s", func(c envelopeCluster) string {
		return fmt.Sprintf("%d + %d B", c.Records.PartKeyBytes, c.Records.PartValueBytes)
	})
	row("etcd puts of 400 B, 1 client a shard", "%.0f /s", func(c envelopeCluster) float64 { return c.Commits.SerialPerSec })
	row("etcd puts of 400 B, 16 clients a shard", "%.0f /s", func(c envelopeCluster) float64 { return c.Commits.ParallelPerSec })
	fsync := func(format string, f func(c envelopeCommits) float64) func(c envelopeCluster) string {
		return func(c envelopeCluster) string {
			if c.Commits.FsyncMeanSeconds == 0 {
				return "no fsync seen"
			}
			return fmt.Sprintf(format, f(c.Commits))
		}
	}
	rowOf(w, res.Clusters, "    WAL fsync, mean (16 clients)", "%s", fsync("%.2f ms", func(c envelopeCommits) float64 { return c.FsyncMeanSeconds * 1e3 }))
	rowOf(w, res.Clusters, "    commits per fsync (16 clients)", "%s", fsync("%.1f", func(c envelopeCommits) float64 { return c.CommitsPerFsync }))
	rowOf(w, res.Clusters, "    puts etcd timed out (not counted)", "%d", func(c envelopeCluster) int64 { return c.Commits.TimedOut })
	row("embedded: gateway RSS per reference", "%.0f B", func(c envelopeCluster) float64 { return c.EtcdRSSBytesPerRef })
	for _, c := range res.Clusters {
		fmt.Fprintf(w, "%s: UploadPart ratio of each pair of rounds: %s\n", c.Name, formatRatios(c.PartsRatios))
	}
	for _, c := range res.Clusters {
		for _, s := range c.PerShard {
			fmt.Fprintf(w, "%s shard %s (%s): %d parts, %.0f db bytes per part; %d sessions, %.0f db bytes per session\n",
				c.Name, s.Name, s.Bucket, s.Parts, s.BytesPerPart, s.Sessions, s.BytesPerSession)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// rowOf prints one row of the envelope table: f of each cluster.
func rowOf[T any](w io.Writer, clusters []envelopeCluster, title, format string, f func(c envelopeCluster) T) {
	fmt.Fprintf(w, "%-50s", title)
	for _, c := range clusters {
		fmt.Fprintf(w, " %18s", fmt.Sprintf(format, f(c)))
	}
	fmt.Fprintln(w)
}
