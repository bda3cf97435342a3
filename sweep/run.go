package sweep

import (
	"context"
	"errors"
	"time"
)

// Run describes one run of a sweep: the pass it belongs to and what the
// pass framework lends it. A sweep reads it and never changes it.
type Run struct {
	// Term fences every etcd write of the run (see FencedTxn). In a dry
	// run it names the term the plan was made under, if any.
	Term Term
	// Pass is the number of the pass the run belongs to; a sweep resumes
	// its own state only when it was left by the same pass.
	Pass int64
	// Now is the pass's decision clock, fixed for the pass's whole life,
	// so that a resumed pass decides as it began to.
	Now time.Time
	// Clock is the clock the records written are stamped with.
	Clock func() time.Time
	// Elapsed is the reclaimer's elapsed clock at the pass's start: time
	// its leaders measured on monotonic clocks, which no wall clock jump
	// moves. A window a sweep deletes by must have passed on it as well
	// as on the wall clock.
	Elapsed time.Duration
	// ElapsedNow, when set, reads the elapsed clock now (at least
	// Elapsed), for a record stamped with it.
	ElapsedNow func() time.Duration
	// ClockSkew is how far in the future a recorded time may lie before
	// it is counted as written by a clock that ran ahead (ErrFutureTime).
	ClockSkew time.Duration
	// DryRun makes the run decide and count, and write nothing anywhere.
	DryRun bool
	// Restored, when not empty, is why the run must delete nothing: etcd
	// was found restored from a snapshot and the restore mark stands.
	// RestoredRev is the mark's etcd revision: only a rebuild that started
	// after it can clear the mark, so one is due.
	Restored    string
	RestoredRev int64
	// Fault, when set, is called at the sweep's named fault points, so
	// that a test can stop or disturb a run at a precise step.
	Fault func(point string)
}

// ErrFutureTime says a recorded time lies beyond now plus the allowed
// clock skew. A clock that ran ahead wrote it, so no age can be judged from
// it: its record is kept (longer, never shorter).
var ErrFutureTime = errors.New("sweep: recorded time in the future")

// Fire calls the fault hook at point, if there is one.
func (r *Run) Fire(point string) {
	if r.Fault != nil {
		r.Fault(point)
	}
}

// Sweep is one kind of reclamation that the pass framework runs once in
// every pass. Run takes the sweep through one pass and returns its report
// R, also when it stops with an error; the error says why it stopped. An
// error made with Abandon ends the pass for good; any other leaves the
// sweep's state for the next attempt of the pass to resume.
type Sweep[R any] interface {
	Run(ctx context.Context, run *Run) (R, error)
}

// abandoned marks a stop that ends the pass for good.
type abandoned struct{ err error }

func (e *abandoned) Error() string { return e.err.Error() }
func (e *abandoned) Unwrap() error { return e.err }

// Abandon wraps err so that the pass is abandoned rather than resumed: the
// next pass starts over (a time in the future, a compacted revision).
func Abandon(err error) error { return &abandoned{err: err} }

// Abandoned reports whether err, or an error it wraps, was made with
// Abandon.
func Abandoned(err error) bool {
	var a *abandoned
	return errors.As(err, &a)
}
