package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The reclaim admin API's documents (docs/admin-api.md). Pass reports are
// reclaim.Report as the reclaimer stores them.

// apiReclaimStatus answers GET /admin/v1/reclaim/status. Its top-level
// fields are those of the newest stored pass report (pass 0 when there is
// none), so that `reclaim status --json` prints a report like `plan --json`
// does; what is not about that pass is under reclaimer, in_progress and
// last_local.
type apiReclaimStatus struct {
	reclaim.Report
	Reclaimer apiReclaimer `json:"reclaimer"`
	// InProgress is the real pass whose cursor etcd holds, if any.
	InProgress *reclaim.Progress `json:"in_progress"`
	// LastLocal is the last pass or plan this process made.
	LastLocal *reclaim.Report `json:"last_local"`
}

// apiReclaimer is this process's reclaimer and whoever leads.
type apiReclaimer struct {
	// ID is what this process campaigns with.
	ID string `json:"id"`
	// Enabled says this process campaigns (reclaim.enabled).
	Enabled bool `json:"enabled"`
	// DryRun is the reclaim.dry_run setting: every pass is a plan.
	DryRun bool `json:"dry_run"`
	// Leading says this process leads, in Term.
	Leading bool  `json:"leading"`
	Term    int64 `json:"term"`
	// Leader is whoever leads, as etcd says; null when nobody does.
	Leader *reclaim.LeaderInfo `json:"leader"`
}

// apiReports answers GET /admin/v1/reclaim/reports.
type apiReports struct {
	Reports []reclaim.Report `json:"reports"`
}

// apiOrphans answers GET /admin/v1/reclaim/orphans.
type apiOrphans struct {
	Orphans []reclaim.Orphan `json:"orphans"`
	// Total counts every orphan found; Truncated says the list is shorter.
	Total     int64 `json:"total"`
	Truncated bool  `json:"truncated"`
	// Fresh says the backend was listed for this answer; otherwise the
	// orphans are those the newest pass report held (Pass, 0 when none).
	Fresh bool      `json:"fresh"`
	Pass  int64     `json:"pass"`
	AsOf  time.Time `json:"as_of"`
}

