package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// The admin API's JSON documents. Their field names are the API
// (docs/admin-api.md): fields may be added, never renamed or removed, and
// every field is always present (null or empty when there is nothing).

// apiSession is one upload session as the list shows it.
type apiSession struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	Owner    string `json:"owner"`
	State    string `json:"state"`
	// StateSince is when the session entered its state: its last
	// transition, or its creation.
	StateSince time.Time `json:"state_since"`
	Created    time.Time `json:"created"`
	// LastActivity is the latest of the activity recorded on the session
	// and on its activity key (parts record activity there).
	LastActivity  time.Time  `json:"last_activity"`
	ExpiredAt     *time.Time `json:"expired_at"`
	Uncertain     string     `json:"uncertain"`
	AbortAttempts int        `json:"abort_attempts"`
	ModRevision   int64      `json:"mod_revision"`
}

// apiSessionDetail is one session with everything recorded about it.
type apiSessionDetail struct {
	apiSession
	ExpectedETag string          `json:"expected_etag"`
	PartsDigest  string          `json:"parts_digest"`
	Completion   *apiCompletion  `json:"completion"`
	Activity     *apiActivity    `json:"activity"`
	History      []apiTransition `json:"history"`
	PartCount    int             `json:"part_count"`
	PartBytes    int64           `json:"part_bytes"`
	Parts        []apiPart       `json:"parts"`
}

type apiCompletion struct {
	Location  string            `json:"location"`
	Bucket    string            `json:"bucket"`
	Key       string            `json:"key"`
	ETag      string            `json:"etag"`
	VersionID string            `json:"version_id"`
	Checksums map[string]string `json:"checksums"`
	At        time.Time         `json:"at"`
}

type apiActivity struct {
	At         time.Time `json:"at"`
	What       string    `json:"what"`
	PartNumber int       `json:"part_number"`
}

type apiTransition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Actor  string    `json:"actor"`
	Term   int64     `json:"term"`
	Reason string    `json:"reason"`
}

type apiPart struct {
	PartNumber int       `json:"part_number"`
	ETag       string    `json:"etag"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	At         time.Time `json:"at"`
}

// apiSessionList answers GET /admin/v1/sessions.
type apiSessionList struct {
	Sessions []apiSession `json:"sessions"`
	// Revision is the etcd revision the sessions were read at.
	Revision int64 `json:"revision"`
	// Truncated says more sessions match; Next is the cursor (the after
	// parameter) that continues the list.
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
	// Warnings are records that could not be shown, for a person to look at.
	Warnings []string `json:"warnings"`
}

// apiSessionAnswer answers GET /admin/v1/sessions/{bucket}/{uploadID}.
type apiSessionAnswer struct {
	Session apiSessionDetail `json:"session"`
}

// apiErrorBody is every error's document.
type apiErrorBody struct {
	Error apiError `json:"error"`
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of the admin API.
const (
	codeNotFound         = "not_found"
	codeBadRequest       = "bad_request"
	codeMethodNotAllowed = "method_not_allowed"
	codeSessionsDisabled = "sessions_disabled"
	codeEtcdUnavailable  = "etcd_unavailable"
)

// List limits: the default keeps an accidental `sessions list` cheap, the
// maximum keeps one answer a few MiB at most.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
	// adminReadTimeout bounds the etcd reads of one admin request, below
	// the admin listener's write timeout.
	adminReadTimeout = 20 * time.Second
)

// sessionsAPI serves /admin/v1/sessions from the session records in etcd.
type sessionsAPI struct {
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
		writeAPIError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no admin API endpoint %s", r.URL.Path))
	})))
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "GET, HEAD")
	writeAPIError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use GET", r.Method))
}

func (a *sessionsAPI) list(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, codeBadRequest, err.Error())
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
	out := apiSessionList{Sessions: []apiSession{}, Revision: rev, Warnings: []string{}}
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
		out.Sessions = append(out.Sessions, summarize(&v.Value, act, v.ModRev))
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
		writeAPIError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no session for upload %q in bucket %q", uploadID, bucket))
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
	writeJSON(w, http.StatusOK, apiSessionAnswer{Session: detail(&v.Value, v.ModRev, act, parts)})
}

func (a *sessionsAPI) enabled(w http.ResponseWriter) bool {
	if a.store == nil {
		writeAPIError(w, http.StatusServiceUnavailable, codeSessionsDisabled, "upload sessions are off on this gateway (sessions.enabled is false)")
		return false
	}
	return true
}

// storeError answers a failed etcd read: the gateway is up but cannot see
// its records, which is worth retrying, not a bad request.
func (a *sessionsAPI) storeError(w http.ResponseWriter, err error) {
	a.log.Warn("admin API: reading sessions failed", "err", err)
	writeAPIError(w, http.StatusServiceUnavailable, codeEtcdUnavailable, "reading the session records failed: "+err.Error())
}

// listQuery is a parsed GET /admin/v1/sessions query.
type listQuery struct {
	states                     []etcdstore.SessionState
	bucket                     string
	limit                      int
	afterBucket, afterUploadID string
}

func parseListQuery(v url.Values) (listQuery, error) {
	q := listQuery{limit: defaultListLimit}
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
		if err != nil || n < 1 || n > maxListLimit {
			return q, fmt.Errorf("limit %q: want a whole number from 1 to %d", s, maxListLimit)
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

// summarize is the list's view of a session; act is its activity record,
// if any.
func summarize(s *etcdstore.Session, act *etcdstore.Activity, modRev int64) apiSession {
	out := apiSession{
		Bucket:        s.Bucket,
		Key:           s.Key,
		UploadID:      s.UploadID,
		Owner:         s.Owner,
		State:         string(s.State),
		StateSince:    s.Created,
		Created:       s.Created,
		LastActivity:  s.LastActivity,
		ExpiredAt:     s.ExpiredAt,
		Uncertain:     s.Uncertain,
		AbortAttempts: s.AbortAttempts,
		ModRevision:   modRev,
	}
	if n := len(s.History); n > 0 {
		out.StateSince = s.History[n-1].At
	}
	if act != nil && act.At.After(out.LastActivity) {
		out.LastActivity = act.At
	}
	return out
}

func detail(s *etcdstore.Session, modRev int64, act *etcdstore.Activity, parts []etcdstore.Part) apiSessionDetail {
	out := apiSessionDetail{
		apiSession:   summarize(s, act, modRev),
		ExpectedETag: s.ExpectedETag,
		PartsDigest:  s.PartsDigest,
		History:      make([]apiTransition, len(s.History)),
		PartCount:    len(parts),
		Parts:        make([]apiPart, len(parts)),
	}
	if c := s.Completion; c != nil {
		out.Completion = &apiCompletion{
			Location: c.Location, Bucket: c.Bucket, Key: c.Key, ETag: c.ETag,
			VersionID: c.VersionID, Checksums: c.Checksums, At: c.At,
		}
		if out.Completion.Checksums == nil {
			out.Completion.Checksums = map[string]string{}
		}
	}
	if act != nil {
		out.Activity = &apiActivity{At: act.At, What: act.What, PartNumber: act.Part}
	}
	for i, t := range s.History {
		out.History[i] = apiTransition{At: t.At, From: string(t.From), To: string(t.To), Actor: t.Actor, Term: t.Term, Reason: t.Reason}
	}
	for i, p := range parts {
		out.Parts[i] = apiPart{PartNumber: p.Number, ETag: p.ETag, Size: p.Size, SHA256: p.SHA256, At: p.At}
		out.PartBytes += p.Size
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to tell it
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiErrorBody{Error: apiError{Code: code, Message: msg}})
}
