package admin

import (
	"context"
	"net/http"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// Reloader reads the configuration again and applies its reloadable
// settings, or changes nothing and says why.
type Reloader func(context.Context) (adminapi.ReloadResult, error)

// reloadAPI serves POST /admin/v1/reload (docs/admin-api.md).
type reloadAPI struct{ reload Reloader }

func (a reloadAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	mux.Handle("POST /admin/v1/reload", protect(http.HandlerFunc(a.post)))
	mux.Handle("/admin/v1/reload", protect(onlyMethod(http.MethodPost)))
}

func (a reloadAPI) post(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if !readJSON(w, r, &req) {
		return
	}
	if a.reload == nil {
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, "this process reloads nothing")
		return
	}
	res, err := a.reload(r.Context())
	if err != nil {
		writeAPIError(w, http.StatusUnprocessableEntity, adminapi.CodeReloadFailed, err.Error())
		return
	}
	if res.RestartNeeded == nil {
		res.RestartNeeded = []string{}
	}
	writeJSON(w, http.StatusOK, res)
}
