package etcdstore

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// statusTimeout bounds one member's status request during a scrape, so
// that a dead member costs a scrape this much, not the scraper's timeout.
const statusTimeout = 2 * time.Second

// StatusCollector serves each etcd member's database size, the part of
// it in use, and its backend quota, read with a status request per
// member at every scrape, so that a database growing toward its quota
// (past which etcd refuses every write, sessions included) shows before
// it stops the gateway:
//
//	sweepgate_etcd_up{endpoint}                    1 when the member answered
//	sweepgate_etcd_db_size_bytes{endpoint}         the database file
//	sweepgate_etcd_db_size_in_use_bytes{endpoint}  its pages in use
//	sweepgate_etcd_db_quota_bytes{endpoint}        the quota (0: unknown)
//
// The endpoint label takes only the configured endpoints' values.
type StatusCollector struct {
	cli       *clientv3.Client
	endpoints []string
	up        *prometheus.Desc
	size      *prometheus.Desc
	inUse     *prometheus.Desc
	quota     *prometheus.Desc
}

// NewStatusCollector returns a collector asking endpoints through cli.
func NewStatusCollector(cli *clientv3.Client, endpoints []string) *StatusCollector {
	label := []string{"endpoint"}
	return &StatusCollector{
		cli:       cli,
		endpoints: endpoints,
		up:        prometheus.NewDesc("sweepgate_etcd_up", "1 when the etcd member answered its status request at this scrape, 0 when it did not.", label, nil),
		size:      prometheus.NewDesc("sweepgate_etcd_db_size_bytes", "Size of the etcd member's database file.", label, nil),
		inUse:     prometheus.NewDesc("sweepgate_etcd_db_size_in_use_bytes", "Bytes of the etcd member's database in use (the file less its free pages).", label, nil),
		quota:     prometheus.NewDesc("sweepgate_etcd_db_quota_bytes", "The etcd member's backend quota: past it, etcd refuses writes (NOSPACE).", label, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StatusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.size
	ch <- c.inUse
	ch <- c.quota
}

// Collect implements prometheus.Collector.
func (c *StatusCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ep := range c.endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
		st, err := c.cli.Status(ctx, ep)
		cancel()
		if err != nil {
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0, ep)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1, ep)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.DbSize), ep)
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.DbSizeInUse), ep)
		ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(st.DbSizeQuota), ep)
	}
}
