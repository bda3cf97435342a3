package reclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/sweep"
)

// Fault points: where Config.Fault is called, so a test can stop or
// disturb a pass at a precise step.
const (
	// FaultPassStarted: reconciled and the pass claimed or resumed;
	// nothing read yet.
	FaultPassStarted = "pass.started"
	// FaultGuardsChecked: the leader's timer, between passes, has settled
	// the guards that were due (Config.GuardCheck).
	FaultGuardsChecked = "guards.checked"
	// FaultPlanned: the whole plan is built and passed the breaker;
	// nothing marked or deleted yet.
	FaultPlanned = "pass.planned"
	// FaultPageRecorded: a page of the inventory is recorded in the cursor.
	FaultPageRecorded = "inventory.page"
	// FaultActed: a mark or a delete is done and recorded in the cursor.
	FaultActed = "act.acted"
	// FaultDeleteAfterIntent: a delete's "aborting" is recorded, the
	// backend abort not sent.
	FaultDeleteAfterIntent = "delete.after-intent"
)

// pass is one run of the upload sweep: reconcile, inventory, plan, breaker,
// act, report. A real pass records its progress in a cursor and its plan in
// chunks (see cursor); a dry run keeps everything in memory and writes
// nothing.
type pass struct {
	r    *Reclaimer
	dry  bool
	term term
	cur  cursor
	inv  *inventory

	// Chunks written for the listing page in progress, not yet counted by
	// the cursor, and what they tally.
	pendingChunks int
	pendingTally  tally
	// lists holds a dry run's report lists (capped).
	lists chunk
	// digest is the digest sweep's report, once it ran (see digests).
	digest *digestsweep.Report
	// elapsed is the elapsed clock at the pass's start (see passClock).
	elapsed time.Duration
	// paused: the upload sweep was found paused (see check); pause, when
	// set, is the pause a refusal of this pass records with its report.
	paused bool
	pause  *etcdstore.Pause
	// restored, when set, is why nothing is marked or deleted: the restore
	// mark stands (restoreGate); restoredRev is the mark's revision and
	// restoreFloor the revision of the latest mark, standing or cleared
	// (0: none).
	restored     string
	restoredRev  int64
	restoreFloor int64
}

// runPass runs one pass under leadership l, or a dry run when l is nil or
// dry is set. It returns the report, also when the pass stopped; err says
// why it stopped.
func (r *Reclaimer) runPass(ctx context.Context, l *Leadership, dry bool) (rep Report, err error) {
	ctx, span := startPassSpan(ctx)
	defer func() { endPassSpan(span, rep, err) }()
	p := &pass{r: r, dry: dry || l == nil}
	if l == nil {
		l = r.elector.Current() // a plan shows the term it was made under
	}
	if l != nil {
		p.term = termOf(l)
	}
	started := r.now().UTC()
	rep, err = p.run(ctx, started)
	rep.Finished = r.now().UTC()
	r.observe(rep, err, rep.Finished.Sub(started))
	if !p.dry {
		// The paused gauge follows what etcd holds after the pass.
		if _, perr := r.Pauses(ctx); perr != nil {
			r.log.Warn("reading the sweeps' pauses failed", "err", perr)
		}
	}
	return rep, err
}

