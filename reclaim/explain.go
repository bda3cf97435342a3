package reclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// Explanations answer an operator's "why is this still here?" and "why did
// this go?" about one upload or one blob, without reading code: they run the
// sweep's own checklist (classify; for a blob, the digest sweep's, in
// package digests) on what etcd and the backend hold now, record every rule
// tried up to the one that decides, and add the records that tell the story
// (session history, orphan record). They write nothing anywhere, so any
// gateway may explain, leader or not, and as often as asked.

// ErrNotKnown says nothing is known about the upload or digest asked
// about: no record in etcd and nothing on the backend.
var ErrNotKnown = sweep.ErrNotKnown

// ErrDigestSweepOff says the reclaimer judges no blobs (no CAS namespace is
// configured), so there is nothing to explain about a digest.
var ErrDigestSweepOff = errors.New("reclaim: the digest sweep is off (no CAS namespace is configured)")

// maxLocatePages bounds the listing pages read to find an upload that has
// no session (and so no recorded key): 100 pages of 1000 keys.
const maxLocatePages = 100

// ExplainPolicy is the upload sweep's policy as an explanation shows it.
type ExplainPolicy struct {
	Grace       string `json:"grace"`
	DeleteAfter string `json:"delete_after"`
	StuckLimit  string `json:"stuck_limit"`
	ClockSkew   string `json:"clock_skew"`
}

// UploadExplanation says what the upload sweep does with one upload now,
// and why.
type UploadExplanation struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	// Now is the clock the checklist ran at; Revision the etcd revision
	// the session and activity were read at.
	Now      time.Time `json:"now"`
	Revision int64     `json:"revision"`
	// Verdict is keep, mark, delete or hold (as a pass would decide now), or
	// absent: the backend has no such upload, so there is nothing to keep or
	// delete.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Stuck flags a session completing past the stuck limit.
	Stuck   bool          `json:"stuck"`
	DryRun  bool          `json:"dry_run"`
	Policy  ExplainPolicy `json:"policy"`
	Backend ExplainUpload `json:"backend"`
	// Session is null for an orphan.
	Session *ExplainSession `json:"session"`
	Steps   []sweep.Step    `json:"steps"`
	// History is the session's recorded transitions, oldest first.
	History []ExplainTransition `json:"history"`
	// Orphan is the operator's recorded decision about the upload when it
	// had no session (adopted, deleted), if any.
	Orphan   *ExplainOrphan     `json:"orphan"`
	LastPass *sweep.PassSummary `json:"last_pass"`
	// Notes are what else bears on the verdict (a refused last pass, dry
	// run).
	Notes []string `json:"notes"`
}

// ExplainUpload is what the backend holds of the upload.
type ExplainUpload struct {
	Present bool  `json:"present"`
	Parts   int   `json:"parts"`
	Bytes   int64 `json:"bytes"`
	// Initiated is known when the upload was found by listing (an orphan).
	Initiated *time.Time `json:"initiated"`
	// NewestPart is the newest part's time on the backend's clock, null
	// without parts; NewestUnrecorded the newest among the parts the
	// gateway did not record, which a pass compares right before a mark
	// or delete (null: none).
	NewestPart       *time.Time `json:"newest_part"`
	NewestUnrecorded *time.Time `json:"newest_unrecorded_part"`
}

// ExplainSession is the session record.
type ExplainSession struct {
	State      string    `json:"state"`
	StateSince time.Time `json:"state_since"`
	Owner      string    `json:"owner"`
	Created    time.Time `json:"created"`
	// LastActivity is the session record's own; Activity the activity key,
	// which parts write. The checklist uses the latest of both and Created.
	LastActivity  time.Time        `json:"last_activity"`
	ExpiredAt     *time.Time       `json:"expired_at"`
	Uncertain     string           `json:"uncertain"`
	AbortAttempts int              `json:"abort_attempts"`
	ModRevision   int64            `json:"mod_revision"`
	Activity      *ExplainActivity `json:"activity"`
	// PartsInFlight counts the upload's in-flight records (one per part
	// in schema 1, one per gateway with parts of it in flight or just
	// ended from schema 2); while any exists, the upload is kept.
	PartsInFlight int `json:"parts_in_flight"`
	inFlightSince time.Time
}

