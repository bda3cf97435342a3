package harness

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Shard mode (SWEEPGATE_E2E_SHARDS=N, N >= 2) runs every gateway that
// would keep its state in one etcd with N shards (etcd.shards) instead:
// the default shard is that etcd (a one-member cluster the harness starts
// in place of the embedded one; an etcd the test runs itself, etcdtest's,
// the harness reaches in the clear), and N-1 clusters, secured as the
// default one is and of as many members (one beside an etcd the test runs
// itself), are the others. All gateways over the same etcd get the same
// shards.
//
// Buckets land on different shards because their names are decided ahead:
// each top-level test has reservedBuckets names (BucketName hands them out
// in order, and so does Env.Bucket), and every shard set pins the i-th on
// shard (hash of the test's name + i) mod N in the shards' buckets lists.
// Each shard but the default lists first a bucket of the harness's own
// on MinIO, where its reclaimer keeps its restore witness (the first of a
// shard's buckets, which must exist; a reserved name need not).
// A digest layout's buckets are all pinned on the shard of its storage
// bucket (its first namespace's, else digests.preset_storage's, else its
// first source's), since a gateway refuses a layout across shards. A name
// handed out past the reserved ones is on the default shard.

// reservedBuckets is how many bucket names a test has pinned on shards.
const reservedBuckets = 12

// ShardCount returns the number of shards SWEEPGATE_E2E_SHARDS asks for;
// 0 when shard mode is off (unset, or fewer than two).
func ShardCount() int {
	n, err := strconv.Atoi(os.Getenv("SWEEPGATE_E2E_SHARDS"))
	if err != nil || n < 2 || DirectMode() {
		return 0
	}
	return n
}

// reservation is the bucket names of one top-level test.
type reservation struct {
	mu    sync.Mutex
	names []string
	next  int
	first int // the shard of names[0]
}

var reservations sync.Map // top-level test name -> *reservation

// reserve returns the bucket names of t's top-level test, making them on
// first use.
func reserve(t testing.TB, n int) *reservation {
	top, _, _ := strings.Cut(t.Name(), "/")
	if r, ok := reservations.Load(top); ok {
		return r.(*reservation)
	}
	h := fnv.New32a()
	h.Write([]byte(top))
	r := &reservation{first: int(h.Sum32() % uint32(n))}
	for range reservedBuckets {
		r.names = append(r.names, bucketName(t))
	}
	actual, loaded := reservations.LoadOrStore(top, r)
	if !loaded && top == t.Name() {
		// A later run of the test (-count) reserves names of its own.
		t.Cleanup(func() { reservations.Delete(top) })
	}
	return actual.(*reservation)
}

// take hands out the next reserved name; ok is false once they are all
// handed out.
func (r *reservation) take() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next >= len(r.names) {
		return "", false
	}
	r.next++
	return r.names[r.next-1], true
}

// shardSet is the shards of every gateway over one etcd in shard mode.
type shardSet struct {
	names     []string
	endpoints [][]string
	// clusters are the shards' clusters; the default shard's is nil when
	// the test runs that etcd itself (etcdtest), and reached in the clear.
	clusters []*EtcdCluster
	// standIn is set when the default shard stands in for an embedded
	// etcd: gateways over it report its URL as EtcdClientURL.
	standIn bool
	prefix  string
	res     *reservation
	// anchors are the first bucket of each shard but the default.
	anchors []string

	mu     sync.Mutex
	assign map[string]int // pinned buckets -> shard index
	fixed  bool           // a gateway runs with assign: it may not change
}

var shardSets sync.Map // the default shard's endpoints, joined -> *shardSet