func (p *pass) run(ctx context.Context, started time.Time) (Report, error) {
	r := p.r
	var rec *multipart.ReconcileReport
	// Every clock is checked before anything is settled or decided.
	if err := p.passClock(ctx); err != nil {
		return p.stop(ctx, started, err, rec), err
	}
	// So is etcd: a restore from a snapshot holds every deletion.
	if err := p.restoreGate(ctx); err != nil {
		return p.stop(ctx, started, err, rec), err
	}
	if !p.dry && p.restored != "" {
		r.log.Warn("the reconciler does not run while the restore mark stands: a session restored from the snapshot may be older than the backend", "why", p.restored)
	}
	if !p.dry && p.restored == "" {
		// Settle what earlier deletes and completes left unclear before
		// deciding anything; a reconciler that cannot look at the backend
		// means this pass cannot either.
		rr, err := r.sessions.Reconcile(ctx, multipart.ReconcileOptions{
			After:          r.cfg.ReconcileAfter,
			StuckLimit:     r.cfg.StuckLimit,
			Retention:      r.cfg.SessionRetention,
			Actor:          actor,
			Term:           p.term.N,
			Fence:          []clientv3.Cmp{p.term.Fence()},
			BackendTimeout: r.cfg.BackendTimeout,
		})
		if err != nil {
			// Any failure stops the pass, ErrUnsettled included: the
			// decisions below assume the unclear outcomes were looked at.
			if errors.Is(err, multipart.ErrFenced) {
				err = fmt.Errorf("%w (%w)", ErrFenced, err)
			}
			err = fmt.Errorf("reconcile failed, nothing marked or deleted: %w", err)
			return p.stop(ctx, started, err, &rr), err
		}
		rec = &rr
	}
	if err := p.begin(ctx, started); err != nil {
		return p.stop(ctx, started, err, rec), err
	}
	r.fault(FaultPassStarted)

	// A refused upload plan still lets the digest sweep run: its own
	// breaker judges its own plan. A pass resumed in the act phase checks
	// the pause and the breaker again, with the settings of now, before it
	// acts on the rest of its plan.
	if p.cur.Phase == phaseInventory {
		if err := p.walkSlice(ctx); err != nil {
			if sweep.IsCompacted(err) {
				err = sweep.Abandon(fmt.Errorf("etcd revision %d, which this pass reads sessions at, was compacted; the next pass starts over: %w", p.cur.Rev, err))
			}
			return p.stop(ctx, started, err, rec), err
		}
	}
	refused, err := p.check(ctx)
	if err != nil {
		return p.stop(ctx, started, err, rec), err
	}
	if refused == "" && p.cur.Phase != phaseAct {
		p.cur.Phase = phaseAct
		if !p.dry {
			if _, err := fencedTxn(ctx, r.cli(), p.term, nil, cursorOp(r.keys(), &p.cur)); err != nil {
				return p.stop(ctx, started, err, rec), err
			}
		}
	}
	if !p.dry && refused == "" {
		r.fault(FaultPlanned)
		if err := p.act(ctx); err != nil {
			return p.stop(ctx, started, err, rec), err
		}
	}
	if err := p.digests(ctx); err != nil {
		return p.stop(ctx, started, err, rec), err
	}
	return p.finish(ctx, started, refused, "", rec)
}

// digests runs the digest sweep of pass p, when it is configured, through
// the sweep interface. The report it builds is kept on p, also when it
// stops with an error.
func (p *pass) digests(ctx context.Context) error {
	if p.r.digests == nil {
		return nil
	}
	var sw sweep.Sweep[*digestsweep.Report] = p.r.digests
	rep, err := sw.Run(ctx, &sweep.Run{
		Term: p.term, Pass: p.cur.Pass, Now: p.cur.Now, Clock: p.r.now, DryRun: p.dry, Fault: p.r.cfg.Fault,
		Elapsed: p.cur.Elapsed, ClockSkew: p.r.cfg.ClockSkew,
		Restored: p.restored, RestoredRev: p.restoredRev,
		ElapsedNow: func() time.Duration { return p.r.elapsedNow(p.cur.Elapsed) },
	})
	p.digest = rep
	return err
}

