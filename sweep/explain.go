package sweep

import (
	"errors"
	"fmt"
	"time"
)

// Explanations answer an operator's "why is this still here?" and "why did
// this go?" about one thing a sweep judges: they run the sweep's own
// checklist on what etcd and the backend hold now and record every rule
// tried up to the one that decides. They write nothing anywhere.

// ErrNotKnown says nothing is known about the thing asked about: no record
// in etcd and nothing on the backend.
var ErrNotKnown = errors.New("sweep: nothing is known about it")

// Values are what a rule compared, by name. Times are time.Time (RFC 3339
// in JSON), durations Go duration strings ("24h0m0s"), revisions and counts
// numbers; nil says the record compared with was absent.
type Values map[string]any

// Step is one rule of a checklist as an explanation shows it. Matched says
// the rule decided; the rules before it did not, and the checklist stops
// there, as the sweep does.
type Step struct {
	Rule    string `json:"rule"`
	Matched bool   `json:"matched"`
	// Detail says in words what the rule found.
	Detail string `json:"detail"`
	Values Values `json:"values"`
}

// Checklist records the steps of one judgement. A nil Checklist records
// nothing and never calls the closures, so a sweep, which judges every
// upload and blob in every pass, pays nothing for explanations.
type Checklist struct{ Steps []Step }

// Step records that rule was tried and whether it decided; explain says
// what it found, and is called only on a non-nil Checklist.
func (c *Checklist) Step(rule string, matched bool, explain func() (string, Values)) {
	if c == nil {
		return
	}
	detail, v := explain()
	if v == nil {
		v = Values{}
	}
	c.Steps = append(c.Steps, Step{Rule: rule, Matched: matched, Detail: detail, Values: v})
}

// RoundSecond is a duration as an explanation shows it: to the second,
// since the clocks compared are no finer than that in any decision.
func RoundSecond(d time.Duration) string { return d.Round(time.Second).String() }

// PassSummary is the newest stored pass report, as far as it bears on an
// explanation: a verdict is carried out only by a pass that is not refused,
// stopped, or (for blobs) keeping everything.
type PassSummary struct {
	Pass     int64     `json:"pass"`
	Term     int64     `json:"term"`
	Finished time.Time `json:"finished"`
	DryRun   bool      `json:"dry_run"`
	// Refused and Stopped are the upload sweep's; DigestsRefused,
	// DigestsKept and RebuildFailed the digest sweep's. Empty when not.
	Refused        string `json:"refused"`
	Stopped        string `json:"stopped"`
	DigestsRefused string `json:"digests_refused"`
	DigestsKept    string `json:"digests_kept"`
	RebuildFailed  string `json:"rebuild_failed"`
}

// PassNotes says what, beyond the checklist, stands between a verdict that
// acts and its action: dry run (passes only plan), and a last pass that
// did not act. digest selects the digest sweep's reasons rather than the
// upload sweep's.
func PassNotes(last *PassSummary, dryRun, acts, digest bool) []string {
	notes := []string{}
	if !acts {
		return notes
	}
	if dryRun {
		notes = append(notes, "reclaim.dry_run is on: passes only plan, and nothing is marked, tombstoned or deleted")
	}
	if last == nil {
		return notes
	}
	if !digest && last.Refused != "" {
		notes = append(notes, fmt.Sprintf("the newest pass (%d) was refused by the breaker, so it marked and deleted nothing: %s", last.Pass, last.Refused))
	}
	if !digest && last.Stopped != "" {
		notes = append(notes, fmt.Sprintf("the newest pass (%d) stopped before finishing: %s", last.Pass, last.Stopped))
	}
	if digest {
		for _, why := range []string{last.DigestsRefused, last.DigestsKept, last.RebuildFailed} {
			if why != "" {
				notes = append(notes, fmt.Sprintf("the newest pass (%d) deleted no blob: %s", last.Pass, why))
				break
			}
		}
	}
	return notes
}
