package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// Limits of the digest API beyond those of its parameters (package
// adminapi).
const (
	// maxReporter bounds the by field, which is stored with the frontier.
	maxReporter = 256
)

// digestAPI serves /admin/v1/frontiers and /admin/v1/trash from the digest
// records in etcd.
type digestAPI struct {
	// store is nil when the gateway keeps no records (sessions are off).
	store *etcdstore.Store
	// planes are the configured planes (digests.planes), which gate
	// deletes and are listed whether they reported or not.
	planes []string
	// now is the clock that stamps reports and judges expiry; nil is
	// time.Now.
	now func() time.Time
	log *slog.Logger
}

func (a *digestAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	handleRoutes(mux, protect, []route{
		{http.MethodGet, "/admin/v1/frontiers", a.frontiers},
		{http.MethodPost, "/admin/v1/frontiers/{plane}", a.reportFrontier},
		{http.MethodGet, "/admin/v1/trash", a.trash},
		{http.MethodPost, "/admin/v1/trash/restore", a.restore},
	})
}

func (a *digestAPI) clock() time.Time {
	if a.now != nil {
		return a.now().UTC()
	}
	return time.Now().UTC()
}

func (a *digestAPI) enabled(w http.ResponseWriter) bool {
	if a.store == nil {
		writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeDigestsDisabled,
			"this gateway keeps no records in etcd (sessions.enabled is false), so it has no frontiers or trash")
		return false
	}
	return true
}

// storeError answers a failed etcd read or write: worth retrying.
func (a *digestAPI) storeError(w http.ResponseWriter, what string, err error) {
	a.log.Warn("admin API: digest request failed", "what", what, "err", err)
	writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeEtcdUnavailable, what+" failed: "+err.Error())
}

// planeList merges the configured planes with the reported frontiers:
// configured planes first, in their configured order, then the planes that
// reported without being configured, by name.
func (a *digestAPI) planeList(reported []etcdstore.Frontier, current int64) []adminapi.Plane {
	byName := make(map[string]etcdstore.Frontier, len(reported))
	for _, f := range reported {
		byName[f.Plane] = f
	}
	out := make([]adminapi.Plane, 0, len(a.planes)+len(reported))
	entry := func(name string, configured bool) adminapi.Plane {
		p := adminapi.Plane{Plane: name, Lag: current, Configured: configured}
		if f, ok := byName[name]; ok {
			at := f.At
			p.Revision, p.Lag, p.ReportedAt, p.By, p.Reported = f.Revision, current-f.Revision, &at, f.By, true
		}
		return p
	}
	for _, name := range a.planes {
		out = append(out, entry(name, true))
	}
	for _, f := range reported {
		if !slices.Contains(a.planes, f.Plane) {
			out = append(out, entry(f.Plane, false))
		}
	}
	return out
}

func (a *digestAPI) frontiers(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	if len(r.URL.Query()) > 0 {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, "the frontier list takes no parameters")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	reported, current, err := a.store.ListFrontiers(ctx)
	if err != nil {
		a.storeError(w, "reading the frontiers", err)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.Frontiers{Revision: current, Planes: a.planeList(reported, current)})
}

func (a *digestAPI) reportFrontier(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	plane := r.PathValue("plane")
	if err := config.CheckPlane(plane); err != nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, fmt.Sprintf("plane %q: %v", plane, err))
		return
	}
	var req adminapi.FrontierReport
	if !readJSON(w, r, &req) {
		return
	}
	switch {
	case req.Revision == nil:
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, `revision is required: the etcd revision the plane has applied, as {"revision": 1234}`)
		return
	case *req.Revision < 0:
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, fmt.Sprintf("revision %d: want 0 or more", *req.Revision))
		return
	case len(req.By) > maxReporter:
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, fmt.Sprintf("by: at most %d bytes", maxReporter))
		return
	}
	by := req.By
	if by == "" {
		by = remoteHost(r)
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	before, current, err := a.store.ListFrontiers(ctx)
	if err != nil {
		a.storeError(w, "reading the frontiers", err)
		return
	}
	// No plane can have applied a revision that etcd has not reached: the
	// number is a typo or comes from another cluster, and trusting it would
	// let every pending blob go at once.
	if *req.Revision > current {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest,
			fmt.Sprintf("revision %d is ahead of etcd's current revision %d: a plane cannot have applied a revision that does not exist yet (is it another etcd cluster's?)", *req.Revision, current))
		return
	}
	if err := a.store.ReportFrontier(ctx, plane, *req.Revision, by, a.clock()); err != nil {
		a.storeError(w, "recording the frontier", err)
		return
	}
	attrs := []any{"plane", plane, "revision", *req.Revision, "by", by, "configured", slices.Contains(a.planes, plane)}
	for _, f := range before {
		if f.Plane == plane {
			attrs = append(attrs, "previous", f.Revision)
		}
	}
	a.log.Info("admin API: frontier reported", attrs...)
	after, current, err := a.store.ListFrontiers(ctx)
	if err != nil {
		a.storeError(w, "reading the frontier back", err)
		return
	}
	for _, p := range a.planeList(after, current) {
		if p.Plane == plane {
			writeJSON(w, http.StatusOK, p)
			return
		}
	}
	// Another report removed it in between; what was written is known.
	writeAPIError(w, http.StatusConflict, adminapi.CodeConflict, fmt.Sprintf("the frontier of plane %q changed while it was recorded; list the frontiers", plane))
}

