package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// The digest sweep reclaims content-addressed blobs that nothing references
// (docs/digests.md). It runs in every pass after the upload
// sweep, under the same pass number and term, in phases recorded in its own
// cursor so that a pass cut short resumes where it stood:
//
//  1. Guards left armed by an earlier attempt are settled (every attempt).
//  2. rebuild: the reference sources on the backend are compared with the
//     recorded references, when due.
//  3. tombstones: every stored blob is judged against the retained set at
//     one etcd revision; blobs outside it move pending -> ready over
//     passes, blobs inside it make their tombstones skipped. The breaker
//     then checks the deletions against its ceilings.
//  4. collect: ready tombstones confirmed in this pass are guarded, their
//     bytes deleted, and the guards released.
//  5. prune: terminal tombstones, expired trash and stale placements are
//     removed in bounded batches, and the tombstones counted.

// Defaults for DigestsConfig.
const (
	DefaultPlacementGrace          = 24 * time.Hour
	DefaultTombstoneRetention      = 7 * 24 * time.Hour
	DefaultDigestMaxDelete         = int64(10000)
	DefaultDigestMaxDeleteFraction = 0.25
)

// Fault points of the digest sweep (see Config.Fault).
const (
	// FaultDigestBeforeTombstone: a page's inventories are read; its
	// tombstone writes are not made yet.
	FaultDigestBeforeTombstone = "digest.before-tombstone"
	// FaultDigestPage: a page's tombstones are written and the cursor has
	// moved past it.
	FaultDigestPage = "digest.page"
	// FaultDigestGuarded: a batch's guards are armed; its bytes are not
	// deleted yet.
	FaultDigestGuarded = "digest.guarded"
	// FaultDigestCollected: a batch's deletes are done and recorded.
	FaultDigestCollected = "digest.collected"
)

// DigestsConfig turns on the digest sweep (docs/digests.md). Zero
// durations and limits take the defaults above.
type DigestsConfig struct {
	// Layout names the CAS namespaces whose blobs are swept and the
	// reference sources the rebuild scans.
	Layout *cas.Layout
	// PlacementGrace retains blobs younger than this, and placements (writes
	// in flight) younger than this; older placements are leftovers of a
	// gateway that died, and are pruned.
	PlacementGrace time.Duration
	// Planes are the replica and backup planes (frontiers/<plane>) that
	// must have applied a tombstone's frontier before its bytes may go. A
	// plane that has not reported counts as revision 0.
	Planes []string
	// MaxDelete is the most blobs one pass deletes; negative means no
	// absolute limit (the fraction still applies).
	MaxDelete int64
	// MaxDeleteFraction is the largest share of all stored blobs one pass
	// deletes, in (0, 1].
	MaxDeleteFraction float64
	// RebuildInterval is the time between rebuilds of the recorded
	// references; zero rebuilds before every pass.
	RebuildInterval time.Duration
	// TombstoneRetention is how long terminal (skipped, deleted)
	// tombstones are kept before they are pruned.
	TombstoneRetention time.Duration
}

// withDefaults returns a copy of c with the defaults filled in, or why c
// cannot work. It copies so that the caller's value is left as given.
func (c *DigestsConfig) withDefaults() (*DigestsConfig, error) {
	d := *c
	if d.Layout == nil || len(d.Layout.Namespaces) == 0 {
		return nil, errors.New("reclaim: the digest sweep needs at least one CAS namespace")
	}
	if err := d.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("reclaim: digest sweep: %w", err)
	}
	if d.PlacementGrace <= 0 {
		d.PlacementGrace = DefaultPlacementGrace
	}
	if d.TombstoneRetention <= 0 {
		d.TombstoneRetention = DefaultTombstoneRetention
	}
	if d.MaxDelete == 0 {
		d.MaxDelete = DefaultDigestMaxDelete
	}
	if d.MaxDeleteFraction == 0 {
		d.MaxDeleteFraction = DefaultDigestMaxDeleteFraction
	}
	if d.MaxDeleteFraction <= 0 || d.MaxDeleteFraction > 1 {
		return nil, fmt.Errorf("reclaim: digest max_delete_fraction %g must be in (0, 1]", d.MaxDeleteFraction)
	}
	if d.RebuildInterval < 0 {
		return nil, fmt.Errorf("reclaim: digest rebuild interval %v is negative", d.RebuildInterval)
	}
	return &d, nil
}

