//go:build integration

package etcdstore_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestStatusCollector reads a live member's database size and quota, and
// reports a member that does not answer as down without failing the
// scrape.
func TestStatusCollector(t *testing.T) {
	e, cli := etcdtest.Start(t)
	live := e.Endpoints()[0]
	dead := "http://127.0.0.1:1"
	reg := prometheus.NewRegistry()
	reg.MustRegister(etcdstore.NewStatusCollector(cli, []string{live, dead}))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			ep := m.GetLabel()[0].GetValue()
			if got[f.GetName()] == nil {
				got[f.GetName()] = map[string]float64{}
			}
			got[f.GetName()][ep] = m.GetGauge().GetValue()
		}
	}
	if got["sweepgate_etcd_up"][live] != 1 || got["sweepgate_etcd_up"][dead] != 0 {
		t.Errorf("sweepgate_etcd_up = %v, want 1 for %s and 0 for %s", got["sweepgate_etcd_up"], live, dead)
	}
	size, inUse, quota := got["sweepgate_etcd_db_size_bytes"][live], got["sweepgate_etcd_db_size_in_use_bytes"][live], got["sweepgate_etcd_db_quota_bytes"][live]
	if size <= 0 || inUse <= 0 || inUse > size {
		t.Errorf("database size %v, in use %v: want 0 < in use <= size", size, inUse)
	}
	if quota != float64(etcdstore.DefaultQuotaBackendBytes) {
		t.Errorf("quota %v, want the embedded default %d", quota, etcdstore.DefaultQuotaBackendBytes)
	}
	if _, ok := got["sweepgate_etcd_db_size_bytes"][dead]; ok {
		t.Errorf("a member that did not answer has a database size")
	}
}
