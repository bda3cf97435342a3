//go:build bench

package bench

// BenchmarkLoad's reclaimer side: the stale uploads seeded for it, the
// passes driven while the load runs, and their reports and metrics.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// staleUploads are the abandoned uploads seeded for the passes to delete.
type staleUploads struct {
	mu   sync.Mutex
	keys []string
	ids  []string
}

// seed creates n uploads with one small part each directly on MinIO and a
// session for each that was marked expired two hours ago and has not
// changed since, as a pass would leave an abandoned upload: the next pass
// deletes them.
func (st *staleUploads) seed(ctx context.Context, env *harness.Env, admin *s3.Client, bucket string, n int) error {
	cli, err := etcdstore.Connect(ctx, []string{env.Gateway.EtcdClientURL}, 5*time.Second)
	if err != nil {
		return err
	}
	defer cli.Close()
	keys, err := etcdstore.NewKeys(etcdstore.DefaultPrefix)
	if err != nil {
		return err
	}
	store := etcdstore.NewStore(cli, keys)
	now := time.Now().UTC()
	created, marked := now.Add(-3*time.Hour), now.Add(-2*time.Hour)
	// All at once: under the load each request takes a while.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("load/stale/%02d", i)
			id, err := createUpload(ctx, admin, bucket, key)
			if err != nil {
				errs[i] = err
				return
			}
			st.mu.Lock()
			st.keys, st.ids = append(st.keys, key), append(st.ids, id)
			st.mu.Unlock()
			if _, err := admin.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
				PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 1024)),
			}); err != nil {
				errs[i] = fmt.Errorf("UploadPart %s: %w", key, err)
				return
			}
			sess := &etcdstore.Session{Bucket: bucket, Key: key, UploadID: id, Owner: "bench", Created: created, LastActivity: created}
			sess.Transition(etcdstore.StateActive, created, "gateway", "created")
			sess.Transition(etcdstore.StateExpired, marked, "reclaimer", "bench: abandoned")
			sess.ExpiredAt = &marked
			if _, err := store.CreateSession(ctx, sess); err != nil {
				errs[i] = fmt.Errorf("session of %s: %w", key, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// awaitGone waits (up to 30s: passes run every second) until every stale
// upload is gone from MinIO and returns how many are.
func (st *staleUploads) awaitGone(ctx context.Context, admin *s3.Client, bucket string, f *faults) int {
	st.mu.Lock()
	keys, ids := slices.Clone(st.keys), slices.Clone(st.ids)
	st.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		gone := 0
		for i, key := range keys {
			_, err := admin.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(ids[i])})
			var api smithy.APIError
			switch {
			case errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload":
				gone++
			case err != nil:
				f.err("ListParts of stale upload %s: %v", key, err)
				return gone
			}
		}
		if gone == len(keys) || time.Now().After(deadline) {
			return gone
		}
		select {
		case <-ctx.Done():
			return gone
		case <-time.After(time.Second):
		}
	}
}

// driveReclaim runs beside the gateway's load: it runs `sweepgate reclaim
// run` again and again until the uploads are done, and once a quarter of
// the parts are in, it seeds the stale uploads.
func driveReclaim(ctx context.Context, env *harness.Env, bin string, admin *s3.Client, t *loadTarget, st *staleUploads, rec *loadReclaim, phaseStart time.Time) {
	var wg sync.WaitGroup
	wg.Go(func() {
		quarter := max(int64(t.uploads*loadParts)/4, 1)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for wait := true; wait && t.partsDone.Load() < quarter; {
			select {
			case <-ctx.Done():
				return
			case <-t.mpDone:
				wait = false
			case <-tick.C:
			}
		}
		rec.StaleSeededS = math.Round(time.Since(phaseStart).Seconds()*10) / 10
		if err := st.seed(ctx, env, admin, t.bucket, loadStale); err != nil {
			t.faults.err("seed the stale uploads: %v", err)
		}
	})
	for {
		run, err := reclaimRunCLI(ctx, bin, env.Gateway.AdminEndpoint)
		if err != nil {
			t.faults.err("sweepgate reclaim run: %v", err)
		} else {
			rec.Runs = append(rec.Runs, run)
		}
		select {
		case <-ctx.Done():
		case <-t.mpDone:
		case <-time.After(loadRunPause):
			continue
		}
		break
	}
	wg.Wait()
}

