package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// Explanations answer an operator's "why is this still here?" and "why did
// this go?" about one upload or one blob, without reading code: they run the
// sweep's own checklist (classify, the inventories, judgeSteps) on what etcd
// and the backend hold now, record every rule tried up to the one that
// decides, and add the records that tell the story (session history,
// tombstone, references). They write nothing anywhere, so any gateway may
// explain, leader or not, and as often as asked.

// ErrNotKnown says nothing is known about the upload or digest asked about:
// no record in etcd and nothing on the backend.
var ErrNotKnown = errors.New("reclaim: nothing is known about it")

// ErrDigestSweepOff says the reclaimer judges no blobs (no CAS namespace is
// configured), so there is nothing to explain about a digest.
var ErrDigestSweepOff = errors.New("reclaim: the digest sweep is off (no CAS namespace is configured)")

// ErrBadDigest says a digest is not "<algorithm>:<hex>" of a known
// algorithm.
var ErrBadDigest = errors.New("reclaim: not a digest")

// Values are what a rule compared, by name. Times are time.Time (RFC 3339
// in JSON), durations Go duration strings ("24h0m0s"), revisions and counts
// numbers; nil says the record compared with was absent.
type Values map[string]any

// Step is one rule of a checklist as an explanation shows it. Matched says
// the rule decided; the rules before it did not, and the checklist stops
// there, as the sweep does.
type Step struct {
	Rule    string `json:"rule"`
	Matched bool   `json:"matched"`
	// Detail says in words what the rule found.
	Detail string `json:"detail"`
	Values Values `json:"values"`
}

// checklist records the steps of one judgement. A nil checklist records
// nothing and never calls the closures, so the sweep, which judges every
// upload and blob in every pass, pays nothing for explanations.
type checklist struct{ steps []Step }

func (c *checklist) step(rule string, matched bool, explain func() (string, Values)) {
	if c == nil {
		return
	}
	detail, v := explain()
	if v == nil {
		v = Values{}
	}
	c.steps = append(c.steps, Step{Rule: rule, Matched: matched, Detail: detail, Values: v})
}

// roundSecond is a duration as an explanation shows it: to the second,
// since the clocks compared are no finer than that in any decision.
func roundSecond(d time.Duration) string { return d.Round(time.Second).String() }

// maxExplainList bounds each list of an explanation (references, trash,
// placements); the step values carry the full counts.
const maxExplainList = 100

// maxLocatePages bounds the listing pages read to find an upload that has
// no session (and so no recorded key) or a blob whose key the namespace's
// pattern does not let us build: 100 pages of 1000 keys.
const maxLocatePages = 100

// PassSummary is the newest stored pass report, as far as it bears on an
// explanation: a verdict is carried out only by a pass that is not refused,
// stopped, or (for blobs) keeping everything.
type PassSummary struct {
	Pass     int64     `json:"pass"`
	Term     int64     `json:"term"`
	Finished time.Time `json:"finished"`
	DryRun   bool      `json:"dry_run"`
	// Refused and Stopped are the upload sweep's; DigestsRefused,
	// DigestsKept and RebuildFailed the digest sweep's. Empty when not.
	Refused        string `json:"refused"`
	Stopped        string `json:"stopped"`
	DigestsRefused string `json:"digests_refused"`
	DigestsKept    string `json:"digests_kept"`
	RebuildFailed  string `json:"rebuild_failed"`
}

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
	Steps   []Step          `json:"steps"`
	// History is the session's recorded transitions, oldest first.
	History []ExplainTransition `json:"history"`
	// Orphan is the operator's recorded decision about the upload when it
	// had no session (adopted, deleted), if any.
	Orphan   *ExplainOrphan `json:"orphan"`
	LastPass *PassSummary   `json:"last_pass"`
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

