//go:build bench

package bench

import (
	"bytes"
	"context"
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
// embedded default (one member inside the gateway) and on a three-member
// cluster of separate processes on this machine, each behind a real
// gateway in front of MinIO:
//
//   - parts/s: UploadPart calls of 1 KiB from envelopeClients clients for
//     envelopeTime through the gateway, in keyspace schema 1 and again in
//     schema 2 (as a migration leaves it), and the same directly on MinIO;
//     a part through the gateway costs two etcd commits in schema 1, and
//     from schema 2 one after the first of its upload's on a gateway (the
//     in-flight record lingers), so this is where the write path's limit
//     shows;
//   - database bytes per session (a CreateMultipartUpload through the
//     gateway), per part, per recorded reference and per tombstone: the
//     growth of the etcd database in use (bbolt pages, every revision
//     written, as nothing is compacted during the run) over how many were
//     written;
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
)

// envelopeCluster is one etcd topology's figures.
type envelopeCluster struct {
	Name    string `json:"name"`
	Members int    `json:"members"`
	// Parts per second through the gateway (in keyspace schema 2) and
	// directly on MinIO; through the gateway in schema 1, before the
	// migration.
	GatewayPartsPerSec        float64 `json:"gateway_parts_per_s"`
	DirectPartsPerSec         float64 `json:"direct_parts_per_s"`
	PartsRatio                float64 `json:"parts_ratio"`
	GatewayPartsPerSecSchema1 float64 `json:"gateway_parts_per_s_schema1"`
	// Creates per second through the gateway.
	CreatesPerSec float64 `json:"creates_per_s"`
	// Database bytes in use per item written.
	BytesPerSession float64 `json:"db_bytes_per_session"`
	BytesPerPart    float64 `json:"db_bytes_per_part"`
	// BytesPerPartSchema1 is the bytes per part before the migration.
	BytesPerPartSchema1 float64 `json:"db_bytes_per_part_schema1"`
	BytesPerRef         float64 `json:"db_bytes_per_reference"`
	BytesPerTombstone   float64 `json:"db_bytes_per_tombstone"`
	// What the quota holds: live sessions (with no parts), references,
	// tombstones (one per unreferenced blob a pass judged), and the
	// sustained part rate whose history within the retention fills it.
	QuotaSessions      float64 `json:"quota_sessions"`
	QuotaRefs          float64 `json:"quota_references"`
	QuotaTombstones    float64 `json:"quota_tombstones"`
	QuotaPartsPerSec   float64 `json:"quota_parts_per_s_at_retention"`
	EtcdRSSBytesPerRef float64 `json:"etcd_rss_bytes_per_reference,omitempty"`
}

type envelopeResult struct {
	QuotaBytes       int64             `json:"quota_bytes"`
	RetentionSeconds float64           `json:"retention_seconds"`
	Clusters         []envelopeCluster `json:"clusters"`
	Notes            []string          `json:"notes"`
}

