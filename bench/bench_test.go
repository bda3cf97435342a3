//go:build bench

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestMain removes what the harness shared (the sweepgate binary it built).
func TestMain(m *testing.M) {
	runEtcdChild()
	harness.Main(m)
}

// Workload sizes and shapes (docs/benchmarks.md).
const (
	largeSize        = 64 << 20 // single-PUT/GET object
	smallSize        = 4 << 10  // small object
	smallClients     = 16       // concurrent small-object requests
	smallKeys        = 64       // distinct small objects read by the GET workload
	partSize         = 16 << 20 // multipart part
	partCount        = 8        // parts per multipart upload (all in parallel)
	mpParallelParts  = 16       // parts of the 4-way parallel multipart upload
	mpParallel       = 4        // UploadPart calls in flight in it
	streamSize       = 1 << 30  // object streamed through for the memory figure
	largeRounds      = 5        // least samples per side for the large workloads: a median of five
	multipartRounds  = 2        // least samples per side for the 8-part multipart upload
	mpParallelRounds = 4        // least samples per side for the 4-way upload: on two cores they spread wider than its 10% margin
	smallRounds      = 5        // least samples per side for the small-object workloads: a median of five
	smallRoundTime   = 1500 * time.Millisecond
	// A workload keeps taking samples until it has run this long (and has
	// its least number of rounds), so that fast ones get enough samples for
	// a stable median; maxRounds caps it.
	minWorkloadTime = 4 * time.Second
	maxRounds       = 64
)

// side is one target of a workload: MinIO itself, the gateway, or the
// bare reverse proxy (bareproxy_test.go).
type side struct {
	name string
	s3   *s3.Client
	// pid is the proxy process's pid now (0 when unknown), nil for MinIO
	// itself: its CPU time is the side's own in the CPU figures.
	pid func() int
}

// The sides' names, as the report and the CPU figures know them.
const (
	sideDirect  = "direct"
	sideGateway = "gateway"
	sideBare    = "bare_proxy"
)

