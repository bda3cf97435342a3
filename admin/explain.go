package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The explain API answers "why is this still here?" and "why did this
// go?" about one upload or one blob (docs/admin-api.md). Its documents are
// the reclaimer's explanations, converted to adminapi.UploadExplanation and
// adminapi.DigestExplanation: every gateway with a reclaimer answers,
// leader or not, since an explanation only reads.

// explainAPI serves /admin/v1/explain from the reclaim API's reclaimer, so
// that it needs nothing of its own from serve.
type explainAPI struct {
	reclaim *reclaimAPI
}

func (a explainAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	handleRoutes(mux, protect, []route{
		{http.MethodGet, "/admin/v1/explain/uploads/{bucket}/{uploadID}", a.upload},
		{http.MethodGet, "/admin/v1/explain/digests/{digest}", a.digest},
	})
}

func (a explainAPI) upload(w http.ResponseWriter, r *http.Request) {
	if !a.reclaim.enabled(w) {
		return
	}
	q := r.URL.Query()
	if err := checkParams(q, "key"); err != nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
		return
	}
	bucket, uploadID := r.PathValue("bucket"), r.PathValue("uploadID")
	ctx, cancel := a.context(w, r)
	defer cancel()
	ex, err := a.reclaim.r.ExplainUpload(ctx, bucket, uploadID, q.Get("key"))
	switch {
	case errors.Is(err, reclaim.ErrNotKnown):
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, fmt.Sprintf(
			"nothing is known about upload %q in bucket %q: no session records it and the backend has no such upload (%v)", uploadID, bucket, err))
	case err != nil:
		if r.Context().Err() == nil {
			a.reclaim.failed(w, "explaining the upload", err)
		}
	default:
		writeJSON(w, http.StatusOK, fromUploadExplanation(ex))
	}
}

func (a explainAPI) digest(w http.ResponseWriter, r *http.Request) {
	if !a.reclaim.enabled(w) {
		return
	}
	if len(r.URL.Query()) > 0 {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, "the explanation of a digest takes no parameters")
		return
	}
	digest := r.PathValue("digest")
	ctx, cancel := a.context(w, r)
	defer cancel()
	ex, err := a.reclaim.r.ExplainDigest(ctx, digest)
	switch {
	case errors.Is(err, digestsweep.ErrBadDigest):
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
	case errors.Is(err, reclaim.ErrDigestSweepOff):
		writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeDigestSweepOff,
			"this gateway's reclaimer judges no blobs: no content-addressed namespace is configured (digests.namespaces)")
	case errors.Is(err, reclaim.ErrNotKnown):
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, fmt.Sprintf(
			"nothing is known about digest %s: no blob of it is stored in a namespace, and etcd holds no reference, trash entry, placement, tombstone or guard of it", digest))
	case err != nil:
		if r.Context().Err() == nil {
			a.reclaim.failed(w, "explaining the digest", err)
		}
	default:
		writeJSON(w, http.StatusOK, fromDigestExplanation(ex))
	}
}

// context bounds an explanation, which may outlast the admin listener's
// write timeout; a client that goes away ends it.
func (a explainAPI) context(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc) {
	noWriteDeadline(w)
	return context.WithTimeout(r.Context(), adminapi.ExplainTimeout)
}
