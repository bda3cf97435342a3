//go:build chaos

package chaos

// The checker's rules for writers around the gateway and for clocks: no
// upload is aborted while MinIO holds a part newer than its mark, or one
// acknowledged within the grace before the abort; and no pass that
// decided while a live gateway's clock was off by more than
// reclaim.clock_skew deletes anything.

import (
	"net/http"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// placeRev places etcd revision rev in wall time with the sampler's
// reads: it was written after lo (a read that did not see it yet began)
// and before hi (a read that saw it ended).
func placeRev(rev int64, samples []revSample, begin, end time.Time) (lo, hi time.Time) {
	lo, hi = begin, end
	for _, s := range samples {
		if s.rev < rev && s.start.After(lo) {
			lo = s.start
		}
		if s.rev >= rev && s.end.Before(hi) {
			hi = s.end
		}
	}
	return lo, hi
}

// backLook is a request about an upload that reached the backend proxy.
type backLook struct {
	at     time.Time
	method string
}

// backendLooks returns, by upload id, the ListParts (GET) and aborts
// (DELETE) that reached the backend proxy, in the order they arrived.
func (c *checker) backendLooks() map[string][]backLook {
	reqs := c.sys.back.Requests()
	times := c.sys.backArrivals.snapshot()
	out := map[string][]backLook{}
	for j := range min(len(reqs), len(times)) {
		r := reqs[j]
		id := r.Query.Get("uploadId")
		if id == "" || r.Method != http.MethodGet && r.Method != http.MethodDelete {
			continue
		}
		out[id] = append(out[id], backLook{at: times[j], method: r.Method})
	}
	return out
}

// checkAroundParts: an upload the reclaimer aborted had no part written
// around the gateway that MinIO had acknowledged by the time the
// reclaimer last looked at the upload's parts before its abort (its last
// ListParts after the mark to reach MinIO before the abort's DELETE; the
// abort intent itself when it never looked) and that was either newer
// than the upload's mark (sent after it) or acknowledged within grace (less the clock
// skew the reclaimer may have) before the abort intent.
func (c *checker) checkAroundParts() {
	samples := c.smp.revSamples()
	now := time.Now()
	looks := c.backendLooks()
	written, acked, aborted := 0, 0, 0
	for _, u := range c.w.uploads {
		if len(u.direct) == 0 {
			continue
		}
		written += len(u.direct)
		for _, p := range u.direct {
			if !p.ack.IsZero() {
				acked++
			}
		}
		trs, revs := c.h.transitions[u.id], c.h.trRevs[u.id]
		for k, tr := range trs {
			if tr.From != etcdstore.StateExpired || tr.To != etcdstore.StateAborting || tr.Term <= 0 {
				continue
			}
			aborted++
			alo, _ := placeRev(revs[k], samples, c.started, now)
			var mlo, mhi time.Time
			var markRev int64
			for j := k - 1; j >= 0; j-- {
				if trs[j].To == etcdstore.StateExpired {
					markRev = revs[j]
					mlo, mhi = placeRev(markRev, samples, c.started, now)
					break
				}
			}
			del := now
			for _, l := range looks[u.id] {
				if l.method == http.MethodDelete && !l.at.Before(alo) {
					del = l.at
					break
				}
			}
			look, lookWhat := alo, "the abort intent (no ListParts reached MinIO after the mark)"
			for _, l := range looks[u.id] {
				if l.method == http.MethodGet && l.at.After(mlo) && l.at.Before(del) {
					look, lookWhat = l.at, "its last ListParts before the abort"
				}
			}
			for _, p := range u.direct {
				if p.ack.IsZero() || !p.ack.Before(look) {
					continue
				}
				// Newer than the mark: sent after the mark was surely
				// written, or after its writer read the session expired
				// at a revision the mark is not after.
				newer := p.sent.After(mhi) || p.markRev > 0 && markRev > 0 && markRev <= p.markRev
				recent := alo.Sub(p.ack) < grace-clockSkew
				if newer || recent {
					c.v.violate("upload with a part newer than its activity aborted: %s %s (upload %s): part %d, written straight to MinIO %s, sent at %s and acknowledged at %s (newer than its mark at %s: %t; within grace %s less clock_skew %s before the abort intent at %s: %t), before %s at %s; session: %s",
						u.lib, u.key, u.id, p.n, p.why, c.v.log.since(p.sent), c.v.log.since(p.ack), c.v.log.since(mhi), newer,
						grace, clockSkew, c.v.log.since(alo), recent, lookWhat, c.v.log.since(look), c.path(u.id))
				}
			}
		}
	}
	c.v.note("%d parts written straight to MinIO during pauses (%d acknowledged); %d aborts of uploads that had them checked against their part times", written, acked, aborted)
}

// clockSlack is how long after a gateway with its clock offset serves a
// pass may still decide without seeing it (the gateway publishes its
// clock as it starts).
const clockSlack = time.Second

// decisionOf returns the decision a deletion was made under: the last
// time before it that its pass started or was resumed.
func (h *history) decisionOf(d deletion) (decision, bool) {
	var last decision
	found := false
	for _, dec := range h.decisions {
		if dec.pass == d.pass && dec.rev <= d.rev {
			last, found = dec, true
		}
	}
	return last, found
}

// checkClockOffsets: no abort intent and no armed guard comes from a pass
// that decided while a gateway ran with its clock offset beyond
// reclaim.clock_skew (from when it served, plus clockSlack, until it was
// stopped), whichever gateway led.
func (c *checker) checkClockOffsets() {
	windows := c.f.offsetsOf()
	samples := c.smp.revSamples()
	now := time.Now()
	large, inside := 0, 0
	for _, w := range windows {
		if w.large() {
			large++
		}
	}
	for _, d := range c.h.deletions {
		dec, ok := c.h.decisionOf(d)
		if !ok {
			continue
		}
		lo, hi := placeRev(dec.rev, samples, c.started, now)
		for _, w := range windows {
			if !w.large() || lo.Before(w.live.Add(clockSlack)) || hi.After(w.end) {
				continue
			}
			inside++
			c.v.violate("deleted after a clock jump: %s at revision %d by pass %d (term %d), which began or resumed at revision %d (between %s and %s) while %s ran with its clock offset %s, beyond reclaim.clock_skew %s (serving from %s to %s, leader by force: %t)",
				d.what, d.rev, d.pass, d.term, dec.rev, c.v.log.since(lo), c.v.log.since(hi), c.sys.names[w.gw], w.offset, clockSkew, c.v.log.since(w.live), c.v.log.since(w.end), w.led)
		}
	}
	c.v.note("%d clock offsets applied (%d beyond clock_skew %s); %d reclaimer deletions (abort intents, armed guards) checked against them, %d of them from passes that decided while a clock was off",
		len(windows), large, clockSkew, len(c.h.deletions), inside)
}

// skewDuring is how much a clock offset within reclaim.clock_skew may
// have shortened the grace between a and b: the largest such offset
// applied to a gateway (the reclaimer's or the one that stamped the
// activity) while it overlapped [a, b]. An offset beyond the skew shortens
// nothing: no pass may delete while it lasts.
func (c *checker) skewDuring(a, b time.Time) time.Duration {
	var most time.Duration
	for _, w := range c.f.offsetsOf() {
		if w.large() {
			continue
		}
		// The restart without the offset takes a moment after end.
		if w.start.After(b) || w.end.Add(5*time.Second).Before(a) {
			continue
		}
		most = max(most, w.offset, -w.offset)
	}
	return most
}
