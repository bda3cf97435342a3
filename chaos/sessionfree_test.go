//go:build chaos

package chaos

// Session-free requests: those a gateway serves without etcd (plain
// object PUT, GET, HEAD and LIST outside the digests layout; GET and HEAD
// of a blob, which read the guards from the gateway's local copy). The
// session-free producers send them, one attempt each, to either gateway
// at random, and the checker holds that none failed because of etcd:
// a frozen cluster, a killed member or a gateway cut off from etcd.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// sessionFreeClients is how many session-free producers a campaign runs
// beside the clients and the remembering producers.
const sessionFreeClients = 2

// sessionFreeCall is one attempt of a session-free request.
type sessionFreeCall struct {
	what   string // PutObject, GetObject, HeadObject, ListObjectsV2
	blob   bool   // of a blob in the digests layout
	method string
	path   string // path-style, as both proxies see it
	gw     int
	lib    string
	sent   time.Time
	recv   time.Time
	// status is the HTTP status of a failure (0: no answer), code its S3
	// code; timeout says the attempt ran out of time unanswered.
	status  int
	code    string
	err     string
	timeout bool
}

func (s sessionFreeCall) failed() bool { return s.err != "" }

// plainObject is an object a session-free producer put and had
// acknowledged.
type plainObject struct {
	key  string
	sum  string
	size int64
}

// plainPrefix holds the session-free producers' objects: outside every
// layout the campaign's gateways run with.
const plainPrefix = "plain/"

// runSessionFree is a session-free producer's loop: it puts objects of
// its own, reads them back (GET, HEAD), lists them, and reads blobs that
// acknowledged manifests and tags name, each with one attempt on a
// gateway drawn at random.
func (c *client) runSessionFree(ctx context.Context) {
	var mine []plainObject
	prefix := fmt.Sprintf("%sc%d/", plainPrefix, c.id)
	for !c.w.stopping() && ctx.Err() == nil {
		if !c.sleep(ctx, time.Duration(50+c.rng.IntN(250))*time.Millisecond) {
			return
		}
		gw, lib, r := c.rng.IntN(len(c.w.names)), c.rng.IntN(2), c.rng.IntN(100)
		pick, size, seed := c.rng.IntN(1<<30), 1+c.rng.Int64N(16<<10), c.rng.Uint64()
		switch {
		case r < 30 || len(mine) == 0:
			key := fmt.Sprintf("%s%05d", prefix, c.n)
			c.n++
			data := harness.NewData(seed, size)
			body := make([]byte, size)
			if _, err := data.Section(0, size).ReadAt(body, 0); err != nil {
				c.w.violation("session-free producer c%d: make a body: %v", c.id, err)
				return
			}
			err := c.sessionFreeCall(ctx, gw, lib, "PutObject", http.MethodPut, key, false, func(ctx context.Context, o s3ops) error {
				return o.put(ctx, key, body)
			})
			if err == nil {
				mine = append(mine, plainObject{key: key, sum: sha256Hex(body), size: size})
			}
		case r < 50:
			c.getPlain(ctx, gw, lib, mine[pick%len(mine)])
		case r < 62:
			c.headPlain(ctx, gw, lib, mine[pick%len(mine)])
		case r < 70:
			_ = c.sessionFreeCall(ctx, gw, lib, "ListObjectsV2", http.MethodGet, "", false, func(ctx context.Context, o s3ops) error {
				_, err := o.list(ctx, prefix)
				return err
			})
		default:
			c.readBlob(ctx, gw, lib, pick, r < 85)
		}
	}
}

// getPlain reads one of the producer's objects back; it must be there,
// byte for byte.
func (c *client) getPlain(ctx context.Context, gw, lib int, p plainObject) {
	var sum string
	var n int64
	err := c.sessionFreeCall(ctx, gw, lib, "GetObject", http.MethodGet, p.key, false, func(ctx context.Context, o s3ops) error {
		var err error
		sum, n, err = o.get(ctx, p.key)
		return err
	})
	status, _ := errInfo(err)
	switch {
	case status == http.StatusNotFound:
		c.w.violation("acknowledged object %s (put by session-free producer c%d) answers 404 on %s", p.key, c.id, c.w.names[gw])
	case err == nil && (sum != p.sum || n != p.size):
		c.w.violation("acknowledged object %s reads back %d bytes sha256 %s on %s, want %d bytes %s", p.key, n, sum, c.w.names[gw], p.size, p.sum)
	}
}