// shardSetFor returns the shards of a gateway configured with opts: those
// of a running gateway over the same etcd, or new ones.
func shardSetFor(t testing.TB, m *MinIO, opts Options, n int) *shardSet {
	t.Helper()
	if len(opts.EtcdEndpoints) > 0 {
		if s, ok := shardSets.Load(strings.Join(opts.EtcdEndpoints, ",")); ok {
			return s.(*shardSet)
		}
	}
	s := &shardSet{res: reserve(t, n), assign: map[string]int{}, prefix: configuredPrefix(opts)}
	var def *EtcdCluster
	endpoints := opts.EtcdEndpoints
	if len(endpoints) == 0 {
		def, s.standIn = StartEtcdCluster(t, 1), true
		endpoints = def.Endpoints()
	} else {
		def = clusterAt(endpoints)
	}
	s.clusters, s.endpoints = append(s.clusters, def), append(s.endpoints, endpoints)
	size := 1
	if def != nil {
		size = def.Len()
	}
	for i := range n {
		s.names = append(s.names, fmt.Sprintf("shard%d", i))
		if i > 0 {
			c := def.startSiblingEtcdCluster(t, size)
			s.clusters, s.endpoints = append(s.clusters, c), append(s.endpoints, c.Endpoints())
		}
	}
	for i, name := range s.res.names {
		s.assign[name] = (s.res.first + i) % n
	}
	direct := NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
	for i := 1; i < n; i++ {
		anchor := fmt.Sprintf("witness-%s-%s", s.names[i], randomHex(t, 4))
		if _, err := direct.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(anchor)}); err != nil {
			t.Fatalf("harness: shard mode: create bucket %s on MinIO: %v", anchor, err)
		}
		s.anchors = append(s.anchors, anchor)
		s.assign[anchor] = i
	}
	key := strings.Join(endpoints, ",")
	shardSets.Store(key, s)
	// Registered after the clusters start, so it runs before they stop
	// (and after every gateway over them has stopped).
	t.Cleanup(func() {
		shardSets.Delete(key)
		s.check(t)
	})
	return s
}

// configuredPrefix is the etcd key prefix opts give the gateway.
func configuredPrefix(opts Options) string {
	p := opts.EtcdPrefix
	if etcd, ok := opts.Config["etcd"].(map[string]any); ok {
		if v, ok := etcd["prefix"].(string); ok {
			p = v
		}
	}
	if p == "" {
		return "/sweepgate/"
	}
	return strings.TrimSuffix(p, "/") + "/"
}

// options returns opts with the set's shards as etcd.shards, the digest
// layout of opts pinned on its storage bucket's shard.
func (s *shardSet) options(t testing.TB, opts Options) Options {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if layout, storage := layoutBuckets(opts.Config); len(layout) > 0 {
		home := s.shardOfLocked(storage)
		for _, b := range layout {
			if s.shardOfLocked(b) == home {
				continue
			}
			if s.fixed {
				t.Fatalf("harness: shard mode: the digest layout of this gateway puts bucket %s on shard %s, another gateway over the same etcd has it on %s",
					b, s.names[home], s.names[s.shardOfLocked(b)])
			}
			s.assign[b] = home
		}
	}
	s.fixed = true
	specs := make([]map[string]any, len(s.names))
	for i, name := range s.names {
		specs[i] = map[string]any{"name": name, "endpoints": s.endpoints[i]}
		if i == 0 {
			continue // the default shard holds every bucket no shard lists
		}
		var buckets []string
		for b, sh := range s.assign {
			if sh == i && b != s.anchors[i-1] {
				buckets = append(buckets, b)
			}
		}
		slices.Sort(buckets)
		specs[i]["buckets"] = append([]string{s.anchors[i-1]}, buckets...)
	}
	opts.EtcdShards, opts.EtcdEndpoints = specs, nil
	return opts
}

// layoutBuckets returns the buckets of the digest layout cfg configures
// (digests.namespaces, digests.sources, digests.preset_storage) and the
// one whose shard keeps the layout.
func layoutBuckets(cfg map[string]any) (buckets []string, storage string) {
	d, _ := cfg["digests"].(map[string]any)
	bucketOf := func(v any) string {
		switch v := v.(type) {
		case string:
			b, _, _ := strings.Cut(v, "/")
			return b
		case map[string]any:
			b, _ := v["bucket"].(string)
			return b
		}
		return ""
	}
	add := func(b string) {
		if b != "" && !slices.Contains(buckets, b) {
			buckets = append(buckets, b)
		}
	}
	for _, setting := range []string{"namespaces", "preset_storage", "sources"} {
		switch v := d[setting].(type) {
		case []string:
			for _, e := range v {
				add(bucketOf(e))
			}
		case []any:
			for _, e := range v {
				add(bucketOf(e))
			}
		case []map[string]any:
			for _, e := range v {
				add(bucketOf(e))
			}
		default:
			add(bucketOf(v))
		}
	}
	if len(buckets) > 0 {
		storage = buckets[0]
	}
	return buckets, storage
}

