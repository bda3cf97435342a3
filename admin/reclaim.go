package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// progressEvery spaces the progress lines of a streamed pass.
const progressEvery = 500 * time.Millisecond

// reclaimAPI serves /admin/v1/reclaim from the reclaimer.
type reclaimAPI struct {
	// shard names the reclaimer's shard in the answers; empty without
	// shards.
	shard string
	// r is nil when there is no reclaimer (sessions are off).
	r *reclaim.Reclaimer
	// store reads who leads, for the answers of a process that does not.
	store    *etcdstore.Store
	info     ReclaimerInfo
	progress *ProgressHub
	log      *slog.Logger
}

func (a *reclaimAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	handleRoutes(mux, protect, []route{
		{http.MethodPost, "/admin/v1/reclaim/run", a.run},
		{http.MethodGet, "/admin/v1/reclaim/plan", a.plan},
		{http.MethodGet, "/admin/v1/reclaim/status", a.status},
		{http.MethodGet, "/admin/v1/reclaim/reports", a.reports},
		{http.MethodGet, "/admin/v1/reclaim/orphans", a.orphans},
		{http.MethodPost, "/admin/v1/reclaim/orphans/adopt", a.adopt},
		{http.MethodPost, "/admin/v1/reclaim/orphans/delete", a.deleteOrphans},
		{http.MethodPost, "/admin/v1/reclaim/resume", a.resume},
	})
}

func (a *reclaimAPI) enabled(w http.ResponseWriter) bool {
	if a.r == nil {
		msg := "this gateway has no reclaimer"
		if a.info.Off != "" {
			msg += ": " + a.info.Off
		}
		writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeReclaimDisabled, msg)
		return false
	}
	return true
}

// leader reads who leads, for an answer that names them; nil when nobody
// does or etcd cannot say.
func (a *reclaimAPI) leader(ctx context.Context) *adminapi.Leader {
	if a.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, adminReadTimeout)
	defer cancel()
	info, ok, err := reclaim.CurrentLeader(ctx, a.store.Client(), a.store.Keys().Election())
	if err != nil || !ok {
		return nil
	}
	l := fromLeader(info)
	return &l
}

// notLeaderError is the error of an action refused off the leader.
func (a *reclaimAPI) notLeaderError(leader *adminapi.Leader, what string) adminapi.ErrorDetail {
	msg := "this gateway (" + a.info.ID + ") does not lead the reclaimer, so it cannot " + what
	switch {
	case leader != nil:
		msg += fmt.Sprintf("; the leader is %s (term %d): ask its admin API", leader.ID, leader.Term)
	case !a.info.Enabled:
		msg += " (reclaim.enabled is off here) and no gateway leads now"
	default:
		msg += "; no gateway leads now (an election is under way, or etcd is unreachable): try again shortly"
	}
	return adminapi.ErrorDetail{Code: adminapi.CodeNotLeader, Message: msg}
}

func (a *reclaimAPI) writeNotLeader(w http.ResponseWriter, r *http.Request, what string) {
	leader := a.leader(r.Context())
	writeJSON(w, http.StatusConflict, adminapi.NotLeader{Error: a.notLeaderError(leader, what), Leader: leader})
}