// BenchmarkGateway starts one MinIO and one sweepgate and runs every
// workload against both, alternating the order of the two sides round by
// round (direct, gateway, gateway, direct, ...; with the bare reverse proxy
// as a third side, the three rotate) so that drift over the run (page
// cache, disk writeback, CPU frequency, other work on the machine) does not
// favour any.
func BenchmarkGateway(b *testing.B) {
	// info, not the harness's default debug: the benchmark measures the
	// gateway as deployed, not its debug logging.
	env := harness.Start(b, harness.Options{LogLevel: "info"})
	env.RequireGateway(b)
	bucket := env.Bucket(b)
	direct := side{name: sideDirect, s3: env.DirectSDK(b)}
	gateway := side{name: sideGateway, s3: env.SDK(b), pid: env.Gateway.PID}
	// The same requests through a bare httputil.ReverseProxy (no
	// verification, no signing, no log), in the same rounds: the floor of
	// what a Go proxy built on net/http costs next to MinIO, for reading
	// the gateway's figures.
	proxy := startBareProxy(b, env)
	bare := side{name: sideBare, s3: proxy.s3, pid: func() int { return proxy.pid }}
	rep := newReport()
	var procs *cpuProcs
	if pid := pidOf(env.MinIO.DataDir); pid != 0 {
		procs = &cpuProcs{minio: pid}
	}

	// One 64 MiB buffer serves every large upload (and, in 16 MiB slices,
	// the parts), so the client spends no time generating data.
	large := harness.NewData(1, largeSize).Bytes()
	small := harness.NewData(2, smallSize).Bytes()

	// Memory first: its baseline should be the gateway's steady state after
	// start-up and a few requests, not what the other workloads left behind.
	b.Run("RSS_1GiB_stream", func(b *testing.B) {
		rep.setRSS(benchRSS(b, env, bucket, small))
	})

	b.Run("PUT_64MiB", func(b *testing.B) {
		compare(b, rep, workload{
			name: "put_64mib", title: "PUT 64 MiB (MB/s)", unit: "MB/s", target: targetLargeRatio,
			rounds: largeRounds, detail: "one PutObject of 64 MiB, aws-sdk-go-v2",
			run: func(ctx context.Context, s side) (float64, time.Duration, error) {
				start := time.Now()
				_, err := s.s3.PutObject(ctx, &s3.PutObjectInput{
					Bucket: aws.String(bucket), Key: aws.String("large/put-" + s.name), Body: bytes.NewReader(large),
				})
				return largeSize, time.Since(start), err
			},
		}, direct, gateway)
	})

	b.Run("GET_64MiB", func(b *testing.B) {
		key := "large/get"
		if _, err := direct.s3.PutObject(b.Context(), &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(large),
		}); err != nil {
			b.Fatalf("seed %s: %v", key, err)
		}
		compare(b, rep, workload{
			name: "get_64mib", title: "GET 64 MiB (MB/s)", unit: "MB/s", target: targetLargeRatio,
			rounds: largeRounds, cpu: procs, detail: "one GetObject of 64 MiB read to the end, aws-sdk-go-v2",
			run: func(ctx context.Context, s side) (float64, time.Duration, error) {
				start := time.Now()
				n, err := getDiscard(ctx, s.s3, bucket, key)
				if err == nil && n != largeSize {
					err = fmt.Errorf("GET %s read %d bytes, want %d", key, n, largeSize)
				}
				return largeSize, time.Since(start), err
			},
		}, direct, gateway, bare)
	})

	b.Run("PUT_4KiB_x16", func(b *testing.B) {
		compare(b, rep, workload{
			name: "put_4kib_16_clients", title: "PUT 4 KiB, 16 clients (ops/s)", unit: "ops/s", target: targetSmallRatio,
			rounds: smallRounds, cpu: procs,
			detail: fmt.Sprintf("PutObject of 4 KiB from %d goroutines sharing one client for %v", smallClients, smallRoundTime),
			run: func(ctx context.Context, s side) (float64, time.Duration, error) {
				return concurrentOps(ctx, smallClients, smallRoundTime, func(ctx context.Context, worker, i int) error {
					_, err := s.s3.PutObject(ctx, &s3.PutObjectInput{
						Bucket: aws.String(bucket),
						Key:    aws.String(fmt.Sprintf("small/put-%s/%02d/%02d", s.name, worker, i%smallKeys)),
						Body:   bytes.NewReader(small),
					})
					return err
				})
			},
		}, direct, gateway, bare)
	})

	b.Run("GET_4KiB_x16", func(b *testing.B) {
		seedSmall(b, direct.s3, bucket, small)
		compare(b, rep, smallGets(bucket, procs, "get_4kib_16_clients", "GET 4 KiB, 16 clients (ops/s)"), direct, gateway, bare)
	})

	b.Run("Multipart_8x16MiB", func(b *testing.B) {
		compare(b, rep, workload{
			name: "multipart_8x16mib", title: "multipart 8 x 16 MiB (MB/s)", unit: "MB/s", target: targetLargeRatio,
			rounds: multipartRounds,
			detail: "CreateMultipartUpload, 8 UploadPart of 16 MiB in parallel, CompleteMultipartUpload",
			run: func(ctx context.Context, s side) (float64, time.Duration, error) {
				start := time.Now()
				err := multipartUpload(ctx, s.s3, bucket, "multipart/"+s.name, large, partShape{partCount, partSize, partCount})
				return partCount * partSize, time.Since(start), err
			},
		}, direct, gateway)
	})

	b.Run("Multipart_16x16MiB_4_parallel", func(b *testing.B) {
		shape := partShape{parts: mpParallelParts, size: partSize, parallel: mpParallel}
		compare(b, rep, workload{
			name: "multipart_16x16mib_4_parallel", title: "multipart 16 x 16 MiB, 4 parallel (MB/s)", unit: "MB/s", target: targetLargeRatio,
			rounds: mpParallelRounds,
			detail: fmt.Sprintf("CreateMultipartUpload, %d UploadPart of 16 MiB from %d goroutines, CompleteMultipartUpload, aws-sdk-go-v2", shape.parts, shape.parallel),
			run: func(ctx context.Context, s side) (float64, time.Duration, error) {
				start := time.Now()
				err := multipartUpload(ctx, s.s3, bucket, "multipart-4/"+s.name, large, shape)
				return float64(shape.parts * shape.size), time.Since(start), err
			},
		}, direct, gateway)
	})

	b.Run("Etcd_commits_per_part", func(b *testing.B) {
		rep.setEtcdWrites(benchEtcdWrites(b, env, bucket, gateway.s3, large))
	})

	rep.print(os.Stdout)
	path, err := rep.write()
	if err != nil {
		b.Fatalf("%v", err)
	}
	fmt.Fprintf(os.Stdout, "results: %s\n\n", path)
}