func (s *shardSet) shardOfLocked(bucket string) int {
	return s.assign[bucket] // 0, the default shard, when not pinned
}

// shardOf returns the index of the shard the set puts bucket on.
func (s *shardSet) shardOf(bucket string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shardOfLocked(bucket)
}

// check reads the shard directory in the default shard and fails the test
// when a bucket's entry names another shard than the one the harness put
// it on; it logs which shard each bucket with state is on, and counts
// them for Main's summary.
func (s *shardSet) check(t testing.TB) {
	cli, err := s.newClient(0)
	if err != nil {
		t.Logf("harness: shard mode: read the shard directory: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dirPrefix := s.prefix + "shards/buckets/"
	resp, err := cli.Get(ctx, dirPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Logf("harness: shard mode: read the shard directory: %v", err)
		return
	}
	byShard := map[string][]string{}
	for _, kv := range resp.Kvs {
		bucket, err := url.PathUnescape(strings.TrimPrefix(string(kv.Key), dirPrefix))
		if err != nil {
			bucket = string(kv.Key)
		}
		got, want := string(kv.Value), s.names[s.shardOf(bucket)]
		if got != want {
			t.Errorf("harness: shard mode: the shard directory has bucket %s on shard %s; the harness put it on %s", bucket, got, want)
		}
		byShard[got] = append(byShard[got], bucket)
		countShardEntry(got)
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(byShard)) {
		parts = append(parts, fmt.Sprintf("%s=%v", name, byShard[name]))
	}
	t.Logf("harness: shard mode: buckets with state by shard (shard directory): %s", strings.Join(parts, " "))
}

// newClient opens a client of shard i's etcd with the rights to every
// key; the caller closes it.
func (s *shardSet) newClient(i int) (*clientv3.Client, error) {
	if c := s.clusters[i]; c != nil {
		return c.newClient(c.Endpoints())
	}
	return clientv3.New(clientv3.Config{Endpoints: s.endpoints[i], DialTimeout: etcdClusterOpTimeout, Logger: zap.NewNop()})
}

// client returns a client of shard i's etcd; t.Cleanup closes it.
func (s *shardSet) client(t testing.TB, i int) *clientv3.Client {
	t.Helper()
	cli, err := s.newClient(i)
	if err != nil {
		t.Fatalf("harness: etcd client of shard %s: %v", s.names[i], err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var entries struct {
	mu      sync.Mutex
	byShard map[string]int
}

func countShardEntry(shard string) {
	entries.mu.Lock()
	defer entries.mu.Unlock()
	if entries.byShard == nil {
		entries.byShard = map[string]int{}
	}
	entries.byShard[shard]++
}

// shardSummary reports, in shard mode, how many buckets' shard directory
// entries named each shard over the run, and fails (false) when a run
// with at least two entries per shard left a shard without any.
func shardSummary() (line string, ok bool) {
	n := ShardCount()
	if n == 0 {
		return "", true
	}
	entries.mu.Lock()
	defer entries.mu.Unlock()
	total := 0
	var parts []string
	ok = true
	for i := range n {
		name := fmt.Sprintf("shard%d", i)
		c := entries.byShard[name]
		total += c
		parts = append(parts, fmt.Sprintf("%s=%d", name, c))
		if c == 0 {
			ok = false
		}
	}
	line = fmt.Sprintf("harness: shard mode (%d shards): buckets with state per shard over the run: %s", n, strings.Join(parts, " "))
	return line, ok || total < 2*n
}

// ShardOf names the shard the gateway keeps bucket's state on in shard
// mode; empty otherwise.
func (g *Gateway) ShardOf(bucket string) string {
	if g.shards == nil {
		return ""
	}
	return g.shards.names[g.shards.shardOf(bucket)]
}

// ShardNames names the gateway's shards in shard mode, the default first;
// nil otherwise.
func (g *Gateway) ShardNames() []string {
	if g.shards == nil {
		return nil
	}
	return slices.Clone(g.shards.names)
}

// EtcdClientOfShard returns a client of the etcd of the gateway's shard
// name (ShardNames), with the rights to read and write every key.
// t.Cleanup closes it.
func (g *Gateway) EtcdClientOfShard(t testing.TB, name string) *clientv3.Client {
	t.Helper()
	if g.shards == nil {
		t.Fatalf("harness: the gateway has no shards (SWEEPGATE_E2E_SHARDS)")
	}
	i := slices.Index(g.shards.names, name)
	if i < 0 {
		t.Fatalf("harness: no shard %q; the shards are %v", name, g.shards.names)
	}
	return g.shards.client(t, i)
}

// EtcdClusterFor returns the cluster of this process that keeps bucket's
// state: in shard mode that of the bucket's shard, else the cluster of
// Options.EtcdEndpoints. It fails the test when there is none (the
// embedded etcd, or an etcd the test runs itself).
func (g *Gateway) EtcdClusterFor(t testing.TB, bucket string) *EtcdCluster {
	t.Helper()
	var c *EtcdCluster
	if g.shards != nil {
		c = g.shards.clusters[g.shards.shardOf(bucket)]
	} else {
		c = clusterAt(g.etcdEndpoints)
	}
	if c == nil {
		t.Fatalf("harness: bucket %s's state is in no etcd cluster of this process", bucket)
	}
	return c
}

// EtcdClientFor returns a client of the etcd that keeps bucket's state:
// in shard mode the etcd of the bucket's shard, else the gateway's etcd
// (the embedded one, or the cluster of Options.EtcdEndpoints when this
// process started it). t.Cleanup closes it.
func (g *Gateway) EtcdClientFor(t testing.TB, bucket string) *clientv3.Client {
	t.Helper()
	switch {
	case g.shards != nil:
		return g.shards.client(t, g.shards.shardOf(bucket))
	case g.EtcdClientURL != "":
		return g.EtcdClient(t)
	}
	if c := clusterAt(g.etcdEndpoints); c != nil {
		return c.Client(t)
	}
	t.Fatalf("harness: no etcd cluster of this process at %v", g.etcdEndpoints)
	return nil
}

// ShardOf names the shard that keeps bucket's state in shard mode; empty
// otherwise (see Gateway.ShardOf).
func (e *Env) ShardOf(bucket string) string {
	if e.Gateway == nil {
		return ""
	}
	return e.Gateway.ShardOf(bucket)
}

// EtcdClientFor returns a client of the etcd that keeps bucket's state
// (see Gateway.EtcdClientFor).
func (e *Env) EtcdClientFor(t testing.TB, bucket string) *clientv3.Client {
	t.Helper()
	e.RequireGateway(t)
	return e.Gateway.EtcdClientFor(t, bucket)
}

// EtcdClient returns a client of the gateway's embedded etcd, to read and
// write sweepgate's records behind its back. It survives restarts of the
// gateway (it reconnects to the same URL); t.Cleanup closes it.
func (g *Gateway) EtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	if g.EtcdClientURL == "" {
		t.Fatalf("harness: the gateway runs no embedded etcd; connect to Options.EtcdEndpoints instead")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{g.EtcdClientURL},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("harness: etcd client for %s: %v", g.EtcdClientURL, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// clusters holds the running EtcdClusters of this process by their
// endpoints joined with commas, so that a gateway given Options.EtcdEndpoints
// finds the cluster behind them (shard mode, Gateway.EtcdClientFor).
var clusters sync.Map

// clusterAt returns the running cluster whose endpoints are endpoints;
// nil when this process started none there.
func clusterAt(endpoints []string) *EtcdCluster {
	if c, ok := clusters.Load(strings.Join(endpoints, ",")); ok {
		return c.(*EtcdCluster)
	}
	return nil
}

// SkipInShardMode skips a test that is about one etcd as a whole in shard
// mode, saying why.
func SkipInShardMode(t testing.TB, why string) {
	t.Helper()
	if ShardCount() > 0 {
		t.Skip("shard mode (SWEEPGATE_E2E_SHARDS): " + why)
	}
}
