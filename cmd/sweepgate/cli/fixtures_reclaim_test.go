//go:build integration

package cli

import (
	"net/http/httptest"
	"testing"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The reclaim and explain commands' tests run against package admintest's
// environments, served by the real admin handler.

// serveWithReclaimer serves the admin handler over store with r as its
// reclaimer, described by info.
func serveWithReclaimer(t *testing.T, store *etcdstore.Store, r *reclaim.Reclaimer, info admin.ReclaimerInfo) string {
	t.Helper()
	srv := httptest.NewServer(testAdminHandler(admin.Config{Store: store, Reclaimer: r, ReclaimerInfo: info}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// serveLeader serves r as the reclaimer of the process leader@test.
func serveLeader(t *testing.T, store *etcdstore.Store, r *reclaim.Reclaimer) string {
	t.Helper()
	return serveWithReclaimer(t, store, r, admin.ReclaimerInfo{ID: "leader@test", Enabled: true})
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