// reclaimRunCLI runs `sweepgate reclaim run --json` against the admin API,
// as an operator would. A refused or stopped pass (exit 4) is an error.
func reclaimRunCLI(ctx context.Context, bin, admin string) (loadRun, error) {
	begin := time.Now()
	rep, stderr, err := reclaimRunReport(ctx, bin, admin, 5*time.Minute)
	run := loadRun{Seconds: math.Round(time.Since(begin).Seconds()*100) / 100, Pass: rep.Pass}
	if err != nil && rep.Pass != 0 {
		return run, fmt.Errorf("pass %d: %v (refused %q, stopped %q) %s", rep.Pass, err, rep.Refused, rep.Stopped, stderr)
	}
	return run, err
}

// reclaimRunReport runs `sweepgate reclaim run --json` against the admin
// API within timeout and returns the pass report it printed, its standard
// error, and the command's failure. A report that does not decode is an
// error naming both outputs, with Pass left 0.
func reclaimRunReport(ctx context.Context, bin, admin string, timeout time.Duration) (reclaim.Report, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "reclaim", "run", "--json", "--admin", admin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWEEPGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SWEEPGATE_ADMIN_TOKEN="+harness.AdminTokenOf(admin))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var rep reclaim.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		return reclaim.Report{}, errOut.Bytes(), fmt.Errorf("%v: %s%s", errors.Join(err, jerr), out.Bytes(), errOut.Bytes())
	}
	return rep, errOut.Bytes(), err
}

// passReports reads the stored pass reports (GET /admin/v1/reclaim/reports)
// of the passes that finished after since, oldest first, noting those that
// started after loadEnd.
func passReports(ctx context.Context, admin string, since, loadEnd time.Time, runs []loadRun) ([]loadPass, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/admin/v1/reclaim/reports?limit=100", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+harness.AdminTokenOf(admin))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var reps struct {
		Reports []reclaim.Report `json:"reports"`
	}
	if err := json.Unmarshal(body, &reps); err != nil {
		return nil, err
	}
	var out []loadPass
	for _, r := range reps.Reports {
		if r.Finished.Before(since) || r.DryRun {
			continue
		}
		u, a := r.Uploads, r.Acted
		out = append(out, loadPass{
			Pass: r.Pass, Run: slices.ContainsFunc(runs, func(x loadRun) bool { return x.Pass == r.Pass }), AfterLoad: r.Started.After(loadEnd),
			StartedS: math.Round(r.Started.Sub(since).Seconds()*10) / 10, Seconds: math.Round(r.Finished.Sub(r.Started).Seconds()*100) / 100,
			Judged: u.Keep.Sessions + u.Mark.Sessions + u.Delete.Sessions + u.Hold.Sessions,
			Keep:   u.Keep.Sessions, Mark: u.Mark.Sessions, Delete: u.Delete.Sessions,
			Marked: a.Marked.Sessions, Deleted: a.Deleted.Sessions, Changed: a.Changed.Sessions,
			Refused: r.Refused, Stopped: r.Stopped,
		})
	}
	slices.SortFunc(out, func(a, b loadPass) int { return int(a.Pass - b.Pass) })
	return out, nil
}

// fillReclaimMetrics takes what the reclaimer and the sessions did from the
// difference of two /metrics scrapes.
func fillReclaimMetrics(rec *loadReclaim, before, after string) {
	b, a := metricSeries(before), metricSeries(after)
	diff := func(name, labels string) float64 { return a[name+labels] - b[name+labels] }
	rec.PassResults = map[string]float64{}
	const passes = "sweepgate_reclaim_passes_total"
	for series, v := range a {
		if labels, ok := strings.CutPrefix(series, passes+"{"); ok {
			result := strings.TrimSuffix(strings.TrimPrefix(labels, `result="`), `"}`)
			if d := v - b[series]; d > 0 {
				rec.PassResults[result] = d
			}
		}
	}
	rec.MarkedParts = diff("sweepgate_reclaim_marked_parts_total", "")
	rec.DeletedParts = diff("sweepgate_reclaim_deleted_parts_total", `{outcome="aborted"}`)
	rec.Revived = diff("sweepgate_sessions_transitions_total", `{from="expired",to="active"}`)
	rec.Conflicts = diff("sweepgate_etcd_txn_conflicts_total", "")
}

// metricSeries maps each sample line of a Prometheus text exposition
// ("name{labels}" or "name") to its value.
func metricSeries(text string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if i := strings.LastIndex(line, "} "); i >= 0 {
			series, value, ok = line[:i+1], line[i+2:], true
		}
		if !ok {
			continue
		}
		value, _, _ = strings.Cut(value, " ") // a timestamp may follow
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[series] = v
		}
	}
	return out
}
