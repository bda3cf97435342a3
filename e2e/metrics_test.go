//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// scrape is one read of /metrics: every sample by its series, written
// name{label="value",...} with the labels sorted.
type scrape map[string]float64

// parseScrape reads Prometheus's text exposition format.
func parseScrape(t *testing.T, text string) scrape {
	t.Helper()
	out := scrape{}
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest, err := splitSample(line)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			t.Fatalf("metrics line %q has no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[seriesKey(name, labels)] = v
	}
	return out
}

// splitSample splits a sample line into its name, its labels and the rest
// (value and timestamp). Label values may hold any escaped character.
func splitSample(line string) (name string, labels map[string]string, rest string, err error) {
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", nil, "", fmt.Errorf("no value")
	}
	name, labels = line[:i], map[string]string{}
	if line[i] == ' ' {
		return name, labels, line[i:], nil
	}
	i++
	for {
		for i < len(line) && (line[i] == ',' || line[i] == ' ') {
			i++
		}
		if i < len(line) && line[i] == '}' {
			return name, labels, line[i+1:], nil
		}
		eq := strings.IndexByte(line[i:], '=')
		if eq < 0 || i+eq+1 >= len(line) || line[i+eq+1] != '"' {
			return "", nil, "", fmt.Errorf("bad label at %d", i)
		}
		key := line[i : i+eq]
		i += eq + 2
		var v strings.Builder
		for ; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) {
				i++
				switch line[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(line[i])
				}
				continue
			}
			v.WriteByte(line[i])
		}
		if i >= len(line) {
			return "", nil, "", fmt.Errorf("unterminated label value")
		}
		labels[key] = v.String()
		i++
	}
}

func seriesKey(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// series returns the value of one series (labels as name, value pairs),
// and whether it is exported.
func (s scrape) series(name string, labels ...string) (float64, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[labels[i]] = labels[i+1]
	}
	v, ok := s[seriesKey(name, m)]
	return v, ok
}

// labelNames returns the name of every family exported, with the names of
// its labels.
func (s scrape) labelNames() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for key := range s {
		name, labels, _, _ := splitSample(key + " 0")
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for l := range labels {
			out[name][l] = true
		}
	}
	return out
}

func readMetrics(t *testing.T, g *harness.Gateway) (scrape, string) {
	t.Helper()
	text, err := g.Metrics()
	if err != nil {
		t.Fatalf("scrape /metrics: %v", err)
	}
	return parseScrape(t, text), text
}