// DigestReport is what the digest sweep of one pass found, decided and did:
// the "digests" section of a pass report. In a dry run the counts are what
// a pass would do; Deleted and Bytes are what its collector would delete.
type DigestReport struct {
	// Pending counts stored blobs outside the retained set whose tombstone
	// waits (new this pass, or for its frontier).
	Pending int64 `json:"pending"`
	// Ready counts blobs confirmed for the collector in this pass.
	Ready int64 `json:"ready"`
	// Skipped counts tombstones whose blob came back into the retained set.
	Skipped int64 `json:"skipped"`
	// Deleted counts blobs the collector deleted, Bytes their size.
	Deleted int64 `json:"deleted"`
	Bytes   int64 `json:"bytes"`

	// Stored counts the blobs listed in the namespaces, StoredBytes their
	// size, ReadyBytes the size of the ready ones.
	Stored      int64 `json:"stored"`
	StoredBytes int64 `json:"stored_bytes"`
	ReadyBytes  int64 `json:"ready_bytes"`
	// Retained counts the stored blobs inside the retained set, RetainedBy
	// by the inventory that retained them.
	Retained   int64            `json:"retained"`
	RetainedBy map[string]int64 `json:"retained_by,omitempty"`
	// NewPending counts blobs that became pending in this pass.
	NewPending int64 `json:"new_pending,omitempty"`
	// Changed counts verdicts not written because a reference, placement or
	// the tombstone itself moved since they were made: left alone.
	Changed int64 `json:"changed,omitempty"`
	// Ignored counts keys in a namespace prefix that carry no digest.
	Ignored int64 `json:"ignored,omitempty"`
	// Duplicates counts blobs whose digest's tombstone is about a copy
	// stored elsewhere; they wait until that copy is settled.
	Duplicates int64 `json:"duplicates,omitempty"`
	// Failed counts blobs the collector found still present after its
	// delete: they stay ready for the next pass.
	Failed int64 `json:"failed,omitempty"`
	// Unknown counts deletes whose outcome could not be learnt: their
	// guards stay armed until a later pass finds out.
	Unknown int64 `json:"unknown,omitempty"`
	// Guards counts guards found armed when the sweep started (left by an
	// interrupted collector; a resumed pass counts again those an earlier
	// attempt took over); Released those released without a delete.
	Guards   int64 `json:"guards,omitempty"`
	Released int64 `json:"released,omitempty"`
	// StalePlacements counts placements older than the placement grace
	// seen by the inventory (pruned by the pass).
	StalePlacements int64 `json:"stale_placements,omitempty"`

	// Refused is why the breaker refused the deletions; Kept why the sweep
	// kept everything (a failed or retired inventory, a reference hold, a
	// failed rebuild). Either way nothing was deleted.
	Refused string `json:"refused,omitempty"`
	Kept    string `json:"kept,omitempty"`
	// Revision is the etcd revision the retained set was read at.
	Revision int64         `json:"revision,omitempty"`
	Resumed  int           `json:"resumed,omitempty"`
	Breaker  DigestBreaker `json:"breaker"`
	Rebuild  DigestRebuild `json:"rebuild"`
	Pruned   Pruned        `json:"pruned"`
	// Tombstones counts the tombstones by state once the pass is done.
	Tombstones map[etcdstore.TombstoneState]int64 `json:"tombstones,omitempty"`
}

// DigestBreaker holds the numbers the digest deletions were checked against.
type DigestBreaker struct {
	DeleteBlobs       int64   `json:"delete_blobs"`
	StoredBlobs       int64   `json:"stored_blobs"`
	MaxDelete         int64   `json:"max_delete"`
	MaxDeleteFraction float64 `json:"max_delete_fraction"`
}

