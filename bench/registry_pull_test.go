//go:build bench

package bench

// BenchmarkRegistryPull: a CNCF distribution registry behind sweepgate
// (digests.preset: distribution, so that every blob GET and HEAD goes
// through the digest service's guard check) and an identical registry on
// MinIO directly, in one run, both with the blob descriptor cache of
// distribution's example configuration (pullCacheEnv). The same multi-layer image is pushed to both,
// then pulled from each, the two interleaved, pullRounds times: each pull
// is a fresh client (new connections, nothing cached) fetching the manifest
// by tag, then the config and the layers, pullParallel at a time, to a
// digest check and io.Discard. It also counts the etcd reads the pulls
// cause per blob GET through sweepgate. For reference, a third registry
// stores through the same sweepgate in a bucket outside the digest layout
// (the gateway's proxying alone, no guard read), a fourth through a
// bare httputil.ReverseProxy to MinIO (bareproxy_test.go: what one proxy
// hop costs a pull on this machine, before any of sweepgate's work), and a
// fifth through a TCP relay that parses nothing (tcprelay_test.go: the
// least any hop costs), in the same rounds. Last, each path's CPU per pull
// by process (registry_pull_cpu_test.go) shows where the machine's CPUs go.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

const (
	pullRoundsEnv     = "SWEEPGATE_BENCH_PULL_ROUNDS"
	defaultPullRounds = 20
	// pullKiBEnv sets the image's layers' total size.
	pullKiBEnv     = "SWEEPGATE_BENCH_PULL_KIB"
	defaultPullKiB = 4 << 10
	// The registries run with distribution's example configuration's
	// blob descriptor cache (harness.RegistryStorage.DescriptorCache), as
	// users run them; pullCacheEnv=0 turns it off in all five, so that
	// every pull stats each blob on the storage.
	pullCacheEnv = "SWEEPGATE_BENCH_PULL_CACHE"
	// pullLayers layers, layer j (from 0) of (j+1)/55 of the total.
	pullLayers = 10
	// pullParallel blobs in flight per pull, as docker's default
	// max-concurrent-downloads.
	pullParallel = 3
	// pullTraced untimed pulls through sweepgate count its blob GETs on
	// MinIO's trace.
	pullTraced      = 2
	targetPullRatio = 0.95 // throughput, through sweepgate/direct, registry pull
	pullRepo        = "bench/pull"
	pullTag         = "v1"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	// The etcd server's counters, from its client URL's /metrics.
	etcdGRPCHandled = "grpc_server_handled_total"
	etcdMVCCRange   = "etcd_mvcc_range_total"
)

// pullSide is one registry's pull times.
type pullSide struct {
	MedianSeconds float64   `json:"median_seconds"`
	P90Seconds    float64   `json:"p90_seconds"`
	Seconds       []float64 `json:"seconds"`
}

// etcdReads are etcd's read counters over a window.
type etcdReads struct {
	// Range counts the Range RPCs etcd's gRPC server handled
	// (grpc_server_handled_total{grpc_method="Range"}, every code): other
	// clients' reads, as the gateway calls its embedded member in process.
	Range float64 `json:"grpc_range"`
	// MVCCRange is etcd_mvcc_range_total: ranges the store served,
	// comparisons and reads inside transactions included, whichever way
	// the client called (the figure the target is on).
	MVCCRange float64 `json:"mvcc_range"`
	// GatewayGets is the gateway's own count of its etcd gets
	// (sweepgate_etcd_request_duration_seconds_count{op="get"}).
	GatewayGets float64 `json:"gateway_gets"`
	// GatewayGetSeconds is the time the gateway waited for those gets
	// (the histogram's _sum), summed over requests in parallel.
	GatewayGetSeconds float64 `json:"gateway_get_seconds"`
}

func (r etcdReads) sub(r0 etcdReads) etcdReads {
	return etcdReads{Range: r.Range - r0.Range, MVCCRange: r.MVCCRange - r0.MVCCRange, GatewayGets: r.GatewayGets - r0.GatewayGets,
		GatewayGetSeconds: r.GatewayGetSeconds - r0.GatewayGetSeconds}
}

func (r etcdReads) div(n float64) etcdReads {
	if n == 0 {
		return etcdReads{}
	}
	return etcdReads{Range: r.Range / n, MVCCRange: r.MVCCRange / n, GatewayGets: r.GatewayGets / n, GatewayGetSeconds: r.GatewayGetSeconds / n}
}

