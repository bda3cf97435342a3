package reclaim

import (
	"github.com/sweepgate/sweepgate/etcdstore"
)

// digestMetrics counts the digest sweep's series (digestsweep.SweepMetrics)
// in the reclaimer's metrics.
type digestMetrics struct{ m *metrics }

func (d *digestMetrics) UnknownRefs(n int64)       { d.m.unknownRefs.Add(float64(n)) }
func (d *digestMetrics) BreakerRefused()           { d.m.digestRefusals.Inc() }
func (d *digestMetrics) Deleted(blobs, size int64) { d.m.digestDeleted(blobs, size) }
func (d *digestMetrics) DeniedBucket()             { d.m.deniedBuckets.WithLabelValues(PauseDigests).Inc() }
func (d *digestMetrics) LayoutMismatch(n int)      { d.m.layoutMismatch.Set(float64(n)) }

func (d *digestMetrics) Tombstones(counts map[etcdstore.TombstoneState]int64) {
	for _, st := range etcdstore.AllTombstoneStates {
		d.m.tombstones.WithLabelValues(string(st)).Set(float64(counts[st]))
	}
}
