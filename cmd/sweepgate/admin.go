package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sweepgate/sweepgate/config"
)

// readyCheck is one dependency that must answer before the gateway is
// ready for traffic.
type readyCheck struct {
	name  string
	check func(context.Context) error
}

// adminHandler serves the operators' endpoints.
type adminHandler struct {
	registry *prometheus.Registry
	// draining is set once shutdown starts, so that load balancers stop
	// sending new requests while in-flight ones finish.
	draining *atomic.Bool
	checks   []readyCheck
	// sessions serves /admin/v1/sessions (docs/admin-api.md).
	sessions sessionsAPI
	// reclaim serves /admin/v1/reclaim (docs/admin-api.md).
	reclaim reclaimAPI
	// digests serves /admin/v1/frontiers and /admin/v1/trash
	// (docs/admin-api.md).
	digests digestAPI
	// token is the bearer token every /admin/v1 request and the status
	// page must carry (requireAdmin); serve always sets one, configured or
	// generated. Without one those requests are all refused.
	token config.Secret
	// hosts are the Host names the listener answers (checkHost); the zero
	// policy answers none.
	hosts hostPolicy
	// log receives the refusals of requests without the token.
	log *slog.Logger
}

// mux returns the admin listener's handler: every request passes the Host
// check first; then the probes and /metrics are open, and everything else
// wants the admin token.
func (a *adminHandler) mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(a.registry,
		promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry})))
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	protect := requireAdmin(a.token, a.log)
	a.sessions.routes(mux, protect)
	a.reclaim.routes(mux, protect)
	a.digests.routes(mux, protect)
	explainAPI{reclaim: &a.reclaim}.routes(mux, protect)
	a.statusRoutes(mux, protect)
	a.loginRoutes(mux)
	return a.checkHost(mux)
}

// healthz answers whenever the process can serve HTTP at all: it is the
// liveness probe, and must not fail because a dependency is down, or the
// orchestrator would restart a process that is only waiting for etcd.
func (a *adminHandler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

// readyz answers 200 only when every dependency answers, checked in
// parallel so that one slow dependency does not hide another's failure.
func (a *adminHandler) readyz(w http.ResponseWriter, r *http.Request) {
	if a.draining.Load() {
		writeText(w, http.StatusServiceUnavailable, "not ready: shutting down")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyCheckTimeout)
	defer cancel()
	failures := make([]string, len(a.checks))
	var wg sync.WaitGroup
	for i, c := range a.checks {
		wg.Go(func() {
			if err := c.check(ctx); err != nil {
				failures[i] = fmt.Sprintf("%s: %v", c.name, err)
			}
		})
	}
	wg.Wait()
	var reasons []string
	for _, f := range failures {
		if f != "" {
			reasons = append(reasons, f)
		}
	}
	if len(reasons) > 0 {
		writeText(w, http.StatusServiceUnavailable, "not ready: "+strings.Join(reasons, "; "))
		return
	}
	writeText(w, http.StatusOK, "ok")
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintln(w, body)
}
