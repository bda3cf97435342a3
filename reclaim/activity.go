package reclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// Activity the gateway did not record. Parts can reach the backend without
// passing this gateway cluster (a presigned URL made against the backend, a
// second cluster behind the same balancer), and a part can stream for longer
// than the grace. So besides the recorded activity:
//
//   - a part in flight through the gateway has a record under its lease
//     (etcdstore.Keys.InFlight: the part's own in keyspace schema 1, its
//     upload's lingering one on that gateway from schema 2); an upload
//     with one is kept, and every mark and abort intent compares that none
//     exists (decidedFrom);
//   - right before a mark or an abort intent, the upload's parts are read
//     from the backend and the newest part the gateway did not record
//     (unrecordedNewest) counts as activity: at a mark, such a part newer
//     than the recorded activity and within the grace keeps the upload; at
//     a delete, such a part newer than the mark (less the clock skew
//     allowance, since the backend's clock is not ours) reverts the mark.
//     Both mean a writer around the gateway: counted, logged and reported.
//     A failed read keeps the upload.
//
// Parts are read only for the uploads about to be marked or deleted, so the
// cost of a pass stays that of its plan. The plan itself reads the
// backend's parts only of the uploads it would delete (the breaker counts
// their parts), holds (an orphan has no part records) or has no part
// record of; any other upload counts the parts the gateway recorded.

// streaming keeps an upload that has parts in flight: d's verdict becomes
// Keep when it would mark or delete.
func streaming(d Decision, inFlight int, since time.Time) Decision {
	if inFlight == 0 || (d.Verdict != Mark && d.Verdict != Delete) {
		return d
	}
	d.Verdict = Keep
	d.Reason = fmt.Sprintf("a part is streaming (%d in-flight records of the gateway, the latest written at %s): kept while it streams",
		inFlight, since.Format(time.RFC3339))
	return d
}

