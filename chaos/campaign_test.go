//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// bucket is the campaign's bucket: its own MinIO, so one name does.
const bucket = "chaos"

// drainWait bounds how long the clients may take to settle their calls
// once told to stop (a call retries for up to callDeadline).
const drainWait = callDeadline + 10*time.Second

// finalWait bounds the final passes: what the workload abandoned last
// becomes deletable grace+delete_after after it, and the reconciler and
// the passes need a few rounds after that.
const finalWait = 75 * time.Second

// TestChaos runs one seeded campaign (see the package documentation):
// setup, CHAOS_DURATION of workload under faults, then the faults healed,
// the final passes and the checker. Any violation fails the test with the
// seed and the command that runs the campaign again.
func TestChaos(t *testing.T) {
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): a campaign needs the gateways")
	}
	cfg := loadConfig(t)
	clog := openLog(t, cfg)
	announce := fmt.Sprintf("chaos: seed %d, %s of workload, %d clients; log %s; reproduce with: %s",
		cfg.seed, cfg.duration, cfg.clients, clog.path, cfg.reproduce())
	t.Log(announce)
	fmt.Fprintln(os.Stderr, announce)

	sys := startSystem(t, clog)
	keys := etcdstore.Keys{Prefix: etcdstore.DefaultPrefix}
	cli := sys.cluster.Client(t)
	d := direct{c: harness.NewS3Client(sys.minio.Endpoint, sys.minio.Region, sys.minio.AccessKey, sys.minio.SecretKey, newTransport(t), true), bucket: bucket}
	if _, err := d.c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket on MinIO: %v", err)
	}
	if err := awaitLeader(t.Context(), sys, 30*time.Second); err != nil {
		t.Fatalf("chaos: %v", err)
	}

	eps := clientEndpoints(t, sys, cfg.clients+registryClients+sessionFreeClients)

	ctx, cancel := context.WithCancel(t.Context())
	f := newFaults(sys, clog, cfg)
	smp := &sampler{sys: sys, cli: cli, keys: keys, log: clog}
	aud := &blobAuditor{d: d, cli: cli, log: clog}
	w := newWorkload(cfg, bucket, clog, eps, sys.names)
	w.around = &aroundWriter{d: d, cli: cli, keys: keys}
	w.pull = &d
	w.steer = &sys.steer
	var bg sync.WaitGroup
	// Registered after every process's cleanup, so it runs before them: no
	// gateway stays paused and no goroutine of the campaign outlives it.
	t.Cleanup(func() {
		cancel()
		bg.Wait()
		w.wg.Wait()
		for i := range sys.gateways {
			f.cont(i)
		}
		if t.Failed() {
			keepLogs(t, clog, sys)
		}
	})
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for _, run := range []func(context.Context){smp.run, aud.run} {
		bg.Add(1)
		go func() {
			defer bg.Done()
			run(ctx)
		}()
	}

	started := time.Now()
	end := started.Add(cfg.duration)
	clog.printf("phase", "workload starts: %d clients for %s", cfg.clients, cfg.duration)
	w.start(wctx)
	pctx, pcancel := context.WithCancel(ctx)
	bg.Add(1)
	go func() {
		defer bg.Done()
		f.runProxies(pctx, end)
	}()
	bg.Add(1)
	go func() {
		defer bg.Done()
		f.runLateDeletes(pctx, end)
	}()
	f.runProcesses(t, ctx, end)
	if d := time.Until(end); d > 0 {
		time.Sleep(d)
	}

	clog.printf("phase", "workload stops; clients settle their calls")
	pcancel()
	w.finish(wcancel, drainWait)
	stopped := time.Now()
	clog.printf("phase", "faults heal")
	f.heal(t)
	if err := awaitLeader(ctx, sys, 45*time.Second); err != nil {
		t.Errorf("chaos: after healing: %v", err)
	}

	c := &checker{v: &verdicts{log: clog}, w: w, sys: sys, f: f, smp: smp, d: d, cli: cli, keys: keys, started: clog.start}
	clog.printf("phase", "final passes")
	finalPasses(t, ctx, c, stopped)

	// The auditor's last round runs in checkBlobs; stop the background
	// readers first so the history's end is after everything they saw.
	cancel()
	bg.Wait()
	clog.printf("phase", "checks")
	c.runChecks(t, aud)

	reportVerdict(t, cfg, clog, c, w, summarize(w, f, smp, started, stopped)+"; "+c.sessionFree)
}

// runChecks replays etcd's history since the system started and runs
// every check on it, the workload's records and MinIO.
func (c *checker) runChecks(t *testing.T, aud *blobAuditor) {
	hctx, hcancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer hcancel()
	h, err := replay(hctx, c.cli, c.keys, c.sys.startRev)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	c.h = h
	c.w.mu.Lock()
	c.v.violations = append(c.v.violations, c.w.violations...)
	c.w.mu.Unlock()
	c.checkObjects(hctx)
	c.checkRefusals()
	c.checkLeaks(hctx)
	c.checkBlobs(hctx, aud)
	c.checkTerms()
	c.checkAroundParts()
	c.checkClockOffsets()
	c.checkLayouts()
	c.checkSessionFree()
}

