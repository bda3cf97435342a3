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
	fracLimit := r.cfg.MaxDeleteFraction * float64(stored)
	overCount := r.cfg.MaxDelete >= 0 && del > r.cfg.MaxDelete
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
	if r.cfg.MaxDelete >= 0 {
		limit = fmt.Sprintf("%d parts", r.cfg.MaxDelete)
	}
	share := 0.0
	if stored > 0 {
		share = float64(del) / float64(stored)
	}
	return fmt.Sprintf("plan deletes %d of %d stored parts (%.1f%%), above %s: max_delete is %s, max_delete_fraction is %g (%.1f parts)",
		del, stored, 100*share, which, limit, r.cfg.MaxDeleteFraction, fracLimit)
}
