//go:build bench

package bench

// BenchmarkRegistryReclaim: a CNCF distribution registry behind sweepgate
// (digests.preset: distribution) and an identical registry writing to MinIO
// directly. The same images go to both, half the tags' manifests are
// deleted through both registries' API, then sweepgate's passes run until
// they settle (online, the registry still serving) and, in the same run,
// `registry garbage-collect` runs on the second storage (offline, its
// registry stopped). Both are timed and their bytes reclaimed counted.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/reclaim"
)

const (
	imagesEnv     = "SWEEPGATE_BENCH_IMAGES"
	defaultImages = 1000
	// Each image is a manifest, a config, one of registryBases shared base
	// layers and registryPrivate private layers of 2 to 8 KiB: 1,000
	// images are 10,010 blobs.
	registryBases   = 10
	registryPrivate = 8
	registryRepos   = 10
	registryPushers = 8
	// registryGrace is the gateway's placement grace and trash window.
	registryGrace     = 2 * time.Second
	registryMaxPasses = 40
)

// registryPass is one sweepgate pass.
type registryPass struct {
	Pass    int64   `json:"pass"`
	Seconds float64 `json:"seconds"`
	Deleted int64   `json:"deleted"`
	Bytes   int64   `json:"bytes"`
	Pending int64   `json:"pending"`
	Ready   int64   `json:"ready"`
}

// registryReclaim is the benchmark's result.
type registryReclaim struct {
	Images       int     `json:"images"`
	Blobs        int     `json:"blobs"`
	Bytes        int64   `json:"bytes"`
	DeletedTags  int     `json:"deleted_tags"`
	SetupSeconds float64 `json:"setup_seconds"`
	// Sweepgate: every pass until two in a row did nothing, and the totals
	// (SweepSeconds sums the passes' durations, not the waits between).
	Passes         []registryPass `json:"passes"`
	SweepSeconds   float64        `json:"sweepgate_seconds"`
	SweepDeleted   int            `json:"sweepgate_deleted"`
	SweepBytes     int64          `json:"sweepgate_bytes"`
	SweepMatchesGC bool           `json:"sweepgate_matches_gc_dry_run"`
	// GC: `registry garbage-collect` on the directly written copy.
	GCSeconds float64  `json:"gc_seconds"`
	GCDeleted int      `json:"gc_deleted"`
	GCBytes   int64    `json:"gc_bytes"`
	Notes     []string `json:"notes"`
}

// BenchmarkRegistryReclaim measures sweepgate's passes and distribution's
// garbage-collect reclaiming the same registry's garbage.
func BenchmarkRegistryReclaim(b *testing.B) {
	var res *registryReclaim
	for b.Loop() {
		if res == nil {
			res = benchRegistryReclaim(b, envCount(b, imagesEnv, defaultImages))
		}
	}
	b.ReportMetric(res.SweepSeconds, "sweepgate-s")
	b.ReportMetric(res.GCSeconds, "gc-s")
	printRegistryReclaim(os.Stdout, res)
	path, err := mergeResults("registry_reclaim", res)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "results: %s\n\n", path)
}