// begin resumes the pass in progress, or claims a new one: its number, its
// clock and the etcd revision it reads sessions at.
func (p *pass) begin(ctx context.Context, started time.Time) error {
	r := p.r
	cur, rev, ok, err := loadCursor(ctx, r.store)
	if err != nil {
		return err
	}
	if ok && !p.dry {
		cur.Resumed++
		cur.Term = p.term.N
		p.cur = cur
		r.log.Info("resuming reclaim pass", "pass", cur.Pass, "phase", cur.Phase, "bucket", cur.Pos.Bucket, "term", p.term.N)
	} else {
		last, err := lastPassNumber(ctx, r.store)
		if err != nil {
			return err
		}
		n := last + 1
		if ok && cur.Pass >= n {
			// A dry run while a real pass is in progress: it would be the
			// pass after that one.
			n = cur.Pass + 1
		}
		p.cur = cursor{Pass: n, Term: p.term.N, Started: started, Now: r.now().UTC(), Elapsed: p.elapsed, Rev: rev, Phase: phaseInventory}
		if err := p.startSlice(ctx); err != nil {
			return err
		}
	}
	pol := r.policy()
	pol.Elapsed = p.cur.Elapsed
	p.inv = &inventory{
		s3: r.s3, store: r.store, policy: pol, now: p.cur.Now, rev: p.cur.Rev,
		batch: r.cfg.BatchSize, parallel: r.cfg.Parallel, buckets: r.cfg.Buckets, exclude: r.cfg.ExcludeBuckets,
		checkBudget: r.cfg.MissingCheckBudget, missingChecks: p.cur.Tally.MissingChecks,
		restoreFloor: p.restoreFloor,
	}
	if p.cur.Slice != nil {
		p.inv.limit, p.inv.listed = p.cur.Slice.Budget, p.cur.Tally.Listed
	}
	if p.dry {
		return nil
	}
	_, err = fencedTxn(ctx, r.cli(), p.term, nil, cursorOp(r.keys(), &p.cur))
	return err
}

// number is the pass in progress, or the next one; 0 when etcd cannot say.
func (p *pass) number(ctx context.Context) int64 {
	if cur, _, ok, err := loadCursor(ctx, p.r.store); err == nil && ok {
		return cur.Pass
	}
	last, err := lastPassNumber(ctx, p.r.store)
	if err != nil {
		return 0
	}
	return last + 1
}

// page is the inventory handler: it counts a batch of examined uploads and
// records their decisions as plan chunks.
func (p *pass) page(ctx context.Context, items []item, pos position, final bool) error {
	var t tally
	var c chunk
	for _, it := range items {
		if !it.Unlisted {
			t.Listed++
		}
		if it.Vanished {
			t.Vanished++
			continue
		}
		if it.Unlisted {
			t.Totals.Unlisted++
		}
		if it.FutureTime {
			p.r.log.Warn("upload kept: a recorded time lies in the future", "pass", p.cur.Pass, "bucket", it.Bucket, "upload_id", it.UploadID, "reason", it.Reason)
		}
		t.Uploads.of(it.Verdict).add(it.Parts, it.Bytes)
		switch {
		case it.Verdict == Hold:
			t.Totals.Orphans++
			c.Orphans = append(c.Orphans, Orphan{Bucket: it.Bucket, Key: it.Key, UploadID: it.UploadID, Initiated: it.Initiated, Parts: it.Parts, Bytes: it.Bytes})
		case it.Stuck:
			t.Totals.Stuck++
			c.Stuck = append(c.Stuck, Stuck{Bucket: it.Bucket, Key: it.Key, UploadID: it.UploadID, Since: it.Since})
		case it.Verdict == Mark || it.Verdict == Delete:
			c.Acts = append(c.Acts, planned{
				Verdict: it.Verdict, Bucket: it.Bucket, Key: it.Key, UploadID: it.UploadID,
				SessionRev: it.SessionRev, ActivityRev: it.ActivityRev, Parts: it.Parts, Bytes: it.Bytes, Reason: it.Reason,
				LastActivity: it.LastActivity,
			})
		}
	}
	p.pendingTally.plus(t)
	return p.record(ctx, c, pos, final)
}

// missing is the inventory handler for sessions without a backend upload.
func (p *pass) missing(ctx context.Context, m []Missing, unverified int64, pos position) error {
	p.pendingTally.Totals.Missing += int64(len(m))
	p.pendingTally.Totals.MissingUnverified += unverified
	p.pendingTally.MissingChecks = p.inv.missingChecks - p.cur.Tally.MissingChecks
	if len(m) > 0 {
		p.r.log.Warn("sessions without a backend upload", "pass", p.cur.Pass, "bucket", pos.Bucket, "count", len(m))
	}
	if n := p.pendingTally.Totals.Unlisted; n > 0 {
		p.r.log.Warn("uploads missing from the backend's listing, found through their sessions (MinIO lists only uploads made since it started; orphans among them cannot be seen)",
			"pass", p.cur.Pass, "bucket", pos.Bucket, "count", n)
	}
	return p.record(ctx, chunk{Missing: m}, pos, true)
}

