package reclaim

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// metrics are the reclaimer's series. Labels are results, verdicts and
// actions, never buckets, keys or upload ids, so the series stay few.
type metrics struct {
	passes       *prometheus.CounterVec
	planParts    *prometheus.GaugeVec
	planBytes    *prometheus.GaugeVec
	markedParts  prometheus.Counter
	markedBytes  prometheus.Counter
	deletedParts *prometheus.CounterVec
	deletedBytes *prometheus.CounterVec
	refusals     prometheus.Counter
	orphans      prometheus.Gauge
	orphanParts  prometheus.Gauge
	oldestOrphan prometheus.Gauge
	stuck        prometheus.Gauge
	missing      prometheus.Gauge
	duration     *prometheus.HistogramVec
	term         prometheus.Gauge
	leading      prometheus.Gauge
	lastFinished prometheus.Gauge
	// aroundGateway counts marks and deletes not done for a part the
	// gateway did not record, by the verdict (mark, delete).
	aroundGateway *prometheus.CounterVec

	// The digest sweep's series.
	tombstones         *prometheus.GaugeVec
	digestDeletedBlobs prometheus.Counter
	digestDeletedBytes prometheus.Counter
	digestRefusals     prometheus.Counter
	unknownRefs        prometheus.Counter

	// paused is 1 for a sweep that its breaker paused, by sweep.
	paused *prometheus.GaugeVec
	// covered is when a sweep's bounded passes last covered its whole
	// keyspace, by sweep.
	covered *prometheus.GaugeVec
	// deniedBuckets counts bucket listings the backend refused, by sweep.
	deniedBuckets *prometheus.CounterVec
	// layoutMismatch is how many live gateways serve another layout.
	layoutMismatch prometheus.Gauge
	// restored is 1 while the restore mark stands (etcd was restored from
	// a snapshot); witnessFailures counts rounds of the restore witness
	// that failed.
	restored        prometheus.Gauge
	witnessFailures prometheus.Counter
	// newerRecords counts passes stopped on a record of a newer release's
	// layout.
	newerRecords prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "sweepgate", "reclaim"
	m := &metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "passes_total",
			Help: "Upload sweep passes by result: ok, refused (breaker), stopped (a failed or missing input), lost (the term ended), dry_run."}, []string{"result"}),
		planParts: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "plan_parts",
			Help: "Parts by verdict (keep, mark, delete, hold) in the last finished pass's plan."}, []string{"verdict"}),
		planBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "plan_bytes",
			Help: "Bytes by verdict (keep, mark, delete, hold) in the last finished pass's plan."}, []string{"verdict"}),
		markedParts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "marked_parts_total",
			Help: "Parts of the uploads the reclaimer marked expired (a first pass: nothing is deleted yet)."}),
		markedBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "marked_bytes_total",
			Help: "Bytes of the uploads the reclaimer marked expired (a first pass: nothing is deleted yet)."}),
		deletedParts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deleted_parts_total",
			Help: "Parts the reclaimer deleted (aborted on the backend), by outcome: aborted, or cleanup_pending when the backend's answer was unclear and the reconciler settles it."}, []string{"outcome"}),
		deletedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deleted_bytes_total",
			Help: "Bytes the reclaimer deleted, by outcome as deleted_parts_total: the sum over outcomes is the bytes reclaimed or being reclaimed."}, []string{"outcome"}),
		newerRecords: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "newer_record_stops_total",
			Help: "Passes stopped because they met a record that a newer sweepgate release wrote in a layout this binary does not read."}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "breaker_refusals_total",
			Help: "Passes whose plan the breaker refused (above reclaim.max_delete, max_delete_uploads, max_mark or their fractions), which pauses the upload sweep; nothing was marked or deleted. Passes of a sweep already paused are not counted."}),
		orphans: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "orphans_held",
			Help: "Backend uploads without a session held by the last finished pass, waiting for a person."}),
		orphanParts: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "orphan_parts_held",
			Help: "Parts of the uploads held as orphans by the last finished pass."}),
		oldestOrphan: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "oldest_orphan_age_seconds",
			Help: "Age, at the last finished pass's clock, of the oldest orphan that pass's report lists (initiated time); 0 when it held none."}),
		stuck: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "stuck_sessions",
			Help: "Sessions completing for longer than the stuck limit, as of the last finished pass."}),
		missing: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "missing_uploads",
			Help: "Live sessions whose backend upload is gone, as of the last finished pass."}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "pass_duration_seconds",
			Help: "Duration of upload sweep passes by result.", Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 12)}, []string{"result"}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "term",
			Help: "The reclaimer term this process holds, 0 when it does not lead."}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leading",
			Help: "1 when this process leads the reclaimer election, else 0."}),
		lastFinished: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_pass_finished_timestamp_seconds",
			Help: "When the last pass that ran to its end (ok or refused) finished; alert when it falls behind."}),
		aroundGateway: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "activity_around_gateway_total",
			Help: "Marks (verdict mark) and deletes (verdict delete, the mark reverted) not done because the backend held a part newer than the gateway recorded: a writer around the gateway."}, []string{"verdict"}),
		tombstones: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "tombstones",
			Help: "Digest tombstones by state (pending, ready, skipped, deleted) after the last digest sweep."}, []string{"state"}),
		digestDeletedBlobs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "digest_deleted_total",
			Help: "Unreferenced blobs the digest sweep's collector deleted."}),
		digestDeletedBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "digest_deleted_bytes_total",
			Help: "Bytes of the unreferenced blobs the digest sweep's collector deleted."}),
		digestRefusals: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "digest_breaker_refusals_total",
			Help: "Digest sweeps whose plan the breaker refused (above digests.max_delete, max_mark or their fractions), which pauses the digest sweep; nothing was deleted. Sweeps already paused are not counted."}),
		unknownRefs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "unknown_producer_refs_total",
			Help: "References the rebuild found in reference objects written around the gateway: a producer it does not know about. They are retained."}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "paused",
			Help: "1 while a sweep (uploads, digests) is paused because its breaker refused a plan: it marks and deletes nothing until a person runs 'sweepgate reclaim resume'. Set by the leader after each pass, and by the process that resumes."}, []string{"sweep"}),
		covered: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "covered_timestamp_seconds",
			Help: "With bounded passes (reclaim.pass_uploads, digests.pass_blobs), when a sweep (uploads, digests) last covered its whole keyspace: the clock of the pass that began its last complete cycle, so everything older was listed since; 0 before the first complete cycle. Set by the leader after each pass."}, []string{"sweep"}),
	}
	m.deniedBuckets = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "denied_buckets_total",
		Help: "Buckets the backend refused with AccessDenied (the reclaimer key's policy), by sweep (uploads, digests), once a pass each: the upload sweep skips the bucket, judging nothing in it, and names it in the pass report's denied_buckets; the digest sweep skips a denied namespace, keeps every blob for a denied reference source, and names it in the report's digests.denied_buckets."}, []string{"sweep"})
	m.layoutMismatch = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "layout_mismatch_gateways",
		Help: "Live gateways whose content-addressed layout (digests.namespaces, digests.sources, preset) differs from the leader's, or which publish none (an older version), as the last digest sweep found them: while it is above 0 the digest sweep deletes nothing. Set by the leader each pass."})
	m.restored = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "etcd_restored",
		Help: "1 while the restore mark stands: the leader found the backend's copy of the restore witness ahead of etcd's, so etcd was restored from a snapshot and lost writes. No pass deletes anything (no upload marked or aborted, no blob deleted) until every live gateway has published its clock since the mark and a complete rebuild started after it has finished. Set by the leader at each pass and on detection."})
	m.witnessFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "witness_failures_total",
		Help: "Rounds of the restore witness (the leader's timer and each pass start) that failed to read or write etcd's or the backend's copy (reclaim.witness_bucket, reclaim.witness_key); a pass whose round fails stops and deletes nothing."})
	if reg != nil {
		reg.MustRegister(m.deniedBuckets, m.layoutMismatch, m.restored, m.witnessFailures, m.newerRecords)
		reg.MustRegister(m.passes, m.planParts, m.planBytes, m.markedParts, m.markedBytes, m.deletedParts, m.deletedBytes, m.refusals,
			m.orphans, m.orphanParts, m.oldestOrphan, m.stuck, m.missing, m.duration, m.term, m.leading, m.lastFinished, m.aroundGateway,
			m.tombstones, m.digestDeletedBlobs, m.digestDeletedBytes, m.digestRefusals, m.unknownRefs, m.paused, m.covered)
	}
	// Every result and outcome is exported from the start, at 0: rate()
	// and increase() see nothing of a series' first sample, so the first
	// stopped pass of a process would otherwise never reach an alert.
	for _, res := range []string{"ok", "refused", "stopped", "lost", "dry_run"} {
		m.passes.WithLabelValues(res)
	}
	for _, sw := range pauseSweeps {
		m.paused.WithLabelValues(sw)
	}
	for _, sw := range pauseSweeps {
		m.deniedBuckets.WithLabelValues(sw)
	}
	for _, v := range []Verdict{Mark, Delete} {
		m.aroundGateway.WithLabelValues(string(v))
	}
	for _, out := range []string{"aborted", "cleanup_pending"} {
		m.deletedParts.WithLabelValues(out)
		m.deletedBytes.WithLabelValues(out)
	}
	return m
}