// ExplainActivity is the upload's activity key.
type ExplainActivity struct {
	At          time.Time `json:"at"`
	What        string    `json:"what"`
	PartNumber  int       `json:"part_number"`
	ModRevision int64     `json:"mod_revision"`
}

// ExplainTransition is one recorded state change.
type ExplainTransition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Actor  string    `json:"actor"`
	Term   int64     `json:"term"`
	Reason string    `json:"reason"`
}

// ExplainOrphan is an operator's recorded decision about an orphan.
type ExplainOrphan struct {
	Action    string    `json:"action"`
	Principal string    `json:"principal"`
	Term      int64     `json:"term"`
	At        time.Time `json:"at"`
	Parts     int       `json:"parts"`
	Bytes     int64     `json:"bytes"`
	Outcome   string    `json:"outcome"`
}

// verdictAbsent is the explanation verdict that is not a Verdict of the
// sweep: the backend holds no such upload, so nothing is kept or deleted.
const verdictAbsent = "absent"

// ruleNotOnBackend is the explanation's first upload rule: the sweep only
// judges uploads the backend holds.
const ruleNotOnBackend = "not_on_backend"

// ExplainUpload explains what a pass would do now with the upload uploadID
// of bucket: it lists the upload's parts on the backend, reads its session
// and activity at one etcd revision and runs the upload sweep's checklist
// (Classify) on them. key is needed only for an upload without a session
// (an orphan), whose key nothing records; without it the bucket's uploads
// are listed to find it. It writes nothing. It fails with ErrNotKnown when
// there is neither a session nor a backend upload.
func (r *Reclaimer) ExplainUpload(ctx context.Context, bucket, uploadID, key string) (UploadExplanation, error) {
	now := r.now().UTC()
	p := r.policy()
	ec, _, err := r.readElapsed(ctx)
	if err != nil {
		return UploadExplanation{}, err
	}
	p.Elapsed = r.elapsedNow(ec.Elapsed)
	ex := UploadExplanation{
		Bucket: bucket, UploadID: uploadID, Now: now, DryRun: r.cfg.DryRun,
		Policy: ExplainPolicy{Grace: p.Grace.String(), DeleteAfter: p.DeleteAfter.String(), StuckLimit: p.StuckLimit.String(), ClockSkew: p.ClockSkew.String()},
		Steps:  []sweep.Step{}, History: []ExplainTransition{}, Notes: []string{},
	}
	sess, act, err := r.explainSessionAt(ctx, &ex, bucket, uploadID)
	if err != nil {
		return ex, err
	}
	if ex.Orphan, err = r.orphanRecord(ctx, bucket, uploadID); err != nil {
		return ex, err
	}
	if err := r.lastPass(ctx, &ex.LastPass); err != nil {
		return ex, err
	}

	searched, err := r.explainBackendUpload(ctx, &ex, bucket, uploadID, key)
	if err != nil {
		return ex, err
	}
	if !ex.Backend.Present && sess == nil {
		if searched != "" {
			return ex, fmt.Errorf("%w: no session, and no such upload among %s", ErrNotKnown, searched)
		}
		return ex, ErrNotKnown
	}

	var cl sweep.Checklist
	cl.Step(ruleNotOnBackend, !ex.Backend.Present, func() (string, sweep.Values) {
		v := sweep.Values{"bucket": bucket, "key": ex.Key, "parts": ex.Backend.Parts, "bytes": ex.Backend.Bytes}
		if ex.Backend.Present {
			return fmt.Sprintf("the backend holds the upload: %d part(s), %d bytes", ex.Backend.Parts, ex.Backend.Bytes), v
		}
		return "the backend has no such upload: a pass never sees it, and has nothing to keep or delete", v
	})
	if !ex.Backend.Present {
		ex.Verdict = verdictAbsent
		switch {
		case sess.State.Terminal():
			ex.Reason = fmt.Sprintf("the backend has no such upload and the session is %s: nothing is left to reclaim (the history says who ended it, when and why)", sess.State)
		default:
			ex.Reason = fmt.Sprintf("the backend has no such upload, yet the session is %s: passes report it among the missing sessions, for the reconciler or a person to settle", sess.State)
		}
		ex.Steps = cl.Steps
		return ex, nil
	}
	d := classify(p, now, sess, act, &cl)
	ex.Steps = cl.Steps
	if !d.FutureTime {
		r.explainActivity(&ex, &d, p, now, sess)
	}
	if err := r.explainRestore(ctx, &ex, &d); err != nil {
		return ex, err
	}
	ex.Verdict, ex.Reason, ex.Stuck = string(d.Verdict), d.Reason, d.Stuck
	r.explainNotes(&ex, d, p)
	return ex, nil
}

