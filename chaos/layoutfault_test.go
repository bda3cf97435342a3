//go:build chaos

package chaos

// The layout-mismatch fault: one gateway restarted for a few seconds with
// another digests layout (without the plain manifests' reference source,
// so that it stores manifests there as plain objects, or with a namespace
// more), so that the fingerprint it publishes with its clock differs from
// the other's; then restarted with the campaign's layout. While the
// layouts differ no digest pass may delete anything, and the manifests the
// odd gateway stored as plain objects must keep their blobs once it is
// back (the rebuild finds them).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// faultLayout restarts one gateway with another digests layout for a few
// seconds.
const faultLayout = "layout-mismatch"

// The odd layouts the fault draws from.
const (
	layoutWithoutSource  = "without the source " + bucket + "/manifests/"
	layoutExtraNamespace = "with the extra namespace " + bucket + "/extra/sha256/"
)

// layoutWindow is a gateway process that ran with an odd layout: restarted
// with it from start on, serving from live on, stopped from end on.
type layoutWindow struct {
	gw               int
	variant          string
	start, live, end time.Time
	// gauge is the largest sweepgate_reclaim_layout_mismatch_gateways
	// either gateway's /metrics showed while it served, -1 if none
	// answered.
	gauge int
}

// oddLayout returns the gateway configuration cfg (the harness's JSON
// file, decoded) with the digests layout of variant.
func oddLayout(cfg map[string]any, variant string) error {
	d, ok := cfg["digests"].(map[string]any)
	if !ok {
		return fmt.Errorf("the gateway's configuration has no digests")
	}
	switch variant {
	case layoutWithoutSource:
		srcs, _ := d["sources"].([]any)
		var kept []any
		for _, s := range srcs {
			if s != bucket+"/manifests/" {
				kept = append(kept, s)
			}
		}
		if len(kept) == len(srcs) {
			return fmt.Errorf("no source %s/manifests/ in %v", bucket, srcs)
		}
		d["sources"] = kept
	case layoutExtraNamespace:
		nss, _ := d["namespaces"].([]any)
		d["namespaces"] = append(slices.Clone(nss), bucket+"/extra/sha256/")
	}
	return nil
}

// layoutMismatch restarts a gateway (the leader when pick says so) with an
// odd layout for d, watching the layout-mismatch gauge meanwhile, then
// restarts it with the campaign's layout. The harness reads the gateway's
// configuration file at each start, so the fault rewrites it and puts it
// back.
func (f *faults) layoutMismatch(t *testing.T, ctx context.Context, pick int, variant string, d time.Duration) {
	victim := pick % len(f.sys.gateways)
	if pick < 50 {
		if i, _ := f.sys.leader(ctx); i >= 0 {
			victim = i
		}
	}
	g := f.sys.gateways[victim]
	orig, err := os.ReadFile(g.ConfigFile)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(orig, &cfg); err != nil {
		t.Fatalf("chaos: %s: %v", g.ConfigFile, err)
	}
	if err := oddLayout(cfg, variant); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	odd, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if err := os.WriteFile(g.ConfigFile, odd, 0o600); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	w := layoutWindow{gw: victim, variant: variant, start: time.Now(), gauge: -1}
	f.log.printf("FAULT", "restart %s %s (another layout fingerprint) for %s", f.sys.names[victim], variant, d)
	g.Restart()
	w.live = time.Now()
	f.restarted(victim, w.start, faultLayout)
	f.log.printf("FAULT", "%s serves %s (pid %d)", f.sys.names[victim], variant, g.PID())
	f.count(faultLayout)
	// Put the file back at once: a kill fault's restart, or the heal,
	// must start it with the campaign's layout.
	if err := os.WriteFile(g.ConfigFile, orig, 0o600); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	// Clients that failed over during the restart stay on the other
	// gateway; send every call to the odd one first while it serves.
	f.sys.steer.Store(int32(victim + 1))
	until := time.Now().Add(d)
	for time.Now().Before(until) && ctx.Err() == nil {
		for i := range f.sys.gateways {
			if n, err := f.sys.mismatchGauge(ctx, i); err == nil && n > w.gauge {
				w.gauge = n
				f.log.printf("FAULT", "%s reports sweepgate_reclaim_layout_mismatch_gateways %d", f.sys.names[i], n)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	f.sys.steer.Store(0)
	w.end = time.Now()
	g.Restart()
	f.restarted(victim, w.end, faultLayout)
	f.log.printf("FAULT", "%s restarted with the campaign's layout (pid %d)", f.sys.names[victim], g.PID())
	f.mu.Lock()
	f.layouts = append(f.layouts, w)
	f.mu.Unlock()
}

var mismatchGaugeRE = regexp.MustCompile(`(?m)^sweepgate_reclaim_layout_mismatch_gateways(?:\{[^}]*\})? ([0-9.e+]+)$`)

// mismatchGauge reads sweepgate_reclaim_layout_mismatch_gateways from
// gateway i's /metrics.
func (s *system) mismatchGauge(ctx context.Context, i int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.gateways[i].AdminEndpoint+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.status.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: %s %v", resp.Status, err)
	}
	m := mismatchGaugeRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no layout mismatch gauge")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return int(v), err
}

func (f *faults) layoutsOf() []layoutWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.layouts)
}

