//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// auditSlack is how long after its term ended a destructive action's audit
// line may be written: the line follows the backend calls that the fenced
// write allowed (an abort and the listing that settles an unclear one,
// each bounded by reclaim.backend_timeout) and the etcd write recording
// the outcome, and a paused gateway writes it only once resumed (added
// separately). The exact check is the one on etcd's history, by revision;
// this one catches terms that never led and actions long after.
const auditSlack = 4*backendTimeout + 10*time.Second

// verdicts collects what the checker finds.
type verdicts struct {
	log        *campaignLog
	mu         sync.Mutex
	violations []string
	notes      []string
}

func (v *verdicts) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	v.log.printf("VIOLATE", "%s", msg)
	v.mu.Lock()
	v.violations = append(v.violations, msg)
	v.mu.Unlock()
}

func (v *verdicts) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	v.log.printf("note", "%s", msg)
	v.mu.Lock()
	v.notes = append(v.notes, msg)
	v.mu.Unlock()
}

// direct reads MinIO itself, around the gateways and their proxies.
type direct struct {
	c      *s3.Client
	bucket string
}

type listed struct{ key, etag string }

func (d direct) list(ctx context.Context, prefix string) ([]listed, error) {
	var out []listed
	p := s3.NewListObjectsV2Paginator(d.c, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			out = append(out, listed{key: aws.ToString(o.Key), etag: strings.Trim(aws.ToString(o.ETag), `"`)})
		}
	}
	return out, nil
}

// read returns an object's body and ETag; found is false for NoSuchKey.
func (d direct) read(ctx context.Context, key string) (body []byte, etag string, found bool, err error) {
	out, err := d.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
	if _, code := errInfo(err); code == "NoSuchKey" {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, err
	}
	defer out.Body.Close()
	body, err = io.ReadAll(out.Body)
	return body, strings.Trim(aws.ToString(out.ETag), `"`), err == nil, err
}

type mpUpload struct{ key, id string }

func (d direct) uploads(ctx context.Context) ([]mpUpload, error) {
	var out []mpUpload
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(d.bucket)}
	for {
		page, err := d.c.ListMultipartUploads(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, u := range page.Uploads {
			out = append(out, mpUpload{key: aws.ToString(u.Key), id: aws.ToString(u.UploadId)})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// checker runs the checks at the end of a campaign.
type checker struct {
	v       *verdicts
	w       *workload
	sys     *system
	f       *faults
	smp     *sampler
	d       direct
	cli     *clientv3.Client
	keys    etcdstore.Keys
	h       *history
	started time.Time
	// sessionFree is checkSessionFree's account, for the summary.
	sessionFree string
}

// checkObjects reads every object whose complete succeeded from MinIO and
// compares it byte for byte (by SHA-256 and size) with what was uploaded.
func (c *checker) checkObjects(ctx context.Context) {
	n := 0
	for _, u := range c.w.uploads {
		if u.outcome != outCompleted {
			continue
		}
		n++
		out, err := c.d.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.d.bucket), Key: aws.String(u.key)})
		if err != nil {
			c.v.violate("object %s (upload %s, completed for its client) cannot be read on MinIO: %v", u.key, u.id, err)
			continue
		}
		sum, size, err := hashBody(out.Body)
		if err != nil || sum != u.sum || size != u.data.Size {
			c.v.violate("object %s (upload %s) reads back %d bytes sha256 %s (%v), want %d bytes %s", u.key, u.id, size, sum, err, u.data.Size, u.sum)
		}
	}
	c.v.note("%d completed objects read back from MinIO", n)
}

func hashBody(r io.ReadCloser) (string, int64, error) {
	defer r.Close()
	b, err := io.ReadAll(r)
	return sha256Hex(b), int64(len(b)), err
}