// TestMetrics scrapes the real binary's /metrics around a PUT, a GET, two
// failed requests, a multipart upload and a reclaimer pass (with an orphan
// on the backend and the digest sweep on), and checks that every series
// an operator alerts on is exported and moved as it should: requests and their
// latency by operation and status class, backend and etcd latency,
// sessions by state, pass results and plan, held orphans and their age,
// stuck sessions, tombstones by state, breaker refusals, unknown-producer
// references, leadership and term. No series may name the bucket, a key
// or the upload id.
func TestMetrics(t *testing.T) {
	t.Parallel()
	bucket := harness.BucketName(t)
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"reclaim": map[string]any{"interval": "1h"},
		"digests": map[string]any{
			"namespaces": []string{bucket + "/blobs/sha256/"},
			"sources":    []string{bucket + "/manifests/"},
		},
	}})
	e.RequireGateway(t)
	g := e.Gateway
	awaitLeading(t, g)
	ctx := t.Context()
	sdk, direct := e.SDK(t), e.DirectSDK(t)

	// The session gauge exports nothing until its first count.
	var before scrape
	eventually(t, 30*time.Second, func() (bool, string) {
		before, _ = readMetrics(t, g)
		_, ok := before.series("sweepgate_sessions", "state", "completed")
		return ok, "sweepgate_sessions has not counted the sessions yet"
	})

	const objectKey, uploadKey, orphanKey = "metrics/object.bin", "metrics/multipart.bin", "metrics/orphan.bin"
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("metrics;"), 512)
	putAndGetBack(t, sdk, bucket, objectKey, body)
	// Two failures: a missing key, and a key the gateway does not know.
	_, err := sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("metrics/missing.bin")})
	requireAPIError(t, err, "NoSuchKey")
	stranger := e.SDK(t, harness.WithCredentials("AKIDMETRICSSTRANGER", "not-a-secret-the-gateway-knows"))
	_, err = stranger.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	requireAPIError(t, err, "InvalidAccessKeyId")

	uploadID := createUpload(t, sdk, bucket, uploadKey)
	part := mustUploadPart(t, sdk, bucket, uploadKey, uploadID, 1, io.NewSectionReader(bytes.NewReader(body), 0, int64(len(body))))
	if _, err := completeUpload(ctx, sdk, bucket, uploadKey, uploadID, []s3types.CompletedPart{part}); err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	// An upload made around the gateway: the pass holds it as an orphan.
	orphanID := createUpload(t, direct, bucket, orphanKey)
	mustUploadPart(t, direct, bucket, orphanKey, orphanID, 1, io.NewSectionReader(bytes.NewReader(body), 0, int64(len(body))))

	rep := runPass(t, g.AdminEndpoint)
	if rep.Refused != "" || rep.Stopped != "" || rep.Uploads.Hold.Sessions != 1 {
		t.Fatalf("the pass did not run as it should, holding the orphan: %+v", rep)
	}

	// The gauge follows etcd's watch: the completed session arrives soon.
	var after scrape
	var text string
	completed, _ := before.series("sweepgate_sessions", "state", "completed")
	eventually(t, 30*time.Second, func() (bool, string) {
		after, text = readMetrics(t, g)
		v, _ := after.series("sweepgate_sessions", "state", "completed")
		return v >= completed+1, fmt.Sprintf("sweepgate_sessions{state=completed} is %v, was %v before the upload", v, completed)
	})

	moved := func(name string, labels ...string) {
		t.Helper()
		b, _ := before.series(name, labels...)
		a, ok := after.series(name, labels...)
		if !ok || a <= b {
			t.Errorf("%s%v did not move: %v before, %v after (exported: %v)", name, labels, b, a, ok)
		}
	}
	for _, rc := range [][2]string{
		{"CreateBucket", "2xx"}, {"PutObject", "2xx"}, {"GetObject", "2xx"}, {"GetObject", "4xx"}, {"ListObjectsV2", "4xx"},
		{"CreateMultipartUpload", "2xx"}, {"UploadPart", "2xx"}, {"CompleteMultipartUpload", "2xx"},
	} {
		moved("sweepgate_requests_total", "operation", rc[0], "status_class", rc[1])
		moved("sweepgate_request_duration_seconds_count", "operation", rc[0], "status_class", rc[1])
		moved("sweepgate_request_duration_seconds_bucket", "operation", rc[0], "status_class", rc[1], "le", "+Inf")
	}
	moved("sweepgate_backend_request_duration_seconds_count", "operation", "PutObject")
	moved("sweepgate_backend_request_duration_seconds_count", "operation", "GetObject")
	// The session service's own backend calls are timed too.
	moved("sweepgate_backend_request_duration_seconds_count", "operation", "UploadPart")
	moved("sweepgate_backend_request_duration_seconds_count", "operation", "CompleteMultipartUpload")
	moved("sweepgate_auth_failures_total", "code", "InvalidAccessKeyId")
	moved("sweepgate_etcd_request_duration_seconds_count", "op", "txn")
	moved("sweepgate_etcd_request_duration_seconds_count", "op", "get")
	moved("sweepgate_sessions_transitions_total", "from", "", "to", "active")
	moved("sweepgate_sessions_transitions_total", "from", "completing", "to", "completed")
	moved("sweepgate_reclaim_passes_total", "result", "ok")
	moved("sweepgate_reclaim_pass_duration_seconds_count", "result", "ok")
	moved("sweepgate_reclaim_last_pass_finished_timestamp_seconds")

	requirePassGauges(t, after, rep.Term, len(body))
	requireNoClientNames(t, text, after, bucket, objectKey, uploadKey, orphanKey, uploadID, orphanID, "AKIDMETRICSSTRANGER")
}

