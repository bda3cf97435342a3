package reclaim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// restoreGate runs at the start of every pass, after the clock check and
// before anything is settled or decided (see witness.go). A real pass
// first runs a round of the restore witness: a round that fails stops the
// pass, since a restore of etcd could not be ruled out. Then it reads the
// restore mark: a standing mark the leader can clear (clearRestored) is
// cleared; one it cannot makes p.restored say why the pass deletes
// nothing. p.restoreFloor is the mark's revision, standing or cleared.
func (p *pass) restoreGate(ctx context.Context) error {
	r := p.r
	if !p.dry {
		if _, err := r.advanceWitness(ctx, p.term); err != nil {
			r.metrics.witnessFailures.Inc()
			return fmt.Errorf("the restore witness could not be checked, so a restore of etcd from a snapshot cannot be ruled out; nothing marked or deleted: %w", err)
		}
	}
	v, err := r.store.GetRestored(ctx)
	if errors.Is(err, etcdstore.ErrNotFound) {
		if !p.dry {
			r.metrics.setRestored(false)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	p.restoreFloor = v.Value.Rev
	if !v.Value.Standing() {
		if !p.dry {
			r.metrics.setRestored(false)
		}
		return nil
	}
	wait := "the leader has checked the conditions of clearing"
	if !p.dry {
		cleared, why, err := r.clearRestored(ctx, p.term, v)
		if err != nil {
			return err
		}
		r.metrics.setRestored(!cleared)
		if cleared {
			return nil
		}
		wait = why
	}
	m := v.Value
	p.restored = fmt.Sprintf("etcd was restored from a snapshot (restore mark at revision %d, detected %s: %s): nothing is marked or deleted until every live gateway has published its clock since the mark and a complete rebuild started after it has finished; now %s",
		v.ModRev, m.DetectedAt.Format(time.RFC3339), m.Reason, wait)
	p.restoredRev = v.ModRev
	r.log.Warn("etcd was restored: this pass deletes nothing", "pass_started", p.r.now().UTC(), "mark_revision", v.ModRev, "waiting", wait)
	return nil
}

// clearRestored clears the standing restore mark v under term t when
// both of its conditions hold: every live gateway's clock record was
// written after the mark (each process runs again on etcd as it is now,
// and a gateway that died meanwhile has lost its lease), and a complete
// rebuild started after the mark (every reference a source on the backend
// holds is recorded again). It returns whether it cleared the mark, or
// what it waits for. The mark is cleared only as it was read (fenced), and
// stays as the record of the restore.
func (r *Reclaimer) clearRestored(ctx context.Context, t term, v etcdstore.Versioned[etcdstore.Restored]) (bool, string, error) {
	resp, err := r.cli().Get(ctx, r.keys().Gateways(), clientv3.WithPrefix())
	if err != nil {
		return false, "", fmt.Errorf("reclaim: read the gateways' clock records: %w", err)
	}
	var stale []string
	for _, kv := range resp.Kvs {
		if kv.ModRevision <= v.ModRev {
			id, _ := etcdstore.LastSegment(string(kv.Key))
			stale = append(stale, id)
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		return false, fmt.Sprintf("waiting for %d gateway(s) to publish their clock after the mark: %s", len(stale), strings.Join(stale, ", ")), nil
	}
	if r.digests != nil {
		ok, why, err := r.digests.RebuiltAfter(ctx, v.ModRev)
		if err != nil {
			return false, "", err
		}
		if !ok {
			return false, "waiting for a complete rebuild started after the mark: " + why, nil
		}
	}
	now := r.now().UTC()
	m := v.Value
	m.Cleared = &now
	m.ClearedWhy = fmt.Sprintf("every live gateway (%d) published its clock after the mark, and a complete rebuild started after it (or none has a reference source)", len(resp.Kvs))
	key := r.keys().Restored()
	_, err = fencedTxn(ctx, r.cli(), t, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", v.ModRev)},
		clientv3.OpPut(key, etcdstore.MarshalRestored(m)))
	if err != nil {
		return false, "", fmt.Errorf("reclaim: clear the restore mark: %w", err)
	}
	r.log.Info("restore mark cleared: passes delete again; sessions recorded before it are marked afresh before any delete",
		"mark_revision", v.ModRev, "detected_at", m.DetectedAt, "why", m.ClearedWhy, "term", t.N)
	return true, "", nil
}

// RestoreMark reads the restore mark (nil when etcd was never found
// restored) and sets the restored gauge from it.
func (r *Reclaimer) RestoreMark(ctx context.Context) (*etcdstore.Restored, error) {
	v, err := r.store.GetRestored(ctx)
	if errors.Is(err, etcdstore.ErrNotFound) {
		r.metrics.setRestored(false)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reclaim: %w", err)
	}
	r.metrics.setRestored(v.Value.Standing())
	return &v.Value, nil
}

// restoreRemark is the rule for sessions recorded before a restore: an
// upload the checklist would delete whose session was last written at or
// below the restore mark's revision (floor) is marked afresh instead. Its
// mark may come from the snapshot, older than what a client did since
// (activity, parts, a revival etcd lost), so it is never aborted on it:
// the new mark reads the backend's parts first (checkBackend) and starts
// delete_after anew, during which any activity revives the upload.
func restoreRemark(d Decision, sessionRev, floor int64) Decision {
	if d.Verdict != Delete || floor == 0 || sessionRev > floor {
		return d
	}
	d.Verdict = Mark
	d.Reason = fmt.Sprintf("marked expired before etcd was restored from a snapshot (session revision %d, restore mark revision %d): the mark is made again, not acted on; was: %s",
		sessionRev, floor, d.Reason)
	return d
}

// explainRestore applies to an upload's explanation what the restore mark
// adds to a pass's decision: a session recorded at or below the latest
// mark's revision is marked afresh rather than deleted (restoreRemark),
// and while the mark stands nothing is marked or deleted at all (a note).
func (r *Reclaimer) explainRestore(ctx context.Context, ex *UploadExplanation, d *Decision) error {
	v, err := r.store.GetRestored(ctx)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	if ex.Session != nil {
		*d = restoreRemark(*d, ex.Session.ModRevision, v.Value.Rev)
	}
	if v.Value.Standing() {
		ex.Notes = append(ex.Notes, fmt.Sprintf("etcd was restored from a snapshot (restore mark at revision %d, detected %s): no pass marks or deletes anything until every live gateway has published its clock since and a complete rebuild started after it has finished",
			v.ModRev, v.Value.DetectedAt.Format(time.RFC3339)))
	}
	return nil
}
