package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// What every endpoint of the API shares: its answers (JSON documents,
// errors among them), its request documents and parameters, and the
// answer to a method it does not take.

// writeJSON answers with v as an indented JSON document.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to tell it
}

// writeAPIError answers with the error document of code and msg.
func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, adminapi.ErrorBody{Error: adminapi.ErrorDetail{Code: code, Message: msg}})
}

// route is one endpoint of the admin API: a method and a path pattern of
// http.ServeMux, and its handler.
type route struct {
	method, path string
	h            http.HandlerFunc
}

// handleRoutes registers each route behind protect, and for each path a
// handler that answers any other method with a JSON 405 (onlyMethod), so a
// client always gets a document.
func handleRoutes(mux *http.ServeMux, protect func(http.Handler) http.Handler, routes []route) {
	for _, rt := range routes {
		mux.Handle(rt.method+" "+rt.path, protect(rt.h))
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
		writeAPIError(w, http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use %s", r.Method, method))
	}
}

// maxRequestBody bounds a request document: 1000 refs with long keys.
const maxRequestBody = 4 << 20

// readJSON decodes a request document into v. It takes only
// application/json: a browser cannot send that to another origin without
// asking first (CORS), which this API never allows, so a web page cannot
// make an operator's browser trigger a pass or a delete. An empty body
// leaves v as it is.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeAPIError(w, http.StatusUnsupportedMediaType, adminapi.CodeUnsupportedMediaType,
			"send the request with Content-Type: application/json (a JSON document, {} when there is nothing to say)")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, "request document: "+err.Error())
		return false
	}
	if dec.More() {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, "request document: more than one JSON value")
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

// methodNotAllowed answers 405 for a path that takes only GET.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "GET, HEAD")
	writeAPIError(w, http.StatusMethodNotAllowed, adminapi.CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use GET", r.Method))
}

// remoteHost names the client, for a log line or a frontier report that
// does not say who made it.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