// DigestRebuild says whether the pass rebuilt the recorded references and
// what came of it.
type DigestRebuild struct {
	// Ran says a rebuild ran (or resumed) in this pass; NotRun why not.
	Ran    bool   `json:"ran"`
	NotRun string `json:"not_run,omitempty"`
	// Failed is why it failed: the pass then deleted nothing.
	Failed string         `json:"failed,omitempty"`
	Result *RebuildResult `json:"result,omitempty"`
	// Last is when the last complete rebuild finished.
	Last time.Time `json:"last,omitzero"`
}

// Pruned counts what the pass removed from etcd (or, in a dry run, would).
type Pruned struct {
	Tombstones int64 `json:"tombstones"`
	Trash      int64 `json:"trash"`
	Placements int64 `json:"placements"`
}

// digestSweepName names the digest sweep's cursor (etcdstore.Keys.Cursor);
// rebuildStateName the record of the last complete rebuild, which outlives
// passes.
const (
	digestSweepName  = "digests"
	rebuildStateName = "rebuild"
)

// The phases of the digest sweep, as recorded in its cursor.
const (
	digestPhaseRebuild    = "rebuild"
	digestPhaseTombstones = "tombstones"
	digestPhaseCollect    = "collect"
	digestPhasePrune      = "prune"
)

// digestCursor is the durable state of the digest sweep of the pass in
// progress, written (fenced) after every page and batch.
//
// Resume semantics:
//   - The sweep belongs to the pass numbered Pass; a cursor of another pass
//     (one abandoned or finished without its digest sweep) is dropped.
//   - rebuild: Rebuild.Pos is where the rebuild stands; its result so far
//     is kept with it.
//   - tombstones: Rev is the revision the retained set is read at and
//     Shards the reference revision of every shard at Rev; both hold for
//     the whole pass. Namespaces are walked in configuration order; NS is
//     the one in progress and After the last key of the last page whose
//     tombstones were written. A page re-listed after a resume is judged
//     again; its tombstones already written in this pass are recognised
//     (their Pass) and counted as they stand, not advanced twice.
//   - collect: Collect is the last tombstone key whose batch is settled.
//     Guards armed by an interrupted batch are settled by the next
//     attempt's first step, from what the backend holds.
//   - prune starts over on a resume; what was pruned is gone.
type digestCursor struct {
	Version int              `json:"v"`
	Pass    int64            `json:"pass"`
	Term    int64            `json:"term"`
	Phase   string           `json:"phase"`
	Rebuild rebuildState     `json:"rebuild"`
	Rev     int64            `json:"rev,omitempty"`
	Shards  map[string]int64 `json:"shards,omitempty"`
	NS      int              `json:"ns"`
	After   string           `json:"after,omitempty"`
	Collect string           `json:"collect,omitempty"`
	Report  DigestReport     `json:"report"`
}

// rebuildState is the rebuild's part of the cursor.
type rebuildState struct {
	Due    bool          `json:"due"`
	Pos    rebuildPos    `json:"pos"`
	Result RebuildResult `json:"result"`
}

// lastRebuild is the record of the last complete rebuild.
type lastRebuild struct {
	Version  int           `json:"v"`
	Pass     int64         `json:"pass"`
	Finished time.Time     `json:"finished"`
	Result   RebuildResult `json:"result"`
}

// digestSweep is the digest sweep of one pass.
type digestSweep struct {
	p   *pass
	r   *Reclaimer
	cfg *DigestsConfig
	// dry: decide and count, write nothing anywhere.
	dry  bool
	term term
	// now is the pass's decision clock, fixed for its whole life.
	now time.Time
	cur digestCursor
	// planes holds the configured planes' frontiers (0: not reported).
	planes map[string]int64
	invs   []Inventory
}

