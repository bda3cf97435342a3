//go:build bench

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
)

// The etcd commits per part: how many etcd commits (revisions) one
// UploadPart of an upload with a session costs, the figure that bounds the
// part rate one etcd cluster carries and the history a part leaves. Each
// measured upload is one burst of etcdParts parts, etcdParallel in flight;
// its commits are the revisions, from the first part's start to the
// removal of the upload's lingering in-flight record (multipart.PartLinger
// after its last part), whose writes touch the upload's keys (read from an
// etcd watch, so that the gateway's own background writes are not
// counted). In keyspace schema 2 the first part of a burst commits the
// upload's in-flight record, every part commits its part record, and the
// removal commits once: (etcdParts+2)/etcdParts, 1.0625 for 32 parts,
// within targetEtcdCommits from 20 parts a burst up. Beside it, as detail,
// the requests by kind the gateway made, counted from its own histogram
// sweepgate_etcd_request_duration_seconds{op} (whose _count per op counts
// requests, failures included) scraped from the admin /metrics around the
// burst, so that the create's and the complete's own requests are not
// counted against the parts; a txn request is a commit or a read-only
// check (each part's start after the burst's first), so requests are not
// commits, and the lingering record's removal, a plain delete of the etcd
// client, is not among them.
const (
	etcdMetric    = "sweepgate_etcd_request_duration_seconds_count"
	etcdParts     = 32      // parts per measured upload: one burst
	etcdPartSize  = 5 << 20 // S3's least part size (but for the last)
	etcdParallel  = 4       // UploadPart calls in flight, as in the 4-way workload
	etcdRounds    = 3       // least measured uploads; the figure is their median
	etcdMaxRounds = 8       // most measured uploads
	etcdMinTime   = 2 * time.Second
	// orderHeld is what the order probe sends of its part before it holds
	// the rest back; orderWait bounds its wait for the part's start to be
	// recorded, and removalWait the wait for a lingering record's removal.
	orderHeld   = 1 << 20
	orderWait   = 10 * time.Second
	removalWait = 4 * multipart.PartLinger
	// revisionProbe is a key outside the gateway's prefix that the
	// benchmark writes to learn etcd's revision.
	revisionProbe = "sweepgate-bench-revision-probe"
)

// The op label values of the histogram.
const (
	opTxn    = "txn"
	opPut    = "put"
	opGet    = "get"
	opDelete = "delete"
)

// etcdCounts is the _count of the histogram by op label.
type etcdCounts map[string]float64

// scrapeEtcd reads the gateway's etcd request counts from /metrics.
func scrapeEtcd(g *harness.Gateway) (etcdCounts, error) {
	text, err := g.Metrics()
	if err != nil {
		return nil, err
	}
	return parseEtcdCounts(text)
}

// parseEtcdCounts picks the etcdMetric series out of a Prometheus text
// exposition.
func parseEtcdCounts(text string) (etcdCounts, error) {
	counts := etcdCounts{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), etcdMetric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return nil, fmt.Errorf("metrics: malformed line %q", sc.Text())
		}
		op := ""
		for l := range strings.SplitSeq(labels, ",") {
			if v, ok := strings.CutPrefix(l, `op="`); ok {
				op = strings.TrimSuffix(v, `"`)
			}
		}
		value, _, _ = strings.Cut(value, " ") // a timestamp may follow
		n, err := strconv.ParseFloat(value, 64)
		if op == "" || err != nil {
			return nil, fmt.Errorf("metrics: malformed line %q", sc.Text())
		}
		counts[op] += n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(counts) == 0 {
		return nil, errors.New("metrics: no " + etcdMetric + " series (does the gateway run sessions?)")
	}
	return counts, nil
}

// sub returns the requests per op from c0 to c.
func (c etcdCounts) sub(c0 etcdCounts) etcdOps {
	return etcdOps{Txn: c[opTxn] - c0[opTxn], Put: c[opPut] - c0[opPut], Get: c[opGet] - c0[opGet], Delete: c[opDelete] - c0[opDelete]}
}

