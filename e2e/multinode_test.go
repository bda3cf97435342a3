//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The multi-node test's settings. The grace period is short so that the
// reclaimer has work during the test (the abandoned uploads), and long
// enough that a live upload whose request hangs on etcd while its raft
// leader is replaced (a write forwarded to the dead leader ends only with
// its deadline) is not even marked before the client's retry records
// activity again: grace and delete_after together are well above
// mnOpTimeout plus a pause.
const (
	mnGrace       = 8 * time.Second
	mnDeleteAfter = 3 * time.Second
	mnElectionTTL = 2 * time.Second
	// mnWorkers upload concurrently, half starting on each gateway.
	mnWorkers = 4
	// mnPartSize is S3's smallest part but the last.
	mnPartSize = 5 * mib
	// mnOpTimeout bounds one attempt of one S3 call; a call that takes
	// longer is retried on the other gateway.
	mnOpTimeout = 6 * time.Second
	// mnOpDeadline bounds all attempts of one S3 call together.
	mnOpDeadline = 40 * time.Second
	// mnSampleEvery is how often both gateways are asked who leads.
	mnSampleEvery = 200 * time.Millisecond
	// mnPhaseTimeout bounds each wait for the workload to make progress.
	mnPhaseTimeout = 45 * time.Second
)

// TestMultiNode runs the multi-node deployment without containers: one
// MinIO, a three-member etcd cluster of separate processes (TLS with
// client certificates and authentication on), and two
// sweepgate processes sharing it, with S3 clients spread over both
// gateways doing multipart uploads. Mid-workload the etcd raft leader is
// killed, then the sweepgate that leads the reclaimer; clients that lose
// their gateway retry on the other one. Throughout, uploads keep
// completing and read back byte for byte, at most one gateway claims to
// lead the reclaimer at every sample, the survivor takes the lead in a
// higher term and reclaims two abandoned uploads, and no live upload is
// touched: no part upload or complete is answered NoSuchUpload and every
// upload that was created completes with its own upload id.
func TestMultiNode(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	m := harness.StartMinIO(t)
	// Secured as a production cluster is: TLS with client certificates,
	// and the gateways signed in as a user that may touch only their
	// prefix.
	cluster := harness.StartSecureEtcdCluster(t, 3)
	user, passwordFile := cluster.AddUser(t, etcdPrefix)
	opts := harness.Options{
		EtcdEndpoints: cluster.Endpoints(),
		Config: map[string]any{
			"etcd": cluster.GatewayEtcdConfig(user, passwordFile),
			"reclaim": map[string]any{
				"grace":        mnGrace.String(),
				"delete_after": mnDeleteAfter.String(),
				"interval":     "1s",
				"election_ttl": mnElectionTTL.String(),
				// A pass sees only this test's few uploads; the
				// default quarter would refuse the abandoned ones.
				"max_delete_fraction":         1,
				"max_delete_uploads_fraction": 1,
				"max_mark_fraction":           1,
			},
			// A complete in flight on a killed gateway keeps retries
			// out only this long.
			"sessions": map[string]any{"complete_hold": "2s"},
		},
	}
	gateways := []*harness.Gateway{harness.StartGateway(t, m, opts), harness.StartGateway(t, m, opts)}
	names := []string{"g0", "g1"}
	direct := harness.NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, mnTransport(t), true)
	bucket := harness.BucketName(t)
	if _, err := direct.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s on MinIO: %v", bucket, err)
	}
	store := gatewayStore(t, gateways[0], cluster.Client(t))

	// In shard mode the monitor watches the election of the bucket's shard.
	mon := &mnMonitor{gateways: gateways, names: names, shard: gateways[0].ShardOf(bucket), client: &http.Client{Timeout: time.Second, Transport: mnTransport(t)}}
	first := mon.awaitOneLeader(t)
	t.Logf("%s leads the reclaimer in term %d", names[first.leader], first.term)

	ctx, cancel := context.WithCancel(t.Context())
	w := newMNWorkload(t, m, bucket, gateways, names)
	var monDone sync.WaitGroup
	monDone.Add(1)
	go func() {
		defer monDone.Done()
		mon.run(ctx)
	}()
	w.start(ctx)
	// Registered after the gateways' cleanups, so it runs before them:
	// no goroutine of this test outlives it.
	t.Cleanup(func() {
		cancel()
		w.wg.Wait()
		monDone.Wait()
	})
	started := time.Now()

	// Warm up: every worker completes an upload.
	w.awaitCreatedAndCompleted(t, started, mnWorkers, "before any kill")

	killEtcdLeader(t, gateways[0].EtcdClusterFor(t, bucket), w, started)

	// Two uploads abandoned after one part each: the reclaimer must
	// delete them, and only them, and by the time it may (grace plus
	// delete_after from now) the leader about to be killed is long gone.
	abandoned := abandonUploads(t, ctx, w, bucket)

	after := killReclaimerLeader(t, ctx, mon, w, started)

	// The new leader reclaims the abandoned uploads, in its own term,
	// while the workload's live uploads go on around them.
	awaitAbandonedAborted(t, w, store, bucket, abandoned, after.Reclaimer.Term)

	// Let every worker finish the upload it is in, then stop watching.
	w.finish(t)
	cancel()
	monDone.Wait()

	left := requireAbandonedGone(t, direct, bucket, abandoned)

	requireCompletedUploads(t, store, direct, bucket, w.completed(), left)

	// Exactly one leader at a time, as both gateways told it.
	samples, violations, timeline := mon.summary()
	for _, v := range violations {
		t.Error(v)
	}
	if samples < 10 {
		t.Errorf("only %d leadership samples were taken", samples)
	}

	w.report(t, time.Since(started))
	t.Logf("%d leadership samples (NAME:TERM leads, NAME- follows, NAME? did not answer): %s", samples, strings.Join(timeline, ", "))
}