// digests runs the digest sweep of pass p, when it is configured. The
// report it builds is kept on p, also when it stops with an error.
func (p *pass) digests(ctx context.Context) error {
	if p.r.cfg.Digests == nil {
		return nil
	}
	s := &digestSweep{p: p, r: p.r, cfg: p.r.cfg.Digests, dry: p.dry, term: p.term, now: p.cur.Now}
	err := s.run(ctx)
	p.digest = &s.cur.Report
	return err
}

// run resumes or starts the sweep and takes it through its phases.
func (s *digestSweep) run(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := s.settleGuards(ctx); err != nil {
		return err
	}
	if s.cur.Phase == digestPhaseRebuild {
		if err := s.rebuild(ctx); err != nil {
			return err
		}
	}
	if s.cur.Phase == digestPhaseTombstones {
		if err := s.tombstones(ctx); err != nil {
			return err
		}
	}
	if s.cur.Phase == digestPhaseCollect {
		if err := s.collect(ctx); err != nil {
			return err
		}
	}
	if err := s.prune(ctx); err != nil {
		return err
	}
	s.log()
	return nil
}

// begin resumes the pass's digest sweep from its cursor, or starts it.
func (s *digestSweep) begin(ctx context.Context) error {
	if !s.dry {
		c, ok, err := s.loadCursor(ctx)
		if err != nil {
			return err
		}
		if ok && c.Pass == s.p.cur.Pass {
			c.Report.Resumed++
			c.Term = s.term.N
			s.cur = c
			s.r.log.Info("resuming digest sweep", "pass", c.Pass, "phase", c.Phase, "term", s.term.N)
			return s.save(ctx)
		}
	}
	s.cur = digestCursor{Pass: s.p.cur.Pass, Term: s.term.N, Phase: digestPhaseRebuild}
	s.cur.Report.Breaker = DigestBreaker{MaxDelete: s.cfg.MaxDelete, MaxDeleteFraction: s.cfg.MaxDeleteFraction}
	due, last, err := s.rebuildDue(ctx)
	if err != nil {
		return err
	}
	s.cur.Rebuild.Due = due
	s.cur.Report.Rebuild.Last = last
	return s.save(ctx)
}

// loadCursor reads the digest sweep's cursor; ok is false when there is
// none.
func (s *digestSweep) loadCursor(ctx context.Context) (c digestCursor, ok bool, err error) {
	resp, err := s.r.cli().Get(ctx, s.r.keys().Cursor(digestSweepName))
	if err != nil {
		return c, false, fmt.Errorf("reclaim: read digest cursor: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return c, false, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &c); err != nil {
		return c, false, fmt.Errorf("reclaim: decode digest cursor: %w", err)
	}
	if c.Version != cursorVersion {
		return c, false, fmt.Errorf("reclaim: digest cursor version %d, want %d", c.Version, cursorVersion)
	}
	return c, true, nil
}

// cursorOp is the write that records the sweep's cursor as it stands.
func (s *digestSweep) cursorOp() clientv3.Op { return cursorOpOf(s.r.keys(), &s.cur) }

// cursorOpOf is the write that records c.
func cursorOpOf(keys etcdstore.Keys, c *digestCursor) clientv3.Op {
	c.Version = cursorVersion
	b, _ := json.Marshal(c) // plain data always marshals
	return clientv3.OpPut(keys.Cursor(digestSweepName), string(b))
}

// save records the cursor (fenced). A dry run keeps it in memory.
func (s *digestSweep) save(ctx context.Context, ops ...clientv3.Op) error {
	if s.dry {
		return nil
	}
	_, err := fencedTxn(ctx, s.r.cli(), s.term, nil, append(ops, s.cursorOp())...)
	return err
}

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
	s.r.log.Warn("digest sweep keeps everything this pass", "pass", s.cur.Pass, "why", why)
}

// rebuildDue reads the last complete rebuild and says whether another is
// due.
func (s *digestSweep) rebuildDue(ctx context.Context) (bool, time.Time, error) {
	last, ok, err := s.lastRebuild(ctx)
	if err != nil {
		return false, time.Time{}, err
	}
	if !ok || s.cfg.RebuildInterval == 0 {
		return true, last.Finished, nil
	}
	return s.now.Sub(last.Finished) >= s.cfg.RebuildInterval, last.Finished, nil
}