// workload is one measurement, run alternately against both sides.
type workload struct {
	name, title, unit, detail string
	target                    float64
	// rounds is the least number of samples per side; the benchmark
	// framework's b.N raises it when -benchtime asks for more, and fast
	// workloads take more until minWorkloadTime has passed.
	rounds int
	// cpu, when set, measures the CPU time of MinIO and of each side's
	// proxy process per request over the rounds (not the warm-up).
	cpu *cpuProcs
	// run performs one sample against s and returns the amount of work
	// (bytes for MB/s, operations for ops/s) and the time it took.
	run func(ctx context.Context, s side) (amount float64, elapsed time.Duration, err error)
}

// compare runs one untimed warm-up sample per side, then the rounds, and
// records the medians. sides are MinIO itself, the gateway and optionally
// the bare reverse proxy; each round runs every side once, rotating which
// goes first, so that a ratio to MinIO compares samples taken side by side.
func compare(b *testing.B, rep *report, w workload, sides ...side) {
	b.Helper()
	ctx := b.Context()
	for _, s := range sides {
		if _, _, err := w.run(ctx, s); err != nil {
			b.Fatalf("%s warm-up against %s: %v", w.name, s.name, err)
		}
	}
	rounds := max(b.N, w.rounds)
	samples := map[string][]float64{}
	var tally *cpuTally
	if w.cpu != nil {
		tally = newCPUTally(w.cpu.minio)
		// A sample of a throughput workload is one request.
		tally.perSample = w.unit == "MB/s"
	}
	b.ResetTimer()
	start := time.Now()
	for r := 0; r < rounds || (r < maxRounds && time.Since(start) < minWorkloadTime); r++ {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			var elapsed time.Duration
			amount, err := tally.sample(s, func() (float64, error) {
				amount, d, err := w.run(ctx, s)
				elapsed = d
				return amount, err
			})
			if err != nil {
				b.Fatalf("%s round %d against %s: %v", w.name, r, s.name, err)
			}
			rate := amount / elapsed.Seconds()
			if w.unit == "MB/s" {
				rate /= 1e6
			}
			samples[s.name] = append(samples[s.name], rate)
		}
	}
	b.StopTimer()
	c := newComparison(w.name, w.title, w.unit, w.detail, w.target, samples[sideDirect], samples[sideGateway])
	if bare, ok := samples[sideBare]; ok {
		c.addBare(bare)
	}
	c.CPU = tally.result()
	rep.addComparison(c)
	// ns/op would be the time of a round over both sides: meaningless here.
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(c.Direct, "direct_"+w.unit)
	b.ReportMetric(c.Gateway, "gateway_"+w.unit)
	b.ReportMetric(c.Ratio, "ratio")
	b.Logf("%s: direct %.1f %s, gateway %.1f %s, ratio %.3f (target >= %.2f) %s",
		w.title, c.Direct, w.unit, c.Gateway, w.unit, c.Ratio, w.target, c.Status)
	if c.BareProxySamples != nil {
		b.ReportMetric(c.BareProxyRatio, "bare_ratio")
		b.Logf("%s: bare proxy %.1f %s, ratio %.3f; the gateway's ratio over the bare proxy's %.3f %s",
			w.title, c.BareProxy, w.unit, c.BareProxyRatio, c.OverBare, c.BareStatus)
	}
	if c.CPU != nil {
		b.ReportMetric(c.CPU.Ratio, "cpu_ratio")
		if c.CPU.BareProxy > 0 {
			b.ReportMetric(c.CPU.BareRatio, "cpu_bare_ratio")
		}
		b.Logf("%s CPU: %v", w.title, c.CPU)
	}
}

