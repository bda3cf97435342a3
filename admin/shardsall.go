package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// readAll answers a read with shard=all: the session list merged over
// every shard, or every shard's reclaimer status.
func (a *handler) readAll(w http.ResponseWriter, r *http.Request) {
	r = withoutShard(r)
	if r.URL.Path == "/admin/v1/reclaim/status" {
		out := adminapi.ShardStatuses{Shards: make([]adminapi.ShardStatus, 0, len(a.shards))}
		for _, sh := range a.shards {
			st := adminapi.ShardStatus{Shard: sh.name}
			rec := httptest.NewRecorder()
			sh.mux.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				st.Status = new(adminapi.ReclaimStatus)
				_ = json.Unmarshal(rec.Body.Bytes(), st.Status)
			} else if e, ok := apiErrorOf(rec.Body.Bytes()); ok {
				st.Error = &e
			}
			out.Shards = append(out.Shards, st)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	a.listAll(w, r)
}

// listAll merges every shard's session list in key order. A shard holds
// all of a bucket's sessions, so each shard's list after the same cursor
// holds every session of the merged list that the shard holds.
func (a *handler) listAll(w http.ResponseWriter, r *http.Request) {
	limit := adminapi.DefaultListLimit
	if q, err := parseListQuery(r.URL.Query()); err == nil {
		limit = q.limit
	}
	out := adminapi.SessionList{Sessions: []adminapi.Session{}, Warnings: []string{}}
	for _, sh := range a.shards {
		rec := httptest.NewRecorder()
		sh.mux.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			if e, ok := apiErrorOf(rec.Body.Bytes()); ok {
				e.Message = "shard " + sh.name + ": " + e.Message
				writeJSON(w, rec.Code, adminapi.ErrorBody{Error: e})
				return
			}
			writeAPIError(w, rec.Code, adminapi.CodeEtcdUnavailable, "shard "+sh.name+": no answer")
			return
		}
		var l adminapi.SessionList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
			writeAPIError(w, http.StatusInternalServerError, adminapi.CodeEtcdUnavailable, "shard "+sh.name+": "+err.Error())
			return
		}
		for i := range l.Sessions {
			l.Sessions[i].Shard = sh.name
		}
		out.Sessions = append(out.Sessions, l.Sessions...)
		out.Truncated = out.Truncated || l.Truncated
		for _, warn := range l.Warnings {
			out.Warnings = append(out.Warnings, "shard "+sh.name+": "+warn)
		}
	}
	// Session keys are the bucket, a slash and the upload id: key order
	// is the order of bucket+"/", and within a bucket the shard's order.
	sort.SliceStable(out.Sessions, func(i, j int) bool {
		return out.Sessions[i].Bucket+"/" < out.Sessions[j].Bucket+"/"
	})
	if len(out.Sessions) > limit {
		out.Sessions, out.Truncated = out.Sessions[:limit], true
	}
	if out.Truncated && len(out.Sessions) > 0 {
		last := out.Sessions[len(out.Sessions)-1]
		out.Next = encodeCursor(last.Bucket, last.UploadID)
	}
	writeJSON(w, http.StatusOK, out)
}

// apiErrorOf reads an error document; ok is false when body is not one.
func apiErrorOf(body []byte) (e adminapi.ErrorDetail, ok bool) {
	var doc adminapi.ErrorBody
	if json.Unmarshal(body, &doc) != nil || doc.Error.Code == "" {
		return adminapi.ErrorDetail{}, false
	}
	return doc.Error, true
}
