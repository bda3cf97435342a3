package sweep_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/sweep"
)

// An abandoned error stays abandoned through wrapping, and says what it
// wraps.
func TestAbandon(t *testing.T) {
	t.Parallel()
	cause := errors.New("revision compacted")
	err := fmt.Errorf("pass 3: %w", sweep.Abandon(cause))
	if !sweep.Abandoned(err) || !errors.Is(err, cause) {
		t.Errorf("Abandoned(%v) = %v, Is(cause) = %v; want both true", err, sweep.Abandoned(err), errors.Is(err, cause))
	}
	if sweep.Abandoned(cause) {
		t.Error("a plain error is abandoned")
	}
}

// A nil checklist records nothing and never asks for the explanation; a
// real one records every step, with empty values rather than nil.
func TestChecklist(t *testing.T) {
	t.Parallel()
	var none *sweep.Checklist
	none.Step("rule", true, func() (string, sweep.Values) {
		t.Error("a nil checklist asked for an explanation")
		return "", nil
	})
	var cl sweep.Checklist
	cl.Step("first", false, func() (string, sweep.Values) { return "no", nil })
	cl.Step("second", true, func() (string, sweep.Values) { return "yes", sweep.Values{"n": 1} })
	if len(cl.Steps) != 2 || cl.Steps[0].Values == nil || !cl.Steps[1].Matched || cl.Steps[1].Detail != "yes" {
		t.Errorf("steps = %+v", cl.Steps)
	}
}

// The breaker's rule refuses above either ceiling and names which.
func TestOverCeiling(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		del, stored, max int64
		frac             float64
		refused          bool
	}{
		{del: 10, stored: 100, max: 20, frac: 0.5},
		{del: 30, stored: 100, max: 20, frac: 0.5, refused: true},
		{del: 60, stored: 100, max: -1, frac: 0.5, refused: true},
		{del: 60, stored: 100, max: -1, frac: 1},
	} {
		if got := sweep.OverCeiling(tt.del, tt.stored, tt.max, tt.frac, "blobs"); (got != "") != tt.refused {
			t.Errorf("OverCeiling(%d, %d, %d, %g) = %q, want refused %v", tt.del, tt.stored, tt.max, tt.frac, got, tt.refused)
		}
	}
}

// Every ceiling a plan is above is named with its own settings and
// numbers; a plan within all is not refused.
func TestOverAny(t *testing.T) {
	t.Parallel()
	parts := sweep.Ceiling{Verb: "deletes", Unit: "parts", Setting: "max_delete", Count: 0, Stored: 10, Max: 100, Fraction: 0.25}
	uploads := sweep.Ceiling{Verb: "deletes", Unit: "uploads", Setting: "max_delete_uploads", Count: 2, Stored: 3, Max: 1, Fraction: 1}
	marks := sweep.Ceiling{Verb: "marks", Unit: "uploads", Setting: "max_mark", Count: 2, Stored: 3, Max: -1, Fraction: 0.5}
	got := sweep.OverAny(parts, uploads, marks)
	for _, want := range []string{
		"plan deletes 2 of 3 stored uploads (66.7%), above max_delete_uploads: max_delete_uploads is 1 uploads, max_delete_uploads_fraction is 1",
		"; plan marks 2 of 3 stored uploads (66.7%), above max_mark_fraction: max_mark is no limit, max_mark_fraction is 0.5 (1.5 uploads)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("OverAny = %q, want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "parts") {
		t.Errorf("OverAny = %q names the parts ceiling, which the plan is within", got)
	}
	if got := sweep.OverAny(parts); got != "" {
		t.Errorf("OverAny(within) = %q, want \"\"", got)
	}
}
