//go:build integration

package admin

import (
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The reclaim and explain APIs' tests run against package admintest's
// environments, served by the real admin handler.

// serveWithReclaimer serves the real admin handler over store with r as its
// reclaimer (nil: none), described by info.
func serveWithReclaimer(t *testing.T, store *etcdstore.Store, r *reclaim.Reclaimer, info ReclaimerInfo) string {
	t.Helper()
	a := &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{store: store, log: slog.New(slog.DiscardHandler)},
		reclaim:  reclaimAPI{r: r, store: store, info: info, progress: NewProgressHub(), log: slog.New(slog.DiscardHandler)},
	}
	srv := httptest.NewServer(testAdminHandler(a))
	t.Cleanup(srv.Close)
	return srv.URL
}

// serveLeader serves r as the reclaimer of the process leader@test.
func serveLeader(t *testing.T, store *etcdstore.Store, r *reclaim.Reclaimer) string {
	t.Helper()
	return serveWithReclaimer(t, store, r, ReclaimerInfo{ID: "leader@test", Enabled: true})
}

func newReclaimEnv(t *testing.T) *admintest.ReclaimEnv {
	t.Helper()
	return admintest.NewReclaimEnv(t, func(store *etcdstore.Store, leader *reclaim.Reclaimer) string {
		return serveLeader(t, store, leader)
	})
}

func newExplainEnv(t *testing.T) *admintest.ExplainEnv {
	t.Helper()
	return admintest.NewExplainEnv(t, func(store *etcdstore.Store, leader *reclaim.Reclaimer) string {
		return serveLeader(t, store, leader)
	})
}
