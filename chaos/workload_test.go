//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The workload's timing: one attempt of one S3 call, and all attempts of
// it together. A call that takes longer than an attempt (a paused gateway)
// is tried again on the other gateway.
const (
	attemptTimeout = 6 * time.Second
	callDeadline   = 30 * time.Second
	// minPart is S3's smallest part but the last.
	minPart = 5 << 20
	// repushAfter is how old a blob's last push may be when a manifest
	// naming it is written; older ones are pushed again first, as a
	// registry client that checks its blobs would. It is well within the
	// placement grace, so a manifest that names a blob the reclaimer took
	// meanwhile is the gateway's doing, not a slow client's (the checker
	// tells the two apart from etcd's history anyway).
	repushAfter = placementGrace / 2
)

// Upload kinds.
const (
	kindFinish  = "finish"  // parts, then complete
	kindPause   = "pause"   // a part, a pause of up to twice the grace, then more and complete
	kindAbort   = "abort"   // parts, then abort
	kindAbandon = "abandon" // parts, then nothing
)

// Upload outcomes, as the client saw them.
const (
	outCompleted      = "completed"
	outAborted        = "aborted"
	outAbandoned      = "abandoned"
	outReclaimed      = "reclaimed"       // NoSuchUpload (or InvalidPart) after a pause: the checker judges it
	outGaveUp         = "gave-up"         // a call failed for good before complete
	outCompleteUnsure = "complete-unsure" // the complete failed for good: it may have happened
	outCreateFailed   = "create-failed"
	outRejected       = "rejected" // an answer no client expects; listed as an anomaly
)

// activity is one successful call on an upload: when its attempt was sent.
type activity struct {
	op   string
	sent time.Time
}

// refusal is an answer that says the upload (or a part of it) is gone.
type refusal struct {
	op         string
	code       string
	sent, recv time.Time
	// lastOK is the client's own last successful call before it.
	lastOK activity
}

// upload is one multipart upload of the workload.
type upload struct {
	client int
	kind   string
	lib    string
	key    string
	id     string
	data   harness.Data
	sum    string // SHA-256 of data, once completed
	etag   string
	// pause is how long the client paused (kindPause).
	pause    time.Duration
	outcome  string
	detail   string
	ok       []activity
	refusals []refusal
	// direct are the parts written straight to MinIO during its pause.
	direct []directPart
}

// workload is the campaign's clients.
type workload struct {
	cfg    campaignConfig
	bucket string
	log    *campaignLog
	// eps are the clients' ways in: [client][gateway], each through that
	// gateway's client-side fault proxy.
	eps   [][]endpoint
	names []string
	// around writes parts straight to MinIO (nil: none are).
	around *aroundWriter
	// pull reads MinIO directly, for the remembering producers' checks
	// of their tags (nil: none are made).
	pull *direct
	// steer, when set, holds 1 + the gateway every call starts on (the
	// one a fault gave another layout), 0 for none.
	steer *atomic.Int32

	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	uploads []*upload
	writes  []manifestWrite
	pushes  map[string][]push // by digest
	deletes []*manifestDelete
	// sessionFree are the session-free producers' attempts.
	sessionFree []sessionFreeCall
	violations  []string
	anomalies   []string
	counts      map[string]int
	lastWrite   time.Time // last manifest or blob write answered
}

// endpoint is one client library talking to one gateway.
type endpoint struct {
	gw  int
	ops [2]s3ops // aws, minio
}

func newWorkload(cfg campaignConfig, bucket string, log *campaignLog, eps [][]endpoint, names []string) *workload {
	return &workload{cfg: cfg, bucket: bucket, log: log, eps: eps, names: names, stop: make(chan struct{}), counts: map[string]int{}, pushes: map[string][]push{}}
}

func (w *workload) start(ctx context.Context) {
	for i := range w.cfg.clients {
		c := &client{w: w, id: i, rng: w.cfg.rng(uint64(100 + i)), gw: i % len(w.names)}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			c.run(ctx)
		}()
	}
	// The remembering producers (remember_test.go), after the clients in
	// eps and in their own random streams.
	for i := range registryClients {
		c := &client{w: w, id: w.cfg.clients + i, rng: w.cfg.rng(uint64(200 + i)), gw: i % len(w.names)}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			c.runRegistry(ctx)
		}()
	}
	// The session-free producers (sessionfree_test.go), after those.
	for i := range sessionFreeClients {
		c := &client{w: w, id: w.cfg.clients + registryClients + i, rng: w.cfg.rng(uint64(300 + i)), gw: i % len(w.names)}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			c.runSessionFree(ctx)
		}()
	}
}