// checkRefusals judges every NoSuchUpload (or missing part) a client got:
// allowed only when nothing the gateway acknowledged for the upload came
// within the time the reclaimer needs (grace, then delete_after). What the
// gateways acknowledged comes from the front proxies: the time each
// request for the upload arrived there, and its answer, include attempts
// whose answers were then lost.
func (c *checker) checkRefusals() {
	acked := map[string][]time.Time{} // upload id -> arrivals of 2xx activity
	for i, p := range c.sys.front {
		reqs := p.Requests()
		times := c.sys.arrivals[i].snapshot()
		for j := range min(len(reqs), len(times)) {
			r := reqs[j]
			id := r.Query.Get("uploadId")
			if id == "" || r.Method == http.MethodDelete || r.Status < 200 || r.Status > 299 {
				continue
			}
			acked[id] = append(acked[id], times[j])
		}
	}
	allowed := 0
	for _, u := range c.w.uploads {
		for _, rf := range u.refusals {
			last, lastWhat := rf.lastOK.sent, rf.lastOK.op+" (client saw it succeed)"
			for _, a := range u.ok {
				if a.sent.Before(rf.sent) && a.sent.After(last) {
					last, lastWhat = a.sent, a.op+" (client saw it succeed)"
				}
			}
			for _, t := range acked[u.id] {
				if t.Before(rf.sent) && t.After(last) {
					last, lastWhat = t, "a request the gateway answered 2xx (answer possibly lost)"
				}
			}
			gap := rf.recv.Sub(last)
			abort := c.abortBefore(u.id, rf.recv)
			if abort == nil && rf.code != "NoSuchUpload" {
				// Nobody decided to abort it: the backend lost the parts
				// itself. MinIO does when a complete is cut off midway
				// (a gateway killed while its complete is on the
				// backend): the upload stays, without its parts, and no
				// object is made.
				c.w.anomaly("%s %s (upload %s, %s) got %s for %s at %s with no abort in its session's history (%s): its parts were lost on the backend, not reclaimed",
					u.lib, u.key, u.id, u.kind, rf.code, rf.op, c.v.log.since(rf.recv), c.path(u.id))
				continue
			}
			if abort != nil && abort.Term == 0 && rf.op == "AbortMultipartUpload" {
				// Its own abort went through, unseen; the retry should
				// have been answered with success (aborts are idempotent), but
				// nothing was reclaimed.
				c.w.anomaly("%s %s (upload %s): a retried abort got %s after the first was done (%s)", u.lib, u.key, u.id, rf.code, c.path(u.id))
				continue
			}
			// A clock offset within reclaim.clock_skew may shorten the
			// grace by as much.
			skew := c.skewDuring(last, rf.recv)
			if gap <= reclaimable-skew {
				c.v.violate("live upload reclaimed: %s %s (upload %s, %s, pause %s) got %s for %s at %s, only %s after its last activity, %s at %s; the reclaimer may delete only after %s (grace %s + delete_after %s, less %s of clock offsets within clock_skew); session: %s",
					u.lib, u.key, u.id, u.kind, u.pause, rf.code, rf.op, c.v.log.since(rf.recv), gap.Round(time.Millisecond), lastWhat, c.v.log.since(last), reclaimable-skew, grace, deleteAfter, skew, c.path(u.id))
				continue
			}
			allowed++
			c.v.log.printf("check", "upload %s (%s, pause %s) reclaimed %s after its last activity: allowed", u.id, u.key, u.pause, gap.Round(time.Millisecond))
		}
	}
	revived := 0
	for _, trs := range c.h.transitions {
		for _, tr := range trs {
			if tr.From == etcdstore.StateExpired && tr.To == etcdstore.StateActive {
				revived++
			}
		}
	}
	c.v.note("%d uploads reclaimed after a pause longer than grace+delete_after (allowed); %d marked expired and then revived by their client's activity", allowed, revived)
}

// abortBefore returns the first transition of the upload's session
// towards an abort made before t, if any.
func (c *checker) abortBefore(id string, t time.Time) *etcdstore.Transition {
	for _, tr := range c.h.transitions[id] {
		switch tr.To {
		case etcdstore.StateAborting, etcdstore.StateAborted, etcdstore.StateCleanupPending:
			if tr.At.Before(t) {
				return &tr
			}
		}
	}
	return nil
}

