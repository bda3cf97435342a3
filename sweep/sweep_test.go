package sweep_test

import (
	"errors"
	"fmt"
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