// killEtcdLeader kills the etcd member that leads the raft group: the
// other two elect a new one, and the gateways' clients fail over while w
// runs on.
func killEtcdLeader(t *testing.T, cluster *harness.EtcdCluster, w *mnWorkload, started time.Time) {
	t.Helper()
	victim := cluster.Leader(t)
	cluster.Kill(victim)
	etcdKilled := time.Now()
	t.Logf("killed etcd member %s (the raft leader) after %s", cluster.Name(victim), etcdKilled.Sub(started).Round(time.Millisecond))
	w.awaitCreatedAndCompleted(t, etcdKilled, mnWorkers, "after the etcd member was killed")
}

// killReclaimerLeader kills whichever gateway leads the reclaimer now and
// waits until the survivor takes over in a higher term, once the killed
// leader's lease has run out, and w completes uploads again. It returns
// the survivor's status.
func killReclaimerLeader(t *testing.T, ctx context.Context, mon *mnMonitor, w *mnWorkload, started time.Time) reclaimStatus {
	t.Helper()
	// Whoever leads the reclaimer now (losing an etcd member may have
	// moved the lead) is the gateway to kill, at once.
	before := mon.awaitOneLeader(t)
	leader, survivor := mon.gateways[before.leader], mon.gateways[1-before.leader]
	survivorName := mon.names[1-before.leader]
	leader.Kill()
	gwKilled := time.Now()
	t.Logf("killed %s (reclaimer leader, term %d) after %s", mon.names[before.leader], before.term, gwKilled.Sub(started).Round(time.Millisecond))

	// The survivor takes over in a higher term, once the killed leader's
	// lease has run out.
	var after reclaimStatus
	eventually(t, mnPhaseTimeout, func() (bool, string) {
		var err error
		after, err = mon.status(ctx, survivor)
		return err == nil && after.Reclaimer.Leading, fmt.Sprintf("the survivor %s does not lead: %+v (%v)", survivorName, after.Reclaimer, err)
	})
	t.Logf("%s leads in term %d, %s after the kill", survivorName, after.Reclaimer.Term, time.Since(gwKilled).Round(100*time.Millisecond))
	if after.Reclaimer.Term <= before.term {
		t.Errorf("the survivor leads in term %d, not above the killed leader's %d", after.Reclaimer.Term, before.term)
	}
	w.awaitCreatedAndCompleted(t, gwKilled, mnWorkers, "after the reclaimer leader was killed")
	return after
}

// requireAbandonedGone checks that MinIO no longer lists the abandoned
// uploads, and returns the uploads it lists.
func requireAbandonedGone(t *testing.T, direct *s3.Client, bucket string, abandoned []mnAbandoned) (left []string) {
	t.Helper()
	uploads, err := direct.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads on MinIO: %v", err)
	}
	left = backendUploadIDs(uploads)
	for _, a := range abandoned {
		if slices.Contains(left, a.uploadID) {
			t.Errorf("MinIO still holds abandoned upload %s, which its session says was aborted", a.key)
		}
	}
	return left
}