// apiOrphanRecord is what an operator's decision about an orphan recorded.
type apiOrphanRecord struct {
	Action    string    `json:"action"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	UploadID  string    `json:"upload_id"`
	Principal string    `json:"principal"`
	Term      int64     `json:"term"`
	At        time.Time `json:"at"`
	Parts     int       `json:"parts"`
	Bytes     int64     `json:"bytes"`
	Outcome   string    `json:"outcome"`
}

// apiAdopted answers POST /admin/v1/reclaim/orphans/adopt.
type apiAdopted struct {
	Adopted apiOrphanRecord `json:"adopted"`
}

// apiOrphanResult is what a delete did, or would do, with one orphan.
type apiOrphanResult struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	Parts    int    `json:"parts"`
	Bytes    int64  `json:"bytes"`
	// Outcome is the state the upload ended in (aborted, cleanup_pending),
	// or why it was not deleted.
	Outcome   string `json:"outcome"`
	Uncertain string `json:"uncertain"`
	Deleted   bool   `json:"deleted"`
}

// apiOrphanDeletion answers POST /admin/v1/reclaim/orphans/delete; with an
// error (not confirmed, a failure part way) it carries the error too.
type apiOrphanDeletion struct {
	Error   *apiError         `json:"error,omitempty"`
	Results []apiOrphanResult `json:"results"`
	Deleted int               `json:"deleted"`
}

// apiNotLeader is the 409 answer of an action that only the leader may
// take.
type apiNotLeader struct {
	Error  apiError            `json:"error"`
	Leader *reclaim.LeaderInfo `json:"leader"`
}

// apiStreamLine is one line of a streamed run or plan (?progress=1):
// progress lines, then one line with the report or an error.
type apiStreamLine struct {
	Progress *reclaim.Progress   `json:"progress,omitempty"`
	Report   *reclaim.Report     `json:"report,omitempty"`
	Error    *apiError           `json:"error,omitempty"`
	Leader   *reclaim.LeaderInfo `json:"leader,omitempty"`
}

// Request bodies.
type (
	apiAdoptRequest struct {
		Bucket    string `json:"bucket"`
		Key       string `json:"key"`
		UploadID  string `json:"upload_id"`
		Principal string `json:"principal"`
	}
	apiDeleteRequest struct {
		Refs    []reclaim.OrphanRef `json:"refs"`
		Confirm bool                `json:"confirm"`
		// Principal is who deletes, recorded with the decision.
		Principal string `json:"principal"`
	}
)

// Error codes of the reclaim API.
const (
	codeReclaimDisabled      = "reclaim_disabled"
	codeNotLeader            = "not_leader"
	codeNotConfirmed         = "not_confirmed"
	codeNotOrphan            = "not_orphan"
	codeReclaimFailed        = "reclaim_failed"
	codeUnsupportedMediaType = "unsupported_media_type"
)

// Limits of the reclaim API.
const (
	defaultReportsLimit = 10
	// maxReportsLimit is the reclaimer's bounded report history.
	maxReportsLimit     = 100
	defaultOrphansLimit = 1000
	maxOrphansLimit     = 10000
	// maxOrphanRefs bounds one delete request.
	maxOrphanRefs = 1000
	// maxRequestBody bounds a request document: 1000 refs with long keys.
	maxRequestBody = 4 << 20
	// progressEvery spaces the progress lines of a streamed pass.
	progressEvery = 500 * time.Millisecond
)

// reclaimAPI serves /admin/v1/reclaim from the reclaimer.
type reclaimAPI struct {
	// r is nil when there is no reclaimer (sessions are off).
	r *reclaim.Reclaimer
	// store reads who leads, for the answers of a process that does not.
	store    *etcdstore.Store
	info     reclaimerInfo
	progress *progressHub
	log      *slog.Logger
}

func (a *reclaimAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	for _, rt := range []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{http.MethodPost, "/admin/v1/reclaim/run", a.run},
		{http.MethodGet, "/admin/v1/reclaim/plan", a.plan},
		{http.MethodGet, "/admin/v1/reclaim/status", a.status},
		{http.MethodGet, "/admin/v1/reclaim/reports", a.reports},
		{http.MethodGet, "/admin/v1/reclaim/orphans", a.orphans},
		{http.MethodPost, "/admin/v1/reclaim/orphans/adopt", a.adopt},
		{http.MethodPost, "/admin/v1/reclaim/orphans/delete", a.deleteOrphans},
	} {
		mux.Handle(rt.method+" "+rt.path, protect(rt.h))
		// Any other method answers in JSON too.
		mux.Handle(rt.path, protect(onlyMethod(rt.method)))
	}
}

// onlyMethod answers 405 for a path that takes only method.
func onlyMethod(method string) http.HandlerFunc {
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeAPIError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use %s", r.Method, method))
	}
}

func (a *reclaimAPI) enabled(w http.ResponseWriter) bool {
	if a.r == nil {
		msg := "this gateway has no reclaimer"
		if a.info.Off != "" {
			msg += ": " + a.info.Off
		}
		writeAPIError(w, http.StatusServiceUnavailable, codeReclaimDisabled, msg)
		return false
	}
	return true
}

// readJSON decodes a request document into v. It takes only
// application/json: a browser cannot send that to another origin without
// asking first (CORS), which this API never allows, so a web page cannot
// make an operator's browser trigger a pass or a delete. An empty body
// leaves v as it is.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeAPIError(w, http.StatusUnsupportedMediaType, codeUnsupportedMediaType,
			"send the request with Content-Type: application/json (a JSON document, {} when there is nothing to say)")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeAPIError(w, http.StatusBadRequest, codeBadRequest, "request document: "+err.Error())
		return false
	}
	if dec.More() {
		writeAPIError(w, http.StatusBadRequest, codeBadRequest, "request document: more than one JSON value")
		return false
	}
	return true
}

// noWriteDeadline lifts the admin listener's write timeout for a request
// that waits for a whole pass, which may take longer; the request's context
// still ends it when the client goes away.
func noWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

// leader reads who leads, for an answer that names them; nil when nobody
// does or etcd cannot say.
func (a *reclaimAPI) leader(ctx context.Context) *reclaim.LeaderInfo {
	if a.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, adminReadTimeout)
	defer cancel()
	info, ok, err := reclaim.CurrentLeader(ctx, a.store.Client(), a.store.Keys().Election())
	if err != nil || !ok {
		return nil
	}
	return &info
}

// notLeaderError is the error of an action refused off the leader.
func (a *reclaimAPI) notLeaderError(leader *reclaim.LeaderInfo, what string) apiError {
	msg := "this gateway (" + a.info.ID + ") does not lead the reclaimer, so it cannot " + what
	switch {
	case leader != nil:
		msg += fmt.Sprintf("; the leader is %s (term %d): ask its admin API", leader.ID, leader.Term)
	case !a.info.Enabled:
		msg += " (reclaim.enabled is off here) and no gateway leads now"
	default:
		msg += "; no gateway leads now (an election is under way, or etcd is unreachable): try again shortly"
	}
	return apiError{Code: codeNotLeader, Message: msg}
}

func (a *reclaimAPI) writeNotLeader(w http.ResponseWriter, r *http.Request, what string) {
	leader := a.leader(r.Context())
	writeJSON(w, http.StatusConflict, apiNotLeader{Error: a.notLeaderError(leader, what), Leader: leader})
}

// failed answers an error the reclaimer returned that no other answer
// covers: etcd or the backend failed, worth retrying.
func (a *reclaimAPI) failed(w http.ResponseWriter, what string, err error) {
	a.log.Warn("admin API: reclaim request failed", "what", what, "err", err)
	writeAPIError(w, http.StatusServiceUnavailable, codeReclaimFailed, what+" failed: "+err.Error())
}

func (a *reclaimAPI) run(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) || !readJSON(w, r, &struct{}{}) {
		return
	}
	if _, ok := a.r.Leader(); !ok {
		a.writeNotLeader(w, r, "run a pass")
		return
	}
	noWriteDeadline(w)
	// The pass runs under the lead, not under this request: a client that
	// goes away stops waiting, not the pass.
	if wantsProgress(r) {
		dry := a.info.DryRun
		a.stream(w, r, "run a pass", func(p reclaim.Progress) bool { return p.DryRun == dry }, a.r.Trigger)
		return
	}
	rep, err := a.r.Trigger(r.Context())
	a.answerPass(w, r, rep, err, "run a pass")
}

func (a *reclaimAPI) plan(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	for name := range r.URL.Query() {
		if name != "progress" {
			writeAPIError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("unknown parameter %q; the parameter is progress", name))
			return
		}
	}
	noWriteDeadline(w)
	if wantsProgress(r) {
		// Plans may run side by side; this one is the first to report
		// after the request came in.
		start := time.Now().UTC()
		var mine time.Time
		a.stream(w, r, "plan", func(p reclaim.Progress) bool {
			if !p.DryRun || p.Started.Before(start) {
				return false
			}
			if mine.IsZero() {
				mine = p.Started
			}
			return p.Started.Equal(mine)
		}, a.r.Plan)
		return
	}
	rep, err := a.r.Plan(r.Context())
	a.answerPass(w, r, rep, err, "plan")
}

func wantsProgress(r *http.Request) bool {
	v, err := strconv.ParseBool(r.URL.Query().Get("progress"))
	return err == nil && v
}

// passAnswer turns what a pass or plan returned into a status and a
// document: the report whenever there is one (a stopped pass's report says
// why in its stopped field), else an error.
func (a *reclaimAPI) passAnswer(ctx context.Context, rep reclaim.Report, err error, what string) (int, *reclaim.Report, *apiError, *reclaim.LeaderInfo) {
	switch {
	case errors.Is(err, reclaim.ErrNotLeader):
		leader := a.leader(ctx)
		e := a.notLeaderError(leader, what)
		return http.StatusConflict, nil, &e, leader
	case err != nil && rep.Started.IsZero():
		a.log.Warn("admin API: reclaim pass failed", "what", what, "err", err)
		return http.StatusServiceUnavailable, nil, &apiError{Code: codeReclaimFailed, Message: what + " failed: " + err.Error()}, nil
	}
	if err != nil && rep.Stopped == "" && rep.Refused == "" {
		rep.Stopped = err.Error()
	}
	if rep.Stuck == nil {
		rep.Stuck = []reclaim.Stuck{}
	}
	if rep.Orphans == nil {
		rep.Orphans = []reclaim.Orphan{}
	}
	if rep.Missing == nil {
		rep.Missing = []reclaim.Missing{}
	}
	return http.StatusOK, &rep, nil, nil
}

func (a *reclaimAPI) answerPass(w http.ResponseWriter, r *http.Request, rep reclaim.Report, err error, what string) {
	if r.Context().Err() != nil {
		return // the client went away; nobody to answer
	}
	status, report, e, leader := a.passAnswer(r.Context(), rep, err, what)
	switch {
	case report != nil:
		writeJSON(w, status, report)
	case status == http.StatusConflict:
		writeJSON(w, status, apiNotLeader{Error: *e, Leader: leader})
	default:
		writeJSON(w, status, apiErrorBody{Error: *e})
	}
}

// stream runs do and answers with newline-delimited JSON: a progress line
// at most every progressEvery while it runs (those that match), then one
// line with the report or the error. The status is 200 whatever happens,
// as it is sent before the pass ends.
func (a *reclaimAPI) stream(w http.ResponseWriter, r *http.Request, what string, match func(reclaim.Progress) bool,
	do func(context.Context) (reclaim.Report, error)) {
	updates, unsubscribe := a.progress.subscribe()
	defer unsubscribe()
	type result struct {
		rep reclaim.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := do(r.Context())
		done <- result{rep, err}
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	enc := json.NewEncoder(w)
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	var latest *reclaim.Progress
	for {
		select {
		case p := <-updates:
			if match(p) {
				latest = &p
			}
		case <-tick.C:
			if latest != nil {
				_ = enc.Encode(apiStreamLine{Progress: latest})
				_ = rc.Flush()
				latest = nil
			}
		case res := <-done:
			if r.Context().Err() != nil {
				return
			}
			_, report, e, leader := a.passAnswer(r.Context(), res.rep, res.err, what)
			_ = enc.Encode(apiStreamLine{Report: report, Error: e, Leader: leader})
			return
		}
	}
}

func (a *reclaimAPI) status(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	st, err := a.r.Status(ctx)
	if err != nil {
		a.failed(w, "reading the reclaimer's status", err)
		return
	}
	out := apiReclaimStatus{
		Reclaimer: apiReclaimer{
			ID: a.info.ID, Enabled: a.info.Enabled, DryRun: a.info.DryRun,
			Leading: st.Leading, Term: st.Term, Leader: st.Leader,
		},
		InProgress: st.InProgress,
		LastLocal:  st.LastLocal,
	}
	if st.Last != nil {
		out.Report = *st.Last
	}
	if out.Stuck == nil {
		out.Stuck = []reclaim.Stuck{}
	}
	if out.Orphans == nil {
		out.Orphans = []reclaim.Orphan{}
	}
	if out.Missing == nil {
		out.Missing = []reclaim.Missing{}
	}
	writeJSON(w, http.StatusOK, out)
}

// intParam reads a whole number parameter from 1 to max, def when absent.
func intParam(v url.Values, name string, def, max int) (int, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("%s %q: want a whole number from 1 to %d", name, s, max)
	}
	return n, nil
}

// checkParams refuses parameters other than names.
func checkParams(v url.Values, names ...string) error {
	for name := range v {
		known := false
		for _, n := range names {
			known = known || n == name
		}
		if !known {
			return fmt.Errorf("unknown parameter %q; the parameters are %v", name, names)
		}
	}
	return nil
}

func (a *reclaimAPI) reports(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit", defaultReportsLimit, maxReportsLimit)
	if err == nil {
		err = checkParams(q, "limit")
	}
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, codeBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	reps, err := reclaim.Reports(ctx, a.store, int64(limit))
	if err != nil {
		a.failed(w, "reading the pass reports", err)
		return
	}
	if reps == nil {
		reps = []reclaim.Report{}
	}
	writeJSON(w, http.StatusOK, apiReports{Reports: reps})
}

func (a *reclaimAPI) orphans(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit", defaultOrphansLimit, maxOrphansLimit)
	if err == nil {
		err = checkParams(q, "limit", "fresh")
	}
	fresh := false
	if s := q.Get("fresh"); err == nil && s != "" {
		if fresh, err = strconv.ParseBool(s); err != nil {
			err = fmt.Errorf("fresh %q: want 1 or 0", s)
		}
	}
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, codeBadRequest, err.Error())
		return
	}
	out := apiOrphans{Orphans: []reclaim.Orphan{}, Fresh: fresh}
	if !fresh {
		ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
		defer cancel()
		rep, ok, err := reclaim.LastReport(ctx, a.store)
		if err != nil {
			a.failed(w, "reading the newest pass report", err)
			return
		}
		if ok {
			out.Pass, out.AsOf, out.Total = rep.Pass, rep.Finished, rep.Totals.Orphans
			out.Orphans = append(out.Orphans, rep.Orphans[:min(limit, len(rep.Orphans))]...)
			out.Truncated = int64(len(out.Orphans)) < out.Total
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	// A scan lists every bucket's uploads: it may take longer than the
	// listener's write timeout, and stops when the client goes away.
	noWriteDeadline(w)
	out.AsOf = time.Now().UTC()
	err = a.r.ScanOrphans(r.Context(), func(o reclaim.Orphan) error {
		out.Total++
		if len(out.Orphans) < limit {
			out.Orphans = append(out.Orphans, o)
		}
		return nil
	})
	if err != nil {
		if r.Context().Err() == nil {
			a.failed(w, "listing the backend's uploads", err)
		}
		return
	}
	out.Truncated = int64(len(out.Orphans)) < out.Total
	writeJSON(w, http.StatusOK, out)
}

func (a *reclaimAPI) adopt(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	var req apiAdoptRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Bucket == "" || req.Key == "" || req.UploadID == "" || req.Principal == "" {
		writeAPIError(w, http.StatusBadRequest, codeBadRequest,
			"bucket, key, upload_id and principal are required (the principal owns the upload from now on)")
		return
	}
	rec, err := a.r.Adopt(r.Context(), req.Bucket, req.Key, req.UploadID, req.Principal)
	switch {
	case errors.Is(err, reclaim.ErrNotLeader), errors.Is(err, reclaim.ErrFenced):
		a.writeNotLeader(w, r, "adopt an orphan")
	case errors.Is(err, reclaim.ErrNotOrphan):
		writeAPIError(w, http.StatusConflict, codeNotOrphan,
			fmt.Sprintf("upload %q of %s/%s has a session, so it is not an orphan: it follows the normal rules", req.UploadID, req.Bucket, req.Key))
	case errors.Is(err, reclaim.ErrNoSuchUpload):
		writeAPIError(w, http.StatusNotFound, codeNotFound,
			fmt.Sprintf("the backend has no upload %q of key %q in bucket %q", req.UploadID, req.Key, req.Bucket))
	case err != nil:
		a.failed(w, "adopting the orphan", err)
	default:
		writeJSON(w, http.StatusOK, apiAdopted{Adopted: orphanRecord(rec)})
	}
}

func orphanRecord(r etcdstore.OrphanRecord) apiOrphanRecord {
	return apiOrphanRecord{Action: string(r.Action), Bucket: r.Bucket, Key: r.Key, UploadID: r.UploadID, Principal: r.Principal,
		Term: r.Term, At: r.At, Parts: r.Parts, Bytes: r.Bytes, Outcome: r.Outcome}
}

func (a *reclaimAPI) deleteOrphans(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	var req apiDeleteRequest
	if !readJSON(w, r, &req) {
		return
	}
	if len(req.Refs) == 0 || len(req.Refs) > maxOrphanRefs {
		writeAPIError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("refs: name 1 to %d uploads as {bucket, key, upload_id}", maxOrphanRefs))
		return
	}
	for i, ref := range req.Refs {
		if ref.Bucket == "" || ref.Key == "" || ref.UploadID == "" {
			writeAPIError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("refs[%d]: bucket, key and upload_id are required", i))
			return
		}
	}
	noWriteDeadline(w)
	results, err := a.r.DeleteOrphans(r.Context(), req.Principal, req.Refs, req.Confirm)
	out := apiOrphanDeletion{Results: make([]apiOrphanResult, len(results))}
	for i, res := range results {
		out.Results[i] = apiOrphanResult{Bucket: res.Bucket, Key: res.Key, UploadID: res.UploadID, Parts: res.Parts, Bytes: res.Bytes,
			Outcome: res.Outcome, Uncertain: res.Uncertain, Deleted: res.Deleted}
		if res.Deleted {
			out.Deleted++
		}
	}
	switch {
	case errors.Is(err, reclaim.ErrNotConfirmed):
		out.Error = &apiError{Code: codeNotConfirmed,
			Message: "nothing was deleted: this is what a delete would do; send confirm: true to delete"}
		writeJSON(w, http.StatusConflict, out)
	case errors.Is(err, reclaim.ErrNotLeader), errors.Is(err, reclaim.ErrFenced):
		if len(results) == 0 {
			a.writeNotLeader(w, r, "delete orphans")
			return
		}
		out.Error = &apiError{Code: codeNotLeader, Message: "the reclaimer's term ended part way; the results say what was done: " + err.Error()}
		writeJSON(w, http.StatusConflict, out)
	case err != nil:
		a.log.Warn("admin API: deleting orphans failed", "err", err)
		out.Error = &apiError{Code: codeReclaimFailed, Message: "deleting orphans failed part way; the results say what was done: " + err.Error()}
		writeJSON(w, http.StatusServiceUnavailable, out)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// progressHub passes the reclaimer's progress reports to the requests that
// stream them. A slow reader misses intermediate reports, never the pass:
// each subscriber holds only the newest one.
type progressHub struct {
	mu   sync.Mutex
	subs map[chan reclaim.Progress]struct{}
}

func newProgressHub() *progressHub {
	return &progressHub{subs: make(map[chan reclaim.Progress]struct{})}
}

// publish is the reclaimer's Progress callback; it never blocks the pass.
func (h *progressHub) publish(p reclaim.Progress) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case <-ch: // drop the older report
		default:
		}
		ch <- p // room for one, and only publish sends
	}
}

func (h *progressHub) subscribe() (<-chan reclaim.Progress, func()) {
	ch := make(chan reclaim.Progress, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}
