//go:build integration

package reclaimtest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/sweep"
)

// Metric reads one series, a counter or a gauge, from a registry; labels
// are name=value pairs the series must carry. A series not found reads 0.
func Metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// WaitFor polls cond until it holds, failing the test after 30 seconds
// of real time (for real events such as a lease expiring in etcd, never
// for simulated time).
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Contains reports whether s contains every one of subs.
func Contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// WantSteps checks the rules an explanation went through: every rule up to
// the last, only the last matched (the checklist stops at the first
// match), except those named in also, which matched too without deciding.
func WantSteps(t *testing.T, what string, steps []sweep.Step, rules []string, also ...string) {
	t.Helper()
	got := make([]string, len(steps))
	for i, s := range steps {
		got[i] = s.Rule
	}
	if strings.Join(got, " ") != strings.Join(rules, " ") {
		t.Fatalf("%s: rules %q, want %q", what, got, rules)
	}
	for i, s := range steps {
		want := i == len(steps)-1 || slices.Contains(also, s.Rule)
		if s.Matched != want || s.Detail == "" || s.Values == nil {
			t.Errorf("%s: step %d = %+v, want matched %v with a detail and values", what, i, s, want)
		}
	}
}

// Step returns the explanation step of rule, failing the test when there
// is none.
func Step(t *testing.T, steps []sweep.Step, rule string) sweep.Step {
	t.Helper()
	for _, s := range steps {
		if s.Rule == rule {
			return s
		}
	}
	t.Fatalf("no step %s in %+v", rule, steps)
	return sweep.Step{}
}