func benchRegistryReclaim(b *testing.B, images int) *registryReclaim {
	setup := time.Now()
	online := harness.BucketName(b)
	offline := online[:len(online)-1] + "x"
	env := harness.Start(b, harness.Options{Config: map[string]any{
		"digests": map[string]any{
			"preset":          "distribution",
			"preset_storage":  online,
			"placement_grace": registryGrace.String(),
			"trash_window":    registryGrace.String(),
			"max_delete":      math.MaxInt32, "max_delete_fraction": 1,
			"max_mark": math.MaxInt32, "max_mark_fraction": 1,
		},
		"reclaim": map[string]any{"interval": "1h",
			"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1},
	}})
	m := env.MinIO
	mc, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport)
	if err != nil {
		b.Fatal(err)
	}
	for _, bucket := range []string{online, offline} {
		if err := mc.MakeBucket(b.Context(), bucket, minio.MakeBucketOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	direct := func(bucket string) harness.RegistryStorage {
		return harness.RegistryStorage{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: bucket}
	}
	regOnline := harness.StartRegistry(b, harness.RegistryStorage{Endpoint: env.Gateway.Endpoint,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey, Bucket: online})
	res := &registryReclaim{Images: images, Notes: []string{
		"images are pushed through sweepgate over the registry API (blob upload POST+PUT, manifest PUT) from the benchmark process",
		"the offline copy is the online bucket copied object by object on MinIO (CopyObject) after the pushes, served by a second registry",
		"the even-numbered tags' manifests are deleted by digest through both registries' API",
		fmt.Sprintf("sweepgate: passes (sweepgate reclaim run) with placement grace and trash window %v until two in a row delete nothing and leave nothing pending or ready; the registry keeps serving", registryGrace),
		"garbage-collect: `registry garbage-collect` (no --dry-run) on the copy, its registry stopped",
	}}
	pushed := pushRegistryImages(b, images, regOnline.URL)
	copyBucket(b, mc, online, offline)
	regOffline := harness.StartRegistry(b, direct(offline))
	for i, d := range pushed {
		if i%2 == 0 {
			for _, reg := range []string{regOnline.URL, regOffline.URL} {
				u := fmt.Sprintf("%s/v2/%s/manifests/%s", reg, registryRepo(i), d)
				if _, err := registryDo(b.Context(), http.MethodDelete, u, "", nil, http.StatusAccepted); err != nil {
					b.Fatal(err)
				}
			}
			res.DeletedTags++
		}
	}
	before := blobSizes(b, mc, online)
	res.Blobs = len(before)
	for _, n := range before {
		res.Bytes += n
	}
	gc := harness.GarbageCollect(b, direct(online), true).Eligible
	res.SetupSeconds = time.Since(setup).Seconds()

	res.Passes = registryPasses(b, env.Gateway.AdminEndpoint)
	for _, p := range res.Passes {
		res.SweepSeconds += p.Seconds
	}
	gone := goneBlobs(before, blobSizes(b, mc, online))
	res.SweepDeleted, res.SweepBytes = len(gone), sum(gone)
	res.SweepMatchesGC = maps.Equal(keysOf(gone), gc)

	regOffline.Stop()
	offBefore := blobSizes(b, mc, offline)
	run := harness.GarbageCollect(b, direct(offline), false)
	offGone := goneBlobs(offBefore, blobSizes(b, mc, offline))
	res.GCSeconds, res.GCDeleted, res.GCBytes = run.Duration.Seconds(), len(offGone), sum(offGone)
	if len(offGone) != len(run.Eligible) {
		b.Fatalf("garbage-collect listed %d blobs, %d are gone", len(run.Eligible), len(offGone))
	}
	return res
}

// registryPasses runs passes until two in a row delete nothing and leave
// nothing pending or ready, and returns them.
func registryPasses(b *testing.B, admin string) []registryPass {
	var passes []registryPass
	for quiet := 0; quiet < 2; {
		if len(passes) == 1 {
			// The first pass stamped the deleted links' trash entries;
			// their window runs from there.
			time.Sleep(registryGrace)
		}
		if len(passes) == registryMaxPasses {
			b.Fatalf("the digest sweep did not settle in %d passes: %+v", registryMaxPasses, passes)
		}
		rep, err := runPassCLI(b.Context(), harness.BuildSweepgate(b), admin)
		if err != nil {
			b.Fatal(err)
		}
		d := rep.Digests
		if d == nil {
			b.Fatalf("pass %d has no digests section", rep.Pass)
		}
		if d.Refused != "" || d.Kept != "" {
			b.Fatalf("pass %d: digest sweep refused %q, kept %q", rep.Pass, d.Refused, d.Kept)
		}
		passes = append(passes, registryPass{Pass: rep.Pass, Seconds: rep.Finished.Sub(rep.Started).Seconds(),
			Deleted: d.Deleted, Bytes: d.Bytes, Pending: d.Pending, Ready: d.Ready})
		if d.Deleted == 0 && d.Pending == 0 && d.Ready == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return passes
}

// runPassCLI runs `sweepgate reclaim run --json` and returns its report.
func runPassCLI(ctx context.Context, bin, admin string) (reclaim.Report, error) {
	rep, stderr, err := reclaimRunReport(ctx, bin, admin, 10*time.Minute)
	if err != nil {
		return rep, fmt.Errorf("sweepgate reclaim run: %w %s", err, stderr)
	}
	return rep, nil
}

// pushRegistryImages pushes images to each registry, registryPushers at a
// time, and returns their manifests' digests. Image i is app/rN:tI.
func pushRegistryImages(b *testing.B, images int, registries ...string) []string {
	digests := make([]string, images)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range registryPushers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= images || failed.Load() != nil {
					return
				}
				for _, reg := range registries {
					d, err := pushRegistryImage(b.Context(), reg, i)
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("image %d to %s: %w", i, reg, err))
						return
					}
					digests[i] = d
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return digests
}

// copyBucket copies every object of from to the bucket to on MinIO,
// registryPushers at a time.
func copyBucket(b *testing.B, mc *minio.Client, from, to string) {
	keys := make(chan string)
	var failed atomic.Value
	var wg sync.WaitGroup
	for range registryPushers {
		wg.Go(func() {
			for key := range keys {
				_, err := mc.CopyObject(b.Context(), minio.CopyDestOptions{Bucket: to, Object: key}, minio.CopySrcOptions{Bucket: from, Object: key})
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("copy %s: %w", key, err))
				}
			}
		})
	}
	for o := range mc.ListObjects(b.Context(), from, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			failed.CompareAndSwap(nil, o.Err)
			break
		}
		keys <- o.Key
	}
	close(keys)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// registryRepo is the repository of image i.