// denied is the inventory handler for a bucket the backend refuses to
// list: it is named in the report, counted and logged, and the pass goes
// on with the next bucket.
func (p *pass) denied(ctx context.Context, bucket string, pos position) error {
	p.pendingTally.Denied = append(p.pendingTally.Denied, bucket)
	p.r.metrics.deniedBuckets.WithLabelValues(PauseUploads).Inc()
	p.r.log.Warn("bucket skipped: the backend denies the reclaimer's key its multipart uploads (AccessDenied); nothing in it was judged",
		"pass", p.cur.Pass, "bucket", bucket)
	return p.record(ctx, chunk{}, pos, true)
}

// record writes a chunk and, when final, advances the cursor over it and
// every pending chunk in the same transaction. A dry run keeps the lists.
func (p *pass) record(ctx context.Context, c chunk, pos position, final bool) error {
	if p.dry {
		p.lists.Orphans = appendCapped(p.lists.Orphans, c.Orphans)
		p.lists.Stuck = appendCapped(p.lists.Stuck, c.Stuck)
		p.lists.Missing = appendCapped(p.lists.Missing, c.Missing)
		if final {
			p.cur.Tally.plus(p.pendingTally)
			p.pendingTally = tally{}
			p.cur.Pos = pos
			p.r.progress(p)
		}
		return nil
	}
	var bodies [][]byte
	if !c.empty() {
		var err error
		if bodies, err = splitChunks(c); err != nil {
			return err
		}
	}
	keys := p.r.keys()
	for i, b := range bodies {
		op := clientv3.OpPut(keys.PlanChunk(p.cur.Pass, p.cur.Chunks+p.pendingChunks), string(b))
		p.pendingChunks++
		if final && i == len(bodies)-1 {
			break // written below with the cursor
		}
		if _, err := fencedTxn(ctx, p.r.cli(), p.term, nil, op); err != nil {
			return err
		}
	}
	if !final {
		return nil
	}
	next := p.cur
	next.Chunks += p.pendingChunks
	next.Tally.plus(p.pendingTally)
	next.Pos = pos
	ops := []clientv3.Op{cursorOp(keys, &next)}
	if len(bodies) > 0 {
		ops = append(ops, clientv3.OpPut(keys.PlanChunk(p.cur.Pass, next.Chunks-1), string(bodies[len(bodies)-1])))
	}
	if _, err := fencedTxn(ctx, p.r.cli(), p.term, nil, ops...); err != nil {
		return err
	}
	p.cur = next
	p.pendingChunks, p.pendingTally = 0, tally{}
	p.r.progress(p)
	p.r.fault(FaultPageRecorded)
	return nil
}

func appendCapped[T any](dst, src []T) []T {
	if room := maxReportList - len(dst); room > 0 {
		dst = append(dst, src[:min(room, len(src))]...)
	}
	return dst
}

// report builds the pass's report from its cursor and, for a real pass,
// the lists kept in its plan chunks.
func (p *pass) report(ctx context.Context, started time.Time, rec *multipart.ReconcileReport) Report {
	rep := Report{
		Pass: p.cur.Pass, Term: p.term.N, DryRun: p.dry, Started: started,
		Uploads: p.cur.Tally.Uploads, Clock: p.cur.Now, Revision: p.cur.Rev, Resumed: p.cur.Resumed,
		Breaker: p.cur.Breaker, Acted: p.cur.Acted, Vanished: p.cur.Tally.Vanished, Totals: p.cur.Tally.Totals,
		DeniedBuckets: p.cur.Tally.Denied, Reconcile: rec, Stuck: []Stuck{}, Orphans: []Orphan{}, Missing: []Missing{},
	}
	if p.digest != nil {
		d := *p.digest
		rep.Digests = &d
	}
	if !p.cur.Started.IsZero() {
		rep.Started = p.cur.Started
	}
	if p.dry {
		rep.Orphans = append(rep.Orphans, p.lists.Orphans...)
		rep.Stuck = append(rep.Stuck, p.lists.Stuck...)
		rep.Missing = append(rep.Missing, p.lists.Missing...)
		return rep
	}
	for i := 0; i < p.cur.Chunks; i++ {
		if len(rep.Orphans) >= maxReportList && len(rep.Stuck) >= maxReportList && len(rep.Missing) >= maxReportList {
			break
		}
		c, err := loadChunk(ctx, p.r.store, p.cur.Pass, i)
		if err != nil {
			p.r.log.Warn("report lists incomplete", "pass", p.cur.Pass, "err", err)
			break
		}
		rep.Orphans = appendCapped(rep.Orphans, c.Orphans)
		rep.Stuck = appendCapped(rep.Stuck, c.Stuck)
		rep.Missing = appendCapped(rep.Missing, c.Missing)
	}
	return rep
}

