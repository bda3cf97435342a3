//go:build integration

package digestsweep_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestPlaneCollector reports a frontier for one of two configured planes
// and checks each plane's series against etcd's revision and the clock: the
// reporting plane's lag and age, the silent plane's whole-revision lag.
func TestPlaneCollector(t *testing.T) {
	_, cli := etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/plane-metrics/")
	if err != nil {
		t.Fatal(err)
	}
	store := etcdstore.NewStore(cli, keys)
	ctx := t.Context()
	reported := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := store.ReportFrontier(ctx, "backup", 1, "test", reported); err != nil {
		t.Fatal(err)
	}
	for range 5 { // etcd moves on past the plane
		if _, err := cli.Put(ctx, "/plane-metrics/elsewhere", "x"); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(ctx, "/plane-metrics/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	rev := float64(resp.Header.Revision)
	now := reported.Add(90 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(digestsweep.NewPlaneCollector(store, []string{"backup", "replica"}, func() time.Time { return now }))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"sweepgate_digests_plane_reported/backup":           1,
		"sweepgate_digests_plane_lag_revisions/backup":      rev - 1,
		"sweepgate_digests_plane_report_age_seconds/backup": 90,
		"sweepgate_digests_plane_reported/replica":          0,
		"sweepgate_digests_plane_lag_revisions/replica":     rev,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want exactly %v", got, want)
	}
}