// stopping reports whether the workload was told to stop.
func (w *workload) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *workload) count(what string) {
	w.mu.Lock()
	w.counts[what]++
	w.mu.Unlock()
}

func (w *workload) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.log.printf("VIOLATE", "%s", msg)
	w.mu.Lock()
	w.violations = append(w.violations, msg)
	w.mu.Unlock()
}

func (w *workload) anomaly(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.log.printf("ANOMALY", "%s", msg)
	w.mu.Lock()
	w.anomalies = append(w.anomalies, msg)
	w.mu.Unlock()
}

// client is one goroutine of the workload, with its own random stream.
type client struct {
	w   *workload
	id  int
	rng *rand.Rand
	gw  int // the gateway it talks to, until a call fails there
	n   int // objects made so far
	// blobs it pushed, some shared by several of its manifests.
	blobs []*blob
	done  []*upload // its completed uploads, to read back
}

func (c *client) run(ctx context.Context) {
	for !c.w.stopping() && ctx.Err() == nil {
		if !c.sleep(ctx, time.Duration(50+c.rng.IntN(350))*time.Millisecond) {
			return
		}
		switch r := c.rng.IntN(100); {
		case r < 25:
			c.multipart(ctx, kindFinish)
		case r < 37:
			c.multipart(ctx, kindPause)
		case r < 45:
			c.multipart(ctx, kindAbort)
		case r < 52:
			c.multipart(ctx, kindAbandon)
		case r < 82:
			c.writeManifest(ctx)
		case r < 90:
			c.deleteManifest(ctx)
		default:
			c.readBack(ctx)
		}
	}
}

// sleep waits d; false when the workload stops first.
func (c *client) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-c.w.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// callResult is what came of a call: when its last attempt was sent and
// answered, and on which gateway.
type callResult struct {
	sent, recv time.Time
	attempts   int
	gw         string
}

