package multipart

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// Defaults for ReconcileOptions.
const (
	// DefaultReconcileActions bounds the sessions one run settles, each of
	// which costs a backend call or two.
	DefaultReconcileActions = 1000
	// DefaultPruneBatch bounds the terminal sessions one run deletes.
	DefaultPruneBatch = 500
	// DefaultBackendTimeout bounds each backend call of a run, so a hung
	// backend cannot hold the run (and the reclaimer behind it) forever.
	DefaultBackendTimeout = 30 * time.Second
	// DefaultReconcileActor is recorded when ReconcileOptions.Actor is empty.
	DefaultReconcileActor = "reconciler"
)

// maxSilentBackend is how many calls in a row may go unanswered (refused
// connection, reset, timeout) before a run stops asking: a backend that is
// down would otherwise cost every due session a full BackendTimeout.
const maxSilentBackend = 3

// abortAttemptsAlarm is the abort attempt from which an unclear outcome is
// logged as an error for a person rather than a warning.
const abortAttemptsAlarm = 5

// errNoAnswer marks a backend call that got no answer at all.
var errNoAnswer = errors.New("no answer from the backend")

// stuckNote starts the Uncertain note of a completing session flagged as
// stuck; finding it there keeps the reconciler from writing the flag again
// on every run.
const stuckNote = "stuck: "

// Errors a reconciler run can end with.
var (
	// ErrUnsettled says the run could not check or record some sessions
	// (the backend failed or gave an unclear answer). It changed nothing it
	// could not verify; the next run looks again.
	ErrUnsettled = errors.New("multipart: reconcile left sessions unsettled")
	// ErrFenced says a write was refused because ReconcileOptions.Fence no
	// longer holds (the reclaimer lost its term); the run stopped there.
	ErrFenced = errors.New("multipart: reconcile fence lost")
)

// ReconcileOptions say which sessions the reconciler looks at.
type ReconcileOptions struct {
	// After is how long a session must have stood in aborting,
	// cleanup_pending or completing before the reconciler acts on it.
	After time.Duration
	// StuckLimit flags a session completing for longer than this; zero
	// flags none.
	StuckLimit time.Duration
	// Retention is how long terminal sessions are kept before pruning;
	// zero keeps them.
	Retention time.Duration
	// Actor is recorded on the transitions it makes ("reconciler", or the
	// reclaimer with its term).
	Actor string
	// Term is recorded on every transition the run makes (the reclaimer's
	// election term); zero records none.
	Term int64
	// Fence holds comparisons that every write of the run also requires,
	// such as the reclaimer's CreateRevision(leaderKey) = term. When one
	// fails the run stops with ErrFenced.
	Fence []clientv3.Cmp
	// MaxActions bounds the sessions one run settles (DefaultReconcileActions
	// when zero); the rest wait for the next run.
	MaxActions int
	// MaxPrune bounds the sessions one run deletes (DefaultPruneBatch when
	// zero).
	MaxPrune int
	// PageSize is how many sessions each etcd read returns (500 when zero).
	PageSize int64
	// BackendTimeout bounds each backend call (DefaultBackendTimeout when
	// zero). A call that runs out of time has an unclear outcome.
	BackendTimeout time.Duration
}

func (o ReconcileOptions) withDefaults() ReconcileOptions {
	if o.Actor == "" {
		o.Actor = DefaultReconcileActor
	}
	if o.MaxActions <= 0 {
		o.MaxActions = DefaultReconcileActions
	}
	if o.MaxPrune <= 0 {
		o.MaxPrune = DefaultPruneBatch
	}
	if o.BackendTimeout <= 0 {
		o.BackendTimeout = DefaultBackendTimeout
	}
	return o
}

// ReconcileReport counts what one reconciler run found and did.
type ReconcileReport struct {
	// Revision is the etcd revision the sessions were read at.
	Revision int64 `json:"revision"`
	// Scanned counts every session read.
	Scanned int `json:"scanned"`
	// Examined counts the aborting, cleanup_pending and completing sessions
	// old enough to act on that the run looked up on the backend.
	Examined int `json:"examined"`
	// Young counts aborting, cleanup_pending and completing sessions left
	// alone because they changed less than After ago (or, by the clock,
	// in the future).
	Young int `json:"young"`
	// Aborted counts sessions moved to aborted, Completed to completed.
	Aborted   int `json:"aborted"`
	Completed int `json:"completed"`
	// Retried counts aborts sent to the backend again.
	Retried int `json:"retried"`
	// Stuck counts sessions completing past the stuck limit at the end of
	// the run (suits a gauge); Flagged those newly flagged in this run.
	Stuck   int `json:"stuck"`
	Flagged int `json:"flagged"`
	// Pruned counts terminal sessions deleted with their parts.
	Pruned int `json:"pruned"`
	// Conflicts counts sessions that changed between the read and the
	// write; the change won and the next run decides again.
	Conflicts int `json:"conflicts"`
	// Deferred counts sessions due for a decision or a prune that this run
	// left to the next one (past MaxActions or MaxPrune).
	Deferred int `json:"deferred"`
	// Errors counts sessions the run could not check, settle or read.
	Errors int `json:"errors"`
}

