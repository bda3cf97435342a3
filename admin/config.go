package admin

import (
	"net/http"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
)

// configAPI serves GET /admin/v1/config (docs/admin-api.md): the
// configuration in effect, secrets redacted by config.Setting.Value.
type configAPI struct{ inEffect func() *config.Config }

func (a configAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	mux.Handle("GET /admin/v1/config", protect(http.HandlerFunc(a.get)))
	mux.Handle("/admin/v1/config", protect(onlyMethod(http.MethodGet)))
}

func (a configAPI) get(w http.ResponseWriter, _ *http.Request) {
	if a.inEffect == nil {
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, "this process has no configuration to show")
		return
	}
	cfg := a.inEffect()
	settings := config.Settings()
	doc := adminapi.ConfigDoc{Settings: make([]adminapi.ConfigSetting, 0, len(settings))}
	for _, s := range settings {
		doc.Settings = append(doc.Settings, adminapi.ConfigSetting{
			Key: s.Key, Value: s.Value(cfg), Reloadable: s.Reloadable, Secret: s.Secret,
		})
	}
	writeJSON(w, http.StatusOK, doc)
}