// headPlain asks for one of the producer's objects; it must be there,
// of its size.
func (c *client) headPlain(ctx context.Context, gw, lib int, p plainObject) {
	var n int64
	err := c.sessionFreeCall(ctx, gw, lib, "HeadObject", http.MethodHead, p.key, false, func(ctx context.Context, o s3ops) error {
		var err error
		n, err = o.head(ctx, p.key)
		return err
	})
	status, _ := errInfo(err)
	switch {
	case status == http.StatusNotFound:
		c.w.violation("acknowledged object %s (put by session-free producer c%d) answers HEAD 404 on %s", p.key, c.id, c.w.names[gw])
	case err == nil && n != p.size:
		c.w.violation("acknowledged object %s answers HEAD with size %d on %s, want %d", p.key, n, c.w.names[gw], p.size)
	}
}

// readBlob reads (get) or asks for (HEAD) a blob named by one of the
// workload's recent acknowledged manifest or tag writes: stored and
// referenced when it was written. It may have gone since (the manifest
// overwritten or deleted, the blob reclaimed); the blob rules judge that,
// not this one.
func (c *client) readBlob(ctx context.Context, gw, lib, pick int, get bool) {
	c.w.mu.Lock()
	writes := c.w.writes[max(0, len(c.w.writes)-20):]
	var digest string
	if len(writes) > 0 {
		mw := writes[pick%len(writes)]
		digest = mw.digests[(pick/len(writes))%len(mw.digests)]
	}
	c.w.mu.Unlock()
	if digest == "" {
		return
	}
	key := blobKey(digest)
	if !get {
		_ = c.sessionFreeCall(ctx, gw, lib, "HeadObject", http.MethodHead, key, true, func(ctx context.Context, o s3ops) error {
			_, err := o.head(ctx, key)
			return err
		})
		return
	}
	var sum string
	err := c.sessionFreeCall(ctx, gw, lib, "GetObject", http.MethodGet, key, true, func(ctx context.Context, o s3ops) error {
		var err error
		sum, _, err = o.get(ctx, key)
		return err
	})
	if err == nil && "sha256:"+sum != digest {
		c.w.violation("blob %s reads back with sha256 %s on %s", digest, sum, c.w.names[gw])
	}
}

// sessionFreeCall makes one attempt of a session-free request on gateway
// gw and records it (unless the workload was cancelled meanwhile).
func (c *client) sessionFreeCall(ctx context.Context, gw, lib int, what, method, key string, blob bool, op func(ctx context.Context, o s3ops) error) error {
	o := c.w.eps[c.id][gw].ops[lib]
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	sent := time.Now()
	err := op(actx, o)
	recv := time.Now()
	cancel()
	if ctx.Err() != nil {
		return err
	}
	path := "/" + c.w.bucket
	if key != "" {
		path += "/" + key
	}
	rec := sessionFreeCall{what: what, blob: blob, method: method, path: path, gw: gw, lib: o.lib(), sent: sent, recv: recv}
	if err != nil {
		rec.status, rec.code = errInfo(err)
		rec.err = err.Error()
		rec.timeout = errors.Is(err, context.DeadlineExceeded)
	}
	c.w.log.printf("op", "c%d %s %-5s %s %s (session-free) -> %s %dms", c.id, c.w.names[gw], o.lib(), what, strings.TrimPrefix(path, "/"+c.w.bucket+"/"), describe(err), recv.Sub(sent).Milliseconds())
	c.w.count("session-free call " + describe(err))
	c.w.mu.Lock()
	c.w.sessionFree = append(c.w.sessionFree, rec)
	c.w.mu.Unlock()
	return err
}

// proxied is a request a proxy saw and when it arrived there.
type proxied struct {
	at time.Time
	r  harness.ProxiedRequest
}

func proxiedOf(p *harness.FaultProxy, a *arrivalLog) []proxied {
	reqs, times := p.Requests(), a.snapshot()
	out := make([]proxied, 0, len(reqs))
	for j := range min(len(reqs), len(times)) {
		out = append(out, proxied{at: times[j], r: reqs[j]})
	}
	return out
}