// backendNewest reads the upload's parts from the backend and the part
// records of the gateway, and returns the newest time among the parts the
// gateway did not record (unrecordedNewest; zero when none). gone says the
// upload or its bucket no longer exists.
func (p *pass) backendNewest(ctx context.Context, e planned) (newest time.Time, gone bool, err error) {
	parts, err := p.r.s3.ListParts(ctx, e.Bucket, e.Key, e.UploadID)
	if errors.Is(err, s3client.ErrNoSuchUpload) || errors.Is(err, s3client.ErrNoSuchBucket) {
		return time.Time{}, true, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	recorded, err := p.r.store.ListParts(ctx, e.UploadID)
	if err != nil {
		return time.Time{}, false, err
	}
	return unrecordedNewest(parts, recorded, p.r.cfg.ClockSkew), false, nil
}

// unrecordedNewest returns the newest time among the backend's parts that
// the gateway did not record, zero when there is none. A part is recorded
// when a part record of the gateway names its number and ETag and was
// written no earlier than skew before the part's time on the backend: its
// start and end are the gateway's recorded activity already, so it is never
// taken for a writer around the gateway, however the two clocks differ
// within the allowance. A part re-sent around the gateway with the same
// bytes later than that reads as unrecorded; a part whose record was lost
// does too, which keeps the upload (on doubt, keep).
func unrecordedNewest(parts []s3client.Part, recorded []etcdstore.Part, skew time.Duration) time.Time {
	seen := make(map[int]etcdstore.Part, len(recorded))
	for _, r := range recorded {
		seen[r.Number] = r
	}
	var newest time.Time
	for _, pt := range parts {
		r, ok := seen[pt.Number]
		if ok && strings.Trim(r.ETag, `"`) == strings.Trim(pt.ETag, `"`) && !pt.LastModified.After(r.At.Add(skew)) {
			continue
		}
		if pt.LastModified.After(newest) {
			newest = pt.LastModified
		}
	}
	return newest
}

// checkBackend reads the upload's parts right before action e and settles
// the action when they forbid it: ok is true when the action may go on.
// A failed read keeps the upload (unread); a vanished upload is left alone
// (changed); a part the gateway did not see keeps it (aroundGateway).
func (p *pass) checkBackend(ctx context.Context, e planned, sess etcdstore.Session, next cursor) (ok bool, err error) {
	newest, gone, rerr := p.backendNewest(ctx, e)
	switch {
	case rerr != nil:
		return false, p.unread(ctx, e, next, rerr)
	case gone:
		return false, p.skip(ctx, e, next)
	case newest.IsZero():
		return true, nil
	}
	if !backendForbids(e.Verdict, newest, e.LastActivity, sess.ExpiredAt, p.r.now().UTC(), p.r.policy()) {
		return true, nil
	}
	if e.Verdict == Mark {
		return false, p.aroundGateway(ctx, e, next, newest, nil)
	}
	return false, p.aroundGateway(ctx, e, next, newest, &sess)
}

// backendForbids reports whether the newest part on the backend (zero:
// none) forbids action v, at now, on a session whose recorded activity is
// recorded and whose mark is expiredAt: a mark, when the part is newer than
// the recorded activity and within the grace; a delete, when the part is
// not older than the mark less the clock skew allowance (the backend's
// clock may be behind ours by that much: on doubt the upload is kept).
func backendForbids(v Verdict, newest, recorded time.Time, expiredAt *time.Time, now time.Time, p Policy) bool {
	switch {
	case newest.IsZero():
		return false
	case v == Mark:
		return newest.After(recorded) && now.Sub(newest) <= p.Grace
	case v == Delete:
		return expiredAt == nil || newest.Add(p.ClockSkew).After(*expiredAt)
	}
	return false
}

// unread keeps an upload whose parts could not be read before its action:
// nothing is marked or deleted on a failed read.
func (p *pass) unread(ctx context.Context, e planned, next cursor, cause error) error {
	next.Acted.Unread.add(e.Parts, e.Bytes)
	if _, err := fencedTxn(ctx, p.r.cli(), p.term, nil, cursorOp(p.r.keys(), &next)); err != nil {
		return err
	}
	p.r.log.Warn("parts not read from the backend; the upload is kept, not "+actionWord(e.Verdict), "pass", p.cur.Pass,
		"bucket", e.Bucket, "upload_id", e.UploadID, "err", cause)
	p.cur = next
	return nil
}

// aroundGateway keeps an upload whose backend parts show activity the
// gateway did not record. At a mark nothing changes; at a delete (sess
// set) the mark is reverted, expired -> active, in a fenced transaction
// compared with what the plan saw, with the part's time as the session's
// last activity (never later than now, so a fast backend clock cannot stop
// later passes).
func (p *pass) aroundGateway(ctx context.Context, e planned, next cursor, newest time.Time, sess *etcdstore.Session) error {
	done := next
	done.Acted.AroundGateway.add(e.Parts, e.Bytes)
	keys := p.r.keys()
	ops := []clientv3.Op{cursorOp(keys, &done)}
	var cmps []clientv3.Cmp
	why := fmt.Sprintf("a part on the backend at %s, newer than the recorded activity at %s and within the grace %s: written around the gateway",
		newest.Format(time.RFC3339Nano), e.LastActivity.Format(time.RFC3339Nano), p.r.cfg.Grace)
	if sess != nil {
		marked := "no recorded mark time"
		if sess.ExpiredAt != nil {
			marked = "the mark at " + sess.ExpiredAt.Format(time.RFC3339Nano)
		}
		why = fmt.Sprintf("a part on the backend at %s, not older than %s less the clock skew allowance %s: written around the gateway; mark reverted",
			newest.Format(time.RFC3339Nano), marked, p.r.cfg.ClockSkew)
		last := newest
		if now := p.r.now().UTC(); now.Before(last) {
			last = now
		}
		if last.After(sess.LastActivity) {
			sess.LastActivity = last
		}
		sess.ExpiredAt = nil
		p.transition(sess, etcdstore.StateActive, why)
		val, err := etcdstore.MarshalSession(sess)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(keys.Session(e.Bucket, e.UploadID), val))
		cmps = p.decidedFrom(e)
	}
	_, err := fencedTxn(ctx, p.r.cli(), p.term, cmps, ops...)
	if errors.Is(err, errChanged) {
		return p.skip(ctx, e, next)
	}
	if err != nil {
		return err
	}
	p.cur = done
	p.r.metrics.aroundGateway.WithLabelValues(string(e.Verdict)).Inc()
	p.r.log.Warn("activity around the gateway: the upload is kept, not "+actionWord(e.Verdict), "pass", p.cur.Pass, "term", p.term.N,
		"bucket", e.Bucket, "key", e.Key, "upload_id", e.UploadID, "newest_part", newest, "why", why)
	return nil
}

func actionWord(v Verdict) string {
	if v == Mark {
		return "marked"
	}
	return "deleted"
}