// registryPull is the benchmark's result.
type registryPull struct {
	Layers int `json:"layers"`
	// Blobs and Bytes are what one pull fetches: the manifest, the config
	// and the layers.
	Blobs           int      `json:"blobs"`
	Bytes           int64    `json:"bytes"`
	Rounds          int      `json:"rounds"`
	Parallel        int      `json:"parallel"`
	DescriptorCache bool     `json:"descriptor_cache"` // pullCacheEnv
	Direct          pullSide `json:"direct"`
	Gateway         pullSide `json:"gateway"`
	// Plain is the registry through sweepgate in a bucket the digest
	// service does not serve.
	Plain pullSide `json:"gateway_without_digests"`
	// Bare is the registry through a bare reverse proxy to MinIO, Relay
	// through a TCP relay.
	Bare  pullSide `json:"bare_proxy"`
	Relay pullSide `json:"tcp_relay"`
	// Throughput is MB/s per pull, through sweepgate over direct;
	// PlainThroughput, BareThroughput and RelayThroughput the same for
	// Plain, Bare and Relay (references, no target of their own).
	Throughput      comparison `json:"throughput"`
	PlainThroughput comparison `json:"throughput_without_digests"`
	BareThroughput  comparison `json:"throughput_bare_proxy"`
	RelayThroughput comparison `json:"throughput_tcp_relay"`
	// CPU is each path's CPU per pull by process, measured after the
	// timed rounds.
	CPU []pullCPU `json:"cpu_per_pull"`
	// PullSeconds is the length of the timed pull phase (every registry's
	// pulls); IdleSeconds that of the idle window measured after it.
	PullSeconds float64   `json:"pull_seconds"`
	IdleSeconds float64   `json:"idle_seconds"`
	PullReads   etcdReads `json:"pull_reads"`
	IdleReads   etcdReads `json:"idle_reads"`
	// BlobGetsPerPull are the GetObject and HeadObject calls on blob data
	// keys that one pull through sweepgate made reach MinIO, counted on
	// MinIO's trace over pullTraced untimed pulls; BlobGets is that times
	// the rounds.
	BlobGetsPerPull  float64 `json:"blob_gets_per_pull"`
	BlobHeadsPerPull float64 `json:"blob_heads_per_pull"`
	BlobGets         float64 `json:"blob_gets"`
	// S3CallsPerPull are all the calls on the bucket that reached MinIO
	// from sweepgate per traced pull, blob reads included.
	S3CallsPerPull float64 `json:"s3_calls_per_pull"`
	// ReadsPerBlobGet is (PullReads - IdleReads) / BlobGets.
	ReadsPerBlobGet etcdReads `json:"etcd_reads_per_blob_get"`
	// TracedReadsPerBlobGet is the same over the traced pulls, without
	// the idle correction.
	TracedReadsPerBlobGet etcdReads `json:"traced_etcd_reads_per_blob_get"`
	Notes                 []string  `json:"notes"`
}

// BenchmarkRegistryPull measures pulling one image from a registry through
// sweepgate against the same from a registry on MinIO directly.
func BenchmarkRegistryPull(b *testing.B) {
	var res *registryPull
	for b.Loop() {
		if res == nil {
			res = benchRegistryPull(b, envCount(b, pullRoundsEnv, defaultPullRounds), envCount(b, pullKiBEnv, defaultPullKiB))
		}
	}
	b.ReportMetric(res.Throughput.Ratio, "ratio")
	b.ReportMetric(res.ReadsPerBlobGet.MVCCRange, "etcd-reads/blob-get")
	printRegistryPull(os.Stdout, res)
	path, err := mergeResults("registry_pull", res)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "results: %s\n\n", path)
}