// The explanation verdicts that are not a Verdict of the sweep.
const (
	// verdictAbsent: nothing is stored, so nothing is kept or deleted.
	verdictAbsent = "absent"
	// verdictTombstone: the next pass records a pending tombstone.
	verdictTombstone = "tombstone"
	// verdictPending: a pending tombstone waits (for its frontier, or for a
	// later pass).
	verdictPending = "pending"
	// verdictDeleted: the bytes are gone; the tombstone says when and why.
	verdictDeleted = "deleted"
)

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
	ex := UploadExplanation{
		Bucket: bucket, UploadID: uploadID, Now: now, DryRun: r.cfg.DryRun,
		Policy: ExplainPolicy{Grace: p.Grace.String(), DeleteAfter: p.DeleteAfter.String(), StuckLimit: p.StuckLimit.String(), ClockSkew: p.ClockSkew.String()},
		Steps:  []Step{}, History: []ExplainTransition{}, Notes: []string{},
	}
	keys := r.keys()
	// One read fixes the revision, so that the session and its activity are
	// seen together, as a pass sees them.
	resp, err := r.cli().Get(ctx, keys.Session(bucket, uploadID), clientv3.WithCountOnly())
	if err != nil {
		return ex, fmt.Errorf("reclaim: read session: %w", err)
	}
	ex.Revision = resp.Header.Revision
	var sess *etcdstore.Session
	var act *etcdstore.Activity
	switch v, err := r.store.GetSessionAt(ctx, bucket, uploadID, ex.Revision); {
	case err == nil:
		sess = &v.Value
		ex.Key = sess.Key
		ex.Session = explainSession(sess, v.ModRev)
		for _, t := range sess.History {
			ex.History = append(ex.History, ExplainTransition{At: t.At, From: string(t.From), To: string(t.To), Actor: t.Actor, Term: t.Term, Reason: t.Reason})
		}
	case !errors.Is(err, etcdstore.ErrNotFound):
		return ex, err
	}
	if sess != nil {
		switch a, err := r.store.GetActivityAt(ctx, uploadID, ex.Revision); {
		case err == nil:
			act = &a.Value
			ex.Session.Activity = &ExplainActivity{At: a.Value.At, What: a.Value.What, PartNumber: a.Value.Part, ModRevision: a.ModRev}
		case !errors.Is(err, etcdstore.ErrNotFound):
			return ex, err
		}
	}
	if ex.Orphan, err = r.orphanRecord(ctx, bucket, uploadID); err != nil {
		return ex, err
	}
	if err := r.lastPass(ctx, &ex.LastPass); err != nil {
		return ex, err
	}

	if ex.Key == "" {
		ex.Key = key
	}
	searched := ""
	if ex.Key == "" {
		u, found, where, err := r.locateUpload(ctx, bucket, uploadID)
		if err != nil {
			return ex, err
		}
		searched = where
		if found {
			ex.Key, ex.Backend.Initiated = u.Key, &u.Initiated
		}
	}
	if ex.Key != "" {
		parts, size, err := r.s3.CountParts(ctx, bucket, ex.Key, uploadID)
		switch {
		case err == nil:
			ex.Backend = ExplainUpload{Present: true, Parts: parts, Bytes: size, Initiated: ex.Backend.Initiated}
		case errors.Is(err, s3client.ErrNoSuchUpload), errors.Is(err, s3client.ErrNoSuchBucket):
		default:
			return ex, fmt.Errorf("reclaim: list parts of %s/%s: %w", bucket, ex.Key, err)
		}
	}
	if !ex.Backend.Present && sess == nil {
		if searched != "" {
			return ex, fmt.Errorf("%w: no session, and no such upload among %s", ErrNotKnown, searched)
		}
		return ex, ErrNotKnown
	}

	var cl checklist
	cl.step(ruleNotOnBackend, !ex.Backend.Present, func() (string, Values) {
		v := Values{"bucket": bucket, "key": ex.Key, "parts": ex.Backend.Parts, "bytes": ex.Backend.Bytes}
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
		ex.Steps = cl.steps
		return ex, nil
	}
	d, err := classify(p, now, sess, act, &cl)
	ex.Steps = cl.steps
	switch {
	case errors.Is(err, ErrFutureTime):
		// The pass stops at this upload: nothing is decided, so nothing is
		// deleted.
		ex.Verdict, ex.Reason = string(Keep), err.Error()+": a pass stops here, deciding nothing"
	case err != nil:
		return ex, err
	default:
		ex.Verdict, ex.Reason, ex.Stuck = string(d.Verdict), d.Reason, d.Stuck
	}
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
			"and so is its activity key (%s): any activity in between wins", ex.Session.ModRevision, revisionOrAbsent(actRev)))
	}
	if d.Verdict == Mark {
		ex.Notes = append(ex.Notes, fmt.Sprintf("a mark is not a delete: the next pass records the session expired; activity revives it, "+
			"and it is deleted once the mark has stood for %s unchanged", p.DeleteAfter))
	}
	ex.Notes = append(ex.Notes, r.passNotes(ex.LastPass, ex.Verdict == string(Mark) || ex.Verdict == string(Delete), false)...)
	if ex.Verdict == string(Hold) {
		ex.Notes = append(ex.Notes, "an orphan is held until a person decides: sweepgate reclaim orphans adopt gives it a session, "+
			"sweepgate reclaim orphans delete --confirm deletes it")
	}
	return ex, nil
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
	if err := json.Unmarshal(resp.Kvs[0].Value, &o); err != nil {
		return nil, fmt.Errorf("reclaim: decode orphan record %s: %w", resp.Kvs[0].Key, err)
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
func (r *Reclaimer) lastPass(ctx context.Context, out **PassSummary) error {
	rep, ok, err := LastReport(ctx, r.store)
	if err != nil || !ok {
		return err
	}
	s := &PassSummary{Pass: rep.Pass, Term: rep.Term, Finished: rep.Finished, DryRun: rep.DryRun, Refused: rep.Refused, Stopped: rep.Stopped}
	if d := rep.Digests; d != nil {
		s.DigestsRefused, s.DigestsKept, s.RebuildFailed = d.Refused, d.Kept, d.Rebuild.Failed
	}
	*out = s
	return nil
}

// passNotes says what, beyond the checklist, stands between a verdict that
// acts and its action: dry run, and a last pass that did not act.
func (r *Reclaimer) passNotes(last *PassSummary, acts, digest bool) []string {
	notes := []string{}
	if !acts {
		return notes
	}
	if r.cfg.DryRun {
		notes = append(notes, "reclaim.dry_run is on: passes only plan, and nothing is marked, tombstoned or deleted")
	}
	if last == nil {
		return notes
	}
	if !digest && last.Refused != "" {
		notes = append(notes, fmt.Sprintf("the newest pass (%d) was refused by the breaker, so it marked and deleted nothing: %s", last.Pass, last.Refused))
	}
	if !digest && last.Stopped != "" {
		notes = append(notes, fmt.Sprintf("the newest pass (%d) stopped before finishing: %s", last.Pass, last.Stopped))
	}
	if digest {
		for _, why := range []string{last.DigestsRefused, last.DigestsKept, last.RebuildFailed} {
			if why != "" {
				notes = append(notes, fmt.Sprintf("the newest pass (%d) deleted no blob: %s", last.Pass, why))
				break
			}
		}
	}
	return notes
}

// DigestExplanation says what the digest sweep does with one digest's blob
// now, and why.
type DigestExplanation struct {
	Digest string `json:"digest"`
	// Now is the clock the checklist ran at; Revision the etcd revision the
	// references, trash, placements and tombstone were read at.
	Now      time.Time `json:"now"`
	Revision int64     `json:"revision"`
	// NextPass is the pass the judgement is made for: the one in progress,
	// or the next one.
	NextPass int64 `json:"next_pass"`
	// Verdict is keep, tombstone (the next pass records a pending
	// tombstone), pending (its tombstone waits), delete (the next pass
	// deletes the blob), deleted (the bytes are gone) or absent (no blob is
	// stored).
	Verdict        string `json:"verdict"`
	Reason         string `json:"reason"`
	DryRun         bool   `json:"dry_run"`
	PlacementGrace string `json:"placement_grace"`
	// Blob is the stored copy judged (null when none is stored); Copies every
	// stored copy found, Blob first.
	Blob   *ExplainBlob  `json:"blob"`
	Copies []ExplainBlob `json:"copies"`
	Steps  []Step        `json:"steps"`
	// References, Trash and Placements are what may retain the digest (at
	// most 100 of each; the steps' values count them all).
	References []ExplainRef       `json:"references"`
	Trash      []ExplainTrash     `json:"trash"`
	Placements []ExplainPlacement `json:"placements"`
	// Shard is the digest's reference revision shard and ShardRefRevision
	// its revision: the last reference, trash or placement write of any
	// digest of the shard.
	Shard            string `json:"shard"`
	ShardRefRevision int64  `json:"shard_ref_revision"`
	// ReferenceHolds counts holds in place: while one exists, the sweep
	// judges no blob.
	ReferenceHolds int64 `json:"reference_holds"`
	// Tombstone is the digest's reclamation record, null when none.
	Tombstone *ExplainTombstone `json:"tombstone"`
	// RequiredFrontier is the revision the planes were compared with (0
	// when the checklist did not get that far); Planes each configured
	// plane's frontier against it.
	RequiredFrontier int64          `json:"required_frontier"`
	Planes           []ExplainPlane `json:"planes"`
	Guard            *ExplainGuard  `json:"guard"`
	LastPass         *PassSummary   `json:"last_pass"`
	Notes            []string       `json:"notes"`
}

// ExplainBlob is one stored copy of the digest's blob, as the backend lists
// it (the listing's time is the one the placement grace is measured from).
type ExplainBlob struct {
	Namespace string    `json:"namespace"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	Size      int64     `json:"size"`
	Modified  time.Time `json:"modified"`
	Age       string    `json:"age"`
}

// ExplainRef is one recorded reference: an object of a reference source
// (a manifest) that names the digest.
type ExplainRef struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// Source is the reference source the object lies in ("" when none does
	// any more).
	Source string    `json:"source"`
	At     time.Time `json:"at"`
	// The object's record: a write in flight (pending), a write of unknown
	// outcome (dirty), restored from the trash, found by the rebuild
	// without the gateway having seen it written (unknown).
	Pending  bool `json:"pending"`
	Dirty    bool `json:"dirty"`
	Restored bool `json:"restored"`
	Unknown  bool `json:"unknown"`
}

// ExplainTrash is one trash entry naming the digest.
type ExplainTrash struct {
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	DeletedAt time.Time `json:"deleted_at"`
	Expires   time.Time `json:"expires"`
	// Expired says it no longer retains the digest.
	Expired   bool   `json:"expired"`
	Principal string `json:"principal"`
}

// ExplainPlacement is one write of the blob in flight through a gateway.
type ExplainPlacement struct {
	ID     string    `json:"id"`
	Bucket string    `json:"bucket"`
	Key    string    `json:"key"`
	At     time.Time `json:"at"`
	Age    string    `json:"age"`
	// Stale says it is older than the placement grace: left by a gateway
	// that died, retaining nothing, pruned by the next pass.
	Stale bool `json:"stale"`
}

// ExplainTombstone is the digest's tombstone.
type ExplainTombstone struct {
	State       string    `json:"state"`
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	Size        int64     `json:"size"`
	Frontier    int64     `json:"frontier"`
	RefRev      int64     `json:"ref_rev"`
	Term        int64     `json:"term"`
	Pass        int64     `json:"pass"`
	Attempts    int       `json:"attempts"`
	Since       time.Time `json:"since"`
	Reason      string    `json:"reason"`
	ModRevision int64     `json:"mod_revision"`
}

// ExplainPlane is one configured plane's frontier against the revision the
// tombstone needs.
type ExplainPlane struct {
	Plane string `json:"plane"`
	// Revision is what the plane reported; 0 when it has not, which is what
	// it counts as.
	Revision int64 `json:"revision"`
	Applied  bool  `json:"applied"`
}

// ExplainGuard is the digest's guard, armed around the delete of its bytes;
// while it is armed every write naming the digest is refused.
type ExplainGuard struct {
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	Term        int64     `json:"term"`
	Pass        int64     `json:"pass"`
	At          time.Time `json:"at"`
	ModRevision int64     `json:"mod_revision"`
}

// The digest rules the explanation adds before the inventories and judge.
const (
	ruleNotStored      = "not_stored"
	ruleReferenceHolds = "reference_holds"
)

// ExplainDigest explains what the digest sweep would do now with digest's
// blob: it finds the stored copy in the configured namespaces, asks the
// sweep's inventories whether it is retained, and runs the sweep's
// judgement (judgeSteps) against its tombstone, its shard's reference
// revision and the planes' frontiers, all read at one etcd revision for the
// pass in progress or the next one. It writes nothing. It fails with
// ErrDigestSweepOff when no namespace is configured, ErrBadDigest for a
// malformed digest, and ErrNotKnown when no blob is stored and etcd holds
// nothing about the digest.
func (r *Reclaimer) ExplainDigest(ctx context.Context, digest string) (DigestExplanation, error) {
	cfg := r.cfg.Digests
	if cfg == nil {
		return DigestExplanation{}, ErrDigestSweepOff
	}
	if !cas.Valid(digest) {
		return DigestExplanation{}, fmt.Errorf("%w: %q, want <algorithm>:<hex>, such as sha256: and 64 hex digits", ErrBadDigest, digest)
	}
	now := r.now().UTC()
	keys := r.keys()
	shard := etcdstore.RefShard(digest)
	ex := DigestExplanation{
		Digest: digest, Now: now, DryRun: r.cfg.DryRun, PlacementGrace: cfg.PlacementGrace.String(), Shard: shard,
		Copies: []ExplainBlob{}, Steps: []Step{}, References: []ExplainRef{}, Trash: []ExplainTrash{},
		Placements: []ExplainPlacement{}, Planes: []ExplainPlane{}, Notes: []string{},
	}
	// One read fixes the revision everything of etcd is read at, as the
	// pass revision does for a pass, with the shard's reference revision.
	resp, err := r.cli().Get(ctx, keys.RefRev(shard))
	if err != nil {
		return ex, fmt.Errorf("reclaim: read reference revision: %w", err)
	}
	ex.Revision = resp.Header.Revision
	if len(resp.Kvs) > 0 {
		ex.ShardRefRevision = resp.Kvs[0].ModRevision
	}
	at := clientv3.WithRev(ex.Revision)
	refTotal, err := r.explainRefs(ctx, &ex, at)
	if err != nil {
		return ex, err
	}
	trashTotal, err := r.explainTrash(ctx, &ex, at)
	if err != nil {
		return ex, err
	}
	young := placementsInventory{now: now, grace: cfg.PlacementGrace}
	placeTotal, err := r.explainPlacements(ctx, &ex, young, at)
	if err != nil {
		return ex, err
	}
	tomb, err := r.explainTombstone(ctx, &ex, at)
	if err != nil {
		return ex, err
	}
	if err := r.explainGuard(ctx, &ex, at); err != nil {
		return ex, err
	}
	holds, err := r.cli().Get(ctx, keys.RefHolds(), clientv3.WithPrefix(), clientv3.WithCountOnly(), at)
	if err != nil {
		return ex, fmt.Errorf("reclaim: read reference holds: %w", err)
	}
	ex.ReferenceHolds = holds.Count
	if err := r.lastPass(ctx, &ex.LastPass); err != nil {
		return ex, err
	}
	if ex.NextPass, err = r.nextPass(ctx); err != nil {
		return ex, err
	}

	// The copies the records name come first: the tombstone is about one
	// of them.
	var hints []Blob
	if tomb != nil && tomb.Bucket != "" {
		hints = append(hints, Blob{Bucket: tomb.Bucket, Key: tomb.Key})
	}
	if g := ex.Guard; g != nil && g.Bucket != "" {
		hints = append(hints, Blob{Bucket: g.Bucket, Key: g.Key})
	}
	for _, p := range ex.Placements {
		hints = append(hints, Blob{Bucket: p.Bucket, Key: p.Key})
	}
	copies, searched, err := r.findBlobs(ctx, cfg.Layout, digest, hints)
	if err != nil {
		return ex, err
	}
	for _, c := range copies {
		ex.Copies = append(ex.Copies, explainBlob(c.ns, c.Blob, now))
	}
	if len(copies) == 0 && refTotal == 0 && trashTotal == 0 && placeTotal == 0 && tomb == nil && ex.Guard == nil {
		return ex, ErrNotKnown
	}

	var cl checklist
	cl.step(ruleNotStored, len(copies) == 0, func() (string, Values) {
		if len(copies) == 0 {
			return "no blob of the digest is stored in " + searched + ": there is nothing to keep or delete", Values{"copies": 0}
		}
		b := copies[0]
		return fmt.Sprintf("stored as %s/%s (%d bytes) in namespace %s", b.Bucket, b.Key, b.Size, b.ns),
			Values{"copies": len(copies), "bucket": b.Bucket, "key": b.Key, "size": b.Size, "modified": b.Modified}
	})
	if len(copies) == 0 {
		ex.Steps = cl.steps
		if tomb != nil && tomb.State == string(etcdstore.TombstoneDeleted) {
			ex.Verdict = verdictDeleted
			ex.Reason = fmt.Sprintf("its bytes were deleted by pass %d (term %d) at %s", tomb.Pass, tomb.Term, tomb.Since.Format(time.RFC3339))
			if tomb.Reason != "" {
				ex.Reason += ": " + tomb.Reason
			}
		} else {
			ex.Verdict, ex.Reason = verdictAbsent, "no blob of the digest is stored: nothing to keep or delete"
		}
		return ex, nil
	}
	b := copies[0].Blob
	bv := ex.Copies[0]
	ex.Blob = &bv

	cl.step(ruleReferenceHolds, ex.ReferenceHolds > 0, func() (string, Values) {
		v := Values{"reference_holds": ex.ReferenceHolds}
		if ex.ReferenceHolds > 0 {
			return "a complete into a reference source is recording its references: the sweep judges no blob while a hold exists", v
		}
		return "no reference hold", v
	})
	if ex.ReferenceHolds > 0 {
		ex.Steps = cl.steps
		ex.Verdict, ex.Reason = string(Keep), "reference holds exist: a pass now judges no blob; ask again once the complete that holds is done"
		return ex, nil
	}

	// The sweep's own inventories, in its order, at the revision read
	// above. Every one is asked, so that an operator learns all that
	// retains the blob; the first to retain it is the one a pass credits.
	s := &digestSweep{r: r, cfg: cfg, dry: true, now: now, cur: digestCursor{Rev: ex.Revision}}
	retainedBy := ""
	var retainedWhy string
	for _, inv := range s.inventories() {
		got, err := inv.Retained(ctx, []Blob{b})
		if err != nil {
			return ex, fmt.Errorf("reclaim: inventory %s: %w", inv.Name(), err)
		}
		kept := got[b.Digest]
		detail, v := ex.inventoryDetail(inv.Name(), kept, b, young, refTotal, trashTotal, placeTotal)
		if kept && retainedBy != "" {
			detail = "also " + detail
		}
		cl.step(inv.Name(), kept, func() (string, Values) { return detail, v })
		if kept && retainedBy == "" {
			retainedBy, retainedWhy = inv.Name(), detail
		}
	}

	planes, err := s.frontiers(ctx)
	if err != nil {
		return ex, err
	}
	s.planes = planes
	var asked int64
	applied := func(rev int64) bool {
		asked = rev
		return s.applied(rev)
	}
	var t *etcdstore.Tombstone
	if tomb != nil {
		t = &etcdstore.Tombstone{Digest: digest, State: etcdstore.TombstoneState(tomb.State), Bucket: tomb.Bucket, Key: tomb.Key,
			Size: tomb.Size, Frontier: tomb.Frontier, RefRev: tomb.RefRev, Term: tomb.Term, Pass: tomb.Pass, Attempts: tomb.Attempts, Since: tomb.Since}
	}
	j := judgeSteps(retainedBy != "", t, b, ex.NextPass, ex.ShardRefRevision, applied, false, &cl)
	ex.Steps = cl.steps
	ex.RequiredFrontier = asked
	for _, name := range cfg.Planes {
		ex.Planes = append(ex.Planes, ExplainPlane{Plane: name, Revision: planes[name], Applied: asked > 0 && planes[name] >= asked})
	}
	decided := ex.Steps[len(ex.Steps)-1]
	switch j.out {
	case outRetained, outSkipped, outDuplicate:
		ex.Verdict = string(Keep)
		ex.Reason = "retained by " + retainedBy + ": " + retainedWhy
		if j.out == outSkipped {
			ex.Reason += "; " + decided.Detail
		}
		if j.out == outDuplicate {
			ex.Reason = decided.Detail
		}
	case outNew:
		ex.Verdict, ex.Reason = verdictTombstone, "nothing retains it: "+decided.Detail
	case outPending:
		ex.Verdict, ex.Reason = verdictPending, decided.Detail
		var behind []string
		for _, p := range ex.Planes {
			if asked > 0 && !p.Applied {
				behind = append(behind, fmt.Sprintf("%s (at %d)", p.Plane, p.Revision))
			}
		}
		if len(behind) > 0 {
			ex.Reason += "; not there yet: " + strings.Join(behind, ", ")
		}
	case outReady:
		ex.Verdict, ex.Reason = string(Delete), decided.Detail
	}
	if ex.Guard != nil {
		ex.Notes = append(ex.Notes, fmt.Sprintf("its guard is armed (term %d, pass %d, since %s): a collector is deleting the bytes, or was cut short; "+
			"the next pass looks at the blob and settles the guard, and writes naming the digest are refused until then",
			ex.Guard.Term, ex.Guard.Pass, ex.Guard.At.Format(time.RFC3339)))
	}
	if len(copies) > 1 {
		ex.Notes = append(ex.Notes, fmt.Sprintf("the digest is stored %d times; the checklist judged %s/%s, and each copy is judged on its own", len(copies), b.Bucket, b.Key))
	}
	acts := ex.Verdict == string(Delete) || ex.Verdict == verdictTombstone || ex.Verdict == verdictPending
	ex.Notes = append(ex.Notes, r.passNotes(ex.LastPass, acts, true)...)
	return ex, nil
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

// inventoryDetail says what one inventory found about blob b, from the
// records the explanation read, with the values it compared.
func (ex *DigestExplanation) inventoryDetail(name string, kept bool, b Blob, young placementsInventory, refs, trash, places int64) (string, Values) {
	switch name {
	case "references":
		v := Values{"references": refs, "shard": ex.Shard, "shard_ref_revision": ex.ShardRefRevision}
		if !kept {
			return "no recorded reference names it", v
		}
		names := make([]string, 0, 3)
		for _, ref := range ex.References[:min(3, len(ex.References))] {
			n := ref.Bucket + "/" + ref.Key
			if ref.Source != "" {
				n += " (" + ref.Source + ")"
			}
			names = append(names, n)
		}
		more := ""
		if int(refs) > len(names) {
			more = fmt.Sprintf(" and %d more", int(refs)-len(names))
		}
		return fmt.Sprintf("named by %d recorded reference(s): %s%s", refs, strings.Join(names, ", "), more), v
	case "trash":
		var live int
		var latest time.Time
		for _, tr := range ex.Trash {
			if !tr.Expired {
				live++
			}
			if tr.Expires.After(latest) {
				latest = tr.Expires
			}
		}
		v := Values{"entries": trash, "unexpired": live, "latest_expiry": nil, "now": ex.Now}
		if !latest.IsZero() {
			v["latest_expiry"] = latest
		}
		switch {
		case kept:
			return fmt.Sprintf("a deleted reference object's trash names it until %s", latest.Format(time.RFC3339)), v
		case trash > 0:
			return fmt.Sprintf("its %d trash entr(ies) expired, the latest at %s", trash, latest.Format(time.RFC3339)), v
		}
		return "no trash entry names it", v
	case "placements":
		age := ex.Now.Sub(b.Modified)
		v := Values{"modified": b.Modified, "age": roundSecond(age), "placement_grace": young.grace.String(),
			"young_blob": young.young(b.Modified), "placements": places}
		youngPlaced := 0
		for _, p := range ex.Placements {
			if !p.Stale {
				youngPlaced++
			}
		}
		v["young_placements"] = youngPlaced
		switch {
		case youngPlaced > 0:
			return fmt.Sprintf("%d write(s) of the blob are in flight through a gateway (placements younger than %s)", youngPlaced, young.grace), v
		case young.young(b.Modified):
			return fmt.Sprintf("stored %s ago, within the placement grace %s: a write may have just finished, or one around the gateway", age.Round(time.Second), young.grace), v
		case kept:
			return "a placement retains it", v
		}
		return fmt.Sprintf("stored %s ago, past the placement grace %s, and no write of it is in flight", age.Round(time.Second), young.grace), v
	case "uploads":
		v := Values{"bucket": b.Bucket, "key": b.Key}
		if kept {
			return fmt.Sprintf("a multipart upload into %s/%s is in flight on the backend", b.Bucket, b.Key), v
		}
		return fmt.Sprintf("no multipart upload into %s/%s is in flight", b.Bucket, b.Key), v
	}
	if kept {
		return "retained by " + name, Values{}
	}
	return "not retained by " + name, Values{}
}

// explainRefs reads the references to ex.Digest, with their objects'
// records, and returns how many there are.
func (r *Reclaimer) explainRefs(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) (int64, error) {
	keys := r.keys()
	prefix := keys.Refs(ex.Digest)
	resp, err := r.cli().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(maxExplainList), at)
	if err != nil {
		return 0, fmt.Errorf("reclaim: read references: %w", err)
	}
	for _, kv := range resp.Kvs {
		parts, ok := unescapeSegments(strings.TrimPrefix(string(kv.Key), prefix), 2)
		if !ok {
			continue
		}
		ref := ExplainRef{Bucket: parts[0], Key: parts[1]}
		var v etcdstore.Ref
		if json.Unmarshal(kv.Value, &v) == nil {
			ref.At = v.At
		}
		if src := r.cfg.Digests.Layout.Source(ref.Bucket, ref.Key); src != nil {
			ref.Source = src.Name
		}
		switch rec, err := r.store.GetRefSource(ctx, ref.Bucket, ref.Key); {
		case err == nil:
			ref.Pending, ref.Dirty, ref.Restored, ref.Unknown = rec.Value.Pending != nil, rec.Value.Dirty, rec.Value.Restored, rec.Value.Unknown
		case !errors.Is(err, etcdstore.ErrNotFound):
			return 0, err
		}
		ex.References = append(ex.References, ref)
	}
	return resp.Count, nil
}

// explainTrash reads the trash entries naming ex.Digest and returns how
// many there are.
func (r *Reclaimer) explainTrash(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) (int64, error) {
	keys := r.keys()
	prefix := keys.TrashRefs(ex.Digest)
	resp, err := r.cli().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(maxExplainList), at)
	if err != nil {
		return 0, fmt.Errorf("reclaim: read trash references: %w", err)
	}
	for _, kv := range resp.Kvs {
		parts, ok := unescapeSegments(strings.TrimPrefix(string(kv.Key), prefix), 3)
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			continue
		}
		tr := ExplainTrash{Bucket: parts[0], Key: parts[1], DeletedAt: time.Unix(0, ns).UTC()}
		var v etcdstore.TrashRef
		if json.Unmarshal(kv.Value, &v) == nil {
			tr.Expires = v.Expires
		}
		// As the trash inventory judges it: retained until it expires.
		tr.Expired = !tr.Expires.After(ex.Now)
		switch rec, err := r.store.GetTrash(ctx, tr.Bucket, tr.Key, tr.DeletedAt); {
		case err == nil:
			tr.Principal = rec.Value.Principal
		case !errors.Is(err, etcdstore.ErrNotFound):
			return 0, err
		}
		ex.Trash = append(ex.Trash, tr)
	}
	return resp.Count, nil
}

// explainPlacements reads the placements of ex.Digest and returns how many
// there are.
func (r *Reclaimer) explainPlacements(ctx context.Context, ex *DigestExplanation, young placementsInventory, at clientv3.OpOption) (int64, error) {
	keys := r.keys()
	resp, err := r.cli().Get(ctx, keys.Placements(ex.Digest), clientv3.WithPrefix(), clientv3.WithLimit(maxExplainList), at)
	if err != nil {
		return 0, fmt.Errorf("reclaim: read placements: %w", err)
	}
	for _, kv := range resp.Kvs {
		id, _ := etcdstore.LastSegment(string(kv.Key))
		var p etcdstore.Placement
		_ = json.Unmarshal(kv.Value, &p) // one that does not decode is young: it retains
		ex.Placements = append(ex.Placements, ExplainPlacement{ID: id, Bucket: p.Bucket, Key: p.Key, At: p.At,
			Age: roundSecond(ex.Now.Sub(p.At)), Stale: !young.young(p.At)})
	}
	return resp.Count, nil
}

// explainTombstone reads ex.Digest's tombstone into ex and returns it (nil
// when there is none, or it does not decode, which a note says).
func (r *Reclaimer) explainTombstone(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) (*ExplainTombstone, error) {
	resp, err := r.cli().Get(ctx, r.keys().Tombstone(ex.Digest), at)
	if err != nil {
		return nil, fmt.Errorf("reclaim: read tombstone: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var t etcdstore.Tombstone
	if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		ex.Notes = append(ex.Notes, "its tombstone does not decode ("+err.Error()+"): a pass cannot write over it, so it leaves the digest alone")
		return nil, nil
	}
	ex.Tombstone = &ExplainTombstone{State: string(t.State), Bucket: t.Bucket, Key: t.Key, Size: t.Size, Frontier: t.Frontier,
		RefRev: t.RefRev, Term: t.Term, Pass: t.Pass, Attempts: t.Attempts, Since: t.Since, Reason: t.Reason, ModRevision: resp.Kvs[0].ModRevision}
	return ex.Tombstone, nil
}

// explainGuard reads ex.Digest's guard into ex.
func (r *Reclaimer) explainGuard(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) error {
	resp, err := r.cli().Get(ctx, r.keys().Guard(ex.Digest), at)
	if err != nil {
		return fmt.Errorf("reclaim: read guard: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	var g etcdstore.Guard
	_ = json.Unmarshal(resp.Kvs[0].Value, &g) // the key is what guards
	ex.Guard = &ExplainGuard{Bucket: g.Bucket, Key: g.Key, Term: g.Term, Pass: g.Pass, At: g.At, ModRevision: resp.Kvs[0].ModRevision}
	return nil
}

// unescapeSegments splits the path-escaped, '/'-separated tail of a key
// into n segments.
func unescapeSegments(tail string, n int) ([]string, bool) {
	parts := strings.Split(tail, "/")
	if len(parts) != n {
		return nil, false
	}
	for i, p := range parts {
		s, err := url.PathUnescape(p)
		if err != nil {
			return nil, false
		}
		parts[i] = s
	}
	return parts, true
}

// storedBlob is a stored copy of a blob and the namespace it lies in.
type storedBlob struct {
	Blob
	ns string
}

func explainBlob(ns string, b Blob, now time.Time) ExplainBlob {
	return ExplainBlob{Namespace: ns, Bucket: b.Bucket, Key: b.Key, Size: b.Size, Modified: b.Modified, Age: roundSecond(now.Sub(b.Modified))}
}

// findBlobs finds the stored copies of digest in the layout's namespaces,
// as the backend lists them (the listing's time, not a HEAD's, is what the
// sweep measures the placement grace from). A namespace's key pattern
// cannot in general be turned around to make a key from a digest, so it
// looks at the keys the records name (hints) and the usual spellings
// (prefix + hex, prefix + digest) when the namespace's own Digest
// recognises them, and otherwise lists the namespace, up to a bound.
// searched says where it looked, for an explanation that found nothing.
func (r *Reclaimer) findBlobs(ctx context.Context, layout *cas.Layout, digest string, hints []Blob) (found []storedBlob, searched string, err error) {
	algo, hex, _ := strings.Cut(digest, ":")
	var where []string
	for i := range layout.Namespaces {
		ns := &layout.Namespaces[i]
		var cands []string
		seen := map[string]bool{}
		add := func(key string) {
			if d, ok := ns.Digest(key); ok && d == digest && !seen[key] {
				seen[key] = true
				cands = append(cands, key)
			}
		}
		for _, h := range hints {
			if h.Bucket == ns.Bucket {
				add(h.Key)
			}
		}
		for _, k := range []string{ns.Prefix + hex, ns.Prefix + digest, ns.Prefix + algo + "/" + hex} {
			add(k)
		}
		if len(cands) == 0 {
			b, ok, note, err := r.scanNamespace(ctx, ns, digest)
			if err != nil {
				return nil, "", err
			}
			where = append(where, note)
			if ok {
				found = append(found, storedBlob{Blob: b, ns: ns.Name})
			}
			continue
		}
		where = append(where, fmt.Sprintf("namespace %s (%s)", ns.Name, strings.Join(cands, ", ")))
		for _, key := range cands {
			b, ok, err := r.listedBlob(ctx, ns.Bucket, key)
			if err != nil {
				return nil, "", err
			}
			if ok {
				b.Digest = digest
				found = append(found, storedBlob{Blob: b, ns: ns.Name})
				break
			}
		}
	}
	// The copy the tombstone is about (the first hint) is judged first.
	if len(hints) > 0 {
		for i, f := range found {
			if f.Bucket == hints[0].Bucket && f.Key == hints[0].Key {
				found[0], found[i] = found[i], found[0]
			}
		}
	}
	return found, strings.Join(where, "; "), nil
}

// listedBlob lists bucket with key as the prefix: the key itself sorts
// first among the keys it prefixes, so one entry says whether it is stored.
func (r *Reclaimer) listedBlob(ctx context.Context, bucket, key string) (Blob, bool, error) {
	page, err := r.s3.ListObjects(ctx, bucket, key, "", 1)
	if errors.Is(err, s3client.ErrNoSuchBucket) {
		return Blob{}, false, nil
	}
	if err != nil {
		return Blob{}, false, fmt.Errorf("reclaim: list %s/%s: %w", bucket, key, err)
	}
	if len(page.Objects) == 0 || page.Objects[0].Key != key {
		return Blob{}, false, nil
	}
	o := page.Objects[0]
	return Blob{Bucket: bucket, Key: o.Key, Size: o.Size, Modified: o.Modified}, true, nil
}

// scanNamespace lists a namespace for a key that carries digest, up to
// maxLocatePages pages.
func (r *Reclaimer) scanNamespace(ctx context.Context, ns *cas.Namespace, digest string) (Blob, bool, string, error) {
	after := ""
	for range maxLocatePages {
		page, err := r.s3.ListObjects(ctx, ns.Bucket, ns.Prefix, after, 1000)
		if errors.Is(err, s3client.ErrNoSuchBucket) {
			return Blob{}, false, fmt.Sprintf("namespace %s (its bucket does not exist)", ns.Name), nil
		}
		if err != nil {
			return Blob{}, false, "", fmt.Errorf("reclaim: list namespace %s: %w", ns.Name, err)
		}
		for _, o := range page.Objects {
			if d, ok := ns.Digest(o.Key); ok && d == digest {
				return Blob{Digest: digest, Bucket: ns.Bucket, Key: o.Key, Size: o.Size, Modified: o.Modified}, true, "namespace " + ns.Name, nil
			}
		}
		if page.Done {
			return Blob{}, false, "namespace " + ns.Name + " (listed whole)", nil
		}
		after = page.Next
	}
	return Blob{}, false, fmt.Sprintf("namespace %s (the first %d pages of its listing)", ns.Name, maxLocatePages), nil
}