// clientEndpoints gives each of n clients both libraries for both
// gateways, through the gateways' front proxies.
func clientEndpoints(t *testing.T, sys *system, n int) [][]endpoint {
	var eps [][]endpoint
	for range n {
		var mine []endpoint
		for g := range sys.gateways {
			url := sys.front[g].URL
			mine = append(mine, endpoint{gw: g, ops: [2]s3ops{
				newAWSOps(t, url, sys.minio.Region, sys.minio.AccessKey, sys.minio.SecretKey, bucket),
				newMinioOps(t, url, sys.minio.Region, sys.minio.AccessKey, sys.minio.SecretKey, bucket),
			}})
		}
		eps = append(eps, mine)
	}
	return eps
}

// reportVerdict logs the campaign's summary, notes and anomalies, and fails
// t with each violation the checker found.
func reportVerdict(t *testing.T, cfg campaignConfig, clog *campaignLog, c *checker, w *workload, summary string) {
	clog.printf("summary", "%s", summary)
	for _, n := range c.v.notes {
		t.Log(n)
	}
	for _, a := range w.anomalies {
		t.Logf("anomaly (not a violation): %s", a)
	}
	t.Log(summary)
	if len(c.v.violations) > 0 {
		for _, v := range c.v.violations {
			t.Error(v)
		}
		t.Errorf("chaos: %d violations with seed %d; log %s; reproduce with:\n\t%s", len(c.v.violations), cfg.seed, clog.path, cfg.reproduce())
		clog.printf("verdict", "FAIL: %d violations", len(c.v.violations))
		return
	}
	clog.printf("verdict", "PASS")
	t.Logf("chaos: seed %d passed, no violations (log %s)", cfg.seed, clog.path)
}

// startSystem starts MinIO, the etcd cluster, the backend proxy, both
// gateways and their front proxies.
func startSystem(t *testing.T, clog *campaignLog) *system {
	t.Helper()
	sys := &system{names: []string{"g0", "g1"}, status: &http.Client{Transport: newTransport(t)}}
	sys.minio = harness.StartMinIO(t)
	sys.cluster = harness.StartEtcdCluster(t, 3)
	sys.back = harness.StartFaultProxy(t, sys.minio.Endpoint)
	sys.backArrivals = &arrivalLog{}
	sys.back.Inject(sys.backArrivals.rule())
	// Where the replay of etcd's history starts: before the gateways'
	// first write.
	resp, err := sys.cluster.Client(t).Get(t.Context(), "/sweepgate-chaos/start")
	if err != nil {
		t.Fatalf("chaos: etcd: %v", err)
	}
	sys.startRev = resp.Header.Revision + 1
	opts := harness.Options{
		EtcdEndpoints: sys.cluster.Endpoints(),
		Config: map[string]any{
			"backend": map[string]any{"endpoint": sys.back.URL},
			"reclaim": map[string]any{
				"grace":           grace.String(),
				"delete_after":    deleteAfter.String(),
				"interval":        passInterval.String(),
				"election_ttl":    electionTTL.String(),
				"backend_timeout": backendTimeout.String(),
				"clock_skew":      clockSkew.String(),
				// A pass sees a few uploads at a time; the default
				// quarter would refuse the abandoned ones (and pause the
				// sweep until a person resumes it).
				"max_delete_fraction":         1,
				"max_delete_uploads_fraction": 1,
				"max_mark_fraction":           1,
			},
			"sessions": map[string]any{
				// A complete in flight on a killed gateway keeps retries
				// out only this long, and what a crash leaves aborting or
				// completing is settled within seconds.
				"complete_hold":      "2s",
				"reconcile_interval": "2s",
				"reconcile_after":    "3s",
			},
			"digests": map[string]any{
				"namespaces": []string{bucket + "/blobs/sha256/"},
				// The remembering producers' tags are confirmed: a tag
				// naming a blob that is not stored is refused.
				"sources": []any{
					bucket + "/manifests/",
					map[string]any{"name": "tags", "bucket": bucket, "prefix": tagPrefix, "confirm_blobs": true},
				},
				"placement_grace":     placementGrace.String(),
				"trash_window":        trashWindow.String(),
				"guard_settle":        guardSettle.String(),
				"max_delete_fraction": 1,
				"max_mark_fraction":   1,
			},
		},
	}
	for i := range sys.names {
		opts := opts
		if i == cutGateway {
			opts.EtcdEndpoints = startEtcdProxies(t, sys)
		}
		g := harness.StartGateway(t, sys.minio, opts)
		sys.gateways = append(sys.gateways, g)
		p := harness.StartFaultProxy(t, g.Endpoint)
		a := &arrivalLog{}
		p.Inject(a.rule())
		sys.front = append(sys.front, p)
		sys.arrivals = append(sys.arrivals, a)
		clog.printf("setup", "%s: pid %d, S3 %s via front proxy %s, admin %s, etcd %s, log %s", sys.names[i], g.PID(), g.Endpoint, p.URL, g.AdminEndpoint, strings.Join(opts.EtcdEndpoints, ","), g.LogFile)
	}
	clog.printf("setup", "MinIO %s (log %s) via backend proxy %s; etcd %s", sys.minio.Endpoint, sys.minio.LogFile, sys.back.URL, strings.Join(sys.cluster.Endpoints(), ","))
	return sys
}