func (a *digestAPI) trash(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit", adminapi.DefaultTrashLimit, adminapi.MaxTrashLimit)
	if err == nil {
		err = checkParams(q, "bucket", "key", "limit")
	}
	bucket, key := q.Get("bucket"), q.Get("key")
	if err == nil && key != "" && bucket == "" {
		err = errors.New("key needs bucket: name the object as bucket=B&key=K")
	}
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	// One more than asked, to know whether there are more.
	recs, err := a.store.ListTrash(ctx, bucket, key, int64(limit)+1)
	if err != nil {
		a.storeError(w, "reading the trash", err)
		return
	}
	out := adminapi.TrashList{Trash: make([]adminapi.Trash, 0, min(len(recs), limit))}
	if len(recs) > limit {
		recs, out.Truncated = recs[:limit], true
	}
	now := a.clock()
	for _, tr := range recs {
		out.Trash = append(out.Trash, trashRecord(tr, now))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *digestAPI) restore(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	var req adminapi.RestoreRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Bucket == "" || req.Key == "" || req.DeletedAt == nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest,
			"bucket, key and deleted_at are required (deleted_at exactly as GET /admin/v1/trash gives it)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminReadTimeout)
	defer cancel()
	now := a.clock()
	tr, err := a.store.RestoreTrash(ctx, req.Bucket, req.Key, *req.DeletedAt, now)
	name := fmt.Sprintf("%s/%s deleted at %s", req.Bucket, req.Key, req.DeletedAt.UTC().Format(time.RFC3339Nano))
	switch {
	case errors.Is(err, etcdstore.ErrNotFound):
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, fmt.Sprintf("no trash record of %s (restored already, or pruned after it expired)", name))
	case errors.Is(err, etcdstore.ErrGuarded):
		writeAPIError(w, http.StatusConflict, adminapi.CodeGuarded,
			fmt.Sprintf("the trash of %s has expired and the bytes of a digest it names are being deleted now; nothing was restored (once the collector is done, the blob must be uploaded again)", name))
	case errors.Is(err, etcdstore.ErrWriteInFlight):
		writeAPIError(w, http.StatusConflict, adminapi.CodeWriteInFlight,
			fmt.Sprintf("a write of %s/%s is in flight through a gateway; nothing was restored, try again when it is done", req.Bucket, req.Key))
	case errors.Is(err, etcdstore.ErrConflict):
		writeAPIError(w, http.StatusConflict, adminapi.CodeConflict,
			fmt.Sprintf("the references of %s/%s kept changing while they were restored; nothing was restored, try again", req.Bucket, req.Key))
	case err != nil && tr.DeletedAt.IsZero():
		a.storeError(w, "restoring "+name, err)
	default:
		if err != nil {
			// The references are back; only removing the trash record
			// failed, which its expiry makes up for.
			a.log.Warn("admin API: trash restored, but its record was not removed", "bucket", tr.Bucket, "key", tr.Key, "err", err)
		}
		rec := trashRecord(tr, now)
		audit.Record(a.log, audit.RestoreTrash, tr.Bucket+"/"+tr.Key, "restored by an operator through the admin API",
			"principal", "admin-api", "deleted_at", tr.DeletedAt,
			"digests", len(tr.Digests), "expired", rec.Expired, "client", remoteHost(r))
		writeJSON(w, http.StatusOK, adminapi.Restored{Restored: rec})
	}
}
