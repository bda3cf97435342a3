package reclaim

import "fmt"

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
	return overCeiling(del, stored, r.cfg.MaxDelete, r.cfg.MaxDeleteFraction, "parts")
}

// overCeiling says why deleting del of stored units (parts, blobs) is
// above maxDelete (negative: no absolute limit) or maxFraction of stored,
// or "" when it is within both. Both sweeps' breakers use it, so they
// refuse by the same rule and say so in the same words.
func overCeiling(del, stored, maxDelete int64, maxFraction float64, unit string) string {
	fracLimit := maxFraction * float64(stored)
	overCount := maxDelete >= 0 && del > maxDelete
	overFrac := float64(del) > fracLimit
	if !overCount && !overFrac {
		return ""
	}
	which := "max_delete"
	switch {
	case overCount && overFrac:
		which = "max_delete and max_delete_fraction"
	case overFrac:
		which = "max_delete_fraction"
	}
	limit := "no limit"
	if maxDelete >= 0 {
		limit = fmt.Sprintf("%d %s", maxDelete, unit)
	}
	share := 0.0
	if stored > 0 {
		share = float64(del) / float64(stored)
	}
	return fmt.Sprintf("plan deletes %d of %d stored %s (%.1f%%), above %s: max_delete is %s, max_delete_fraction is %g (%.1f %s)",
		del, stored, unit, 100*share, which, limit, maxFraction, fracLimit, unit)
}