// benchRegistryPull runs the scenario once: the servers, the pushes, the
// interleaved timed rounds and the counts of etcd reads and blob GETs.
//
// Size: one scenario read top to bottom, each step using the servers and
// counts of the ones before.
func benchRegistryPull(b *testing.B, rounds, kib int) *registryPull {
	online := harness.BucketName(b)
	direct := online + "-direct"
	plain := online + "-plain"
	bare := online + "-bare"
	relayed := online + "-relay"
	env := harness.Start(b, harness.Options{Config: profileConfig(map[string]any{
		"digests": map[string]any{"preset": "distribution", "preset_storage": online},
		"reclaim": map[string]any{"interval": "1h"},
	})})
	m, g := env.MinIO, env.Gateway
	if g.EtcdClientURL == "" {
		b.Fatal("the gateway runs no embedded etcd")
	}
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport)
	if err != nil {
		b.Fatal(err)
	}
	for _, bucket := range []string{online, direct, plain, bare, relayed} {
		if err := mc.MakeBucket(b.Context(), bucket, minio.MakeBucketOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	cache := os.Getenv(pullCacheEnv) != "0"
	regGateway := harness.StartRegistry(b, harness.RegistryStorage{Endpoint: g.Endpoint,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey, Bucket: online, DescriptorCache: cache})
	regDirect := harness.StartRegistry(b, harness.RegistryStorage{Endpoint: m.Endpoint,
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: direct, DescriptorCache: cache})
	regPlain := harness.StartRegistry(b, harness.RegistryStorage{Endpoint: g.Endpoint,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey, Bucket: plain, DescriptorCache: cache})
	proxy, proxyPID := startChild(b, proxyChildEnv, m.Endpoint, "listening ", 10*time.Second)
	regBare := harness.StartRegistry(b, harness.RegistryStorage{Endpoint: "http://" + proxy,
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: bare, DescriptorCache: cache})
	relay, relayPID := startChild(b, tcpRelayChildEnv, strings.TrimPrefix(m.Endpoint, "http://"), "listening ", 10*time.Second)
	regRelay := harness.StartRegistry(b, harness.RegistryStorage{Endpoint: "http://" + relay,
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: relayed, DescriptorCache: cache})
	regs := []string{regGateway.URL, regDirect.URL, regPlain.URL, regBare.URL, regRelay.URL}

	res := &registryPull{Layers: pullLayers, Rounds: rounds, Parallel: pullParallel, DescriptorCache: cache}
	for _, reg := range regs {
		if err := pushPullImage(b.Context(), reg, int64(kib)<<10); err != nil {
			b.Fatal(err)
		}
	}
	// One untimed pull from each: the registries' and MinIO's first-use
	// costs, and the check that both serve the same image.
	for _, reg := range regs {
		blobs, n, err := pullImage(b.Context(), reg)
		if err != nil {
			b.Fatal(err)
		}
		if res.Bytes != 0 && (n != res.Bytes || blobs != res.Blobs) {
			b.Fatalf("the registries serve different images: %d blobs, %d bytes against %d, %d", blobs, n, res.Blobs, res.Bytes)
		}
		res.Blobs, res.Bytes = blobs, n
	}

	reads := func() etcdReads {
		r, err := scrapeEtcdReads(g)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	timed := func(reg string) float64 {
		start := time.Now()
		if _, _, err := pullImage(b.Context(), reg); err != nil {
			b.Fatal(err)
		}
		return time.Since(start).Seconds()
	}
	secs := make([][]float64, len(regs))
	// The profile covers about the timed rounds (a pull takes some 40 ms).
	profiled := profileGateway(b, g, "registry-pull", max(time.Second, time.Duration(rounds*len(regs))*40*time.Millisecond))
	r0, start := reads(), time.Now()
	for i := range rounds {
		// Each round rotates which registry goes first.
		for k := range regs {
			j := (i + k) % len(regs)
			secs[j] = append(secs[j], timed(regs[j]))
		}
	}
	gatewaySecs, directSecs, plainSecs, bareSecs, relaySecs := secs[0], secs[1], secs[2], secs[3], secs[4]
	pull := time.Since(start)
	res.PullReads = reads().sub(r0)
	profiled()
	res.PullSeconds = pull.Seconds()

	// The idle window: as long as the pull phase, nothing pulled.
	r0, start = reads(), time.Now()
	time.Sleep(pull)
	res.IdleReads = reads().sub(r0)
	res.IdleSeconds = time.Since(start).Seconds()

	// The traced pulls count the blob GETs one pull makes through sweepgate.
	tr := harness.StartTrace(b, m)
	r0 = reads()
	for range pullTraced {
		if _, _, err := pullImage(b.Context(), regGateway.URL); err != nil {
			b.Fatal(err)
		}
	}
	traced := reads().sub(r0)
	if err := tr.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	tr.Stop()
	gets, heads, calls := countBlobReads(tr.Entries(), online)

	res.CPU, err = measurePullCPU(b.Context(), pidOf(m.DataDir), []pullPath{
		{"direct", regDirect.URL, regDirect.ConfigFile, 0},
		{"through sweepgate", regGateway.URL, regGateway.ConfigFile, g.PID()},
		{"through a bare reverse proxy", regBare.URL, regBare.ConfigFile, proxyPID},
		{"through a TCP relay", regRelay.URL, regRelay.ConfigFile, relayPID},
	})
	if err != nil {
		b.Fatal(err)
	}
	res.S3CallsPerPull = float64(calls) / pullTraced
	res.BlobGetsPerPull = float64(gets+heads) / pullTraced
	res.BlobHeadsPerPull = float64(heads) / pullTraced
	res.BlobGets = res.BlobGetsPerPull * float64(rounds)
	res.ReadsPerBlobGet = res.PullReads.sub(res.IdleReads).div(res.BlobGets)
	res.TracedReadsPerBlobGet = traced.div(float64(gets + heads))

	toMBps := func(secs []float64) []float64 {
		out := make([]float64, len(secs))
		for i, s := range secs {
			out[i] = float64(res.Bytes) / 1e6 / s
		}
		return out
	}
	res.Direct = newPullSide(directSecs)
	res.Gateway = newPullSide(gatewaySecs)
	res.Plain = newPullSide(plainSecs)
	res.Bare = newPullSide(bareSecs)
	res.Relay = newPullSide(relaySecs)
	res.Throughput = newComparison("registry_pull", "registry pull (MB/s)", "MB/s",
		fmt.Sprintf("one pull of a %d-layer image (%d blobs, %d bytes): manifest by tag, then config and layers %d at a time, digest-checked to io.Discard; a fresh client per pull",
			pullLayers, res.Blobs, res.Bytes, pullParallel),
		targetPullRatio, toMBps(directSecs), toMBps(gatewaySecs))
	res.PlainThroughput = newComparison("registry_pull_without_digests", "  same, bucket outside the digest layout", "MB/s",
		"the same pulls from a registry storing through sweepgate in a bucket the digest service does not serve: no guard read",
		targetPullRatio, toMBps(directSecs), toMBps(plainSecs))
	res.BareThroughput = newComparison("registry_pull_bare_proxy", "  same, through a bare reverse proxy", "MB/s",
		"the same pulls from a registry storing on MinIO through a bare httputil.ReverseProxy (no verification, signing or logging): one proxy hop's cost",
		targetPullRatio, toMBps(directSecs), toMBps(bareSecs))
	res.RelayThroughput = newComparison("registry_pull_tcp_relay", "  same, through a TCP relay", "MB/s",
		"the same pulls from a registry storing on MinIO through a TCP relay that parses nothing: the least a hop costs",
		targetPullRatio, toMBps(directSecs), toMBps(relaySecs))
	res.Notes = []string{
		"the image is pushed to every registry over the registry API; the gateway's registry stores through sweepgate (digests.preset: distribution), the direct one on MinIO",
		"rounds interleave the registries, rotating which goes first",
		fmt.Sprintf("the registries' blob descriptor cache (storage.cache.blobdescriptor: inmemory, as distribution's example configuration has it): %v (%s=0 turns it off in all five)", cache, pullCacheEnv),
		"for reference, a third registry stores through the same sweepgate in a bucket outside the digest layout (proxying only, no guard read); its pulls are in the same rounds and make no etcd read",
		"for reference, a fourth registry stores on MinIO through a bare httputil.ReverseProxy in a process of its own, in the same rounds",
		"for reference, a fifth registry stores on MinIO through a TCP relay in a process of its own (accept, dial MinIO, copy both ways with splice; no HTTP), in the same rounds",
		fmt.Sprintf("CPU per pull: %d pulls from each path in turn after the timed rounds, each process's utime+stime (/proc/PID/stat) over them: this benchmark's client, the path's registry, MinIO and the process in between", pullCPUPulls),
		"etcd reads are the embedded etcd's counters from its client URL's /metrics, over the timed pull phase minus an idle window of the same length measured right after it",
		fmt.Sprintf("blob GETs: GetObject and HeadObject calls on blob data keys that reached MinIO from sweepgate, on MinIO's trace over %d untimed pulls through sweepgate, times the rounds", pullTraced),
	}
	return res
}

func newPullSide(secs []float64) pullSide {
	return pullSide{MedianSeconds: median(secs), P90Seconds: percentile(secs, 0.9), Seconds: round4(secs)}
}

// percentile returns the nearest-rank p-th percentile of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func round4(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*1e4) / 1e4
	}
	return out
}