// result names how a pass ended, for the passes and duration series.
func result(rep Report, err error) string {
	switch {
	case rep.DryRun && err == nil:
		return "dry_run"
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNotLeader):
		return "lost"
	case err != nil || rep.Stopped != "":
		return "stopped"
	case rep.Refused != "":
		return "refused"
	}
	return "ok"
}

func (m *metrics) pass(rep Report, err error, d time.Duration) {
	res := result(rep, err)
	m.passes.WithLabelValues(res).Inc()
	m.duration.WithLabelValues(res).Observe(d.Seconds())
	if errors.Is(err, etcdstore.ErrNewerRecord) {
		m.newerRecords.Inc()
	}
	if rep.Refused != "" && !rep.Paused && rep.Restored == "" && !rep.DryRun {
		m.refusals.Inc()
	}
	if res != "ok" && res != "refused" && res != "dry_run" {
		return
	}
	for v, c := range map[Verdict]Count{Keep: rep.Uploads.Keep, Mark: rep.Uploads.Mark, Delete: rep.Uploads.Delete, Hold: rep.Uploads.Hold} {
		m.planParts.WithLabelValues(string(v)).Set(float64(c.Parts))
		m.planBytes.WithLabelValues(string(v)).Set(float64(c.Bytes))
	}
	m.orphans.Set(float64(rep.Uploads.Hold.Sessions))
	m.orphanParts.Set(float64(rep.Uploads.Hold.Parts))
	m.oldestOrphan.Set(oldestOrphanAge(rep).Seconds())
	m.stuck.Set(float64(rep.Totals.Stuck))
	m.missing.Set(float64(rep.Totals.Missing))
	if !rep.DryRun {
		m.lastFinished.Set(float64(rep.Finished.Unix()))
		m.setCovered(uploadSweep, rep.Slice)
		if rep.Digests != nil {
			m.setCovered(digestsweep.CursorName, rep.Digests.Slice)
		}
	}
}