func (s *digestSweep) lastRebuild(ctx context.Context) (lastRebuild, bool, error) {
	var l lastRebuild
	resp, err := s.r.cli().Get(ctx, s.r.keys().Cursor(rebuildStateName))
	if err != nil {
		return l, false, fmt.Errorf("reclaim: read the last rebuild: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return l, false, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &l); err != nil {
		return l, false, fmt.Errorf("reclaim: decode the last rebuild: %w", err)
	}
	return l, true, nil
}

// rebuild runs (or resumes) the rebuild when it is due. A failed rebuild
// does not stop the pass: the sweep goes on to judge and mark, but writes
// no ready tombstone and deletes nothing, since a reference the rebuild
// could not check may be the only one to a blob.
func (s *digestSweep) rebuild(ctx context.Context) error {
	rep := &s.cur.Report.Rebuild
	switch {
	case !s.cur.Rebuild.Due:
		rep.NotRun = "not due: the last rebuild is more recent than the rebuild interval"
	case len(s.cfg.Layout.Sources) == 0:
		rep.NotRun = "no reference sources are configured"
	case s.dry:
		rep.NotRun = "a dry run does not rebuild (it would record references); the plan judges by the recorded ones"
	default:
		if err := s.runRebuild(ctx); err != nil {
			return err
		}
	}
	s.cur.Phase = digestPhaseTombstones
	return s.save(ctx)
}

// runRebuild runs the rebuild from the cursor's position, saving its
// position after every page, and records a complete one.
func (s *digestSweep) runRebuild(ctx context.Context) error {
	rep := &s.cur.Report.Rebuild
	rep.Ran = true
	b := &rebuilder{
		s3: s.r.s3, store: s.r.store, sources: s.cfg.Layout.Sources, batch: s.r.cfg.BatchSize,
		log: s.r.log, now: s.r.now,
	}
	start := s.cur.Rebuild.Result
	res, err := b.run(ctx, s.cur.Rebuild.Pos, start, func(pos rebuildPos, res RebuildResult) error {
		s.cur.Rebuild.Pos, s.cur.Rebuild.Result = pos, res
		return s.save(ctx)
	})
	if n := res.UnknownRefs - start.UnknownRefs; n > 0 {
		s.r.metrics.unknownRefs.Add(float64(n))
	}
	s.cur.Rebuild.Result = res
	rep.Result = &res
	if err != nil {
		if errors.Is(err, ErrFenced) || ctx.Err() != nil {
			return err
		}
		rep.Failed = err.Error()
		s.r.log.Error("rebuild of the recorded references failed: the digest sweep deletes nothing this pass", "pass", s.cur.Pass, "err", err)
		return nil
	}
	if res.UnknownRefs > 0 {
		s.r.log.Warn("the rebuild found references written around the gateway; they are retained",
			"pass", s.cur.Pass, "objects", res.Unknown, "references", res.UnknownRefs)
	}
	finished := s.r.now().UTC()
	rep.Last = finished
	b2, _ := json.Marshal(lastRebuild{Version: cursorVersion, Pass: s.cur.Pass, Finished: finished, Result: res})
	return s.save(ctx, clientv3.OpPut(s.r.keys().Cursor(rebuildStateName), string(b2)))
}

// log writes the sweep's summary to the log.
func (s *digestSweep) log() {
	rep := &s.cur.Report
	s.r.log.Info("digest sweep report", "pass", s.cur.Pass, "term", s.term.N, "dry_run", s.dry,
		"stored", rep.Stored, "retained", rep.Retained, "pending", rep.Pending, "ready", rep.Ready,
		"skipped", rep.Skipped, "deleted", rep.Deleted, "bytes", rep.Bytes, "failed", rep.Failed,
		"unknown", rep.Unknown, "changed", rep.Changed, "refused", rep.Refused, "kept", rep.Kept,
		"rebuild_failed", rep.Rebuild.Failed)
}