// explainActivity applies to d what a pass adds to the checklist: a part
// in flight keeps the upload, and so does a part on the backend that
// forbids the mark or delete (backendForbids, as the pass runs it right
// before acting).
func (r *Reclaimer) explainActivity(ex *UploadExplanation, d *Decision, p Policy, now time.Time, sess *etcdstore.Session) {
	if ex.Session == nil {
		return
	}
	*d = streaming(*d, ex.Session.PartsInFlight, ex.Session.inFlightSince)
	u := ex.Backend.NewestUnrecorded
	if u == nil || !backendForbids(d.Verdict, *u, d.LastActivity, sess.ExpiredAt, now, p) {
		return
	}
	what := "a mark"
	if d.Verdict == Delete {
		what = "a delete (the pass reverts the mark)"
	}
	d.Verdict = Keep
	d.Reason = fmt.Sprintf("the backend holds a part from %s that the gateway did not record: written around the gateway, so %s is not done",
		u.Format(time.RFC3339Nano), what)
}

// explainSessionAt fixes the revision of ex and reads the upload's records
// at it, as a pass reads them (etcdstore.UploadStatesAt), filling in ex's
// key, session and history. The session and the activity a pass judges by
// are nil when absent.
func (r *Reclaimer) explainSessionAt(ctx context.Context, ex *UploadExplanation, bucket, uploadID string) (*etcdstore.Session, *etcdstore.Activity, error) {
	// One read fixes the revision, so that the session and its activity are
	// seen together, as a pass sees them.
	resp, err := r.cli().Get(ctx, r.keys().Session(bucket, uploadID), clientv3.WithCountOnly())
	if err != nil {
		return nil, nil, fmt.Errorf("reclaim: read session: %w", err)
	}
	ex.Revision = resp.Header.Revision
	states, err := r.store.UploadStatesAt(ctx, ex.Revision, []etcdstore.UploadRef{{Bucket: bucket, UploadID: uploadID}})
	if err != nil {
		return nil, nil, err
	}
	st := states[0]
	if st.Session == nil {
		return nil, nil, nil
	}
	sess := &st.Session.Value
	ex.Key = sess.Key
	ex.Session = explainSession(sess, st.Session.ModRev)
	for _, t := range sess.History {
		ex.History = append(ex.History, ExplainTransition{At: t.At, From: string(t.From), To: string(t.To), Actor: t.Actor, Term: t.Term, Reason: t.Reason})
	}
	ex.Session.PartsInFlight, ex.Session.inFlightSince = st.InFlight, st.InFlightSince
	// The activity a pass judges by: the activity key's, or the end of the
	// newest recorded part when later (UploadState.RecordedActivity).
	act := st.RecordedActivity()
	if act != nil {
		ex.Session.Activity = &ExplainActivity{At: act.At, What: act.What, PartNumber: act.Part}
		if st.Activity != nil {
			ex.Session.Activity.ModRevision = st.Activity.ModRev
		}
	}
	return sess, act, nil
}

