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

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The etcd writes per part: how many etcd requests the gateway makes for
// one UploadPart of an upload that has a session, counted from its own
// histogram sweepgate_etcd_request_duration_seconds{op} (whose _count per
// op counts requests, failures included) scraped from the admin /metrics
// between the phases of an upload, so that the create's and the complete's
// own requests are not counted against the parts.
const (
	etcdMetric    = "sweepgate_etcd_request_duration_seconds_count"
	etcdParts     = 16      // parts per measured upload
	etcdPartSize  = 5 << 20 // S3's least part size (but for the last)
	etcdParallel  = 4       // UploadPart calls in flight, as in the 4-way workload
	etcdRounds    = 3       // least measured uploads; the figure is their median
	etcdMaxRounds = 8       // most measured uploads
	etcdMinTime   = 2 * time.Second
	// orderHeld is what the order probe sends of its part before it holds
	// the rest back; orderWait bounds its wait for the txn to show.
	orderHeld = 1 << 20
	orderWait = 10 * time.Second
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

// writes counts the requests that write: transactions, puts and deletes.
func (o etcdOps) writes() float64 { return o.Txn + o.Put + o.Delete }

func (o etcdOps) div(n float64) etcdOps {
	return etcdOps{Txn: o.Txn / n, Put: o.Put / n, Get: o.Get / n, Delete: o.Delete / n}
}

func (o etcdOps) String() string {
	return fmt.Sprintf("txn %.2f, put %.2f, delete %.2f, get %.2f", o.Txn, o.Put, o.Delete, o.Get)
}

// etcdRound is one measured upload.
type etcdRound struct {
	// Create and Complete are the requests of the one call each; Parts
	// those of the UploadPart phase divided by the number of parts.
	Create   etcdOps `json:"create"`
	Parts    etcdOps `json:"per_part"`
	Complete etcdOps `json:"complete"`
	// WritesPerPart is (txn + put + delete) / parts of the UploadPart phase.
	WritesPerPart float64 `json:"writes_per_part"`
	// RevisionsPerPart is the growth of etcd's revision over the UploadPart
	// phase divided by the number of parts: the writes that changed
	// something (a transaction whose comparison failed does not).
	RevisionsPerPart float64 `json:"revisions_per_part"`
}

// etcdOrder is what the order probe saw: one UploadPart whose body the
// client holds back after orderHeld bytes until the gateway's transaction
// shows on /metrics.
type etcdOrder struct {
	// Mid is the requests from the start of the call to the moment the
	// transaction showed, with the body still incomplete (so the backend
	// cannot have accepted the part yet).
	Mid etcdOps `json:"while_body_incomplete"`
	// End is the requests of the whole call, response included.
	End etcdOps `json:"whole_call"`
	// Confirmed: one txn before the body was complete, no put before it,
	// one put by the time of the response.
	Confirmed bool   `json:"confirmed"`
	Note      string `json:"note,omitempty"`
}

// etcdWritesResult is the "etcd writes per part" figure.
type etcdWritesResult struct {
	Parts    int `json:"parts"`
	PartSize int `json:"part_size"`
	Parallel int `json:"parallel"`
	// WritesPerPart, PerPart and RevisionsPerPart are the medians over the
	// rounds.
	WritesPerPart    float64     `json:"writes_per_part"`
	PerPart          etcdOps     `json:"per_part"`
	RevisionsPerPart float64     `json:"revisions_per_part"`
	Create           etcdOps     `json:"create"`
	Complete         etcdOps     `json:"complete"`
	Rounds           []etcdRound `json:"rounds"`
	Order            etcdOrder   `json:"order"`
	TargetWrites     float64     `json:"target_writes_per_part"`
	// Status is PASS when a part costs at most TargetWrites writes, at
	// most one txn and one put, and the order probe saw the txn before the
	// bytes and the put after.
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// benchEtcdWrites measures the gateway's etcd requests per UploadPart. Each
// round is one upload of etcdParts parts of etcdPartSize, etcdParallel at a
// time, with /metrics scraped after the create, after the last part and
// after the complete; then the order probe runs once.
func benchEtcdWrites(b *testing.B, env *harness.Env, bucket string, c *s3.Client, buf []byte) etcdWritesResult {
	b.Helper()
	ctx := b.Context()
	g := env.Gateway
	cli := g.EtcdClient(b)
	shape := partShape{parts: etcdParts, size: etcdPartSize, parallel: etcdParallel}
	res := etcdWritesResult{
		Parts: shape.parts, PartSize: shape.size, Parallel: shape.parallel, TargetWrites: targetEtcdWrites,
		Detail: fmt.Sprintf("one upload of %d parts of %d MiB, %d in flight, through the gateway; (txn+put+delete)/parts of "+
			"sweepgate_etcd_request_duration_seconds_count, scraped between create, parts and complete", shape.parts, shape.size>>20, shape.parallel),
	}
	scrape := func() etcdCounts {
		cs, err := scrapeEtcd(g)
		if err != nil {
			b.Fatalf("scrape %s: %v", g.AdminEndpoint, err)
		}
		return cs
	}
	revision := func() int64 {
		resp, err := cli.Get(ctx, "sweepgate-bench-revision-probe")
		if err != nil {
			b.Fatalf("etcd revision: %v", err)
		}
		return resp.Header.Revision
	}

	// Warm-up: one upload, unmeasured.
	if err := multipartUpload(ctx, c, bucket, "etcd/warm-up", buf, shape); err != nil {
		b.Fatalf("etcd warm-up upload: %v", err)
	}
	b.ResetTimer()
	start := time.Now()
	var writes, txn, put, get, del, revs, ccTxn, ccPut, ccGet, ccDel, cpTxn, cpPut, cpGet, cpDel []float64
	for r := 0; r < max(b.N, etcdRounds) || (r < etcdMaxRounds && time.Since(start) < etcdMinTime); r++ {
		key := fmt.Sprintf("etcd/round-%d", r)
		c0 := scrape()
		id, err := createUpload(ctx, c, bucket, key)
		if err != nil {
			b.Fatalf("etcd round %d: %v", r, err)
		}
		c1 := scrape()
		rev1 := revision()
		parts, err := uploadParts(ctx, c, bucket, key, id, buf, shape)
		if err != nil {
			abortUpload(ctx, c, bucket, key, id)
			b.Fatalf("etcd round %d: %v", r, err)
		}
		rev2 := revision()
		c2 := scrape()
		if err := completeUpload(ctx, c, bucket, key, id, parts); err != nil {
			abortUpload(ctx, c, bucket, key, id)
			b.Fatalf("etcd round %d: %v", r, err)
		}
		c3 := scrape()
		phase := c2.sub(c1)
		round := etcdRound{
			Create: c1.sub(c0), Parts: phase.div(float64(shape.parts)), Complete: c3.sub(c2),
			WritesPerPart:    phase.writes() / float64(shape.parts),
			RevisionsPerPart: float64(rev2-rev1) / float64(shape.parts),
		}
		res.Rounds = append(res.Rounds, round)
		writes = append(writes, round.WritesPerPart)
		revs = append(revs, round.RevisionsPerPart)
		txn, put, get, del = append(txn, round.Parts.Txn), append(put, round.Parts.Put), append(get, round.Parts.Get), append(del, round.Parts.Delete)
		ccTxn, ccPut, ccGet, ccDel = append(ccTxn, round.Create.Txn), append(ccPut, round.Create.Put), append(ccGet, round.Create.Get), append(ccDel, round.Create.Delete)
		cpTxn, cpPut, cpGet, cpDel = append(cpTxn, round.Complete.Txn), append(cpPut, round.Complete.Put), append(cpGet, round.Complete.Get), append(cpDel, round.Complete.Delete)
	}
	res.WritesPerPart = median(writes)
	res.RevisionsPerPart = median(revs)
	res.PerPart = etcdOps{Txn: median(txn), Put: median(put), Get: median(get), Delete: median(del)}
	res.Create = etcdOps{Txn: median(ccTxn), Put: median(ccPut), Get: median(ccGet), Delete: median(ccDel)}
	res.Complete = etcdOps{Txn: median(cpTxn), Put: median(cpPut), Get: median(cpGet), Delete: median(cpDel)}

	res.Order = probeEtcdOrder(ctx, env, env.HTTPClient(b), bucket, c, scrape)
	b.StopTimer()

	res.Status = statusBelow
	if res.WritesPerPart <= targetEtcdWrites && res.PerPart.Txn <= 1 && res.PerPart.Put <= 1 && res.Order.Confirmed {
		res.Status = statusPass
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(res.WritesPerPart, "etcd_writes/part")
	b.ReportMetric(res.PerPart.Txn, "etcd_txn/part")
	b.ReportMetric(res.PerPart.Put, "etcd_put/part")
	b.Logf("etcd requests per UploadPart: %v; writes %.2f (target <= %d, one txn before the bytes, one put after) %s; order probe: %s",
		res.PerPart, res.WritesPerPart, targetEtcdWrites, res.Status, res.Order.Note)
	return res
}

// probeEtcdOrder sends one UploadPart through the gateway as a raw
// UNSIGNED-PAYLOAD request whose body stops after orderHeld bytes until the
// gateway's transaction shows on /metrics. While the body is incomplete the
// backend cannot have taken the part, so a put seen by then would be a part
// record written before the bytes; the whole call must add one of each.
func probeEtcdOrder(ctx context.Context, env *harness.Env, hc *http.Client, bucket string, c *s3.Client, scrape func() etcdCounts) (o etcdOrder) {
	key := "etcd/order"
	id, err := createUpload(ctx, c, bucket, key)
	if err != nil {
		o.Note = err.Error()
		return o
	}
	defer abortUpload(ctx, c, bucket, key, id)

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
		o.Mid = scrape().sub(c0)
		if o.Mid.Txn >= 1 || time.Now().After(deadline) {
			break
		}
		select {
		case a := <-done:
			done <- a // the call ended early: reported below
			ended = true
		case <-time.After(2 * time.Millisecond):
		}
	}
	releaseBody()
	a := <-done
	o.End = scrape().sub(c0)
	switch {
	case a.err != nil:
		o.Note = fmt.Sprintf("UploadPart: %v", a.err)
	case a.status != http.StatusOK:
		o.Note = fmt.Sprintf("UploadPart: HTTP %d", a.status)
	case o.Mid.Txn < 1:
		o.Note = fmt.Sprintf("no txn within %v of the call while the body was incomplete", orderWait)
	default:
		o.Confirmed = o.Mid.Txn == 1 && o.Mid.Put == 0 && o.End.Txn == 1 && o.End.Put == 1
		o.Note = fmt.Sprintf("before the body was complete: txn %.0f, put %.0f; whole call: txn %.0f, put %.0f",
			o.Mid.Txn, o.Mid.Put, o.End.Txn, o.End.Put)
	}
	return o
}