// abandonUploads creates two uploads through w's gateways and uploads one
// part to each, then abandons them.
func abandonUploads(t *testing.T, ctx context.Context, w *mnWorkload, bucket string) []mnAbandoned {
	t.Helper()
	var abandoned []mnAbandoned
	controlGW := 0
	for i := range 2 {
		a := mnAbandoned{key: fmt.Sprintf("abandoned/%d.bin", i)}
		err := w.call(ctx, 0, &controlGW, "CreateMultipartUpload "+a.key, func(ctx context.Context, c *s3.Client) error {
			out, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(a.key)})
			if err == nil {
				a.uploadID = aws.ToString(out.UploadId)
			}
			return err
		})
		if err == nil {
			err = w.call(ctx, 0, &controlGW, "UploadPart 1 of "+a.key, func(ctx context.Context, c *s3.Client) error {
				_, err := uploadPart(ctx, c, bucket, a.key, a.uploadID, 1, harness.NewData(uint64(9000+i), 4*kib).Section(0, 4*kib))
				return err
			})
		}
		if err != nil {
			t.Fatalf("abandoned upload %s: %v", a.key, err)
		}
		abandoned = append(abandoned, a)
	}
	return abandoned
}

// awaitAbandonedAborted waits until the sessions of the abandoned uploads
// say aborted, each by a reclaimer in term or later, while w's live uploads
// go on around them.
func awaitAbandonedAborted(t *testing.T, w *mnWorkload, store *sessionStore, bucket string, abandoned []mnAbandoned, term int64) {
	t.Helper()
	eventually(t, mnGrace+mnDeleteAfter+mnPhaseTimeout, func() (bool, string) {
		w.check(t)
		for _, a := range abandoned {
			rec, raw, _, found := store.lookup(t, bucket, a.uploadID)
			if !found || rec.State != "aborted" {
				return false, fmt.Sprintf("abandoned upload %s is %s: %s", a.key, rec.State, rec.path())
			}
			if got := mnAbortTerm(t, raw); got < term {
				t.Fatalf("abandoned upload %s was aborted in term %d, before the survivor's term %d: %s", a.key, got, term, raw)
			}
		}
		return true, ""
	})
}

// requireCompletedUploads checks each upload that completed for its
// client (done): its session says completed with the ETag the client got,
// nothing ever moved it towards an abort, MinIO no longer lists it (left
// are the uploads MinIO lists) and holds its object.
func requireCompletedUploads(t *testing.T, store *sessionStore, direct *s3.Client, bucket string, done []mnUpload, left []string) {
	t.Helper()
	for _, u := range done {
		rec, _, _, found := store.lookup(t, bucket, u.uploadID)
		if !found || rec.State != "completed" {
			t.Errorf("upload %s (%s) completed for its client, but its session is %q: %s", u.key, u.uploadID, rec.State, rec.path())
			continue
		}
		if rec.Completion == nil || unquoteETag(rec.Completion.ETag) != unquoteETag(u.etag) {
			t.Errorf("upload %s: session records completion %+v, the client got ETag %s", u.key, rec.Completion, u.etag)
		}
		for _, step := range []string{"aborting", "aborted", "cleanup_pending"} {
			if strings.Contains(rec.path(), "->"+step) {
				t.Errorf("live upload %s was moved towards an abort: %s", u.key, rec.path())
			}
		}
		if strings.Contains(rec.path(), "->expired") {
			t.Logf("live upload %s was marked expired once (its client was slower than the grace period, and its next call won): %s", u.key, rec.path())
		}
		if slices.Contains(left, u.uploadID) {
			t.Errorf("MinIO still lists completed upload %s (%s)", u.key, u.uploadID)
		}
		head, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(u.key)})
		if err != nil {
			t.Errorf("HEAD %s on MinIO: %v", u.key, err)
			continue
		}
		if aws.ToInt64(head.ContentLength) != u.data.Size || unquoteETag(aws.ToString(head.ETag)) != unquoteETag(u.etag) {
			t.Errorf("%s on MinIO: %d bytes ETag %s, want %d bytes ETag %s", u.key, aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), u.data.Size, u.etag)
		}
	}
}

// mnAbandoned is an upload the test abandons for the reclaimer.
type mnAbandoned struct{ key, uploadID string }