// failed answers an error the reclaimer returned that no other answer
// covers: etcd or the backend failed, worth retrying.
func (a *reclaimAPI) failed(w http.ResponseWriter, what string, err error) {
	a.log.Warn("admin API: reclaim request failed", "what", what, "err", err)
	writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeReclaimFailed, what+" failed: "+err.Error())
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
			writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, fmt.Sprintf("unknown parameter %q; the parameter is progress", name))
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
func (a *reclaimAPI) passAnswer(ctx context.Context, rep reclaim.Report, err error, what string) (int, *adminapi.Report, *adminapi.ErrorDetail, *adminapi.Leader) {
	switch {
	case errors.Is(err, reclaim.ErrNotLeader):
		leader := a.leader(ctx)
		e := a.notLeaderError(leader, what)
		return http.StatusConflict, nil, &e, leader
	case err != nil && rep.Started.IsZero():
		a.log.Warn("admin API: reclaim pass failed", "what", what, "err", err)
		return http.StatusServiceUnavailable, nil, &adminapi.ErrorDetail{Code: adminapi.CodeReclaimFailed, Message: what + " failed: " + err.Error()}, nil
	}
	if err != nil && rep.Stopped == "" && rep.Refused == "" {
		rep.Stopped = err.Error()
	}
	out := fromReport(rep)
	fillLists(&out)
	return http.StatusOK, &out, nil, nil
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
		writeJSON(w, status, adminapi.NotLeader{Error: *e, Leader: leader})
	default:
		writeJSON(w, status, adminapi.ErrorBody{Error: *e})
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
	var latest *adminapi.Progress
	for {
		select {
		case p := <-updates:
			if match(p) {
				wire := fromProgress(p)
				latest = &wire
			}
		case <-tick.C:
			if latest != nil {
				_ = enc.Encode(adminapi.StreamLine{Progress: latest})
				_ = rc.Flush()
				latest = nil
			}
		case res := <-done:
			if r.Context().Err() != nil {
				return
			}
			_, report, e, leader := a.passAnswer(r.Context(), res.rep, res.err, what)
			_ = enc.Encode(adminapi.StreamLine{Report: report, Error: e, Leader: leader})
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
	out := adminapi.ReclaimStatus{
		Shard:      a.shard,
		Reclaimer:  reclaimerStatus(a.info, st),
		InProgress: convertPtr(st.InProgress, fromProgress),
		LastLocal:  convertPtr(st.LastLocal, fromReport),
		Paused:     convertSlice(st.Paused, fromPause),
		Restored:   convertPtr(st.Restored, fromRestored),
	}
	if out.Paused == nil {
		out.Paused = []adminapi.Pause{}
	}
	if st.Last != nil {
		out.Report = fromReport(*st.Last)
	}
	fillLists(&out.Report)
	writeJSON(w, http.StatusOK, out)
}

func (a *reclaimAPI) reports(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit", adminapi.DefaultReportsLimit, adminapi.MaxReportsLimit)
	if err == nil {
		err = checkParams(q, "limit")
	}
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	reps, err := reclaim.Reports(ctx, a.store, int64(limit))
	if err != nil {
		a.failed(w, "reading the pass reports", err)
		return
	}
	out := adminapi.Reports{Reports: convertSlice(reps, fromReport)}
	if out.Reports == nil {
		out.Reports = []adminapi.Report{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *reclaimAPI) orphans(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit", adminapi.DefaultOrphansLimit, adminapi.MaxOrphansLimit)
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
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
		return
	}
	out := adminapi.Orphans{Orphans: []adminapi.Orphan{}, Fresh: fresh}
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
			out.Orphans = append(out.Orphans, convertSlice(rep.Orphans[:min(limit, len(rep.Orphans))], fromOrphan)...)
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
			out.Orphans = append(out.Orphans, fromOrphan(o))
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
	var req adminapi.AdoptRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Bucket == "" || req.Key == "" || req.UploadID == "" || req.Principal == "" {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest,
			"bucket, key, upload_id and principal are required (the principal owns the upload from now on)")
		return
	}
	rec, err := a.r.Adopt(r.Context(), req.Bucket, req.Key, req.UploadID, req.Principal)
	switch {
	case errors.Is(err, reclaim.ErrNotLeader), errors.Is(err, reclaim.ErrFenced):
		a.writeNotLeader(w, r, "adopt an orphan")
	case errors.Is(err, reclaim.ErrNotOrphan):
		writeAPIError(w, http.StatusConflict, adminapi.CodeNotOrphan,
			fmt.Sprintf("upload %q of %s/%s has a session, so it is not an orphan: it follows the normal rules", req.UploadID, req.Bucket, req.Key))
	case errors.Is(err, reclaim.ErrNoSuchUpload):
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound,
			fmt.Sprintf("the backend has no upload %q of key %q in bucket %q", req.UploadID, req.Key, req.Bucket))
	case errors.Is(err, reclaim.ErrOtherShard):
		writeAPIError(w, http.StatusConflict, adminapi.CodeConflict,
			fmt.Sprintf("bucket %q is on another etcd shard than this reclaimer's (etcd.shards): its own shard's reclaimer acts on its uploads", req.Bucket))
	case err != nil:
		a.failed(w, "adopting the orphan", err)
	default:
		writeJSON(w, http.StatusOK, adminapi.Adopted{Adopted: fromOrphanRecord(rec)})
	}
}

func (a *reclaimAPI) deleteOrphans(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	var req adminapi.DeleteRequest
	if !readJSON(w, r, &req) {
		return
	}
	if len(req.Refs) == 0 || len(req.Refs) > adminapi.MaxOrphanRefs {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, fmt.Sprintf("refs: name 1 to %d uploads as {bucket, key, upload_id}", adminapi.MaxOrphanRefs))
		return
	}
	for i, ref := range req.Refs {
		if ref.Bucket == "" || ref.Key == "" || ref.UploadID == "" {
			writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, fmt.Sprintf("refs[%d]: bucket, key and upload_id are required", i))
			return
		}
	}
	noWriteDeadline(w)
	results, err := a.r.DeleteOrphans(r.Context(), req.Principal, convertSlice(req.Refs, toOrphanRef), req.Confirm)
	out := adminapi.OrphanDeletion{Results: make([]adminapi.OrphanResult, len(results))}
	for i, res := range results {
		out.Results[i] = fromOrphanResult(res)
		if res.Deleted {
			out.Deleted++
		}
	}
	switch {
	case errors.Is(err, reclaim.ErrNotConfirmed):
		out.Error = &adminapi.ErrorDetail{Code: adminapi.CodeNotConfirmed,
			Message: "nothing was deleted: this is what a delete would do; send confirm: true to delete"}
		writeJSON(w, http.StatusConflict, out)
	case errors.Is(err, reclaim.ErrNotLeader), errors.Is(err, reclaim.ErrFenced):
		if len(results) == 0 {
			a.writeNotLeader(w, r, "delete orphans")
			return
		}
		out.Error = &adminapi.ErrorDetail{Code: adminapi.CodeNotLeader, Message: "the reclaimer's term ended part way; the results say what was done: " + err.Error()}
		writeJSON(w, http.StatusConflict, out)
	case err != nil:
		a.log.Warn("admin API: deleting orphans failed", "err", err)
		out.Error = &adminapi.ErrorDetail{Code: adminapi.CodeReclaimFailed, Message: "deleting orphans failed part way; the results say what was done: " + err.Error()}
		writeJSON(w, http.StatusServiceUnavailable, out)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// resume lifts the pauses the breaker put on the sweeps named (both when
// none is). Any gateway with a reclaimer may answer: the pause is in etcd.
// A sweep that is not paused is answered as such, with nothing changed.
func (a *reclaimAPI) resume(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	var req adminapi.ResumeRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Principal == "" {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, "principal is required: who resumes is recorded in the audit line")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	res, err := a.r.Resume(ctx, req.Principal, req.Sweeps...)
	switch {
	case errors.Is(err, reclaim.ErrUnknownSweep):
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, "sweeps: "+err.Error())
	case err != nil:
		a.failed(w, "resuming", err)
	default:
		writeJSON(w, http.StatusOK, adminapi.Resumed{Results: convertSlice(res, fromResumed)})
	}
}
