package digestsweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// A digest pass deletes nothing, and says why in its report, while any of
// these stands: the breaker refused its plan or a person paused the sweep
// (checkPlan), a live gateway serves another layout (layoutsDiffer), a
// complete into a reference source may have left references unrecorded
// (unrecorded), a reference source is denied to the reclaimer's key
// (denied), or the rebuild failed. The pass still judges and writes
// tombstones, which delete nothing by themselves.

// keepsAll reports whether the sweep deletes nothing this pass, and why.
func (s *digestSweep) keepsAll() (string, bool) {
	rep := &s.cur.Report
	switch {
	case rep.Kept != "":
		return rep.Kept, true
	case rep.Rebuild.Failed != "":
		return "the rebuild failed: " + rep.Rebuild.Failed, true
	case rep.Refused != "":
		return "refused by the breaker: " + rep.Refused, true
	}
	return "", false
}

// keepAll records that the sweep keeps everything this pass.
func (s *digestSweep) keepAll(why string) {
	if s.cur.Report.Kept == "" {
		s.cur.Report.Kept = why
	}
	s.log.Warn("digest sweep keeps everything this pass", "pass", s.cur.Pass, "why", why)
}

// The breaker stays tripped: a plan it refuses pauses the digest sweep in
// etcd (etcdstore.Keys.Pause(CursorName)), and while the pause exists every
// pass still judges the blobs and writes their tombstones (pending, ready,
// skipped: records that delete nothing by themselves), reports what the
// collector would do, and deletes nothing: the collector does not run, and
// the guards the pass took over are released by the prune's rules. Only a
// person removes the pause (reclaim.Reclaimer.Resume).

// checkPlan runs the breaker on the plan as counted and reads the pause. It
// returns why the collector must not run ("" when it may) and, when the
// breaker refused a plan of a sweep not yet paused and this is not a dry
// run, the pause to record with the cursor.
func (s *digestSweep) checkPlan(ctx context.Context) (string, *etcdstore.Pause, error) {
	refused := s.breaker()
	cur, err := s.store.GetPause(ctx, CursorName)
	switch {
	case err == nil:
		p := cur.Value
		why := sweep.Paused(CursorName, p.Pass, p.Term, p.At, p.Reason)
		if refused != "" {
			why += "; this plan is refused too: " + refused
		}
		s.cur.Report.Paused = true
		return why, nil, nil
	case !errors.Is(err, etcdstore.ErrNotFound):
		return "", nil, err
	case refused == "":
		return "", nil, nil
	case s.dry:
		s.log.Warn("the digest breaker would refuse this plan", "pass", s.cur.Pass, "refused", refused)
		return refused, nil, nil
	}
	s.metrics.BreakerRefused()
	s.log.Error("digest deletions refused by the breaker: nothing deleted, and the digest sweep is paused until a person resumes it",
		"pass", s.cur.Pass, "term", s.term.N, "refused", refused)
	compared, _ := json.Marshal(s.cur.Report.Breaker) // plain data always marshals
	return refused, &etcdstore.Pause{Sweep: CursorName, Reason: refused, Compared: compared,
		Pass: s.cur.Pass, Term: s.term.N, At: s.clock().UTC()}, nil
}

// layoutsDiffer compares the layout every live gateway publishes with its
// clock (etcdstore.GatewayClock.Layout) with the sweep's own, and returns
// why the pass keeps everything when any differs, or "". A gateway whose
// layout differs may store objects this sweep takes for plain (a source it
// lacks) or read blobs this sweep does not know, so nothing it wrote can
// be judged; a record without a layout is from a version that does not
// publish one, which is as unknown. The count of differing gateways is
// the layout-mismatch gauge.
func (s *digestSweep) layoutsDiffer(ctx context.Context) (string, error) {
	resp, err := s.cli().Get(ctx, s.keys().Gateways(), clientv3.WithPrefix())
	if err != nil {
		return "", fmt.Errorf("digestsweep: read the gateways' layouts: %w", err)
	}
	own := s.cfg.Layout.Fingerprint()
	var differ []string
	for _, kv := range resp.Kvs {
		var g etcdstore.GatewayClock
		if err := etcdstore.DecodeKV(etcdstore.GatewayRecord, kv, &g); err != nil {
			differ = append(differ, fmt.Sprintf("%s (record does not decode: %v)", kv.Key, err))
			continue
		}
		switch {
		case !g.Layouts:
			differ = append(differ, fmt.Sprintf("%s on %s (publishes no layout: an older version)", g.ID, g.Host))
		case g.Layout != own:
			differ = append(differ, fmt.Sprintf("%s on %s (layout %q)", g.ID, g.Host, g.Layout))
		}
	}
	s.metrics.LayoutMismatch(len(differ))
	if len(differ) == 0 {
		return "", nil
	}
	sort.Strings(differ)
	s.log.Error("gateways serve another layout than the reclaimer's: the digest sweep deletes nothing", "layout", own, "gateways", differ)
	return fmt.Sprintf("%d gateway(s) serve another layout than this reclaimer's (layout %q): %s; every gateway and reclaimer must have the same digests.namespaces, digests.sources and preset", len(differ), own, strings.Join(differ, ", ")), nil
}