// etcdOps counts etcd requests by kind.
type etcdOps struct {
	Txn    float64 `json:"txn"`
	Put    float64 `json:"put"`
	Get    float64 `json:"get"`
	Delete float64 `json:"delete"`
}

func (o etcdOps) div(n float64) etcdOps {
	return etcdOps{Txn: o.Txn / n, Put: o.Put / n, Get: o.Get / n, Delete: o.Delete / n}
}

func (o etcdOps) String() string {
	return fmt.Sprintf("txn %.2f, put %.2f, delete %.2f, get %.2f", o.Txn, o.Put, o.Delete, o.Get)
}

// burstCommits is what one burst committed to the upload's keys.
type burstCommits struct {
	// Commits is the number of distinct revisions that wrote the upload's
	// keys.
	Commits int `json:"commits"`
	// PartRecords, RecordWrites and RecordRemovals count key writes: part
	// records put, in-flight records put and in-flight records deleted;
	// Other the upload's other keys written (its session, its activity).
	PartRecords    int `json:"part_records"`
	RecordWrites   int `json:"inflight_writes"`
	RecordRemovals int `json:"inflight_removals"`
	Other          int `json:"other_keys"`
}

// etcdRound is one measured upload.
type etcdRound struct {
	// Create and Complete are the requests of the one call each; Parts
	// those of the burst (its parts and its lingering record's removal)
	// divided by the number of parts.
	Create   etcdOps `json:"create"`
	Parts    etcdOps `json:"requests_per_part"`
	Complete etcdOps `json:"complete"`
	// Burst is what the burst committed; CommitsPerPart its commits over
	// the number of parts.
	Burst          burstCommits `json:"burst"`
	CommitsPerPart float64      `json:"commits_per_part"`
}

// etcdOrder is what the order probe saw: the first UploadPart of an
// upload, whose body the client holds back after orderHeld bytes until
// the part's start shows in etcd.
type etcdOrder struct {
	// Started: the upload's in-flight record was in etcd while the body
	// was incomplete (so the backend cannot have accepted the part yet);
	// PartBefore: its part record was, too; PartAfter: the part record was
	// there once the client had its answer.
	Started    bool `json:"inflight_record_before_bytes"`
	PartBefore bool `json:"part_record_before_bytes"`
	PartAfter  bool `json:"part_record_at_answer"`
	// Mid is the requests from the start of the call to the moment the
	// record showed; End those of the whole call.
	Mid etcdOps `json:"requests_while_body_incomplete"`
	End etcdOps `json:"requests_whole_call"`
	// Confirmed: the start recorded before the bytes, the part record
	// only after them, and there by the answer.
	Confirmed bool   `json:"confirmed"`
	Note      string `json:"note,omitempty"`
}