func BenchmarkEnvelope(b *testing.B) {
	res := envelopeResult{QuotaBytes: envelopeQuota, RetentionSeconds: envelopeRetention.Seconds()}
	res.Notes = append(res.Notes,
		"database bytes are etcd's db_size_in_use growth over the items written, every revision included (nothing is compacted during the run)",
		"the three members run on this machine's disk and cores, as the embedded member does; on separate machines the write path's limit is the slowest member's fsync and the network round trip",
		"quota_parts_per_s_at_retention is the sustained UploadPart rate at which the parts' history within the compaction retention alone fills the quota")
	for _, topo := range []struct {
		name    string
		members int
	}{{"embedded", 0}, {"three_members", 3}} {
		b.Run(topo.name, func(b *testing.B) {
			if len(res.Clusters) < 2 {
				res.Clusters = append(res.Clusters, benchEnvelope(b, topo.name, topo.members))
			}
			c := res.Clusters[len(res.Clusters)-1]
			b.ReportMetric(c.GatewayPartsPerSec, "parts/s")
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

// benchEnvelope measures one topology: members 0 is the gateway's
// embedded etcd, otherwise a cluster of that many member processes.
func benchEnvelope(b *testing.B, name string, members int) envelopeCluster {
	opts := harness.Options{LogLevel: "info"}
	var endpoints []string
	if members > 0 {
		cluster := harness.StartEtcdCluster(b, members)
		endpoints = cluster.Endpoints()
		opts.EtcdEndpoints = endpoints
	}
	env := harness.Start(b, opts)
	env.RequireGateway(b)
	if members == 0 {
		endpoints = []string{env.Gateway.EtcdClientURL}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatalf("etcd client: %v", err)
	}
	defer cli.Close()
	ctx := b.Context()
	bucket := env.Bucket(b)
	res := envelopeCluster{Name: name, Members: max(1, members)}
	inUse := func() int64 { return dbInUse(b, cli, endpoints) }

	before := inUse()
	var parts int64
	res.GatewayPartsPerSecSchema1, parts = partsPerSec(b, env.SDK(b), bucket, "envelope/gateway1")
	res.BytesPerPartSchema1 = float64(inUse()-before) / float64(parts)
	// The keyspace as a migration leaves it (its first transaction records
	// the schema; the gateway reads it within a second).
	keys, err := etcdstore.NewKeys(etcdstore.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cli.Put(ctx, keys.Schema(), `{"v":1,"schema":2,"by":"bench"}`); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	before = inUse()
	res.GatewayPartsPerSec, parts = partsPerSec(b, env.SDK(b), bucket, "envelope/gateway2")
	res.BytesPerPart = float64(inUse()-before) / float64(parts)
	res.DirectPartsPerSec, _ = partsPerSec(b, env.DirectSDK(b), bucket, "envelope/direct")
	res.PartsRatio = ratio(res.GatewayPartsPerSec, res.DirectPartsPerSec)

	before = inUse()
	start := time.Now()
	gw := env.SDK(b)
	if err := inParallel(ctx, envelopeClients, envelopeSessions, func(ctx context.Context, i int) error {
		_, err := createUpload(ctx, gw, bucket, fmt.Sprintf("envelope/session/%06d", i))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	res.CreatesPerSec = envelopeSessions / time.Since(start).Seconds()
	res.BytesPerSession = float64(inUse()-before) / envelopeSessions

	rss0 := memberRSS(env, members)
	before = inUse()
	seedEnvelopeRefs(b, cli, keys, bucket)
	res.BytesPerRef = float64(inUse()-before) / envelopeRefs
	if rss0 > 0 {
		if rss1 := memberRSS(env, members); rss1 > rss0 {
			res.EtcdRSSBytesPerRef = float64(rss1-rss0) / envelopeRefs
		}
	}
	before = inUse()
	tomb := etcdstore.MarshalRecord(etcdstore.Tombstone{Version: 1, State: etcdstore.TombstonePending,
		Bucket: bucket, Key: "blobs/sha256/" + strings.Repeat("0", 64), Size: 4096, Frontier: 1, RefRev: 1, Term: 1, Pass: 1})
	if err := putKeys(ctx, cli, envelopeTombstones, func(i int) (string, string) {
		return keys.Tombstone(envelopeDigest(1, i)), tomb
	}); err != nil {
		b.Fatal(err)
	}
	res.BytesPerTombstone = float64(inUse()-before) / envelopeTombstones

	quota := float64(envelopeQuota)
	res.QuotaSessions = quota / res.BytesPerSession
	res.QuotaRefs = quota / res.BytesPerRef
	res.QuotaTombstones = quota / res.BytesPerTombstone
	res.QuotaPartsPerSec = quota / (envelopeRetention.Seconds() * res.BytesPerPart)
	return res
}

// partsPerSec uploads 1 KiB parts from envelopeClients clients, each to an
// upload of its own, for envelopeTime, and returns the rate and the count.
func partsPerSec(b *testing.B, c *s3.Client, bucket, prefix string) (float64, int64) {
	ctx := b.Context()
	ids := make([]string, envelopeClients)
	for w := range ids {
		id, err := createUpload(ctx, c, bucket, fmt.Sprintf("%s/%02d", prefix, w))
		if err != nil {
			b.Fatal(err)
		}
		ids[w] = id
	}
	body := bytes.Repeat([]byte("p"), 1024)
	var n atomic.Int64
	stop := time.Now().Add(envelopeTime)
	start := time.Now()
	err := inParallel(ctx, envelopeClients, envelopeClients, func(ctx context.Context, w int) error {
		for part := int32(1); time.Now().Before(stop) && part <= 10_000; part++ {
			if _, err := c.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("%s/%02d", prefix, w)), UploadId: aws.String(ids[w]),
				PartNumber: aws.Int32(part), Body: bytes.NewReader(body),
			}); err != nil {
				return fmt.Errorf("upload part %d of %s/%02d: %w", part, prefix, w, err)
			}
			n.Add(1)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), n.Load()
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
		fmt.Fprintf(w, "%-50s", title)
		for _, c := range res.Clusters {
			fmt.Fprintf(w, " %18s", fmt.Sprintf(format, f(c)))
		}
		fmt.Fprintln(w)
	}
	row("UploadPart 1 KiB, 16 clients, gateway, schema 1", "%.0f /s", func(c envelopeCluster) float64 { return c.GatewayPartsPerSecSchema1 })
	row("UploadPart 1 KiB, 16 clients, gateway", "%.0f /s", func(c envelopeCluster) float64 { return c.GatewayPartsPerSec })
	row("UploadPart 1 KiB, 16 clients, direct", "%.0f /s", func(c envelopeCluster) float64 { return c.DirectPartsPerSec })
	row("    ratio", "%.3f", func(c envelopeCluster) float64 { return c.PartsRatio })
	row("CreateMultipartUpload, gateway", "%.0f /s", func(c envelopeCluster) float64 { return c.CreatesPerSec })
	row("db bytes per session", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerSession })
	row("db bytes per part, schema 1", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerPartSchema1 })
	row("db bytes per part", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerPart })
	row("db bytes per reference", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerRef })
	row("db bytes per tombstone", "%.0f B", func(c envelopeCluster) float64 { return c.BytesPerTombstone })
	row("quota holds sessions", "%.3g", func(c envelopeCluster) float64 { return c.QuotaSessions })
	row("quota holds references", "%.3g", func(c envelopeCluster) float64 { return c.QuotaRefs })
	row("quota holds tombstones", "%.3g", func(c envelopeCluster) float64 { return c.QuotaTombstones })
	row("parts/s whose history fills the quota", "%.0f /s", func(c envelopeCluster) float64 { return c.QuotaPartsPerSec })
	row("embedded: gateway RSS per reference", "%.0f B", func(c envelopeCluster) float64 { return c.EtcdRSSBytesPerRef })
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
