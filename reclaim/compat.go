package reclaim

import (
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/sweep"
)

// The names below moved to package sweep (what the sweeps share) and
// package digests (the digest sweep). They stay here only for callers not
// yet moved to the new packages (cmd/sweepgate, deploy, bench); new code
// names the new packages.

// ErrBadDigest is digests.ErrBadDigest.
var ErrBadDigest = digests.ErrBadDigest

type (
	Step              = sweep.Step
	PassSummary       = sweep.PassSummary
	DigestsConfig     = digests.SweepConfig
	DigestReport      = digests.Report
	DigestExplanation = digests.DigestExplanation
	ExplainRef        = digests.ExplainRef
	ExplainPlane      = digests.ExplainPlane
)

const (
	DefaultPlacementGrace = digests.DefaultPlacementGrace
	FaultDigestPage       = digests.FaultPage
	FaultDigestGuarded    = digests.FaultGuarded
	FaultDigestCollected  = digests.FaultCollected
)
