package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// adminReadTimeout bounds the etcd reads of one admin request, below the
// admin listener's write timeout.
const adminReadTimeout = 20 * time.Second

// sessionsAPI serves /admin/v1/sessions from the session records in etcd.
type sessionsAPI struct {
	// shard names the store's shard in the answers; empty without shards.
	shard string
	// store is nil when sessions are off.
	store *etcdstore.Store
	log   *slog.Logger
}

// routes registers the API on mux, every route behind protect.
func (a *sessionsAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	mux.Handle("GET /admin/v1/sessions", protect(http.HandlerFunc(a.list)))
	mux.Handle("GET /admin/v1/sessions/{bucket}/{uploadID}", protect(http.HandlerFunc(a.show)))
	// The same paths with another method, and any other path under the
	// API, answer in JSON too, so a client always gets a document.
	mux.Handle("/admin/v1/sessions", protect(http.HandlerFunc(methodNotAllowed)))
	mux.Handle("/admin/v1/sessions/{bucket}/{uploadID}", protect(http.HandlerFunc(methodNotAllowed)))
	mux.Handle("/admin/v1/", protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, fmt.Sprintf("no admin API endpoint %s", r.URL.Path))
	})))
}

func (a *sessionsAPI) list(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()

	// Read one more than asked, to know whether there are more.
	var found []etcdstore.Versioned[etcdstore.Session]
	page := int64(q.limit + 1)
	if len(q.states) > 0 {
		page = 500 // most sessions read may not match
	}
	rev, undecodable, err := a.store.ScanSessionsAfter(ctx, etcdstore.SessionScan{
		Bucket:      q.bucket,
		AfterBucket: q.afterBucket, AfterUploadID: q.afterUploadID,
		PageSize: page,
	}, func(v etcdstore.Versioned[etcdstore.Session]) bool {
		if len(q.states) == 0 || slices.Contains(q.states, v.Value.State) {
			found = append(found, v)
		}
		return len(found) <= q.limit
	})
	if err != nil {
		a.storeError(w, err)
		return
	}
	out := adminapi.SessionList{Sessions: []adminapi.Session{}, Revision: rev, Warnings: []string{}}
	if len(found) > q.limit {
		found = found[:q.limit]
		out.Truncated = true
		last := found[len(found)-1].Value
		out.Next = encodeCursor(last.Bucket, last.UploadID)
	}
	ids := make([]string, len(found))
	for i, v := range found {
		ids[i] = v.Value.UploadID
	}
	activity, err := a.store.GetActivities(ctx, ids)
	if err != nil {
		a.storeError(w, err)
		return
	}
	for _, v := range found {
		var act *etcdstore.Activity
		if rec, ok := activity[v.Value.UploadID]; ok {
			act = &rec
		}
		s := summarize(&v.Value, act, v.ModRev)
		s.Shard = a.shard
		out.Sessions = append(out.Sessions, s)
	}
	if len(undecodable) > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d session record(s) do not decode and are not shown: %s",
			len(undecodable), strings.Join(undecodable[:min(len(undecodable), 10)], ", ")))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *sessionsAPI) show(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	bucket, uploadID := r.PathValue("bucket"), r.PathValue("uploadID")
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	v, err := a.store.GetSession(ctx, bucket, uploadID)
	if errors.Is(err, etcdstore.ErrNotFound) {
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, fmt.Sprintf("no session for upload %q in bucket %q", uploadID, bucket))
		return
	}
	if err != nil {
		a.storeError(w, err)
		return
	}
	var act *etcdstore.Activity
	switch av, err := a.store.GetActivity(ctx, uploadID); {
	case err == nil:
		act = &av.Value
	case !errors.Is(err, etcdstore.ErrNotFound):
		a.storeError(w, err)
		return
	}
	parts, err := a.store.ListParts(ctx, uploadID)
	if err != nil {
		a.storeError(w, err)
		return
	}
	// A part's end is activity, recorded from schema 2 by its part record
	// alone (etcdstore.UploadState.RecordedActivity).
	var newest etcdstore.Part
	for _, p := range parts {
		if p.At.After(newest.At) {
			newest = p
		}
	}
	act = etcdstore.NewestActivity(act, newest)
	d := detail(&v.Value, v.ModRev, act, parts)
	d.Shard = a.shard
	writeJSON(w, http.StatusOK, adminapi.SessionAnswer{Session: d})
}

func (a *sessionsAPI) enabled(w http.ResponseWriter) bool {
	if a.store == nil {
		writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeSessionsDisabled, "upload sessions are off on this gateway (sessions.enabled is false)")
		return false
	}
	return true
}

// storeError answers a failed etcd read: the gateway is up but cannot see
// its records, which is worth retrying, not a bad request.
func (a *sessionsAPI) storeError(w http.ResponseWriter, err error) {
	a.log.Warn("admin API: reading sessions failed", "err", err)
	writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeEtcdUnavailable, "reading the session records failed: "+err.Error())
}

// listQuery is a parsed GET /admin/v1/sessions query.
type listQuery struct {
	states                     []etcdstore.SessionState
	bucket                     string
	limit                      int
	afterBucket, afterUploadID string
}

func parseListQuery(v url.Values) (listQuery, error) {
	q := listQuery{limit: adminapi.DefaultListLimit}
	for name := range v {
		switch name {
		case "state", "bucket", "limit", "after":
		default:
			return q, fmt.Errorf("unknown parameter %q; the parameters are state, bucket, limit and after", name)
		}
	}
	for _, raw := range v["state"] {
		for _, s := range strings.Split(raw, ",") {
			st := etcdstore.SessionState(strings.TrimSpace(s))
			if !slices.Contains(etcdstore.AllStates, st) {
				return q, fmt.Errorf("unknown state %q; the states are %s", st, stateNames())
			}
			if !slices.Contains(q.states, st) {
				q.states = append(q.states, st)
			}
		}
	}
	q.bucket = v.Get("bucket")
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > adminapi.MaxListLimit {
			return q, fmt.Errorf("limit %q: want a whole number from 1 to %d", s, adminapi.MaxListLimit)
		}
		q.limit = n
	}
	if s := v.Get("after"); s != "" {
		b, id, err := decodeCursor(s)
		if err != nil {
			return q, err
		}
		q.afterBucket, q.afterUploadID = b, id
	}
	return q, nil
}

func stateNames() string {
	names := make([]string, len(etcdstore.AllStates))
	for i, s := range etcdstore.AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// encodeCursor names the session a list continues after: its bucket and
// upload id, path-escaped and joined by '/', as they appear in its key.
func encodeCursor(bucket, uploadID string) string {
	return url.PathEscape(bucket) + "/" + url.PathEscape(uploadID)
}

func decodeCursor(s string) (bucket, uploadID string, err error) {
	b, id, ok := strings.Cut(s, "/")
	if ok {
		bucket, err = url.PathUnescape(b)
	}
	if ok && err == nil {
		uploadID, err = url.PathUnescape(id)
	}
	if !ok || err != nil || bucket == "" || uploadID == "" {
		return "", "", fmt.Errorf("after %q: want the next value of an earlier list", s)
	}
	return bucket, uploadID, nil
}
