package reclaim

import (
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/sweep"
)

// The names below moved to package sweep (what the sweeps share) and
// package digests (the digest sweep). They stay here for callers not yet
// moved to the new packages; new code names the new packages.

// ErrNotKnown is sweep.ErrNotKnown.
var ErrNotKnown = sweep.ErrNotKnown

// ErrBadDigest is digests.ErrBadDigest.
var ErrBadDigest = digests.ErrBadDigest

type (
	Values      = sweep.Values
	Step        = sweep.Step
	PassSummary = sweep.PassSummary

	DigestsConfig     = digests.SweepConfig
	DigestReport      = digests.Report
	DigestBreaker     = digests.Breaker
	DigestRebuild     = digests.RebuildReport
	DigestProgress    = digests.Progress
	Pruned            = digests.Pruned
	RebuildResult     = digests.RebuildResult
	DigestExplanation = digests.DigestExplanation
	ExplainBlob       = digests.ExplainBlob
	ExplainRef        = digests.ExplainRef
	ExplainTrash      = digests.ExplainTrash
	ExplainPlacement  = digests.ExplainPlacement
	ExplainTombstone  = digests.ExplainTombstone
	ExplainPlane      = digests.ExplainPlane
	ExplainGuard      = digests.ExplainGuard
)

// The digest sweep's defaults and fault points.
const (
	DefaultPlacementGrace          = digests.DefaultPlacementGrace
	DefaultTombstoneRetention      = digests.DefaultTombstoneRetention
	DefaultDigestMaxDelete         = digests.DefaultMaxDelete
	DefaultDigestMaxDeleteFraction = digests.DefaultMaxDeleteFraction

	FaultDigestBeforeTombstone = digests.FaultBeforeTombstone
	FaultDigestPage            = digests.FaultPage
	FaultDigestGuarded         = digests.FaultGuarded
	FaultDigestCollected       = digests.FaultCollected
)
