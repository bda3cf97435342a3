package admin

import (
	"encoding/json"
	"net/http"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// The API's answers: JSON documents, errors among them.

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to tell it
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, adminapi.ErrorBody{Error: adminapi.ErrorDetail{Code: code, Message: msg}})
}