// seenAt returns what a proxy saw of the call: requests of its method and
// path that arrived while it was under way.
func (s sessionFreeCall) seenAt(log []proxied) []proxied {
	var out []proxied
	from, to := s.sent.Add(-100*time.Millisecond), s.recv.Add(100*time.Millisecond)
	for _, p := range log {
		if p.at.Before(from) || p.at.After(to) || p.r.Method != s.method ||
			strings.TrimSuffix(p.r.Path, "/") != strings.TrimSuffix(s.path, "/") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// overlaps reports whether [from, to], widened by slack, meets the call.
func (s sessionFreeCall) overlaps(from, to time.Time, slack time.Duration) bool {
	return !from.Add(-slack).After(s.recv) && !to.Add(slack).Before(s.sent)
}

// excuse says which fault the campaign injected explains a failed
// session-free call: its gateway down, restarting or paused; a fault of
// its gateway's front proxy on it; a fault or a failure of the backend
// on it. "" when none does.
func (c *checker) excuse(s sessionFreeCall, fronts [][]proxied, back []proxied, restarts []gwWindow, pauses []pause) string {
	for _, r := range restarts {
		if r.gw == s.gw && s.overlaps(r.from, r.to, 500*time.Millisecond) {
			return fmt.Sprintf("%s was down or restarting (%s) from %s to %s", c.sys.names[s.gw], r.why, c.v.log.since(r.from), c.v.log.since(r.to))
		}
	}
	for _, p := range pauses {
		if p.gw == s.gw && s.overlaps(p.from, p.to, 500*time.Millisecond) {
			return fmt.Sprintf("%s was paused (SIGSTOP) from %s to %s", c.sys.names[s.gw], c.v.log.since(p.from), c.v.log.since(p.to))
		}
	}
	for _, p := range s.seenAt(fronts[s.gw]) {
		if p.r.Fault != harness.Forward {
			return fmt.Sprintf("its front proxy applied %s to it", p.r.Fault)
		}
	}
	for _, p := range s.seenAt(back) {
		switch {
		case p.r.Fault != harness.Forward:
			return fmt.Sprintf("the backend proxy applied %s to it", p.r.Fault)
		case p.r.Status == 0 || p.r.Status >= 500:
			return fmt.Sprintf("MinIO answered it %d (0: no whole answer)", p.r.Status)
		}
	}
	return ""
}

// checkSessionFree: no session-free request failed with a server error
// (or went unanswered until its attempt timed out while an etcd fault
// reached its gateway) that nothing the campaign injected in front of or
// behind the gateway explains. It also counts the session-free requests
// that ran during etcd faults, for the summary.
func (c *checker) checkSessionFree() {
	c.w.mu.Lock()
	calls := append([]sessionFreeCall(nil), c.w.sessionFree...)
	c.w.mu.Unlock()
	var fronts [][]proxied
	for i, p := range c.sys.front {
		fronts = append(fronts, proxiedOf(p, c.sys.arrivals[i]))
	}
	back := proxiedOf(c.sys.back, c.sys.backArrivals)
	restarts, pauses, windows := c.f.restartsOf(), c.f.pausesOf(), c.f.etcdFaultsOf()
	during := map[string]int{}
	var inFault, failed, excused, unanswered, violations int
	for _, s := range calls {
		var faults []string
		for _, w := range windows {
			if w.reaches(s.gw) && s.overlaps(w.from, w.to, 0) {
				faults = append(faults, fmt.Sprintf("%s from %s to %s", w.kind, c.v.log.since(w.from), c.v.log.since(w.to)))
				during[w.kind]++
			}
		}
		if len(faults) > 0 {
			inFault++
		}
		server := s.status >= 500
		hung := s.status == 0 && s.timeout && len(faults) > 0
		if !s.failed() || !server && s.status != 0 {
			continue
		}
		failed++
		why := c.excuse(s, fronts, back, restarts, pauses)
		etcd := "none"
		if len(faults) > 0 {
			etcd = strings.Join(faults, "; ")
		}
		desc := fmt.Sprintf("%s %s on %s (%s), sent %s, %s after %s: %s; etcd faults reaching it then: %s",
			s.what, s.path, c.sys.names[s.gw], s.lib, c.v.log.since(s.sent), describeCall(s), s.recv.Sub(s.sent).Round(time.Millisecond), s.err, etcd)
		switch {
		case why != "":
			excused++
			c.v.log.printf("check", "session-free request failed, excused: %s; %s", desc, why)
		case server || hung:
			violations++
			c.v.violate("session-free request failed: %s; the gateway was live and unpaused, and no proxy fault or backend failure was on it", desc)
		default:
			unanswered++
			c.w.anomaly("session-free request unanswered with no fault to explain it: %s", desc)
		}
	}
	var kinds []string
	for k, n := range during {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	c.sessionFree = fmt.Sprintf("session-free requests: %d, %d during etcd faults that reached their gateway (%s); %d failed with a server error or unanswered: %d excused by injected faults, %d violations, %d unanswered with nothing to explain it",
		len(calls), inFault, strings.Join(kinds, ", "), failed, excused, violations, unanswered)
	c.v.note("%s", c.sessionFree)
}

// describeCall is how a failed call ended, for messages.
func describeCall(s sessionFreeCall) string {
	switch {
	case s.timeout:
		return "timed out unanswered"
	case s.status == 0:
		return "unanswered"
	}
	return fmt.Sprintf("answered %d %s", s.status, s.code)
}
