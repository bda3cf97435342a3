package reclaim

import "github.com/sweepgate/sweepgate/sweep"

// Defaults of the breaker's limits.
const (
	// DefaultMaxDelete is the most parts one pass deletes.
	DefaultMaxDelete int64 = 10000
	// DefaultMaxDeleteFraction is the largest share of all stored parts one
	// pass deletes: a plan to delete more says more about the picture the
	// pass had (a wrong clock, a lost etcd) than about abandoned uploads.
	DefaultMaxDeleteFraction = 0.25
)

// breaker checks a whole plan against the ceilings before anything is done
// and returns why it is refused, or "" when it is not. b receives the
// numbers it compared, for the report.
func (r *Reclaimer) breaker(u Uploads, b *Breaker) string {
	stored := u.Stored().Parts
	del := u.Delete.Parts
	*b = Breaker{DeleteParts: del, StoredParts: stored, MaxDelete: r.cfg.MaxDelete, MaxDeleteFraction: r.cfg.MaxDeleteFraction}
	return sweep.OverCeiling(del, stored, r.cfg.MaxDelete, r.cfg.MaxDeleteFraction, "parts")
}