// finish writes the report of a pass that ran to its end (or was refused,
// or stopped for good) and removes its cursor and plan in the same fenced
// transaction. A dry run only returns the report.
func (p *pass) finish(ctx context.Context, started time.Time, refused, stopped string, rec *multipart.ReconcileReport) (Report, error) {
	rep := p.report(ctx, started, rec)
	rep.Refused, rep.Stopped, rep.Paused, rep.Restored = refused, stopped, p.paused, p.restored
	rep.Slice = p.sliceReport(refused, stopped)
	rep.Finished = p.r.now().UTC()
	p.r.logReport(rep)
	if p.dry {
		return rep, nil
	}
	body, err := encodeReport(&rep)
	if err != nil {
		return rep, err
	}
	keys := p.r.keys()
	ops := append(reportOps(keys, rep.Pass, body),
		clientv3.OpDelete(keys.Cursor(uploadSweep)),
		clientv3.OpDelete(keys.Cursor(digestsweep.CursorName)),
		clientv3.OpDelete(keys.PlansPrefix(rep.Pass), clientv3.WithPrefix()))
	ops = append(ops, p.coverageOps(refused, stopped)...)
	if p.pause != nil && refused != "" {
		// The refusal pauses the upload sweep with its report, fenced.
		ops = append(ops, keys.PauseOp(*p.pause))
	}
	if _, err := fencedTxn(ctx, p.r.cli(), p.term, nil, ops...); err != nil {
		return rep, fmt.Errorf("reclaim: write report of pass %d: %w", rep.Pass, err)
	}
	return rep, nil
}

// stop ends a pass that could not go on. A stop for good (final) writes the
// report and drops the pass; any other stop leaves the cursor for the next
// pass to resume and records the report best-effort (etcd may be what
// failed). Nothing is deleted after a stop.
func (p *pass) stop(ctx context.Context, started time.Time, cause error, rec *multipart.ReconcileReport) Report {
	why := cause.Error()
	if sweep.Abandoned(cause) {
		rep, err := p.finish(ctx, started, "", why, rec)
		if err != nil {
			p.r.log.Error("reclaim pass report not written", "pass", rep.Pass, "err", err)
		}
		return rep
	}
	if p.cur.Pass == 0 && !p.dry && ctx.Err() == nil {
		// Stopped before the pass was claimed (the reconciler failed): the
		// report still gets the number the pass would have had.
		p.cur.Pass, p.cur.Now = p.number(ctx), p.r.now().UTC()
	}
	rep := p.report(ctx, started, rec)
	rep.Stopped = why
	rep.Slice = p.sliceReport("", why)
	rep.Finished = p.r.now().UTC()
	p.r.logReport(rep)
	if p.dry || p.cur.Pass == 0 || errors.Is(cause, ErrFenced) || ctx.Err() != nil {
		return rep
	}
	body, err := encodeReport(&rep)
	if err == nil {
		_, err = fencedTxn(ctx, p.r.cli(), p.term, nil, reportOps(p.r.keys(), rep.Pass, body)...)
	}
	if err != nil {
		p.r.log.Warn("reclaim pass report not written", "pass", rep.Pass, "err", err)
	}
	return rep
}