// Reconcile settles sessions whose last backend call had an unclear outcome
// by looking at the backend again, and prunes terminal sessions past the
// retention period.
//
// The sessions are read at one etcd revision, page by page. For each
// aborting or cleanup_pending session older than After it lists the upload:
// gone means aborted; still there means the abort is sent again, after the
// attempt is recorded, and settled as aborted or, when the outcome is
// unclear, cleanup_pending. A completing session older than After becomes
// completed when its object exists with the expected ETag; otherwise it
// stays completing, never reverted or deleted, and past StuckLimit it is
// flagged once for a person. A backend call that fails changes nothing.
//
// Every write compares the session's mod revision as read (and the Fence),
// so a session that changed meanwhile is left to the next run. The run stops
// at the first etcd failure or lost fence and returns the error with what it
// did so far; when it completes but left sessions unsettled it returns
// ErrUnsettled.
func (s *Service) Reconcile(ctx context.Context, opts ReconcileOptions) (ReconcileReport, error) {
	r := &reconcileRun{s: s, opts: opts.withDefaults(), now: s.now()}
	if err := r.run(ctx); err != nil {
		return r.rep, err
	}
	if r.opts.Actor == DefaultReconcileActor {
		// Only serve's own reconciler (sessions.stuck_limit) sets the
		// gauge; a reclaimer pass reconciles with reclaim.stuck_limit and
		// reports its count in sweepgate_reclaim_stuck_sessions, so the
		// two limits never take turns on one series.
		s.metrics.stuck.Set(float64(r.rep.Stuck))
	}
	if r.rep.Errors > 0 {
		return r.rep, fmt.Errorf("%w: %d session(s); first: %w", ErrUnsettled, r.rep.Errors, r.firstErr)
	}
	return r.rep, nil
}

// reconcileRun is one run of Reconcile.
type reconcileRun struct {
	s    *Service
	opts ReconcileOptions
	// now is the time every decision of the run is made against.
	now      time.Time
	rep      ReconcileReport
	firstErr error
	// silent counts the backend calls in a row that got no answer.
	silent int
}