// path is an upload session's history as etcd recorded it, for messages.
func (c *checker) path(id string) string {
	var steps []string
	for _, tr := range c.h.transitions[id] {
		step := fmt.Sprintf("%s->%s by %s at %s", tr.From, tr.To, tr.Actor, c.v.log.since(tr.At))
		if tr.Term > 0 {
			step += fmt.Sprintf(" in term %d", tr.Term)
		}
		steps = append(steps, step)
	}
	if len(steps) == 0 {
		return "no session recorded"
	}
	return strings.Join(steps, ", ")
}

// sessionState returns an upload's session state in etcd ("" when none),
// and whether its session or activity records a time beyond now plus
// clockSkew: written by a gateway whose clock ran ahead, such an upload is
// kept until that time has passed.
func (c *checker) sessionState(ctx context.Context, id string) (etcdstore.SessionState, bool, error) {
	resp, err := c.cli.Get(ctx, c.keys.Session(c.d.bucket, id))
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	var s etcdstore.Session
	if err := json.Unmarshal(resp.Kvs[0].Value, &s); err != nil {
		return "", false, err
	}
	limit := time.Now().Add(clockSkew)
	future := s.Created.After(limit) || s.LastActivity.After(limit)
	for _, h := range s.History {
		future = future || h.At.After(limit)
	}
	act, err := c.cli.Get(ctx, c.keys.Activity(id))
	if err != nil {
		return "", false, err
	}
	if len(act.Kvs) > 0 {
		var a etcdstore.Activity
		if json.Unmarshal(act.Kvs[0].Value, &a) == nil && a.At.After(limit) {
			future = true
		}
	}
	return s.State, future, nil
}

// offsetAhead reports whether a gateway ran with its clock ahead by more
// than clockSkew during the campaign: only then may a session record a time
// in the future.
func (c *checker) offsetAhead() bool {
	for _, o := range c.f.offsetsOf() {
		if o.offset > clockSkew {
			return true
		}
	}
	return false
}

// leftovers lists the uploads MinIO still holds that should be gone after
// the final passes, with why; notes are the ones kept by design (orphans
// without a session, sessions completing).
func (c *checker) leftovers(ctx context.Context) (leaks, kept []string, err error) {
	listed, err := c.d.uploads(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list multipart uploads on MinIO: %w", err)
	}
	known := map[string]*upload{}
	for _, u := range c.w.uploads {
		if u.id != "" {
			known[u.id] = u
		}
	}
	for _, l := range listed {
		state, future, err := c.sessionState(ctx, l.id)
		if err != nil {
			return nil, nil, fmt.Errorf("session of %s: %w", l.id, err)
		}
		u := known[l.id]
		what := fmt.Sprintf("%s (upload %s, unknown to the clients: its create's answer was lost), session %q", l.key, l.id, state)
		if u != nil {
			what = fmt.Sprintf("%s (upload %s, %s, client outcome %s), session %q", l.key, l.id, u.kind, u.outcome, state)
		}
		switch {
		case u != nil && u.outcome == outCompleted:
			leaks = append(leaks, "completed upload still listed: "+what)
		case state == "":
			kept = append(kept, "orphan, held for a person: "+what)
		case state == etcdstore.StateCompleting:
			kept = append(kept, "completing, kept until its client retries the complete: "+what)
		case future && c.offsetAhead():
			kept = append(kept, "kept until a time in the future that a gateway whose clock ran ahead recorded has passed: "+what)
		default:
			leaks = append(leaks, what)
		}
	}
	return leaks, kept, nil
}

// checkLeaks: after the final passes, no upload that was aborted or
// abandoned (or whose create's answer was lost) has parts left on MinIO.
func (c *checker) checkLeaks(ctx context.Context) {
	leaks, kept, err := c.leftovers(ctx)
	if err != nil {
		c.v.violate("cannot check for leftover uploads: %v", err)
		return
	}
	for _, l := range leaks {
		c.v.violate("leak: parts left on MinIO after the final passes: %s", l)
	}
	for _, k := range kept {
		c.v.note("%s", k)
	}
}