// mnAbortTerm returns the term of the reclaimer's expired->aborting step in
// a raw session record, or 0.
func mnAbortTerm(t *testing.T, raw []byte) int64 {
	t.Helper()
	var rec struct {
		History []struct {
			From  string `json:"from"`
			To    string `json:"to"`
			Actor string `json:"actor"`
			Term  int64  `json:"term"`
		} `json:"history"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("session record: %v\n%s", err, raw)
	}
	for _, h := range rec.History {
		if h.From == "expired" && h.To == "aborting" {
			return h.Term
		}
	}
	return 0
}

func backendUploadIDs(out *s3.ListMultipartUploadsOutput) []string {
	ids := make([]string, 0, len(out.Uploads))
	for _, u := range out.Uploads {
		ids = append(ids, aws.ToString(u.UploadId))
	}
	return ids
}

// mnTransport returns an HTTP transport of its own, closed at cleanup, so
// that one client's connections to a killed gateway do not affect another.
func mnTransport(t *testing.T) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// mnLeadership is a sample in which exactly one gateway led.
type mnLeadership struct {
	leader int
	term   int64
}

// mnMonitor asks both gateways every mnSampleEvery whether they lead the
// reclaimer, and records every sample in which more than one claims to.
type mnMonitor struct {
	gateways []*harness.Gateway
	names    []string
	// shard is the shard whose reclaimer election is watched (shard
	// mode); empty: the one election.
	shard  string
	client *http.Client

	mu         sync.Mutex
	samples    int
	violations []string
	timeline   []string // each change of what the gateways answered
	last       string
}

// status reads a gateway's reclaimer status; an error means it did not
// answer (it is dead, or too slow).
func (m *mnMonitor) status(ctx context.Context, g *harness.Gateway) (reclaimStatus, error) {
	var st reclaimStatus
	u := g.AdminEndpoint + "/admin/v1/reclaim/status"
	if m.shard != "" {
		u += "?shard=" + m.shard
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	authorizeAdmin(req)
	resp, err := m.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, errors.New(resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("reclaim status of %s: %w", g.AdminEndpoint, err)
	}
	return st, nil
}

// sample asks both gateways at once, so that the answers are as close in
// time as two requests can be.
func (m *mnMonitor) sample(ctx context.Context) (sts []reclaimStatus, errs []error) {
	sts, errs = make([]reclaimStatus, len(m.gateways)), make([]error, len(m.gateways))
	var wg sync.WaitGroup
	for i, g := range m.gateways {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sts[i], errs[i] = m.status(ctx, g)
		}()
	}
	wg.Wait()
	return sts, errs
}

// record checks one sample and returns who led, if exactly one did.
func (m *mnMonitor) record(sts []reclaimStatus, errs []error) (mnLeadership, bool) {
	var leaders []string
	one := mnLeadership{leader: -1}
	for i, st := range sts {
		if errs[i] == nil && st.Reclaimer.Leading {
			leaders = append(leaders, fmt.Sprintf("%s in term %d", m.names[i], st.Reclaimer.Term))
			one = mnLeadership{leader: i, term: st.Reclaimer.Term}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples++
	if len(leaders) > 1 {
		m.violations = append(m.violations, fmt.Sprintf("at %s more than one gateway claims to lead the reclaimer: %s",
			time.Now().Format("15:04:05.000"), strings.Join(leaders, " and ")))
	}
	// The timeline shows each gateway as leading in a term, following
	// (-) or not answering (?).
	var now []string
	for i, st := range sts {
		switch {
		case errs[i] != nil:
			now = append(now, m.names[i]+"?")
		case st.Reclaimer.Leading:
			now = append(now, fmt.Sprintf("%s:%d", m.names[i], st.Reclaimer.Term))
		default:
			now = append(now, m.names[i]+"-")
		}
	}
	state := strings.Join(now, " ")
	if state != m.last {
		m.timeline = append(m.timeline, state)
		m.last = state
	}
	return one, len(leaders) == 1
}

// run samples until ctx ends.
func (m *mnMonitor) run(ctx context.Context) {
	tick := time.NewTicker(mnSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sctx, cancel := context.WithTimeout(ctx, mnSampleEvery*4)
		sts, errs := m.sample(sctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		m.record(sts, errs)
	}
}

// awaitOneLeader samples until exactly one gateway leads.
func (m *mnMonitor) awaitOneLeader(t *testing.T) mnLeadership {
	t.Helper()
	var got mnLeadership
	eventually(t, mnPhaseTimeout, func() (bool, string) {
		sts, errs := m.sample(t.Context())
		var ok bool
		got, ok = m.record(sts, errs)
		return ok, fmt.Sprintf("not exactly one reclaimer leader: %+v %v", sts, errs)
	})
	return got
}

func (m *mnMonitor) summary() (samples int, violations, timeline []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples, slices.Clone(m.violations), slices.Clone(m.timeline)
}