// pullLayerData is layer j of the image whose layers total size bytes.
func pullLayerData(j int, size int64) harness.Data {
	const parts = pullLayers * (pullLayers + 1) / 2
	return harness.NewData(uint64(1<<41+j), max(1, size*int64(j+1)/parts))
}

// pushPullImage pushes the benchmark's image to reg as pullRepo:pullTag.
func pushPullImage(ctx context.Context, reg string, size int64) error {
	var descs []string
	for j := range pullLayers {
		body := pullLayerData(j, size).Bytes()
		d, err := pushBlob(ctx, reg, pullRepo, body)
		if err != nil {
			return err
		}
		descs = append(descs, fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":%q,"size":%d}`, d, len(body)))
	}
	config := []byte(`{"architecture":"amd64","os":"linux","config":{"Labels":{"bench":"registry-pull"}}}`)
	cd, err := pushBlob(ctx, reg, pullRepo, config)
	if err != nil {
		return err
	}
	manifest := fmt.Appendf(nil, `{"schemaVersion":2,"mediaType":%q,`+
		`"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":%d},"layers":[%s]}`,
		ociManifestType, cd, len(config), strings.Join(descs, ","))
	_, err = registryDo(ctx, http.MethodPut, fmt.Sprintf("%s/v2/%s/manifests/%s", reg, pullRepo, pullTag),
		ociManifestType, manifest, http.StatusCreated)
	return err
}

// pullImage pulls pullRepo:pullTag from reg as a fresh client would: the
// manifest by tag, then its config and layers, pullParallel at a time,
// each checked against its digest and size and discarded. It returns the
// blobs fetched, the manifest included, and their bytes.
func pullImage(ctx context.Context, reg string) (int, int64, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: pullParallel, DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	fetch := func(path, accept string, w io.Writer) (string, int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, reg+path, nil)
		if err != nil {
			return "", 0, err
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return "", 0, fmt.Errorf("GET %s: %s %s", path, resp.Status, msg)
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(h, w), resp.Body)
		if err != nil {
			return "", n, fmt.Errorf("GET %s: %w", path, err)
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
	}
	var body strings.Builder
	_, n, err := fetch(fmt.Sprintf("/v2/%s/manifests/%s", pullRepo, pullTag), ociManifestType, &body)
	if err != nil {
		return 0, 0, err
	}
	var man struct {
		Config struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"config"`
		Layers []struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"layers"`
	}
	if err := json.Unmarshal([]byte(body.String()), &man); err != nil {
		return 0, 0, fmt.Errorf("manifest: %w", err)
	}
	type blob struct {
		digest string
		size   int64
	}
	blobs := []blob{{man.Config.Digest, man.Config.Size}}
	for _, l := range man.Layers {
		blobs = append(blobs, blob{l.Digest, l.Size})
	}
	var (
		mu    sync.Mutex
		total = n
		first error
		wg    sync.WaitGroup
		next  = make(chan blob)
	)
	for range pullParallel {
		wg.Go(func() {
			for bl := range next {
				d, n, err := fetch(fmt.Sprintf("/v2/%s/blobs/%s", pullRepo, bl.digest), "", io.Discard)
				if err == nil && (d != bl.digest || n != bl.size) {
					err = fmt.Errorf("blob %s: got %s, %d bytes, want %d", bl.digest, d, n, bl.size)
				}
				mu.Lock()
				total += n
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	for _, bl := range blobs {
		next <- bl
	}
	close(next)
	wg.Wait()
	return len(blobs) + 1, total, first
}

// countBlobReads counts the GetObject and HeadObject calls on blob data
// keys of bucket that reached MinIO from sweepgate, and all its calls on
// the bucket.
func countBlobReads(entries []harness.TraceEntry, bucket string) (gets, heads, calls int) {
	prefix := "/" + bucket + "/docker/registry/v2/blobs/"
	for _, e := range entries {
		if e.RequestID == "" || harness.IsTraceSync(e) || !strings.HasPrefix(e.Path, "/"+bucket) {
			continue
		}
		calls++
		if !strings.HasPrefix(e.Path, prefix) || !strings.HasSuffix(e.Path, "/data") {
			continue
		}
		switch e.FuncName {
		case "s3.GetObject":
			gets++
		case "s3.HeadObject":
			heads++
		}
	}
	return gets, heads, calls
}
