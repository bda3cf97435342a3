package reclaim

import "github.com/sweepgate/sweepgate/sweep"

// The names below moved to package sweep (what the sweeps share) and
// package digests (the digest sweep). They stay here for callers not yet
// moved to the new packages; new code names the new packages.

// ErrNotKnown is sweep.ErrNotKnown.
var ErrNotKnown = sweep.ErrNotKnown

type (
	Values      = sweep.Values
	Step        = sweep.Step
	PassSummary = sweep.PassSummary
)