// explainBackendUpload finds the upload on the backend and fills in ex's
// key and backend: the key is the session's, else the caller's key, else
// found by listing the bucket's uploads. searched names what was listed
// when the key had to be searched for.
func (r *Reclaimer) explainBackendUpload(ctx context.Context, ex *UploadExplanation, bucket, uploadID, key string) (searched string, err error) {
	if ex.Key == "" {
		ex.Key = key
	}
	if ex.Key == "" {
		u, found, where, err := r.locateUpload(ctx, bucket, uploadID)
		if err != nil {
			return "", err
		}
		searched = where
		if found {
			ex.Key, ex.Backend.Initiated = u.Key, &u.Initiated
		}
	}
	if ex.Key != "" {
		parts, err := r.s3.ListParts(ctx, bucket, ex.Key, uploadID)
		switch {
		case err == nil:
			ex.Backend = ExplainUpload{Present: true, Parts: len(parts), Initiated: ex.Backend.Initiated}
			for _, pt := range parts {
				ex.Backend.Bytes += pt.Size
			}
			if newest := s3client.NewestPart(parts); !newest.IsZero() {
				ex.Backend.NewestPart = &newest
			}
			recorded, err := r.store.ListParts(ctx, uploadID)
			if err != nil {
				return searched, err
			}
			if u := unrecordedNewest(parts, recorded, r.cfg.ClockSkew); !u.IsZero() {
				ex.Backend.NewestUnrecorded = &u
			}
		case errors.Is(err, s3client.ErrNoSuchUpload), errors.Is(err, s3client.ErrNoSuchBucket):
		default:
			return searched, fmt.Errorf("reclaim: list parts of %s/%s: %w", bucket, ex.Key, err)
		}
	}
	return searched, nil
}

// explainNotes adds the notes on what follows from decision d: what a mark
// or delete compares, what a mark leads to, what the newest pass carries
// out, and what a held orphan waits for.
func (r *Reclaimer) explainNotes(ex *UploadExplanation, d Decision, p Policy) {
	if d.Verdict == Mark || d.Verdict == Delete {
		// What the action compares (pass.decidedFrom): a pass acts only on
		// the session and activity it decided from.
		actRev := int64(0)
		if a := ex.Session.Activity; a != nil {
			actRev = a.ModRevision
		}
		decided := ex.Steps[len(ex.Steps)-1].Values
		decided["session_mod_revision"], decided["activity_mod_revision"] = ex.Session.ModRevision, actRev
		ex.Notes = append(ex.Notes, fmt.Sprintf("the pass acts only if the session is unchanged since it decided (mod revision %d) "+
			"and so are its activity key (%s) and its part records: any activity in between wins", ex.Session.ModRevision, revisionOrAbsent(actRev)))
	}
	if d.Verdict == Mark {
		ex.Notes = append(ex.Notes, fmt.Sprintf("a mark is not a delete: the next pass records the session expired; activity revives it, "+
			"and it is deleted once the mark has stood for %s unchanged", p.DeleteAfter))
	}
	ex.Notes = append(ex.Notes, sweep.PassNotes(ex.LastPass, r.cfg.DryRun, ex.Verdict == string(Mark) || ex.Verdict == string(Delete), false)...)
	if ex.Verdict == string(Hold) {
		ex.Notes = append(ex.Notes, "an orphan is held until a person decides: sweepgate reclaim orphans adopt gives it a session, "+
			"sweepgate reclaim orphans delete --confirm deletes it")
	}
}

// revisionOrAbsent names a compared mod revision, 0 meaning the key must
// still be absent.
func revisionOrAbsent(rev int64) string {
	if rev == 0 {
		return "absent, and must stay absent"
	}
	return fmt.Sprintf("mod revision %d", rev)
}

func explainSession(s *etcdstore.Session, modRev int64) *ExplainSession {
	return &ExplainSession{
		State: string(s.State), StateSince: s.StateSince(), Owner: s.Owner, Created: s.Created,
		LastActivity: s.LastActivity, ExpiredAt: s.ExpiredAt, Uncertain: s.Uncertain, AbortAttempts: s.AbortAttempts,
		ModRevision: modRev,
	}
}

