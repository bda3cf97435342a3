package digestsweep

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// planeReadTimeout bounds the frontier read of one scrape.
const planeReadTimeout = 2 * time.Second

// PlaneCollector serves how far each configured plane (digests.planes)
// trails etcd, read from the frontiers the planes reported at every scrape.
// No blob is deleted until every plane has applied the revision its
// tombstone requires, so a plane that stops reporting stops reclamation
// (it never risks data); these series show it:
//
//	sweepgate_digests_plane_reported{plane}            1 once the plane reported
//	sweepgate_digests_plane_lag_revisions{plane}       etcd's revision less the plane's
//	sweepgate_digests_plane_report_age_seconds{plane}  time since its last report
//
// A plane that never reported has lag (etcd's whole revision) and no age.
type PlaneCollector struct {
	store    *etcdstore.Store
	planes   []string
	now      func() time.Time
	reported *prometheus.Desc
	lag      *prometheus.Desc
	age      *prometheus.Desc
}

// NewPlaneCollector returns a collector of planes' frontiers in store,
// with now as its clock.
func NewPlaneCollector(store *etcdstore.Store, planes []string, now func() time.Time) *PlaneCollector {
	label := []string{"plane"}
	return &PlaneCollector{
		store: store, planes: planes, now: now,
		reported: prometheus.NewDesc("sweepgate_digests_plane_reported", "1 once the plane (digests.planes) has reported a frontier, 0 before.", label, nil),
		lag:      prometheus.NewDesc("sweepgate_digests_plane_lag_revisions", "etcd's current revision less the last revision the plane reported applied.", label, nil),
		age:      prometheus.NewDesc("sweepgate_digests_plane_report_age_seconds", "Time since the plane's last frontier report.", label, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PlaneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.reported
	ch <- c.lag
	ch <- c.age
}

// Collect implements prometheus.Collector. When etcd cannot be read the
// scrape carries none of these series, which sweepgate_etcd_up explains.
func (c *PlaneCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), planeReadTimeout)
	defer cancel()
	frontiers, rev, err := c.store.ListFrontiers(ctx)
	if err != nil {
		return
	}
	byPlane := make(map[string]etcdstore.Frontier, len(frontiers))
	for _, f := range frontiers {
		byPlane[f.Plane] = f
	}
	now := c.now()
	for _, p := range c.planes {
		f, ok := byPlane[p]
		if !ok {
			ch <- prometheus.MustNewConstMetric(c.reported, prometheus.GaugeValue, 0, p)
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(rev), p)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.reported, prometheus.GaugeValue, 1, p)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(max(0, rev-f.Revision)), p)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, max(0, now.Sub(f.At).Seconds()), p)
	}
}