func registryRepo(i int) string { return fmt.Sprintf("app/r%d", i%registryRepos) }

// pushRegistryImage pushes image i: its layers and config, then an OCI
// manifest naming them under tag tI. It returns the manifest's digest.
func pushRegistryImage(ctx context.Context, reg string, i int) (string, error) {
	repo := registryRepo(i)
	layers := []harness.Data{harness.NewData(uint64(1<<40+i%registryBases), 8<<10)}
	for j := range registryPrivate {
		seed := uint64(i*registryPrivate + j)
		layers = append(layers, harness.NewData(seed, int64(2<<10+seed%7<<10)))
	}
	var descs []string
	for _, l := range layers {
		body := l.Bytes()
		d, err := pushBlob(ctx, reg, repo, body)
		if err != nil {
			return "", err
		}
		descs = append(descs, fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":%q,"size":%d}`, d, len(body)))
	}
	config := fmt.Appendf(nil, `{"architecture":"amd64","os":"linux","config":{"Labels":{"image":"%d"}}}`, i)
	cd, err := pushBlob(ctx, reg, repo, config)
	if err != nil {
		return "", err
	}
	manifest := fmt.Appendf(nil, `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",`+
		`"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":%d},"layers":[%s]}`,
		cd, len(config), strings.Join(descs, ","))
	resp, err := registryDo(ctx, http.MethodPut, fmt.Sprintf("%s/v2/%s/manifests/t%d", reg, repo, i),
		"application/vnd.oci.image.manifest.v1+json", manifest, http.StatusCreated)
	if err != nil {
		return "", err
	}
	return resp.Header.Get("Docker-Content-Digest"), nil
}

// pushBlob uploads body to repo unless the repository has it: POST, then a
// monolithic PUT with the digest.
func pushBlob(ctx context.Context, reg, repo string, body []byte) (string, error) {
	d := "sha256:" + harness.SHA256Hex(body)
	if _, err := registryDo(ctx, http.MethodHead, fmt.Sprintf("%s/v2/%s/blobs/%s", reg, repo, d), "", nil, http.StatusOK); err == nil {
		return d, nil
	}
	resp, err := registryDo(ctx, http.MethodPost, fmt.Sprintf("%s/v2/%s/blobs/uploads/", reg, repo), "", nil, http.StatusAccepted)
	if err != nil {
		return "", err
	}
	loc, err := url.Parse(reg + "/")
	if err == nil {
		loc, err = loc.Parse(resp.Header.Get("Location"))
	}
	if err != nil {
		return "", fmt.Errorf("upload location %q: %w", resp.Header.Get("Location"), err)
	}
	q := loc.Query()
	q.Set("digest", d)
	loc.RawQuery = q.Encode()
	_, err = registryDo(ctx, http.MethodPut, loc.String(), "application/octet-stream", body, http.StatusCreated)
	return d, err
}

// registryDo sends one registry API request and checks its status.
func registryDo(ctx context.Context, method, u, contentType string, body []byte, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return resp, fmt.Errorf("%s %s: %s %s", method, u, resp.Status, msg)
	}
	return resp, nil
}