// layoutReplay is what the replay keeps of the gateways' published
// layouts: the live records, and the revisions at which live gateways
// published more than one layout.
type layoutReplay struct {
	live map[string]string // gateway key -> layout ("" when it publishes none)
}

// applyGateway records a gateway's clock record: the revisions during
// which the live records carry different layouts are h.layoutsDiffer.
func (st *replayState) applyGateway(ev *clientv3.Event, key string, rev int64, put bool) {
	if st.layouts.live == nil {
		st.layouts.live = map[string]string{}
	}
	if put {
		var g etcdstore.GatewayClock
		if json.Unmarshal(ev.Kv.Value, &g) != nil {
			st.layouts.live[key] = "(does not decode)"
		} else if !g.Layouts {
			st.layouts.live[key] = "(none)"
		} else {
			st.layouts.live[key] = g.Layout
		}
	} else {
		delete(st.layouts.live, key)
	}
	distinct := map[string]bool{}
	for _, l := range st.layouts.live {
		distinct[l] = true
	}
	h := st.h
	n := len(h.layoutsDiffer)
	open := n > 0 && h.layoutsDiffer[n-1].to == 0
	switch {
	case len(distinct) > 1 && !open:
		h.layoutsDiffer = append(h.layoutsDiffer, span{from: rev})
	case len(distinct) <= 1 && open:
		h.layoutsDiffer[n-1].to = rev
	}
}

// noteLayoutKept records, from a digest cursor, the first revision at
// which each pass's report says it keeps everything for a layout that
// differs.
func (st *replayState) noteLayoutKept(c cursorRec, rev int64) {
	if !strings.Contains(c.Report.Kept, "layout") {
		return
	}
	if _, ok := st.h.layoutKept[c.Pass]; !ok {
		st.h.layoutKept[c.Pass] = rev
	}
}

// passStart returns the revision at which the pass of deletion d first
// decided (its first cursor, of either sweep) before d.
func (h *history) passStart(d deletion) (int64, bool) {
	for _, dec := range h.decisions {
		if dec.pass == d.pass && dec.rev <= d.rev {
			return dec.rev, true
		}
	}
	return 0, false
}

// differThrough reports whether the live gateways published different
// layouts at every revision from a through b.
func (h *history) differThrough(a, b int64) bool {
	for _, s := range h.layoutsDiffer {
		if s.has(a) && (s.to == 0 || b < s.to) {
			return true
		}
	}
	return false
}

