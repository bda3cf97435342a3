package sweep

import "fmt"

// OverCeiling says why deleting del of stored units (parts, blobs) is
// above maxDelete (negative: no absolute limit) or maxFraction of stored,
// or "" when it is within both. Every sweep's breaker uses it, so they
// refuse by the same rule and say so in the same words.
func OverCeiling(del, stored, maxDelete int64, maxFraction float64, unit string) string {
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