// getDiscard GETs an object and reads its body to the end.
func getDiscard(ctx context.Context, c *s3.Client, bucket, key string) (int64, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	return io.Copy(io.Discard, out.Body)
}

// concurrentOps runs op from n goroutines until d has passed and returns the
// number of completed operations and the time until the last one ended.
func concurrentOps(ctx context.Context, n int, d time.Duration, op func(ctx context.Context, worker, i int) error) (float64, time.Duration, error) {
	var (
		ops     atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(d)
	for w := range n {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				if err := op(ctx, w, i); err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(ops.Load()), time.Since(start), first
}

// partShape is the shape of a multipart upload: how many parts of what size,
// and how many UploadPart calls are in flight at once.
type partShape struct {
	parts, size, parallel int
}

// multipartUpload creates an upload, uploads its parts (see uploadParts) and
// completes it. A failed upload is aborted.
func multipartUpload(ctx context.Context, c *s3.Client, bucket, key string, buf []byte, shape partShape) (err error) {
	id, err := createUpload(ctx, c, bucket, key)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			abortUpload(ctx, c, bucket, key, id)
		}
	}()
	parts, err := uploadParts(ctx, c, bucket, key, id, buf, shape)
	if err != nil {
		return err
	}
	return completeUpload(ctx, c, bucket, key, id, parts)
}

func createUpload(ctx context.Context, c *s3.Client, bucket, key string) (string, error) {
	created, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", fmt.Errorf("CreateMultipartUpload: %w", err)
	}
	return aws.ToString(created.UploadId), nil
}

// abortUpload aborts an upload, best effort (its caller already failed).
func abortUpload(ctx context.Context, c *s3.Client, bucket, key, id string) {
	_, _ = c.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
	})
}

func completeUpload(ctx context.Context, c *s3.Client, bucket, key, id string, parts []types.CompletedPart) error {
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		return fmt.Errorf("CompleteMultipartUpload: %w", err)
	}
	return nil
}

