package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// Explanations answer an operator's "why is this still here?" and "why did
// this go?" about one blob, without reading code: they run the sweep's own
// inventories and judgement (judgeSteps) on what etcd and the backend hold
// now, record every rule tried up to the one that decides, and add the
// records that tell the story (tombstone, references, trash, placements).
// They write nothing anywhere, so any gateway may explain, leader or not,
// and as often as asked.

// ErrBadDigest says a digest is not "<algorithm>:<hex>" of a known
// algorithm.
var ErrBadDigest = errors.New("digestsweep: not a digest")

// maxExplainList bounds each list of an explanation (references, trash,
// placements); the step values carry the full counts.
const maxExplainList = 100

// maxLocatePages bounds the listing pages read to find a blob whose key
// the namespace's pattern does not let us build: 100 pages of 1000 keys.
const maxLocatePages = 100

// The explanation verdicts. Keep and delete are the words of the upload
// sweep's verdicts; the others are the digest sweep's own.
const (
	verdictKeep   = "keep"
	verdictDelete = "delete"
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

// ExplainPass is what an explanation needs of the pass framework.
type ExplainPass struct {
	// Now is the clock the checklist runs at.
	Now func() time.Time
	// DryRun says passes only plan (reclaim.dry_run).
	DryRun bool
	// LastPass reads the newest stored pass report (nil when none).
	LastPass func(context.Context) (*sweep.PassSummary, error)
	// NextPass reads the number of the pass in progress, or of the next
	// one: the pass a judgement made now is for.
	NextPass func(context.Context) (int64, error)
	// Elapsed reads the reclaimer's elapsed clock (sweep.Run.Elapsed);
	// nil reads 0.
	Elapsed func(context.Context) (time.Duration, error)
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
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// elapsed is the elapsed clock the checklist ran at.
	elapsed        time.Duration
	DryRun         bool   `json:"dry_run"`
	PlacementGrace string `json:"placement_grace"`
	// Blob is the stored copy judged (null when none is stored); Copies every
	// stored copy found, Blob first.
	Blob   *ExplainBlob  `json:"blob"`
	Copies []ExplainBlob `json:"copies"`
	Steps  []sweep.Step  `json:"steps"`
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
	RequiredFrontier int64              `json:"required_frontier"`
	Planes           []ExplainPlane     `json:"planes"`
	Guard            *ExplainGuard      `json:"guard"`
	LastPass         *sweep.PassSummary `json:"last_pass"`
	Notes            []string           `json:"notes"`
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
	// Source is the reference source the object lies in, or "content of"
	// the namespace whose blob (a manifest) it is ("" when none any more).
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
	// Undecodable: the guard's value does not decode; it stays armed for
	// a person, since it may record a delete still in flight.
	Undecodable bool `json:"undecodable,omitempty"`
	// Attempt is the last delete of the blob sent under the guard, if
	// any; SettledAfter when no such delete can still be executed (its
	// deadline plus digests.guard_settle plus reclaim.clock_skew): the
	// guard stays armed at least until then.
	Attempt      *etcdstore.DeleteAttempt `json:"attempt,omitempty"`
	SettledAfter *time.Time               `json:"settled_after,omitempty"`
}

// The digest rules the explanation adds before the inventories and judge.
const (
	ruleNotStored      = "not_stored"
	ruleReferenceHolds = "reference_holds"
)

// explainTotals counts what may retain the digest: references, trash
// entries and placements (the explanation lists at most maxExplainList of
// each).
type explainTotals struct{ refs, trash, places int64 }

// Explain explains what the digest sweep would do now with digest's blob:
// it finds the stored copy in the configured namespaces, asks the sweep's
// inventories whether it is retained, and runs the sweep's judgement
// (judgeSteps) against its tombstone, its shard's reference revision and
// the planes' frontiers, all read at one etcd revision for the pass in
// progress or the next one. It writes nothing. It fails with ErrBadDigest
// for a malformed digest, and sweep.ErrNotKnown when no blob is stored and
// etcd holds nothing about the digest.
func (sw *Sweep) Explain(ctx context.Context, digest string, pc ExplainPass) (DigestExplanation, error) {
	if !cas.Valid(digest) {
		return DigestExplanation{}, fmt.Errorf("%w: %q, want <algorithm>:<hex>, such as sha256: and 64 hex digits", ErrBadDigest, digest)
	}
	now := pc.Now().UTC()
	var elapsed time.Duration
	if pc.Elapsed != nil {
		var err error
		if elapsed, err = pc.Elapsed(ctx); err != nil {
			return DigestExplanation{}, err
		}
	}
	ex := DigestExplanation{elapsed: elapsed,
		Digest: digest, Now: now, DryRun: pc.DryRun, PlacementGrace: sw.cfg.PlacementGrace.String(), Shard: etcdstore.RefShard(digest),
		Copies: []ExplainBlob{}, Steps: []sweep.Step{}, References: []ExplainRef{}, Trash: []ExplainTrash{},
		Placements: []ExplainPlacement{}, Planes: []ExplainPlane{}, Notes: []string{},
	}
	young := placementsInventory{now: now, grace: sw.cfg.PlacementGrace}
	tot, tomb, err := sw.explainRecords(ctx, &ex, young, pc)
	if err != nil {
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
	copies, searched, err := sw.findBlobs(ctx, sw.cfg.Layout, digest, hints)
	if err != nil {
		return ex, err
	}
	for _, c := range copies {
		ex.Copies = append(ex.Copies, explainBlob(c.ns, c.Blob, now))
	}
	if len(copies) == 0 && tot.refs == 0 && tot.trash == 0 && tot.places == 0 && tomb == nil && ex.Guard == nil {
		return ex, sweep.ErrNotKnown
	}

	var cl sweep.Checklist
	if !explainStored(&ex, &cl, copies, searched, tomb) {
		return ex, nil
	}
	bv := ex.Copies[0]
	ex.Blob = &bv

	cl.Step(ruleReferenceHolds, ex.ReferenceHolds > 0, func() (string, sweep.Values) {
		v := sweep.Values{"reference_holds": ex.ReferenceHolds}
		if ex.ReferenceHolds > 0 {
			return "a complete into a reference source is recording its references: the sweep judges no blob while a hold exists", v
		}
		return "no reference hold", v
	})
	if ex.ReferenceHolds > 0 {
		ex.Steps = cl.Steps
		ex.Verdict, ex.Reason = verdictKeep, "reference holds exist: a pass now judges no blob; ask again once the complete that holds is done"
		return ex, nil
	}
	return ex, sw.explainJudgement(ctx, &ex, &cl, copies, young, tot, tomb, pc.DryRun)
}

// explainRecords reads into ex, at one etcd revision (as the pass revision
// does for a pass), the shard's reference revision, the references, trash
// entries and placements that may retain the digest, its tombstone, its
// guard and the reference holds, then the last pass and the next pass's
// number. It returns how many references, trash entries and placements
// there are, and the tombstone (nil when none).
func (sw *Sweep) explainRecords(ctx context.Context, ex *DigestExplanation, young placementsInventory, pc ExplainPass) (explainTotals, *ExplainTombstone, error) {
	var tot explainTotals
	resp, err := sw.cli().Get(ctx, sw.keys().RefRev(ex.Shard))
	if err != nil {
		return tot, nil, fmt.Errorf("digestsweep: read reference revision: %w", err)
	}
	ex.Revision = resp.Header.Revision
	if len(resp.Kvs) > 0 {
		ex.ShardRefRevision = resp.Kvs[0].ModRevision
	}
	at := clientv3.WithRev(ex.Revision)
	if tot.refs, err = sw.explainRefs(ctx, ex, at); err != nil {
		return tot, nil, err
	}
	if tot.trash, err = sw.explainTrash(ctx, ex, at); err != nil {
		return tot, nil, err
	}
	if tot.places, err = sw.explainPlacements(ctx, ex, young, at); err != nil {
		return tot, nil, err
	}
	tomb, err := sw.explainTombstone(ctx, ex, at)
	if err != nil {
		return tot, nil, err
	}
	if err := sw.explainGuard(ctx, ex, at); err != nil {
		return tot, nil, err
	}
	holds, err := sw.cli().Get(ctx, sw.keys().RefHolds(), clientv3.WithPrefix(), clientv3.WithCountOnly(), at)
	if err != nil {
		return tot, nil, fmt.Errorf("digestsweep: read reference holds: %w", err)
	}
	ex.ReferenceHolds = holds.Count
	if ex.LastPass, err = pc.LastPass(ctx); err != nil {
		return tot, nil, err
	}
	if ex.NextPass, err = pc.NextPass(ctx); err != nil {
		return tot, nil, err
	}
	return tot, tomb, nil
}

// explainStored records the checklist's first rule, whether a blob of the
// digest is stored, and reports whether one is; when none is, it settles
// the verdict (deleted, or absent).
func explainStored(ex *DigestExplanation, cl *sweep.Checklist, copies []storedBlob, searched string, tomb *ExplainTombstone) bool {
	cl.Step(ruleNotStored, len(copies) == 0, func() (string, sweep.Values) {
		if len(copies) == 0 {
			return "no blob of the digest is stored in " + searched + ": there is nothing to keep or delete", sweep.Values{"copies": 0}
		}
		b := copies[0]
		return fmt.Sprintf("stored as %s/%s (%d bytes) in namespace %s", b.Bucket, b.Key, b.Size, b.ns),
			sweep.Values{"copies": len(copies), "bucket": b.Bucket, "key": b.Key, "size": b.Size, "modified": b.Modified}
	})
	if len(copies) > 0 {
		return true
	}
	ex.Steps = cl.Steps
	if tomb != nil && tomb.State == string(etcdstore.TombstoneDeleted) {
		ex.Verdict = verdictDeleted
		ex.Reason = fmt.Sprintf("its bytes were deleted by pass %d (term %d) at %s", tomb.Pass, tomb.Term, tomb.Since.Format(time.RFC3339))
		if tomb.Reason != "" {
			ex.Reason += ": " + tomb.Reason
		}
	} else {
		ex.Verdict, ex.Reason = verdictAbsent, "no blob of the digest is stored: nothing to keep or delete"
	}
	return false
}

// explainJudgement asks the sweep's own inventories, in its order, at the
// revision the records were read at, about the first copy, then runs the
// sweep's judgement against the tombstone and the planes, and settles the
// verdict, its reason and the notes. Every inventory is asked, so that an
// operator learns all that retains the blob; the first to retain it is
// the one a pass credits. As in a pass, the uploads inventory is asked
// only about a blob whose tombstone is pending or ready (uploadsAhead).
func (sw *Sweep) explainJudgement(ctx context.Context, ex *DigestExplanation, cl *sweep.Checklist, copies []storedBlob,
	young placementsInventory, tot explainTotals, tomb *ExplainTombstone, dryRun bool) error {
	b := copies[0].Blob
	s := &digestSweep{Sweep: sw, dry: true, now: ex.Now, cur: digestCursor{Rev: ex.Revision},
		run: &sweep.Run{Now: ex.Now, DryRun: true, Elapsed: ex.elapsed}}
	retainedBy := ""
	var retainedWhy string
	live := tomb != nil && !etcdstore.TombstoneState(tomb.State).Terminal()
	for _, inv := range append(s.inventories(), s.uploadsInventory()) {
		asked := inv.Name() != "uploads" || live
		var got map[string]bool
		if asked {
			var err error
			if got, err = inv.Retained(ctx, []Blob{b}); err != nil {
				return fmt.Errorf("digestsweep: inventory %s: %w", inv.Name(), err)
			}
		}
		kept := got[b.Digest]
		detail, v := ex.inventoryDetail(inv.Name(), kept, b, young, tot.refs, tot.trash, tot.places)
		if !asked {
			detail, v["asked"] = fmt.Sprintf("not asked: the backend is asked about multipart uploads into %s/%s only for a blob "+
				"with a pending or ready tombstone, which a pass may make ready", b.Bucket, b.Key), false
		}
		if kept && retainedBy != "" {
			detail = "also " + detail
		}
		cl.Step(inv.Name(), kept, func() (string, sweep.Values) { return detail, v })
		if kept && retainedBy == "" {
			retainedBy, retainedWhy = inv.Name(), detail
		}
	}

	planes, err := s.frontiers(ctx)
	if err != nil {
		return err
	}
	s.planes = planes
	var asked int64
	applied := func(rev int64) bool {
		asked = rev
		return s.applied(rev)
	}
	var t *etcdstore.Tombstone
	if tomb != nil {
		t = &etcdstore.Tombstone{Digest: ex.Digest, State: etcdstore.TombstoneState(tomb.State), Bucket: tomb.Bucket, Key: tomb.Key,
			Size: tomb.Size, Frontier: tomb.Frontier, RefRev: tomb.RefRev, Term: tomb.Term, Pass: tomb.Pass, Attempts: tomb.Attempts, Since: tomb.Since}
	}
	var ord rebuildOrder
	if tomb != nil {
		if ord, err = s.explainOrder(ctx, tomb.ModRevision); err != nil {
			return err
		}
	}
	j := judgeSteps(retainedBy != "", t, b, ex.NextPass, ex.ShardRefRevision, ord, applied, false, cl)
	ex.Steps = cl.Steps
	ex.RequiredFrontier = asked
	for _, name := range sw.cfg.Planes {
		ex.Planes = append(ex.Planes, ExplainPlane{Plane: name, Revision: planes[name], Applied: asked > 0 && planes[name] >= asked})
	}
	ex.verdict(j.out, retainedBy, retainedWhy, asked)
	if ex.Guard != nil {
		ex.Notes = append(ex.Notes, ex.Guard.note(ex.Now))
	}
	if len(copies) > 1 {
		ex.Notes = append(ex.Notes, fmt.Sprintf("the digest is stored %d times; the checklist judged %s/%s, and each copy is judged on its own", len(copies), b.Bucket, b.Key))
	}
	acts := ex.Verdict == verdictDelete || ex.Verdict == verdictTombstone || ex.Verdict == verdictPending
	ex.Notes = append(ex.Notes, sweep.PassNotes(ex.LastPass, dryRun, acts, true)...)
	return nil
}

// verdict settles the verdict and its reason from the judgement's outcome
// and the step that decided. asked is the revision the planes were
// compared with (0: not compared).
func (ex *DigestExplanation) verdict(out outcome, retainedBy, retainedWhy string, asked int64) {
	decided := ex.Steps[len(ex.Steps)-1]
	switch out {
	case outRetained, outSkipped, outDuplicate:
		ex.Verdict = verdictKeep
		ex.Reason = "retained by " + retainedBy + ": " + retainedWhy
		if out == outSkipped {
			ex.Reason += "; " + decided.Detail
		}
		if out == outDuplicate {
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
		ex.Verdict, ex.Reason = verdictDelete, decided.Detail
	}
}

// note says what the guard means for the digest at now.
func (g *ExplainGuard) note(now time.Time) string {
	armed := fmt.Sprintf("its guard is armed (term %d, pass %d, since %s)", g.Term, g.Pass, g.At.Format(time.RFC3339))
	switch {
	case g.Undecodable:
		return "its guard does not decode: it stays armed, as it may record a delete still in flight, until a person removes it; writes naming the digest are refused"
	case g.Attempt != nil && now.Before(*g.SettledAfter):
		return fmt.Sprintf("%s and a delete was sent at %s (term %d, pass %d) that the backend may still execute: the guard is settling and stays armed until %s, "+
			"then a pass looks at the blob; writes naming the digest are refused and reads of the blob answer 404 until then",
			armed, g.Attempt.Sent.Format(time.RFC3339), g.Attempt.Term, g.Attempt.Pass, g.SettledAfter.Format(time.RFC3339))
	case g.Attempt != nil:
		return fmt.Sprintf("%s; its delete sent at %s is settled (no longer executable since %s): the next pass looks at the blob and settles the guard, and writes naming the digest are refused until then",
			armed, g.Attempt.Sent.Format(time.RFC3339), g.SettledAfter.Format(time.RFC3339))
	}
	return armed + ": a collector is deleting the bytes, or was cut short before sending a delete; " +
		"the next pass looks at the blob and settles the guard, and writes naming the digest are refused until then"
}
