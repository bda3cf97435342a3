package sweep

import (
	"fmt"
	"time"
)

// Ceiling is one limit a sweep's breaker checks a plan against: Count of
// Stored units (parts, uploads, blobs) that the plan Verb ("deletes",
// "marks"), above Max (negative: no absolute limit) or Fraction of Stored.
// Setting names the limit's settings: Setting and Setting+"_fraction".
type Ceiling struct {
	Verb     string
	Unit     string
	Setting  string
	Count    int64
	Stored   int64
	Max      int64
	Fraction float64
}

// Over says why the plan is above the ceiling, with every number compared,
// or "" when it is within both limits. Every sweep's breaker uses it, so
// they refuse by the same rule and say so in the same words.
func (c Ceiling) Over() string {
	fracLimit := c.Fraction * float64(c.Stored)
	overCount := c.Max >= 0 && c.Count > c.Max
	overFrac := float64(c.Count) > fracLimit
	if !overCount && !overFrac {
		return ""
	}
	frac := c.Setting + "_fraction"
	which := c.Setting
	switch {
	case overCount && overFrac:
		which = c.Setting + " and " + frac
	case overFrac:
		which = frac
	}
	limit := "no limit"
	if c.Max >= 0 {
		limit = fmt.Sprintf("%d %s", c.Max, c.Unit)
	}
	share := 0.0
	if c.Stored > 0 {
		share = float64(c.Count) / float64(c.Stored)
	}
	return fmt.Sprintf("plan %s %d of %d stored %s (%.1f%%), above %s: %s is %s, %s is %g (%.1f %s)",
		c.Verb, c.Count, c.Stored, c.Unit, 100*share, which, c.Setting, limit, frac, c.Fraction, fracLimit, c.Unit)
}

// OverCeiling says why deleting del of stored units (parts, blobs) is
// above maxDelete (negative: no absolute limit) or maxFraction of stored,
// or "" when it is within both: the Ceiling of the max_delete settings.
func OverCeiling(del, stored, maxDelete int64, maxFraction float64, unit string) string {
	return Ceiling{Verb: "deletes", Unit: unit, Setting: "max_delete", Count: del, Stored: stored, Max: maxDelete, Fraction: maxFraction}.Over()
}

// OverAny checks a plan against every ceiling and says why each one it
// is above refuses it, joined by "; ", or "" when it is within all.
func OverAny(cs ...Ceiling) string {
	var out string
	for _, c := range cs {
		if why := c.Over(); why != "" {
			if out != "" {
				out += "; "
			}
			out += why
		}
	}
	return out
}

// Paused says why a sweep that its breaker paused does not act, and how a
// person resumes it. name is the sweep ("uploads", "digests"); pass, term,
// at and reason are those of the refusal that paused it.
func Paused(name string, pass, term int64, at time.Time, reason string) string {
	return fmt.Sprintf("the %s sweep is paused since pass %d (term %d, %s), when the breaker refused its plan: %s; it acts again only once a person resumes it ('sweepgate reclaim resume --%s')",
		name, pass, term, at.UTC().Format(time.RFC3339), reason, name)
}
