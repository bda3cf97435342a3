package admin

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The status page is the admin listener's answer to a
// person with a browser: who leads, what the last passes decided and did,
// what is held for a person, and what holds deletes back. It is rendered on
// the server from the same calls the JSON API makes, so it cannot tell a
// different story than `sweepgate reclaim status` does, and it needs no
// JavaScript and no build step.
//
// Every number carries data-metric (a stable dotted name) and data-value
// (the exact number, where the text may round bytes), so that tests and
// scrapers read the page without depending on its layout.

//go:embed statuspage.html
var statusPageHTML string

const (
	// statusPageTimeout bounds all the etcd reads of one page: a person
	// waiting for a page with etcd down should see the error in seconds,
	// not after the API's longer timeout.
	statusPageTimeout = 10 * time.Second
	// statusPagePasses is how many pass reports the page shows.
	statusPagePasses = adminapi.DefaultReportsLimit
	// statusPageListRows bounds the orphans and stuck sessions listed; the
	// totals say how many there are, the API lists them all.
	statusPageListRows = 100
)

// statusPage renders the page over the admin handler's APIs.
type statusPage struct {
	a    *handler
	tmpl *template.Template
	log  *slog.Logger
}

// statusRoutes registers the page at / and /status behind protect, the
// same wrapper as the API's, since the page shows what the API does.
func (a *handler) statusRoutes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	p := &statusPage{a: a, tmpl: newStatusTemplate(), log: a.statusLog()}
	h := protect(http.HandlerFunc(p.serve))
	mux.Handle("GET /{$}", h)
	mux.Handle("GET /status", h)
}

// statusLog is the admin handler's logger, else that of whichever API has
// one (tests build handlers with some of them only).
func (a *handler) statusLog() *slog.Logger {
	for _, l := range []*slog.Logger{a.log, a.reclaim.log, a.sessions.log, a.digests.log} {
		if l != nil {
			return l
		}
	}
	return slog.New(slog.DiscardHandler)
}

// newStatusTemplate parses the embedded page; it panics on a broken
// template, which the tests catch long before a process starts.
func newStatusTemplate() *template.Template {
	return template.Must(template.New("status").Funcs(template.FuncMap{
		"bytes":   humanBytes,
		"time":    formatTime,
		"since":   since,
		"boolnum": boolNum,
		"count":   countOf,
		"deref":   derefTime,
	}).Parse(statusPageHTML))
}

// statusView is what the template renders. Each section is nil (or
// empty) when it could not be read, and Errors say why.
type statusView struct {
	Now time.Time
	// Off says why the gateway keeps no records at all (sessions off).
	Off    string
	Errors []string

	Reclaimer *adminapi.Reclaimer
	// ReclaimerOff says why this gateway has no reclaimer.
	ReclaimerOff string
	InProgress   *adminapi.Progress
	// Paused are the sweeps the breaker paused, until a person resumes.
	Paused []adminapi.Pause

	// Passes are the newest stored pass reports, newest first (PassesRead
	// tells none from unreadable); Last is the newest, whose lists the page
	// shows.
	Passes     []adminapi.Report
	PassesRead bool
	Last       *adminapi.Report
	// Orphans and Stuck are Last's lists, cut to statusPageListRows.
	Orphans []adminapi.Orphan
	Stuck   []adminapi.Stuck

	Sessions *statusSessions

	// Tombstones are the counts of the newest report with a digest
	// section, from pass TombstonesPass.
	Tombstones     []statusCount
	TombstonesPass int64

	Frontiers *adminapi.Frontiers

	// Shards are every etcd shard's reclaimer, with etcd.shards; the
	// sections above are the default shard's.
	Shards []statusShard
}

// statusShard is one shard's reclaimer on the status page: Off says why
// it has none; Reclaimer is nil when its status could not be read.
type statusShard struct {
	Name      string
	Off       string
	Reclaimer *adminapi.Reclaimer
}

// statusSessions counts the sessions by state at one etcd revision.
type statusSessions struct {
	States      []statusCount
	Total       int64
	Undecodable int
	Revision    int64
}

// statusCount is one state's count.
type statusCount struct {
	State string
	Count int64
}