// uploadParts uploads shape.parts parts of shape.size bytes, taken
// round-robin from the shape.size slices of buf, from shape.parallel
// goroutines that each take the next part number when their last part is
// done. It returns the parts for CompleteMultipartUpload; the first failure
// stops the others from starting new parts.
func uploadParts(ctx context.Context, c *s3.Client, bucket, key, id string, buf []byte, shape partShape) ([]types.CompletedPart, error) {
	nslices := len(buf) / shape.size
	if nslices == 0 {
		return nil, fmt.Errorf("a buffer of %d bytes holds no part of %d bytes", len(buf), shape.size)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := make([]types.CompletedPart, shape.parts)
	errs := make([]error, shape.parts)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(shape.parallel, shape.parts) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= shape.parts {
					return
				}
				off := (i % nslices) * shape.size
				out, err := c.UploadPart(ctx, &s3.UploadPartInput{
					Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
					PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(buf[off : off+shape.size]),
				})
				if err != nil {
					errs[i] = fmt.Errorf("UploadPart %d: %w", i+1, err)
					cancel()
					return
				}
				parts[i] = types.CompletedPart{
					PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag,
					ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C,
					ChecksumCRC64NVME: out.ChecksumCRC64NVME, ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256,
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return parts, nil
}

// benchRSS streams a generated 1 GiB object through the gateway three ways
// (aws-sdk-go-v2 PUT with a signed SHA-256 payload, minio-go PUT with signed
// streaming chunks, aws-sdk-go-v2 GET) while sampling the gateway's VmRSS,
// and reports the peak growth over the baseline taken before. The data is
// generated as it is read; neither side holds the object.
func benchRSS(b *testing.B, env *harness.Env, bucket string, small []byte) rssResult {
	b.Helper()
	ctx := b.Context()
	res := rssResult{PID: env.Gateway.PID(), TargetGrowthMiB: targetRSSGrowthMB, Status: statusUnavailable}
	if runtime.GOOS != "linux" {
		res.Note = "VmRSS is read from /proc, which only Linux has"
		return res
	}
	sdk := env.SDK(b)
	mc := env.MinioGo(b)
	key := "stream/1gib"

	// Warm up: a few small requests, so that the baseline includes what any
	// serving gateway holds (connection state, pools).
	for i := range 8 {
		k := fmt.Sprintf("stream/warmup-%d", i)
		if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(small)}); err != nil {
			b.Fatalf("warm-up PUT: %v", err)
		}
		if _, err := getDiscard(ctx, sdk, bucket, k); err != nil {
			b.Fatalf("warm-up GET: %v", err)
		}
	}
	baseline, err := readRSS(res.PID)
	if err != nil {
		res.Note = fmt.Sprintf("read VmRSS of pid %d: %v", res.PID, err)
		return res
	}
	res.BaselineBytes = baseline
	res.PeakBytes = baseline

	data := harness.NewData(3, streamSize)
	phases := []struct {
		name string
		run  func() (int64, error)
	}{
		{"PUT aws-sdk-go-v2 (sha256)", func() (int64, error) {
			_, err := sdk.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(key), Body: data.Reader(), ContentLength: aws.Int64(streamSize),
			})
			return streamSize, err
		}},
		{"PUT minio-go (signed chunks)", func() (int64, error) {
			info, err := mc.PutObject(ctx, bucket, key, data.Reader(), streamSize, minio.PutObjectOptions{DisableMultipart: true})
			if err == nil && info.Size != streamSize {
				err = fmt.Errorf("minio-go PUT stored %d bytes, want %d", info.Size, streamSize)
			}
			return streamSize, err
		}},
		{"GET aws-sdk-go-v2", func() (int64, error) {
			n, err := getDiscard(ctx, sdk, bucket, key)
			if err == nil && n != streamSize {
				err = fmt.Errorf("GET read %d bytes, want %d", n, streamSize)
			}
			return n, err
		}},
	}
	b.ResetTimer()
	for _, p := range phases {
		s := startRSSSampler(res.PID)
		start := time.Now()
		n, err := p.run()
		elapsed := time.Since(start)
		peak, samples, serr := s.finish()
		if err != nil {
			b.Fatalf("1 GiB stream, %s: %v", p.name, err)
		}
		if serr != nil {
			res.Note = fmt.Sprintf("sampling VmRSS of pid %d: %v", res.PID, serr)
		}
		growth := max(0, peak-baseline)
		res.Phases = append(res.Phases, rssPhase{
			Name: p.name, PeakGrowthBytes: growth, PeakGrowthMiB: float64(growth) / mib,
			MBPerSec: float64(n) / elapsed.Seconds() / 1e6, Samples: samples,
		})
		res.PeakBytes = max(res.PeakBytes, peak)
	}
	b.StopTimer()
	if _, err := sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		b.Logf("delete %s: %v", key, err)
	}
	res.GrowthBytes = res.PeakBytes - baseline
	res.GrowthMiB = float64(res.GrowthBytes) / mib
	res.Status = statusBelow // "below" the bar: over the memory budget
	if res.GrowthMiB < targetRSSGrowthMB {
		res.Status = statusPass
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(res.GrowthMiB, "rss_growth_MiB")
	b.Logf("gateway RSS growth while 1 GiB streams through: %.1f MiB (baseline %.1f MiB, target < %d MiB) %s",
		res.GrowthMiB, float64(baseline)/mib, targetRSSGrowthMB, res.Status)
	return res
}