// putAndGetBack puts body as key into bucket with sdk and reads it back.
func putAndGetBack(t *testing.T, sdk *s3.Client, bucket, key string, body []byte) {
	t.Helper()
	ctx := t.Context()
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	out, err := sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(out.Body); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("GetObject returned %d bytes (%v), want what was put", len(got), err)
	}
	out.Body.Close()
}

// requirePassGauges checks the gauges of TestMetrics' pass, made in term
// with one orphan of bodyLen bytes held, and of who leads; and that the
// counters a rate() needs are exported before their first event.
func requirePassGauges(t *testing.T, after scrape, term int64, bodyLen int) {
	t.Helper()
	want := func(name string, ok func(float64) bool, what string, labels ...string) {
		t.Helper()
		v, exported := after.series(name, labels...)
		if !exported || !ok(v) {
			t.Errorf("%s%v = %v (exported: %v), want %s", name, labels, v, exported, what)
		}
	}
	is := func(x float64) func(float64) bool { return func(v float64) bool { return v == x } }
	want("sweepgate_reclaim_leading", is(1), "1: this gateway leads")
	want("sweepgate_reclaim_term", is(float64(term)), fmt.Sprintf("the pass's term %d", term))
	want("sweepgate_reclaim_orphans_held", is(1), "the one orphan")
	want("sweepgate_reclaim_orphan_parts_held", is(1), "its one part")
	want("sweepgate_reclaim_plan_parts", is(1), "the orphan's part", "verdict", "hold")
	want("sweepgate_reclaim_plan_bytes", is(float64(bodyLen)), "the orphan's bytes", "verdict", "hold")
	want("sweepgate_reclaim_oldest_orphan_age_seconds", func(v float64) bool { return v > 0 && v < 3600 }, "the orphan's age, a few seconds")
	for _, st := range []string{"active", "expired", "completing", "completed", "aborting", "aborted", "cleanup_pending"} {
		want("sweepgate_sessions", func(v float64) bool { return v >= 0 }, "a count", "state", st)
	}
	for _, st := range []string{"pending", "ready", "skipped", "deleted"} {
		want("sweepgate_reclaim_tombstones", func(v float64) bool { return v >= 0 }, "a count after the digest sweep", "state", st)
	}
	zero := is(0)
	for _, name := range []string{
		"sweepgate_sessions_stuck", "sweepgate_reclaim_stuck_sessions",
		"sweepgate_reclaim_breaker_refusals_total", "sweepgate_reclaim_digest_breaker_refusals_total",
		"sweepgate_reclaim_unknown_producer_refs_total", "sweepgate_reclaim_digest_deleted_total",
	} {
		want(name, zero, "0 in this test")
	}
	// Exported before the first of each happens, so rate() sees the first.
	want("sweepgate_reclaim_passes_total", zero, "0, exported before any stopped pass", "result", "stopped")
	want("sweepgate_reclaim_deleted_parts_total", zero, "0, exported before any delete", "outcome", "aborted")
}

// requireNoClientNames checks that the scrape (text, parsed as after)
// names nothing a client chose: none of chosen, and no label such as
// bucket or key.
func requireNoClientNames(t *testing.T, text string, after scrape, chosen ...string) {
	t.Helper()
	for _, s := range chosen {
		if strings.Contains(text, s) {
			t.Errorf("/metrics contains %q", s)
		}
	}
	forbidden := []string{"bucket", "key", "upload_id", "digest", "principal", "access_key"}
	for name, labels := range after.labelNames() {
		for _, l := range forbidden {
			if labels[l] {
				t.Errorf("%s has label %s", name, l)
			}
		}
	}
}