// call runs op on the client's current gateway with a per-attempt timeout
// and tries again, on the other gateway, while the failure is one a client
// retries, until callDeadline. before, when set, runs before each attempt.
func (c *client) call(ctx context.Context, lib int, what string, before func(ctx context.Context) error, op func(ctx context.Context, o s3ops) error) (callResult, error) {
	deadline := time.Now().Add(callDeadline)
	var res callResult
	if g, ok := c.w.steered(); ok {
		c.gw = g
	}
	for attempt := 1; ; attempt++ {
		if before != nil {
			if err := before(ctx); err != nil {
				return res, err
			}
		}
		ep := c.w.eps[c.id][c.gw]
		o := ep.ops[lib]
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		res.sent = time.Now()
		err := op(actx, o)
		res.recv = time.Now()
		cancel()
		res.attempts, res.gw = attempt, c.w.names[c.gw]
		c.w.log.printf("op", "c%d %s %-5s %s #%d -> %s %dms", c.id, res.gw, o.lib(), what, attempt, describe(err), res.recv.Sub(res.sent).Milliseconds())
		c.w.count("call " + describe(err))
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if !retryable(err) {
			return res, err
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%s: gave up after %d attempts: %w", what, attempt, err)
		}
		c.gw = (c.gw + 1) % len(c.w.names)
		select {
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

// newUpload draws an upload's object: one part of up to a MiB mostly, or
// (finishing uploads only) 5 MiB parts and a small last one.
func (c *client) newUpload(kind string) (*upload, []int64) {
	u := &upload{client: c.id, kind: kind, key: fmt.Sprintf("objects/c%d/%04d-%s", c.id, c.n, kind)}
	c.n++
	var sizes []int64
	switch {
	case kind == kindFinish && c.rng.IntN(100) < 25:
		for range 1 + c.rng.IntN(2) {
			sizes = append(sizes, minPart)
		}
		sizes = append(sizes, 1+c.rng.Int64N(256<<10))
	case kind == kindPause && c.rng.IntN(100) < 20:
		// Resumed with a second part.
		sizes = []int64{minPart, 1 + c.rng.Int64N(64<<10)}
	case kind == kindAbort || kind == kindAbandon:
		// Parts of an upload that is never completed may be of any size.
		for range c.rng.IntN(3) {
			sizes = append(sizes, 1+c.rng.Int64N(512<<10))
		}
	default:
		sizes = []int64{1 + c.rng.Int64N(1<<20)}
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	u.data = harness.NewData(c.rng.Uint64(), total)
	if c.rng.IntN(2) == 0 {
		u.lib = "aws"
	} else {
		u.lib = "minio"
	}
	return u, sizes
}

func libIndex(lib string) int {
	if lib == "minio" {
		return 1
	}
	return 0
}

// uploadCall runs one call of an upload and records what came of it:
// activity on success, a refusal when the answer says the upload or a part
// of it is gone.
func (c *client) uploadCall(ctx context.Context, u *upload, what string, op func(ctx context.Context, o s3ops) error) error {
	label := fmt.Sprintf("%s %s up=%s", what, u.key, shortID(u.id))
	res, err := c.call(ctx, libIndex(u.lib), label, nil, op)
	if err == nil {
		u.ok = append(u.ok, activity{op: what, sent: res.sent})
		return nil
	}
	if gone(err) {
		_, code := errInfo(err)
		var last activity
		if len(u.ok) > 0 {
			last = u.ok[len(u.ok)-1]
		}
		u.refusals = append(u.refusals, refusal{op: what, code: code, sent: res.sent, recv: res.recv, lastOK: last})
		c.w.log.printf("refused", "c%d %s %s up=%s: %s %s after the last success (%s) sent %s before; reclaimable after %s",
			c.id, what, u.key, u.id, code, u.kind, last.op, res.recv.Sub(last.sent).Round(time.Millisecond), reclaimable)
	}
	return err
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// multipart runs one upload of the kind.
func (c *client) multipart(ctx context.Context, kind string) {
	u, sizes := c.newUpload(kind)
	c.w.mu.Lock()
	c.w.uploads = append(c.w.uploads, u)
	c.w.mu.Unlock()
	defer func() {
		c.w.count("upload " + u.kind + " " + u.outcome)
		c.w.log.printf("upload", "c%d %s %s up=%s %s %d bytes -> %s %s", c.id, u.lib, u.key, u.id, u.kind, u.data.Size, u.outcome, u.detail)
	}()
	fail := func(err error, outcome string) {
		u.outcome, u.detail = outcome, err.Error()
		if gone(err) {
			u.outcome = outReclaimed
		} else if !retryable(err) && ctx.Err() == nil {
			u.outcome = outRejected
			c.w.anomaly("c%d %s %s up=%s: %v", c.id, u.kind, u.key, u.id, err)
		}
	}

	var id string
	res, err := c.call(ctx, libIndex(u.lib), "CreateMultipartUpload "+u.key, nil, func(ctx context.Context, o s3ops) error {
		var err error
		id, err = o.create(ctx, u.key)
		return err
	})
	if err != nil {
		fail(err, outCreateFailed)
		return
	}
	u.id = id
	// The session's activity starts no earlier than the create was sent.
	u.ok = append(u.ok, activity{op: "CreateMultipartUpload", sent: res.sent})

	parts := map[int]partResult{}
	var off int64
	uploadPart := func(n int, off, size int64) error {
		return c.uploadCall(ctx, u, fmt.Sprintf("UploadPart %d", n), func(ctx context.Context, o s3ops) error {
			p, err := o.part(ctx, u.key, u.id, n, u.data.Section(off, size))
			if err == nil {
				parts[n] = p
			}
			return err
		})
	}
	first := len(sizes)
	if kind == kindPause {
		first = 1
	}
	for i := range first {
		if i > 0 && !c.sleep(ctx, time.Duration(c.rng.IntN(300))*time.Millisecond) {
			u.outcome = outAbandoned
			u.detail = "workload stopped"
			return
		}
		if err := uploadPart(i+1, off, sizes[i]); err != nil {
			fail(err, outGaveUp)
			return
		}
		off += sizes[i]
	}

	switch kind {
	case kindAbandon:
		u.outcome = outAbandoned
		return
	case kindAbort:
		err := c.uploadCall(ctx, u, "AbortMultipartUpload", func(ctx context.Context, o s3ops) error {
			return o.abort(ctx, u.key, u.id)
		})
		if err != nil {
			fail(err, outGaveUp)
			return
		}
		u.outcome = outAborted
		return
	case kindPause:
		if err := c.pauseAndResume(ctx, u, sizes, off, uploadPart); err != nil {
			if !errors.Is(err, errStopped) {
				fail(err, outGaveUp)
			}
			return
		}
	}

	err = c.completeParts(ctx, u, parts)
	if err != nil {
		fail(err, outCompleteUnsure)
		return
	}
	u.outcome = outCompleted
	u.sum = u.data.SHA256()
	c.done = append(c.done, u)
	if c.rng.IntN(2) == 0 {
		c.verify(ctx, u, "read after complete")
	}
}

// errStopped is pauseAndResume's answer when the workload stopped during
// the pause, which it has recorded as the upload's outcome.
var errStopped = errors.New("workload stopped")

// pauseAndResume pauses a kindPause upload, whose first part is sent, for
// a time drawn around the reclaimer's grace, then resumes it with its
// second part, a ListParts or its first part again.
func (c *client) pauseAndResume(ctx context.Context, u *upload, sizes []int64, off int64, uploadPart func(n int, off, size int64) error) error {
	// Some pauses are shorter than the grace, some between it and
	// the time the reclaimer may delete, some well past it.
	u.pause = time.Duration(1000+c.rng.IntN(int(2*reclaimable/time.Millisecond))) * time.Millisecond
	c.w.log.printf("pause", "c%d %s up=%s pauses %s", c.id, u.key, u.id, u.pause)
	pauseEnd := time.Now().Add(u.pause)
	// Some uploads get a part written around the gateway during the
	// pause: right after their mark, or around the grace.
	around, afterMark := c.rng.IntN(100) < 40, c.rng.IntN(100) < 60
	after := grace - time.Second + time.Duration(c.rng.IntN(int((deleteAfter+2*time.Second)/time.Millisecond)))*time.Millisecond
	if around {
		c.writeAround(ctx, u, pauseEnd, afterMark, after)
	}
	if !c.sleep(ctx, time.Until(pauseEnd)) {
		u.outcome, u.detail = outAbandoned, "workload stopped during the pause"
		return errStopped
	}
	var err error
	switch {
	case len(sizes) > 1:
		err = uploadPart(2, off, sizes[1])
	case c.rng.IntN(2) == 0:
		err = c.uploadCall(ctx, u, "ListParts", func(ctx context.Context, o s3ops) error {
			n, err := o.listParts(ctx, u.key, u.id)
			if err == nil && (n < 1 || n > 1+len(u.direct)) {
				return partsMissing{n}
			}
			return err
		})
	default:
		err = uploadPart(1, 0, sizes[0])
	}
	return err
}

// completeParts completes u with the parts sent, in order.
func (c *client) completeParts(ctx context.Context, u *upload, parts map[int]partResult) error {
	var list []partResult
	for _, p := range parts {
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].n < list[j].n })
	return c.uploadCall(ctx, u, "CompleteMultipartUpload", func(ctx context.Context, o s3ops) error {
		etag, err := o.complete(ctx, u.key, u.id, list)
		if err == nil {
			u.etag = etag
		}
		return err
	})
}

// verify reads a completed object back through a gateway.
func (c *client) verify(ctx context.Context, u *upload, why string) {
	var sum string
	var n int64
	_, err := c.call(ctx, c.rng.IntN(2), "GetObject "+u.key, nil, func(ctx context.Context, o s3ops) error {
		var err error
		sum, n, err = o.get(ctx, u.key)
		return err
	})
	switch {
	case err != nil && !retryable(err):
		c.w.violation("%s: GET %s (completed, up=%s) failed: %v", why, u.key, u.id, err)
	case err != nil:
		// Could not reach it now; the checker reads every object at the end.
	case sum != u.sum || n != u.data.Size:
		c.w.violation("%s: %s (up=%s) reads back %d bytes sha256 %s, want %d bytes %s", why, u.key, u.id, n, sum, u.data.Size, u.sum)
	}
}

// readBack reads one of the client's completed objects.
func (c *client) readBack(ctx context.Context) {
	if len(c.done) == 0 {
		return
	}
	c.verify(ctx, c.done[c.rng.IntN(len(c.done))], "read back")
}

// finish stops the clients and waits for them to settle what they are in
// the middle of (a call runs out its retries); after wait, whatever still
// runs is cancelled.
func (w *workload) finish(cancel context.CancelFunc, wait time.Duration) {
	close(w.stop)
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		w.log.printf("workload", "clients still busy after %s; cancelling them", wait)
		cancel()
		<-done
	}
}