// unrecorded looks at the records of completes into a reference source
// whose object's references may not be recorded (etcdstore.UnrecordedWrite)
// and returns why the pass keeps everything, or "". Such an object may name
// any blob, so while one record stands no blob is deleted:
//
//   - a record whose hold still exists is a complete in flight;
//   - a record whose hold is gone but which is not settled belongs to a
//     gateway that stopped mid-complete: it is written again, settled, so
//     that its mod revision comes after any write of the object;
//   - a settled record is deleted once a complete rebuild started after
//     its last write (Proof greater than its mod revision): that rebuild
//     read the object and recorded what it names.
//
// Every write is fenced and compares the record as read; a dry run writes
// nothing and only says why it would keep everything.
func (s *digestSweep) unrecorded(ctx context.Context) (string, error) {
	keys := s.keys()
	resp, err := s.cli().Get(ctx, keys.Unrecorded(), clientv3.WithPrefix())
	if err != nil {
		return "", fmt.Errorf("digestsweep: read unrecorded completes: %w", err)
	}
	waiting := 0
	var first etcdstore.UnrecordedWrite
	for _, kv := range resp.Kvs {
		var u etcdstore.UnrecordedWrite
		if err := etcdstore.DecodeKV(etcdstore.UnrecordedRecord, kv, &u); err != nil {
			// A record that does not decode keeps everything, for a person.
			s.log.Error("record of an unrecorded complete does not decode; everything is kept", "key", string(kv.Key))
			waiting++
			continue
		}
		cmp := clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)
		hold, err := s.cli().Get(ctx, keys.RefHold(u.ID), clientv3.WithCountOnly())
		if err != nil {
			return "", fmt.Errorf("digestsweep: read reference hold: %w", err)
		}
		switch {
		case hold.Count > 0:
		case !u.Settled:
			if !s.dry {
				u.Settled, u.Reason = true, "its complete's hold ended before the references were recorded (the gateway stopped)"
				if _, err := sweep.FencedTxn(ctx, s.cli(), s.term, []clientv3.Cmp{cmp}, clientv3.OpPut(string(kv.Key), etcdstore.MarshalRecord(u))); err != nil && !errors.Is(err, sweep.ErrChanged) {
					return "", err
				}
			}
			s.log.Warn("complete into a reference source left unrecorded by a gateway that stopped; everything is kept until a rebuild reads it", "bucket", u.Bucket, "key", u.Key, "complete", u.ID)
		case s.cur.Rebuild.Proof > kv.ModRevision:
			if !s.dry {
				if _, err := sweep.FencedTxn(ctx, s.cli(), s.term, []clientv3.Cmp{cmp}, clientv3.OpDelete(string(kv.Key))); err != nil && !errors.Is(err, sweep.ErrChanged) {
					return "", err
				}
			}
			s.log.Info("unrecorded complete read by a rebuild that started after it; its record is removed", "bucket", u.Bucket, "key", u.Key, "complete", u.ID)
			continue
		}
		if waiting == 0 {
			first = u
		}
		waiting++
	}
	if waiting == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d completed reference object(s) whose references are not recorded (%s/%s among them): everything is kept until a rebuild that starts after them has read every source", waiting, first.Bucket, first.Key), nil
}

// A bucket the backend refuses to the reclaimer's key (AccessDenied, its
// policy) is reported, not fatal to the pass:
//
//   - A denied namespace is skipped whole: none of its blobs is judged, so
//     none gets a tombstone, has one advanced or is deleted, and nothing is
//     inferred from its blobs being missing from the listing (nothing in
//     the sweep is). The other namespaces are judged as usual. A bounded
//     sweep that met one does not move its coverage record.
//   - A denied reference source (or content namespace, which the rebuild
//     reads as one) leaves the references it holds unknown, so the rebuild
//     is not complete and the sweep keeps every blob for the pass: no
//     namespace is judged, no tombstone written, nothing deleted.
//
// Either way the bucket is named in the report's DeniedBuckets, counted
// once a pass and logged. Any other failure is handled as before.

// isDenied reports whether err is the backend's AccessDenied.
func isDenied(err error) bool { return errors.Is(err, s3client.ErrAccessDenied) }

// denied records that the backend refused bucket, the bucket of the
// namespace or reference source called name (what: "namespace" or
// "source").
func (s *digestSweep) denied(bucket, what, name string, err error) {
	s.log.Warn("digest sweep: the backend denies the reclaimer's key the bucket of a "+what+" (AccessDenied); "+deniedEffect[what],
		"pass", s.cur.Pass, what, name, "bucket", bucket, "err", err)
	if slices.Contains(s.cur.Report.DeniedBuckets, bucket) {
		return
	}
	s.cur.Report.DeniedBuckets = append(s.cur.Report.DeniedBuckets, bucket)
	s.metrics.DeniedBucket()
}

// deniedEffect is what a denial does to the pass, by what was denied.
var deniedEffect = map[string]string{
	"namespace": "its blobs are not judged this pass",
	"source":    "the references it holds are unknown, so every blob is kept this pass",
}