// setCovered sets the covered gauge of sweep from its slice, if bounded.
func (m *metrics) setCovered(sweep string, s *sweep.Slice) {
	if s == nil {
		return
	}
	v := 0.0
	if !s.Covered.IsZero() {
		v = float64(s.Covered.Unix())
	}
	m.covered.WithLabelValues(sweep).Set(v)
}

// oldestOrphanAge is the age of the oldest orphan rep lists, 0 when none:
// one number lets an alert say "held for longer than a day" without a
// label per upload.
// A report lists at most maxReportList orphans, so past that the oldest
// listed stands for all: enough to say that orphans wait for a person.
func oldestOrphanAge(rep Report) time.Duration {
	clock := rep.Clock
	if clock.IsZero() {
		clock = rep.Finished
	}
	var oldest time.Duration
	for _, o := range rep.Orphans {
		if o.Initiated.IsZero() {
			continue
		}
		oldest = max(oldest, clock.Sub(o.Initiated))
	}
	return oldest
}

// marked counts an upload marked expired.
func (m *metrics) marked(parts int, size int64) {
	m.markedParts.Add(float64(parts))
	m.markedBytes.Add(float64(size))
}

// deleted counts an upload deleted, by outcome (aborted, cleanup_pending).
func (m *metrics) deleted(outcome string, parts int, size int64) {
	m.deletedParts.WithLabelValues(outcome).Add(float64(parts))
	m.deletedBytes.WithLabelValues(outcome).Add(float64(size))
}

func (m *metrics) leader(term int64, ok bool) {
	if ok {
		m.term.Set(float64(term))
		m.leading.Set(1)
		return
	}
	m.term.Set(0)
	m.leading.Set(0)
}

// digestDeleted counts blobs the collector deleted.
func (m *metrics) digestDeleted(blobs, size int64) {
	m.digestDeletedBlobs.Add(float64(blobs))
	m.digestDeletedBytes.Add(float64(size))
}

// setPaused sets the paused gauge of sweep.
func (m *metrics) setPaused(sweep string, paused bool) {
	v := 0.0
	if paused {
		v = 1
	}
	m.paused.WithLabelValues(sweep).Set(v)
}

// setRestored sets the restore mark's gauge.
func (m *metrics) setRestored(standing bool) {
	v := 0.0
	if standing {
		v = 1
	}
	m.restored.Set(v)
}
