package digestsweep

import (
	"errors"
	"fmt"
	"time"

	"github.com/sweepgate/sweepgate/cas"
)

// Defaults for SweepConfig.
const (
	DefaultPlacementGrace     = 24 * time.Hour
	DefaultTombstoneRetention = 7 * 24 * time.Hour
	DefaultMaxDelete          = int64(10000)
	DefaultMaxDeleteFraction  = 0.25
	// DefaultMaxMark and DefaultMaxMarkFraction bound the blobs one pass
	// makes pending: a plan that finds most blobs unreferenced at once
	// says the picture of the references is wrong.
	DefaultMaxMark         = int64(10000)
	DefaultMaxMarkFraction = 0.5
	// DefaultGuardSettle is how long a guard stays armed after the
	// deadline of a delete whose outcome is not known: several times the
	// reclaimer's default backend timeout and election TTL together.
	DefaultGuardSettle = 2 * time.Minute
	// DefaultDeleteParallel is how many DeleteObjects requests the
	// collector has in flight at once.
	DefaultDeleteParallel = 4
	// DefaultPassBlobs lists every namespace in every pass.
	DefaultPassBlobs = 0
)

// Fallbacks for the reclaimer's settings the sweep measures guards with,
// when the caller leaves them zero (the reclaimer always sets them).
const (
	fallbackBackendTimeout = 30 * time.Second
	fallbackElectionTTL    = 15 * time.Second
	fallbackClockSkew      = 5 * time.Minute
)

// Fault points of the digest sweep (see sweep.Run.Fault).
const (
	// FaultBeforeTombstone: a page's inventories are read; its
	// tombstone writes are not made yet.
	FaultBeforeTombstone = "digest.before-tombstone"
	// FaultPage: a page's tombstones are written and the cursor has
	// moved past it.
	FaultPage = "digest.page"
	// FaultGuarded: a batch's guards are armed; its bytes are not
	// deleted yet.
	FaultGuarded = "digest.guarded"
	// FaultAttempted: a batch's delete attempt is recorded on its guards;
	// the DeleteObjects request is not sent yet.
	FaultAttempted = "digest.attempted"
	// FaultGoneRecorded: a batch's request has answered, and the
	// tombstones of the blobs it deleted are recorded deleted; their
	// guards are not released yet.
	FaultGoneRecorded = "digest.gone-recorded"
	// FaultCollected: a batch's deletes are done and recorded.
	FaultCollected = "digest.collected"
)

// SweepConfig turns on the digest sweep (docs/digests.md). Zero
// durations and limits take the defaults above.
type SweepConfig struct {
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
	// MaxMark and MaxMarkFraction are the same ceilings in blobs whose
	// tombstone one pass makes pending.
	MaxMark         int64
	MaxMarkFraction float64
	// RebuildInterval is the time between rebuilds of the recorded
	// references; zero rebuilds before every pass.
	RebuildInterval time.Duration
	// TombstoneRetention is how long terminal (skipped, deleted)
	// tombstones are kept before they are pruned.
	TombstoneRetention time.Duration
	// GuardSettle is how long a guard whose delete was sent stays armed
	// after that delete's deadline (plus ClockSkew) before a HEAD may
	// release it; it must exceed BackendTimeout + ElectionTTL. Zero takes
	// DefaultGuardSettle, or twice BackendTimeout + ElectionTTL when that
	// is longer.
	GuardSettle time.Duration
	// BackendTimeout is the deadline of every DeleteObjects request the
	// collector sends; ElectionTTL how long a lost leader may still be
	// running; ClockSkew how far a successor's clock may differ from the
	// sender's. The reclaimer sets them from its own settings.
	BackendTimeout time.Duration
	ElectionTTL    time.Duration
	ClockSkew      time.Duration
	// DeleteParallel is how many DeleteObjects requests (of up to 1000
	// blobs of one bucket each) the collector has in flight at once.
	DeleteParallel int
	// PassBlobs, when above 0, bounds the objects one pass lists in the
	// namespaces (see slice.go); 0 lists them all every pass.
	PassBlobs int64
}

// withDefaults returns a copy of c with the defaults filled in, or why c
// cannot work. It copies so that the caller's value is left as given.
func (c *SweepConfig) withDefaults() (*SweepConfig, error) {
	d := *c
	if d.Layout == nil || len(d.Layout.Namespaces) == 0 {
		return nil, errors.New("digestsweep: the digest sweep needs at least one CAS namespace")
	}
	if err := d.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("digestsweep: digest sweep: %w", err)
	}
	if d.PlacementGrace <= 0 {
		d.PlacementGrace = DefaultPlacementGrace
	}
	if d.TombstoneRetention <= 0 {
		d.TombstoneRetention = DefaultTombstoneRetention
	}
	if d.MaxDelete == 0 {
		d.MaxDelete = DefaultMaxDelete
	}
	if d.MaxDeleteFraction == 0 {
		d.MaxDeleteFraction = DefaultMaxDeleteFraction
	}
	if d.MaxMark == 0 {
		d.MaxMark = DefaultMaxMark
	}
	if d.MaxMarkFraction == 0 {
		d.MaxMarkFraction = DefaultMaxMarkFraction
	}
	if d.DeleteParallel <= 0 {
		d.DeleteParallel = DefaultDeleteParallel
	}
	if d.MaxDeleteFraction <= 0 || d.MaxDeleteFraction > 1 {
		return nil, fmt.Errorf("digestsweep: digest max_delete_fraction %g must be in (0, 1]", d.MaxDeleteFraction)
	}
	if d.MaxMarkFraction <= 0 || d.MaxMarkFraction > 1 {
		return nil, fmt.Errorf("digestsweep: digest max_mark_fraction %g must be in (0, 1]", d.MaxMarkFraction)
	}
	def := func(v *time.Duration, f time.Duration) {
		if *v <= 0 {
			*v = f
		}
	}
	def(&d.BackendTimeout, fallbackBackendTimeout)
	def(&d.ElectionTTL, fallbackElectionTTL)
	def(&d.ClockSkew, fallbackClockSkew)
	floor := d.BackendTimeout + d.ElectionTTL
	def(&d.GuardSettle, max(DefaultGuardSettle, 2*floor))
	if d.GuardSettle <= floor {
		return nil, fmt.Errorf("digestsweep: digest guard_settle %v must be longer than the backend timeout and the election TTL together (%v)", d.GuardSettle, floor)
	}
	if d.RebuildInterval < 0 {
		return nil, fmt.Errorf("digestsweep: digest rebuild interval %v is negative", d.RebuildInterval)
	}
	return &d, nil
}
