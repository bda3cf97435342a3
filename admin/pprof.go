package admin

import (
	"net/http"
	"net/http/pprof"
)

// pprofRoutes serves Go's runtime profiles under /debug/pprof/ (admin.pprof),
// each behind protect: the index and the named profiles (heap, allocs,
// goroutine, ...), a CPU profile (?seconds=N, within the listener's write
// timeout), an execution trace, the command line and symbol lookups.
func pprofRoutes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	mux.Handle("GET /debug/pprof/", protect(http.HandlerFunc(pprof.Index)))
	mux.Handle("GET /debug/pprof/cmdline", protect(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("GET /debug/pprof/profile", protect(http.HandlerFunc(pprof.Profile)))
	mux.Handle("GET /debug/pprof/symbol", protect(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("POST /debug/pprof/symbol", protect(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("GET /debug/pprof/trace", protect(http.HandlerFunc(pprof.Trace)))
}