// blobSizes lists the registry's blob store in bucket on MinIO: each blob's
// digest and size.
func blobSizes(b *testing.B, mc *minio.Client, bucket string) map[string]int64 {
	const prefix = "docker/registry/v2/blobs/"
	sizes := map[string]int64{}
	for o := range mc.ListObjects(b.Context(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			b.Fatal(o.Err)
		}
		parts := strings.Split(strings.TrimPrefix(o.Key, prefix), "/")
		if len(parts) == 4 && parts[3] == "data" {
			sizes[parts[0]+":"+parts[2]] = o.Size
		}
	}
	return sizes
}

// goneBlobs returns the blobs of before that after lacks.
func goneBlobs(before, after map[string]int64) map[string]int64 {
	gone := map[string]int64{}
	for d, n := range before {
		if _, ok := after[d]; !ok {
			gone[d] = n
		}
	}
	return gone
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func keysOf(m map[string]int64) map[string]bool {
	set := make(map[string]bool, len(m))
	for k := range m {
		set[k] = true
	}
	return set
}

// printRegistryReclaim prints sweepgate's passes and garbage-collect side by
// side.
func printRegistryReclaim(w io.Writer, r *registryReclaim) {
	fmt.Fprintf(w, "\nregistry reclaim (%s, %d CPUs): %d images, %d blobs (%.1f MB), %d tags deleted; setup %.0fs\n",
		runtime.Version(), runtime.NumCPU(), r.Images, r.Blobs, float64(r.Bytes)/1e6, r.DeletedTags, r.SetupSeconds)
	fmt.Fprintf(w, "%-*s %8s %10s %14s %14s\n", titleWidth, "", "passes", "seconds", "blobs deleted", "MB reclaimed")
	fmt.Fprintf(w, "%-*s %8d %10.2f %14d %14.2f\n", titleWidth, "sweepgate passes (online)", len(r.Passes), r.SweepSeconds, r.SweepDeleted, float64(r.SweepBytes)/1e6)
	for _, p := range r.Passes {
		fmt.Fprintf(w, "    %-*s %8s %10.2f %14d %14.2f  pending %d, ready %d\n", titleWidth-4, fmt.Sprintf("pass %d", p.Pass), "", p.Seconds, p.Deleted, float64(p.Bytes)/1e6, p.Pending, p.Ready)
	}
	fmt.Fprintf(w, "%-*s %8d %10.2f %14d %14.2f\n", titleWidth, "registry garbage-collect (offline)", 1, r.GCSeconds, r.GCDeleted, float64(r.GCBytes)/1e6)
	fmt.Fprintf(w, "sweepgate deleted exactly garbage-collect --dry-run's set: %v\n", r.SweepMatchesGC)
}