// keepLogs copies the processes' logs next to the campaign's log (which
// is kept), since theirs go with the test's temporary directories.
func keepLogs(t *testing.T, clog *campaignLog, sys *system) {
	dir := os.Getenv("SWEEPGATE_TEST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	base := strings.TrimSuffix(filepath.Base(clog.path), ".log")
	logs := map[string]string{"minio": sys.minio.LogFile}
	for i, g := range sys.gateways {
		logs[sys.names[i]] = g.LogFile
	}
	for name, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		kept := filepath.Join(dir, base+"-"+name+".log")
		if os.WriteFile(kept, b, 0o644) == nil {
			t.Logf("chaos: %s log kept at %s", name, kept)
		}
	}
}

// awaitLeader waits until a gateway says it leads the reclaimer.
func awaitLeader(ctx context.Context, sys *system, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if i, _ := sys.leader(ctx); i >= 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s", errNoLeader, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// finalPasses runs passes with `sweepgate reclaim run` against the
// leader's admin endpoint (besides the ones its interval runs) until every
// upload that should be gone is, at least three after the last upload
// could have become deletable, and the trash and placement grace of the
// last manifest writes have run out.
func finalPasses(t *testing.T, ctx context.Context, c *checker, stopped time.Time) {
	c.w.mu.Lock()
	lastWrite := c.w.lastWrite
	c.w.mu.Unlock()
	quiet := maxTime(stopped.Add(reclaimable+passInterval), lastWrite.Add(trashWindow+placementGrace+passInterval))
	deadline := stopped.Add(finalWait)
	passes, after := 0, 0
	for {
		i, term := c.sys.leader(ctx)
		if i >= 0 {
			rep, err := runPass(t, ctx, c.sys.gateways[i].AdminEndpoint)
			passes++
			switch {
			case err != nil:
				c.v.log.printf("pass", "reclaim run on %s (term %d): %v", c.sys.names[i], term, err)
			default:
				digests := ""
				if rep.Digests != nil {
					digests = fmt.Sprintf(", digests: %d pending, %d ready, %d deleted (refused %q)", rep.Digests.Pending, rep.Digests.Ready, rep.Digests.Deleted, rep.Digests.Refused)
				}
				c.v.log.printf("pass", "reclaim run on %s: pass %d term %d, uploads %+v, acted %+v, refused %q stopped %q%s",
					c.sys.names[i], rep.Pass, rep.Term, rep.Uploads, rep.Acted, rep.Refused, rep.Stopped, digests)
				if rep.Refused != "" || rep.Digests != nil && rep.Digests.Refused != "" {
					c.v.violate("a final pass was refused by the breaker (max_delete_fraction is 1): %s", rep.Refused+digests)
				}
			}
		}
		if time.Now().After(quiet) {
			after++
			leaks, _, err := c.leftovers(ctx)
			if err == nil && len(leaks) == 0 && after >= 3 {
				c.v.note("final passes: %d run with `sweepgate reclaim run`, done %s after the workload stopped", passes, time.Since(stopped).Round(time.Second))
				return
			}
			if time.Now().After(deadline) {
				c.v.log.printf("pass", "final passes gave up after %s with %d leftovers (%v)", finalWait, len(leaks), err)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// runPass runs one pass with the sweepgate binary as an operator would.
func runPass(t *testing.T, ctx context.Context, admin string) (reclaim.Report, error) {
	var rep reclaim.Report
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.BuildSweepgate(t), "reclaim", "run", "--json", "--admin", admin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWEEPGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SWEEPGATE_ADMIN_TOKEN="+harness.AdminTokenOf(admin))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return rep, fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut.String()))
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("reclaim run --json: %w", err)
	}
	return rep, nil
}

// summarize says what the campaign did.
func summarize(w *workload, f *faults, smp *sampler, started, stopped time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for _, m := range []map[string]int{w.counts, f.counts} {
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s x%d", k, m[k]))
		}
	}
	smp.mu.Lock()
	double := smp.doubleClaims
	smp.mu.Unlock()
	return fmt.Sprintf("workload %s (stopped %s later); %d uploads, %d manifest writes, %d deletes; both gateways claimed the lead in %d samples; %s",
		stopped.Sub(started).Round(time.Second), time.Since(stopped).Round(time.Second), len(w.uploads), len(w.writes), len(w.deletes), double, strings.Join(parts, ", "))
}