// checkLayouts: no digest pass deletes anything while the gateways'
// layouts differ. A pass reads the gateways' layouts after it starts (its
// first cursor) and before it arms a guard (when its tombstone phase
// starts), so a guard armed by a pass during whose whole span from its
// start to the arming the live gateways published different layouts in
// etcd is a violation; so is a guard armed by a pass after its report said
// it keeps everything for the layouts. A pass that read the layouts while
// they agreed may still arm guards after they came to differ (a pass
// resumed in its collect phase does not read them again): those are
// counted, not judged. Each fault must also have made a difference in
// etcd.
func (c *checker) checkLayouts() {
	armedWhile := 0
	for _, d := range c.h.deletions {
		if !strings.HasPrefix(d.what, "guard of ") {
			continue
		}
		if k, ok := c.h.layoutKept[d.pass]; ok && k <= d.rev {
			c.v.violate("deleted while layouts differed: %s at revision %d by pass %d (term %d), whose report said at revision %d that it keeps everything because a gateway serves another layout",
				d.what, d.rev, d.pass, d.term, k)
			continue
		}
		if r, ok := c.h.passStart(d); ok && c.h.differThrough(r, d.rev) {
			c.v.violate("deleted while layouts differed: %s at revision %d by pass %d (term %d), which started at revision %d; the live gateways published different layouts at every revision in between (%s)",
				d.what, d.rev, d.pass, d.term, r, c.layoutSpans())
			continue
		}
		if c.h.differThrough(d.rev, d.rev) {
			armedWhile++
			c.v.log.printf("check", "%s armed at revision %d by pass %d while layouts differed, but the pass read the layouts at a revision where they may still have agreed", d.what, d.rev, d.pass)
		}
	}
	windows := c.f.layoutsOf()
	samples := c.smp.revSamples()
	now := time.Now()
	for _, w := range windows {
		seen := false
		for _, s := range c.h.layoutsDiffer {
			from, to := placeSpan(s, samples, c.started, now)
			if !from.After(w.end) && !to.Before(w.start) {
				seen = true
			}
		}
		if !seen {
			c.v.violate("%s served %s from %s to %s, but etcd never held different layouts for the live gateways then: its fingerprint did not change, so no pass could tell",
				c.sys.names[w.gw], w.variant, c.v.log.since(w.live), c.v.log.since(w.end))
		}
		odd, lacking := c.w.writesThrough(c.sys.names[w.gw], w.live, w.end)
		if w.variant != layoutWithoutSource {
			lacking = 0
		}
		c.v.note("%s served %s from %s to %s: largest layout-mismatch gauge seen %d; %d manifest writes acknowledged through it, %d into the source it lacked",
			c.sys.names[w.gw], w.variant, c.v.log.since(w.live), c.v.log.since(w.end), w.gauge, odd, lacking)
	}
	c.v.note("%d layout-mismatch faults; layouts differed in etcd at revisions %s; %d passes kept everything for it; %d guards armed while they differed by passes that read them before they did (not judged)",
		len(windows), c.layoutSpans(), len(c.h.layoutKept), armedWhile)
}

func (c *checker) layoutSpans() string {
	var out []string
	for _, s := range c.h.layoutsDiffer {
		out = append(out, fmt.Sprintf("[%d,%d)", s.from, s.to))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// steered returns the gateway a fault wants every call to start on.
func (w *workload) steered() (int, bool) {
	if w.steer == nil {
		return 0, false
	}
	s := w.steer.Load()
	return int(s - 1), s > 0
}

// writesThrough counts the manifest writes acknowledged through gateway
// gw between from and to, and those of them into manifests/.
func (w *workload) writesThrough(gw string, from, to time.Time) (all, plain int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.writes {
		if m.gw != gw || m.recv.Before(from) || m.recv.After(to) {
			continue
		}
		all++
		if strings.HasPrefix(m.key, "manifests/") {
			plain++
		}
	}
	return all, plain
}