// checkTerms: every write to etcd that carries a reclaimer term was made
// while that term led (exactly, by revision), reclaimer decisions carry a
// term, and every destructive action in the gateways' audit logs names a
// term that led at that moment (by wall time, which the sampler ties to
// revisions) or else the principal that asked for it.
func (c *checker) checkTerms() {
	for _, w := range c.h.writes {
		if w.term <= 0 {
			c.v.violate("%s at revision %d carries no term", w.what, w.rev)
			continue
		}
		if l := c.h.leaderOf(w.rev); l != w.term {
			c.v.violate("%s at revision %d carries term %d, but term %d led then", w.what, w.rev, w.term, l)
		}
	}
	for _, u := range c.h.untermed {
		c.v.violate("reclaimer decision without a term: %s", u)
	}
	var terms []int64
	for t := range c.h.leaders {
		terms = append(terms, t)
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i] < terms[j] })
	samples := c.smp.revSamples()
	now := time.Now()
	var spans []string
	for _, t := range terms {
		from, to := placeSpan(c.h.leaders[t], samples, c.started, now)
		spans = append(spans, fmt.Sprintf("%d [%s, %s]", t, c.v.log.since(from), c.v.log.since(to)))
	}
	c.v.note("%d etcd events replayed; %d term-carrying writes and %d guards checked; terms that led: %s",
		c.h.events, len(c.h.writes), len(c.h.guards), strings.Join(spans, ", "))

	pauses := c.f.pausesOf()
	actions := map[string]int{}
	lines := 0
	for i, g := range c.sys.gateways {
		for _, a := range readAudit(g.LogFile) {
			lines++
			actions[a.Action]++
			where := fmt.Sprintf("%s audit %s %s at %s", c.sys.names[i], a.Action, a.What, c.v.log.since(a.Time))
			if a.Term <= 0 {
				// A restore of the trash undoes a delete that did not
				// happen: it takes nothing away.
				if a.Principal == "" && a.Action != "restore_trash" {
					c.v.violate("%s carries neither a term nor a principal", where)
				}
				continue
			}
			sp, led := c.h.leaders[a.Term]
			if !led {
				c.v.violate("%s carries term %d, which never led", where, a.Term)
				continue
			}
			from, to := placeSpan(sp, samples, c.started, now)
			end := to.Add(auditSlack)
			for _, p := range pauses {
				if !p.from.After(end) && p.to.After(to) {
					end = maxTime(end, p.to.Add(auditSlack))
				}
			}
			if a.Time.Before(from.Add(-time.Second)) || a.Time.After(end) {
				c.v.violate("%s carries term %d, which led from %s to %s (audit lines allowed until %s)", where, a.Term, c.v.log.since(from), c.v.log.since(to), c.v.log.since(end))
			}
		}
	}
	if lines == 0 {
		c.v.note("no audit lines in the gateways' logs: terms were checked from etcd's history only")
		return
	}
	var kinds []string
	for k, n := range actions {
		kinds = append(kinds, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(kinds)
	c.v.note("%d audit lines checked: %s", lines, strings.Join(kinds, ", "))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// auditLine is what the checker reads of a gateway's "audit" log line.
type auditLine struct {
	Time      time.Time `json:"time"`
	Msg       string    `json:"msg"`
	Action    string    `json:"action"`
	What      string    `json:"what"`
	Term      int64     `json:"term"`
	Principal string    `json:"principal"`
}

// readAudit returns the audit lines of a gateway's log (JSON lines; the
// harness's own lines and anything else are skipped).
func readAudit(path string) []auditLine {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []auditLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' || !strings.Contains(string(line), `"msg":"audit"`) {
			continue
		}
		var a auditLine
		if json.Unmarshal(line, &a) == nil && a.Msg == "audit" {
			out = append(out, a)
		}
	}
	return out
}

// errNoLeader says no gateway led when a pass was wanted.
var errNoLeader = errors.New("no gateway leads the reclaimer")