// serve reads every section at once, so that one slow or failing read
// neither delays nor hides the others, then renders what it has. Any
// failed read answers 503: the page is then incomplete, and a probe or a
// script that fetches it must not take it for a healthy answer.
func (p *statusPage) serve(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusPageTimeout)
	defer cancel()
	v := statusView{Now: p.a.digests.clock()}
	errs := p.read(ctx, &v)
	v.summarize()

	status := http.StatusOK
	for i, err := range errs {
		if err != nil {
			v.Errors = append(v.Errors, statusReadWhat[i]+" failed: "+err.Error())
			status = http.StatusServiceUnavailable
		}
	}
	if len(v.Errors) > 0 {
		p.log.Warn("status page: reads failed", "errors", v.Errors)
	}
	// Render before answering, so that a template failure is a 500, not
	// half a page under a 200.
	var buf bytes.Buffer
	if err := p.tmpl.Execute(&buf, &v); err != nil {
		p.log.Error("status page: rendering failed", "err", err)
		writeText(w, http.StatusInternalServerError, "the status page failed to render: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// The page runs no script and loads nothing: say so, so that even a
	// name that slipped through escaping could not run, and no other site
	// can frame the page.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away; nobody to tell
}

// The status page's reads. Each has its own slot in read's answer,
// written by its goroutine only.
const (
	readStatus = iota
	readReports
	readSessions
	readFrontiers
	statusReads
)

// statusReadWhat says what each read does, for its error.
var statusReadWhat = [statusReads]string{"reading the reclaimer's status", "reading the pass reports", "counting the sessions", "reading the frontiers"}

// read fills v's sections, every read at once, and returns each read's
// error in its slot.
func (p *statusPage) read(ctx context.Context, v *statusView) (errs [statusReads]error) {
	var wg sync.WaitGroup
	a := p.a
	switch {
	case a.sessions.store == nil:
		v.Off = "upload sessions are off on this gateway (sessions.enabled is false): it records nothing in etcd, so there is no reclaimer, no pass and no frontier to show"
	default:
		if a.reclaim.r == nil {
			v.ReclaimerOff = "this gateway has no reclaimer"
			if a.reclaim.info.Off != "" {
				v.ReclaimerOff += ": " + a.reclaim.info.Off
			}
		} else {
			wg.Go(func() {
				st, err := a.reclaim.r.Status(ctx)
				if err != nil {
					errs[readStatus] = err
					return
				}
				rc := reclaimerStatus(a.reclaim.info, st)
				v.Reclaimer = &rc
				v.InProgress = convertPtr(st.InProgress, fromProgress)
				v.Paused = convertSlice(st.Paused, fromPause)
			})
		}
		wg.Go(func() {
			reps, err := reclaim.Reports(ctx, a.sessions.store, statusPagePasses)
			if err != nil {
				errs[readReports] = err
				return
			}
			v.Passes, v.PassesRead = convertSlice(reps, fromReport), true
		})
		wg.Go(func() {
			counts, undecodable, rev, err := a.sessions.store.SessionStates(ctx, adminapi.MaxListLimit)
			if err != nil {
				errs[readSessions] = err
				return
			}
			s := &statusSessions{Undecodable: undecodable, Revision: rev}
			for _, st := range etcdstore.AllStates {
				s.States = append(s.States, statusCount{State: string(st), Count: counts[st]})
				s.Total += counts[st]
			}
			v.Sessions = s
		})
		p.readShards(ctx, v, &wg)
		if a.digests.store != nil {
			wg.Go(func() {
				reported, current, err := a.digests.store.ListFrontiers(ctx)
				if err != nil {
					errs[readFrontiers] = err
					return
				}
				v.Frontiers = &adminapi.Frontiers{Revision: current, Planes: a.digests.planeList(reported, current)}
			})
		}
	}
	wg.Wait()
	return errs
}

// summarize derives the sections that come from the newest reports.
func (v *statusView) summarize() {
	if len(v.Passes) == 0 {
		return
	}
	v.Last = &v.Passes[0]
	v.Orphans = v.Last.Orphans[:min(len(v.Last.Orphans), statusPageListRows)]
	v.Stuck = v.Last.Stuck[:min(len(v.Last.Stuck), statusPageListRows)]
	for _, rep := range v.Passes {
		if rep.Digests == nil {
			continue
		}
		v.TombstonesPass = rep.Pass
		for _, st := range etcdstore.AllTombstoneStates {
			v.Tombstones = append(v.Tombstones, statusCount{State: string(st), Count: rep.Digests.Tombstones[string(st)]})
		}
		break
	}
}

// statusCountView is an adminapi.Count with the data-metric prefix of its
// numbers, for the template's "count" block.
type statusCountView struct {
	Prefix string
	adminapi.Count
}

func countOf(prefix string, c adminapi.Count) statusCountView {
	return statusCountView{Prefix: prefix, Count: c}
}

// boolNum is a flag as data-value shows it: 1 or 0, like the metrics.
func boolNum(b bool) int {
	if b {
		return 1
	}
	return 0
}

// derefTime is *t, or the zero time (shown as "never") for nil.
func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// humanBytes shows a size in IEC units, one decimal place; data-value
// carries the exact number.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for (f >= unit || f <= -unit) && i < 5 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[i])
}

// formatTime shows a time in UTC to the second, as operators compare it
// with logs; the zero time is "never".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// since says how long ago t was, relative to now, to the second.
func since(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

// readShards reads every shard's reclaimer status into v.Shards, with
// etcd.shards, each in a goroutine of wg; a status that cannot be read
// leaves its Reclaimer nil, which the page says.
func (p *statusPage) readShards(ctx context.Context, v *statusView, wg *sync.WaitGroup) {
	if !p.a.sharded {
		return
	}
	v.Shards = make([]statusShard, len(p.a.shards))
	for i, sh := range p.a.shards {
		v.Shards[i].Name = sh.name
		if sh.reclaim.r == nil {
			v.Shards[i].Off = "no reclaimer"
			if sh.reclaim.info.Off != "" {
				v.Shards[i].Off += ": " + sh.reclaim.info.Off
			}
			continue
		}
		wg.Go(func() {
			st, err := sh.reclaim.r.Status(ctx)
			if err != nil {
				p.log.Warn("status page: reading a shard's reclaimer failed", "shard", sh.name, "err", err)
				return
			}
			rc := reclaimerStatus(sh.reclaim.info, st)
			v.Shards[i].Reclaimer = &rc
		})
	}
}