// orphanRecord reads the operator's decision about an upload that had no
// session, if one was recorded.
func (r *Reclaimer) orphanRecord(ctx context.Context, bucket, uploadID string) (*ExplainOrphan, error) {
	resp, err := r.cli().Get(ctx, r.keys().OrphanRecord(bucket, uploadID))
	if err != nil {
		return nil, fmt.Errorf("reclaim: read orphan record: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var o etcdstore.OrphanRecord
	if err := etcdstore.DecodeKV(etcdstore.OrphanRecordKind, resp.Kvs[0], &o); err != nil {
		return nil, fmt.Errorf("reclaim: %w", err)
	}
	return &ExplainOrphan{Action: string(o.Action), Principal: o.Principal, Term: o.Term, At: o.At, Parts: o.Parts, Bytes: o.Bytes, Outcome: o.Outcome}, nil
}

// locateUpload finds an upload by its id among the bucket's uploads: an
// upload without a session has no recorded key, and S3 needs the key to
// list its parts. searched says where it looked, for an answer that found
// nothing.
func (r *Reclaimer) locateUpload(ctx context.Context, bucket, uploadID string) (u Upload, found bool, searched string, err error) {
	km, um := "", ""
	for range maxLocatePages {
		page, err := r.s3.ListUploads(ctx, bucket, km, um, 1000)
		if errors.Is(err, s3client.ErrNoSuchBucket) {
			return Upload{}, false, "the uploads of " + bucket + " (the bucket does not exist)", nil
		}
		if err != nil {
			return Upload{}, false, "", err
		}
		for _, u := range page.Uploads {
			if u.UploadID == uploadID {
				return Upload{Bucket: bucket, Key: u.Key, UploadID: u.UploadID, Initiated: u.Initiated}, true, "", nil
			}
		}
		if page.Done {
			return Upload{}, false, "the uploads the backend lists in " + bucket + " (an upload made before MinIO last started is not listed: name its key)", nil
		}
		km, um = page.NextKey, page.NextUploadID
	}
	return Upload{}, false, fmt.Sprintf("the first %d pages of uploads of %s (name its key)", maxLocatePages, bucket), nil
}

// lastPass reads the newest stored pass report into *out (nil when none).
func (r *Reclaimer) lastPass(ctx context.Context, out **sweep.PassSummary) error {
	rep, ok, err := LastReport(ctx, r.store)
	if err != nil || !ok {
		return err
	}
	s := &sweep.PassSummary{Pass: rep.Pass, Term: rep.Term, Finished: rep.Finished, DryRun: rep.DryRun, Refused: rep.Refused, Stopped: rep.Stopped}
	if d := rep.Digests; d != nil {
		s.DigestsRefused, s.DigestsKept, s.RebuildFailed = d.Refused, d.Kept, d.Rebuild.Failed
	}
	*out = s
	return nil
}

// nextPass is the number of the pass in progress, or of the next one: the
// pass a judgement made now is for.
func (r *Reclaimer) nextPass(ctx context.Context) (int64, error) {
	cur, _, ok, err := loadCursor(ctx, r.store)
	if err != nil {
		return 0, err
	}
	if ok {
		return cur.Pass, nil
	}
	last, err := lastPassNumber(ctx, r.store)
	return last + 1, err
}

// lastPassSummary reads the newest stored pass report (nil when none).
func (r *Reclaimer) lastPassSummary(ctx context.Context) (*sweep.PassSummary, error) {
	var s *sweep.PassSummary
	err := r.lastPass(ctx, &s)
	return s, err
}

// ExplainDigest explains what the digest sweep would do now with digest's
// blob (digestsweep.Sweep.Explain), for the pass in progress or the next one.
// It writes nothing. It fails with ErrDigestSweepOff when no namespace is
// configured, ErrBadDigest for a malformed digest, and ErrNotKnown when no
// blob is stored and etcd holds nothing about the digest.
func (r *Reclaimer) ExplainDigest(ctx context.Context, digest string) (digestsweep.DigestExplanation, error) {
	if r.digests == nil {
		return digestsweep.DigestExplanation{}, ErrDigestSweepOff
	}
	return r.digests.Explain(ctx, digest, digestsweep.ExplainPass{
		Now: r.now, DryRun: r.cfg.DryRun, LastPass: r.lastPassSummary, NextPass: r.nextPass,
		Elapsed: func(ctx context.Context) (time.Duration, error) {
			ec, _, err := r.readElapsed(ctx)
			return r.elapsedNow(ec.Elapsed), err
		},
	})
}