// etcdWritesResult is the "etcd commits per part" figure.
type etcdWritesResult struct {
	Parts    int `json:"parts"`
	PartSize int `json:"part_size"`
	Parallel int `json:"parallel"`
	// Schema is the keyspace schema the gateway wrote in.
	Schema int `json:"schema"`
	// CommitsPerPart, PerPart and Burst are the medians over the rounds.
	CommitsPerPart float64      `json:"commits_per_part"`
	PerPart        etcdOps      `json:"requests_per_part"`
	Burst          burstCommits `json:"burst"`
	Create         etcdOps      `json:"create"`
	Complete       etcdOps      `json:"complete"`
	Rounds         []etcdRound  `json:"rounds"`
	Order          etcdOrder    `json:"order"`
	TargetCommits  float64      `json:"target_commits_per_part"`
	// Status is PASS when the keyspace is in schema 2, a part costs at
	// most TargetCommits commits, and the order probe confirmed the order.
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// benchEtcdWrites measures the gateway's etcd commits and requests per
// UploadPart. Each round is one upload of etcdParts parts of etcdPartSize,
// etcdParallel at a time, with /metrics scraped after the create, after
// the lingering record's removal and after the complete; then the order
// probe runs once.
func benchEtcdWrites(b *testing.B, env *harness.Env, bucket string, c *s3.Client, buf []byte) etcdWritesResult {
	b.Helper()
	ctx := b.Context()
	g := env.Gateway
	cli := g.EtcdClient(b)
	keys, err := etcdstore.NewKeys(etcdstore.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	shape := partShape{parts: etcdParts, size: etcdPartSize, parallel: etcdParallel}
	res := etcdWritesResult{
		Parts: shape.parts, PartSize: shape.size, Parallel: shape.parallel, TargetCommits: targetEtcdCommits,
		Detail: fmt.Sprintf("one upload of %d parts of %d MiB, %d in flight, through the gateway; commits: etcd revisions writing the upload's keys "+
			"from the first part to the lingering in-flight record's removal, over the parts; requests: sweepgate_etcd_request_duration_seconds_count "+
			"by op over the same span", shape.parts, shape.size>>20, shape.parallel),
	}
	scrape := func() etcdCounts {
		cs, err := scrapeEtcd(g)
		if err != nil {
			b.Fatalf("scrape %s: %v", g.AdminEndpoint, err)
		}
		return cs
	}

	// Warm-up: one upload, unmeasured.
	if err := multipartUpload(ctx, c, bucket, "etcd/warm-up", buf, shape); err != nil {
		b.Fatalf("etcd warm-up upload: %v", err)
	}
	res.Schema = storedSchema(b, cli, keys)
	b.ResetTimer()
	start := time.Now()
	for r := 0; r < max(b.N, etcdRounds) || (r < etcdMaxRounds && time.Since(start) < etcdMinTime); r++ {
		res.Rounds = append(res.Rounds, etcdWritesRound(b, cli, keys, c, bucket, fmt.Sprintf("etcd/round-%d", r), buf, shape, scrape))
	}
	res.medians()
	res.Order = probeEtcdOrder(ctx, env, env.HTTPClient(b), cli, keys, bucket, c, scrape)
	b.StopTimer()

	res.Status = statusBelow
	if res.Schema == 2 && res.CommitsPerPart <= targetEtcdCommits && res.Order.Confirmed {
		res.Status = statusPass
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(res.CommitsPerPart, "etcd_commits/part")
	b.ReportMetric(res.PerPart.Txn, "etcd_txn_requests/part")
	b.Logf("etcd commits per UploadPart (schema %d): %.3f (target <= %.1f) %s; requests per part: %v; order probe: %s",
		res.Schema, res.CommitsPerPart, targetEtcdCommits, res.Status, res.PerPart, res.Order.Note)
	return res
}

// etcdWritesRound measures one upload: its create, one burst of parts
// until the lingering record's removal, and its complete.
func etcdWritesRound(b *testing.B, cli *clientv3.Client, keys etcdstore.Keys, c *s3.Client, bucket, key string, buf []byte, shape partShape, scrape func() etcdCounts) etcdRound {
	ctx := b.Context()
	c0 := scrape()
	id, err := createUpload(ctx, c, bucket, key)
	if err != nil {
		b.Fatalf("etcd %s: %v", key, err)
	}
	c1 := scrape()
	rev1 := etcdRevision(b, cli)
	parts, err := uploadParts(ctx, c, bucket, key, id, buf, shape)
	if err == nil {
		err = awaitRemoval(ctx, cli, keys, id)
	}
	if err != nil {
		abortUpload(ctx, c, bucket, key, id)
		b.Fatalf("etcd %s: %v", key, err)
	}
	c2 := scrape()
	rev2 := etcdRevision(b, cli)
	burst, err := commitsOf(ctx, cli, keys, id, rev1, rev2)
	if err != nil {
		abortUpload(ctx, c, bucket, key, id)
		b.Fatalf("etcd %s: %v", key, err)
	}
	if err := completeUpload(ctx, c, bucket, key, id, parts); err != nil {
		abortUpload(ctx, c, bucket, key, id)
		b.Fatalf("etcd %s: %v", key, err)
	}
	c3 := scrape()
	return etcdRound{
		Create: c1.sub(c0), Parts: c2.sub(c1).div(float64(shape.parts)), Complete: c3.sub(c2),
		Burst: burst, CommitsPerPart: float64(burst.Commits) / float64(shape.parts),
	}
}

// medians sets the result's figures to the medians over its rounds.
func (res *etcdWritesResult) medians() {
	of := func(f func(r etcdRound) float64) float64 {
		var xs []float64
		for _, r := range res.Rounds {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	ops := func(f func(r etcdRound) etcdOps) etcdOps {
		return etcdOps{
			Txn: of(func(r etcdRound) float64 { return f(r).Txn }), Put: of(func(r etcdRound) float64 { return f(r).Put }),
			Get: of(func(r etcdRound) float64 { return f(r).Get }), Delete: of(func(r etcdRound) float64 { return f(r).Delete }),
		}
	}
	count := func(f func(r etcdRound) int) int { return int(of(func(r etcdRound) float64 { return float64(f(r)) })) }
	res.CommitsPerPart = of(func(r etcdRound) float64 { return r.CommitsPerPart })
	res.PerPart = ops(func(r etcdRound) etcdOps { return r.Parts })
	res.Create = ops(func(r etcdRound) etcdOps { return r.Create })
	res.Complete = ops(func(r etcdRound) etcdOps { return r.Complete })
	res.Burst = burstCommits{
		Commits:        count(func(r etcdRound) int { return r.Burst.Commits }),
		PartRecords:    count(func(r etcdRound) int { return r.Burst.PartRecords }),
		RecordWrites:   count(func(r etcdRound) int { return r.Burst.RecordWrites }),
		RecordRemovals: count(func(r etcdRound) int { return r.Burst.RecordRemovals }),
		Other:          count(func(r etcdRound) int { return r.Burst.Other }),
	}
}

// etcdRevision writes revisionProbe and returns the revision of the write:
// every commit before it has a smaller revision.
func etcdRevision(b *testing.B, cli *clientv3.Client) int64 {
	resp, err := cli.Put(b.Context(), revisionProbe, "x")
	if err != nil {
		b.Fatalf("etcd revision: %v", err)
	}
	return resp.Header.Revision
}

// awaitRemoval waits until the upload has no in-flight record left: the
// lingering record of its last burst removed.
func awaitRemoval(ctx context.Context, cli *clientv3.Client, keys etcdstore.Keys, uploadID string) error {
	deadline := time.Now().Add(removalWait)
	for {
		resp, err := cli.Get(ctx, keys.InFlight(uploadID), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the lingering in-flight record of %s was not removed within %v", uploadID, removalWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// commitsOf reads etcd's history between revisions from and to (both
// excluded) from a watch over every key and returns what it committed to
// the upload's keys.
func commitsOf(ctx context.Context, cli *clientv3.Client, keys etcdstore.Keys, uploadID string, from, to int64) (burstCommits, error) {
	ctx, cancel := context.WithTimeout(ctx, orderWait)
	defer cancel()
	var bc burstCommits
	revs := map[int64]bool{}
	esc := url.PathEscape(uploadID)
	for wr := range cli.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from+1)) {
		if err := wr.Err(); err != nil {
			return bc, err
		}
		for _, ev := range wr.Events {
			rev, key := ev.Kv.ModRevision, string(ev.Kv.Key)
			if rev >= to {
				bc.Commits = len(revs)
				return bc, nil
			}
			if !strings.Contains(key, esc) {
				continue
			}
			revs[rev] = true
			switch {
			case strings.HasPrefix(key, keys.Parts(uploadID)) && ev.Type == clientv3.EventTypePut:
				bc.PartRecords++
			case strings.HasPrefix(key, keys.InFlight(uploadID)) && ev.Type == clientv3.EventTypePut:
				bc.RecordWrites++
			case strings.HasPrefix(key, keys.InFlight(uploadID)) && ev.Type == clientv3.EventTypeDelete:
				bc.RecordRemovals++
			default:
				bc.Other++
			}
		}
	}
	return bc, fmt.Errorf("etcd history from revision %d to %d: %w", from+1, to, ctx.Err())
}

// probeEtcdOrder sends the first UploadPart of an upload through the
// gateway as a raw UNSIGNED-PAYLOAD request whose body stops after
// orderHeld bytes until the upload's in-flight record shows in etcd.
// While the body is incomplete the backend cannot have taken the part, so
// the record there says the part's start was recorded before its bytes,
// and a part record there would be one written before them.
func probeEtcdOrder(ctx context.Context, env *harness.Env, hc *http.Client, cli *clientv3.Client, keys etcdstore.Keys, bucket string, c *s3.Client, scrape func() etcdCounts) (o etcdOrder) {
	key := "etcd/order"
	id, err := createUpload(ctx, c, bucket, key)
	if err != nil {
		o.Note = err.Error()
		return o
	}
	defer abortUpload(ctx, c, bucket, key, id)
	present := func(prefix string) bool {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count > 0
	}

	body := harness.NewData(4, etcdPartSize).Bytes()
	u := fmt.Sprintf("%s/%s/%s?partNumber=1&uploadId=%s", env.Endpoint, bucket, key, url.QueryEscape(id))
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, pr)
	if err != nil {
		o.Note = err.Error()
		return o
	}
	req.ContentLength = int64(len(body))
	if err := harness.SignV4(ctx, req, env.AccessKey, env.SecretKey, env.Region, harness.UnsignedPayload, time.Now()); err != nil {
		o.Note = err.Error()
		return o
	}

	release := make(chan struct{})
	released := false
	releaseBody := func() {
		if !released {
			released = true
			close(release)
		}
	}
	defer releaseBody()
	go func() {
		if _, err := pw.Write(body[:orderHeld]); err != nil {
			return
		}
		<-release
		_, err := pw.Write(body[orderHeld:])
		pw.CloseWithError(err)
	}()
	type answer struct {
		status int
		err    error
	}
	done := make(chan answer, 1)
	c0 := scrape()
	go func() {
		resp, err := hc.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- answer{status: resp.StatusCode}
	}()

	deadline := time.Now().Add(orderWait)
	for ended := false; !ended; {
		if o.Started = present(keys.InFlight(id)); o.Started || time.Now().After(deadline) {
			break
		}
		select {
		case a := <-done:
			done <- a // the call ended early: reported below
			ended = true
		case <-time.After(2 * time.Millisecond):
		}
	}
	o.PartBefore = present(keys.Parts(id))
	o.Mid = scrape().sub(c0)
	releaseBody()
	a := <-done
	o.PartAfter = present(keys.Parts(id))
	o.End = scrape().sub(c0)
	switch {
	case a.err != nil:
		o.Note = fmt.Sprintf("UploadPart: %v", a.err)
	case a.status != http.StatusOK:
		o.Note = fmt.Sprintf("UploadPart: HTTP %d", a.status)
	case !o.Started:
		o.Note = fmt.Sprintf("no in-flight record within %v of the call while the body was incomplete", orderWait)
	default:
		o.Confirmed = !o.PartBefore && o.PartAfter
		o.Note = fmt.Sprintf("before the body was complete: in-flight record %v, part record %v (requests: %v); at the answer: part record %v (requests: %v)",
			o.Started, o.PartBefore, o.Mid, o.PartAfter, o.End)
	}
	return o
}