func (r *reconcileRun) run(ctx context.Context) error {
	var due, prune []etcdstore.Versioned[etcdstore.Session]
	rev, err := r.s.store.ScanSessions(ctx, "", r.opts.PageSize, func(v etcdstore.Versioned[etcdstore.Session]) error {
		r.rep.Scanned++
		sess := &v.Value
		switch sess.State {
		case etcdstore.StateAborting, etcdstore.StateCleanupPending, etcdstore.StateCompleting:
			if !r.older(sess.LastChange(), r.opts.After) {
				r.rep.Young++
				r.countStuck(sess)
				return nil
			}
			if len(due) >= r.opts.MaxActions {
				r.rep.Deferred++
				r.countStuck(sess)
				return nil
			}
			due = append(due, v)
		case etcdstore.StateCompleted, etcdstore.StateAborted:
			if r.opts.Retention <= 0 || !r.older(sess.LastChange(), r.opts.Retention) {
				return nil
			}
			if len(prune) >= r.opts.MaxPrune {
				r.rep.Deferred++
				return nil
			}
			prune = append(prune, v)
		}
		return nil
	})
	if bad := (*etcdstore.UndecodableError)(nil); errors.As(err, &bad) {
		// No decision about one session depends on another, so those
		// that decode are settled; the rest are left as they are.
		r.s.log.Error("reconcile: session records do not decode; left as they are", "count", len(bad.Keys), "keys", bad.Keys, "err", bad.First)
		r.rep.Errors += len(bad.Keys)
		r.noteErr(err)
	} else if err != nil {
		// The sessions could not be read: the run acts on none, and
		// reports none of its partial counts.
		r.rep = ReconcileReport{}
		return fmt.Errorf("multipart: reconcile: %w", err)
	}
	r.rep.Revision = rev

	for i, v := range due {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.silent >= maxSilentBackend {
			// The rest wait for the next run; pruning needs only etcd.
			r.s.log.Error("reconcile: the backend does not answer; sessions left for the next run", "unanswered", r.silent, "left", len(due)-i)
			for _, v := range due[i:] {
				r.rep.Deferred++
				r.countStuck(&v.Value)
			}
			break
		}
		r.rep.Examined++
		var err error
		if v.Value.State == etcdstore.StateCompleting {
			err = r.settleCompleting(ctx, v)
		} else {
			err = r.settleAbort(ctx, v)
		}
		if err != nil {
			return err
		}
	}
	for _, v := range prune {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.prune(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// older reports whether t lies more than d before the run's time. A time in
// the future is never older: a clock that ran ahead keeps everything.
func (r *reconcileRun) older(t time.Time, d time.Duration) bool {
	return !t.After(r.now) && r.now.Sub(t) >= d
}

// countStuck counts a completing session the run does not look up as stuck
// when it has been completing past the stuck limit.
func (r *reconcileRun) countStuck(sess *etcdstore.Session) {
	if sess.State == etcdstore.StateCompleting && r.stuck(sess) {
		r.rep.Stuck++
	}
}

func (r *reconcileRun) stuck(sess *etcdstore.Session) bool {
	return r.opts.StuckLimit > 0 && r.older(sess.StateSince(), r.opts.StuckLimit)
}

// unsettled counts and logs a session the run could not check or settle.
func (r *reconcileRun) unsettled(sess *etcdstore.Session, msg string, err error) {
	r.rep.Errors++
	if errors.Is(err, errNoAnswer) {
		r.silent++
	}
	r.noteErr(fmt.Errorf("%s/%s: %w", sess.Bucket, sess.UploadID, err))
	r.s.log.Warn("reconcile: "+msg, "bucket", sess.Bucket, "key", sess.Key, "upload_id", sess.UploadID, "state", sess.State, "err", err)
}

func (r *reconcileRun) noteErr(err error) {
	if r.firstErr == nil {
		r.firstErr = err
	}
}

func (r *reconcileRun) backendCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.BackendTimeout)
}

// settleAbort settles an aborting or cleanup_pending session from what a
// listing of its upload shows. It returns only errors that stop the run.
func (r *reconcileRun) settleAbort(ctx context.Context, v etcdstore.Versioned[etcdstore.Session]) error {
	sess := &v.Value
	bctx, cancel := r.backendCtx(ctx)
	gone, why, err := r.s.uploadGone(bctx, sess)
	cancel()
	if err != nil {
		r.unsettled(sess, "listing the upload failed; session left as it is", err)
		return nil
	}
	r.silent = 0
	if gone {
		_, ok, err := r.transition(ctx, v, etcdstore.StateAborted, "reconciler: "+why, func(s *etcdstore.Session) {
			s.Uncertain = ""
		})
		if ok {
			r.rep.Aborted++
		}
		return err
	}

	// The upload is still there. The attempt is recorded before the abort
	// is sent, so a crash or a lost fence in between leaves it on record
	// and the next run lists the upload again before deciding anything.
	attempt := sess.AbortAttempts + 1
	nv, ok, err := r.transition(ctx, v, etcdstore.StateAborting, fmt.Sprintf("reconciler: upload still on the backend; aborting again (attempt %d)", attempt), func(s *etcdstore.Session) {
		s.AbortAttempts = attempt
	})
	if err != nil || !ok {
		return err
	}
	r.rep.Retried++
	bctx, cancel = r.backendCtx(ctx)
	unclear := r.s.abortBackend(bctx, sess.Bucket, sess.Key, sess.UploadID)
	cancel()
	outcome := etcdstore.StateAborted
	if unclear != nil {
		outcome = etcdstore.StateCleanupPending
	}
	audit.Record(r.s.log, audit.AbortUpload, audit.Upload(sess.Bucket, sess.Key, sess.UploadID),
		fmt.Sprintf("abort decided earlier (%s), upload still on the backend (attempt %d)", sess.State, attempt),
		"principal", r.opts.Actor, "term", r.opts.Term, "outcome", outcome)

	// The backend acted (or may have); what it said is recorded even if
	// the caller gives up now.
	wctx, wcancel := detached(ctx)
	defer wcancel()
	if unclear == nil {
		_, ok, err := r.transition(wctx, nv, etcdstore.StateAborted, "reconciler: backend confirmed abort", func(s *etcdstore.Session) {
			s.Uncertain = ""
		})
		if ok {
			r.rep.Aborted++
		}
		return err
	}
	r.unsettled(sess, "abort outcome unclear; left cleanup_pending for the next run", unclear)
	if attempt >= abortAttemptsAlarm {
		r.s.log.Error("reconcile: abort keeps failing; the upload's parts stay billed until a person looks", "bucket", sess.Bucket, "key", sess.Key,
			"upload_id", sess.UploadID, "attempts", attempt, "err", unclear)
	}
	_, _, err = r.transition(wctx, nv, etcdstore.StateCleanupPending, "reconciler: abort outcome unclear", func(s *etcdstore.Session) {
		s.Uncertain = unclear.Error()
	})
	return err
}

// settleCompleting records a completing session as completed when its object
// exists with the expected ETag. Otherwise the session stays completing (its
// complete may still be running, and the client may retry it), and past the
// stuck limit it is flagged once for a person.
func (r *reconcileRun) settleCompleting(ctx context.Context, v etcdstore.Versioned[etcdstore.Session]) error {
	sess := &v.Value
	stuck := r.stuck(sess)
	bctx, cancel := r.backendCtx(ctx)
	comp, found, err := r.s.completedObject(bctx, sess)
	cancel()
	if err != nil {
		if stuck {
			r.rep.Stuck++
		}
		r.unsettled(sess, "looking up the completed object failed; session left completing", err)
		return nil
	}
	r.silent = 0
	if comp != nil {
		_, ok, err := r.transition(ctx, v, etcdstore.StateCompleted, "reconciler: object found with the expected ETag", func(s *etcdstore.Session) {
			s.Completion = comp
			s.Uncertain = ""
		})
		if ok {
			r.rep.Completed++
		}
		return err
	}
	if !stuck {
		return nil
	}
	r.rep.Stuck++
	if strings.HasPrefix(sess.Uncertain, stuckNote) {
		return nil // flagged already: the record is not rewritten every run
	}
	since := sess.StateSince()
	note := fmt.Sprintf("%scompleting since %s, past the stuck limit of %s; %s; a person should look (the session is never reverted or deleted by cleanup)",
		stuckNote, since.UTC().Format(time.RFC3339), r.opts.StuckLimit, found)
	r.s.log.Warn("reconcile: completing session stuck; flagged for a person", "bucket", sess.Bucket, "key", sess.Key, "upload_id", sess.UploadID,
		"completing_since", since, "stuck_limit", r.opts.StuckLimit, "found", found)
	_, ok, err := r.transition(ctx, v, etcdstore.StateCompleting, "reconciler: flagged stuck: "+found, func(s *etcdstore.Session) {
		s.Uncertain = note
	})
	if ok {
		r.rep.Flagged++
	}
	return err
}

// prune deletes a terminal session with its parts and activity, unless it
// changed since it was read.
func (r *reconcileRun) prune(ctx context.Context, v etcdstore.Versioned[etcdstore.Session]) error {
	sess := &v.Value
	err := r.s.store.DeleteSession(ctx, sess.Bucket, sess.UploadID, v.ModRev, r.opts.Fence...)
	if errors.Is(err, etcdstore.ErrConflict) {
		return r.conflict(ctx, sess)
	}
	if err != nil {
		return fmt.Errorf("multipart: reconcile: prune %s/%s: %w", sess.Bucket, sess.UploadID, err)
	}
	r.rep.Pruned++
	audit.Record(r.s.log, audit.PruneSession, audit.Upload(sess.Bucket, sess.Key, sess.UploadID),
		fmt.Sprintf("%s since %s, past the retention of %s", sess.State, sess.LastChange().Format(time.RFC3339), r.opts.Retention),
		"principal", r.opts.Actor, "term", r.opts.Term)
	return nil
}

// transition is Service.transition for the reconciler: it records the run's
// actor and term and requires the run's fence. ok is false when the session
// changed since v was read; the change wins and the next run decides again.
// An error (etcd failed, or the fence is lost) stops the run.
func (r *reconcileRun) transition(ctx context.Context, v etcdstore.Versioned[etcdstore.Session], to etcdstore.SessionState, reason string, mutate func(*etcdstore.Session)) (etcdstore.Versioned[etcdstore.Session], bool, error) {
	sess := v.Value
	sess.History = slices.Clone(sess.History)
	from := sess.State
	if mutate != nil {
		mutate(&sess)
	}
	sess.Transition(to, r.s.now().UTC(), r.opts.Actor, reason)
	sess.History[len(sess.History)-1].Term = r.opts.Term
	rev, err := r.s.store.UpdateSession(ctx, etcdstore.SessionUpdate{Session: &sess, ModRev: v.ModRev, If: r.opts.Fence})
	if errors.Is(err, etcdstore.ErrConflict) {
		return v, false, r.conflict(ctx, &v.Value)
	}
	if err != nil {
		return v, false, fmt.Errorf("multipart: reconcile: record %s -> %s for %s/%s: %w", from, to, sess.Bucket, sess.UploadID, err)
	}
	r.s.metrics.transitions.WithLabelValues(string(from), string(to)).Inc()
	r.s.log.Info("reconcile: session moved", "bucket", sess.Bucket, "upload_id", sess.UploadID, "from", from, "to", to, "reason", reason, "actor", r.opts.Actor)
	return etcdstore.Versioned[etcdstore.Session]{Value: sess, ModRev: rev}, true, nil
}

// conflict handles a refused write: a lost fence stops the run; a session
// that changed meanwhile is counted and left to the next run.
func (r *reconcileRun) conflict(ctx context.Context, sess *etcdstore.Session) error {
	if len(r.opts.Fence) > 0 {
		held, err := r.s.store.Holds(ctx, r.opts.Fence...)
		if err != nil {
			return fmt.Errorf("multipart: reconcile: %w", err)
		}
		if !held {
			return ErrFenced
		}
	}
	r.s.metrics.conflicts.Inc()
	r.rep.Conflicts++
	r.s.log.Info("reconcile: session changed since it was read; left to the next run", "bucket", sess.Bucket, "upload_id", sess.UploadID, "state", sess.State)
	return nil
}

// uploadGone lists the session's upload on the backend. gone is true when
// the backend says the upload (or its whole bucket) does not exist, with why
// saying which; any other answer than a listing is an error, and decides
// nothing.
func (s *Service) uploadGone(ctx context.Context, sess *etcdstore.Session) (gone bool, why string, err error) {
	q := uploadQuery(sess.UploadID)
	q.Set("max-parts", "1") // existence is the question, not the parts
	req, err := s.backend.NewRequest(ctx, http.MethodGet, sess.Bucket, sess.Key, q)
	if err != nil {
		return false, "", err
	}
	resp, err := s.backend.RoundTrip(req)
	if err != nil {
		return false, "", fmt.Errorf("list parts: %w: %w", errNoAnswer, err)
	}
	defer resp.Body.Close()
	body, err := readBody(resp)
	if err != nil {
		return false, "", fmt.Errorf("list parts: %w", err)
	}
	code := ErrorCode(body)
	switch {
	case resp.StatusCode == http.StatusOK && code == "":
		return false, "", nil
	case resp.StatusCode == http.StatusNotFound && code == "NoSuchUpload":
		return true, "upload gone on the backend", nil
	case resp.StatusCode == http.StatusNotFound && code == "NoSuchBucket":
		return true, "bucket gone on the backend", nil
	}
	return false, "", fmt.Errorf("list parts: backend answered %d %s", resp.StatusCode, code)
}

// completedObject looks for the object a completing session's complete
// would produce. It returns a completion built from it when the object
// exists with the expected ETag; otherwise nil and what was found instead.
// An error means the backend did not say.
func (s *Service) completedObject(ctx context.Context, sess *etcdstore.Session) (*etcdstore.Completion, string, error) {
	if sess.ExpectedETag == "" {
		return nil, "no expected ETag to recognise the object by", nil
	}
	req, err := s.backend.NewRequest(ctx, http.MethodHead, sess.Bucket, sess.Key, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := s.backend.RoundTrip(req)
	if err != nil {
		return nil, "", fmt.Errorf("head object: %w: %w", errNoAnswer, err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		got := unquote(resp.Header.Get("ETag"))
		if got != sess.ExpectedETag {
			return nil, fmt.Sprintf("the object has ETag %q, not the expected %q", got, sess.ExpectedETag), nil
		}
		return &etcdstore.Completion{
			Location:  "/" + sess.Bucket + "/" + sess.Key,
			Bucket:    sess.Bucket,
			Key:       sess.Key,
			ETag:      `"` + sess.ExpectedETag + `"`,
			VersionID: resp.Header.Get("X-Amz-Version-Id"),
			At:        s.now().UTC(),
		}, "", nil
	case http.StatusNotFound:
		return nil, "no object at the key", nil
	}
	return nil, "", fmt.Errorf("head object: backend answered %s", resp.Status)
}
