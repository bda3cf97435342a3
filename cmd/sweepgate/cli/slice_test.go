package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// TestWriteSlices checks that a bounded pass's report says its budget,
// where it started and stopped, and when the keyspace was last covered.
func TestWriteSlices(t *testing.T) {
	covered := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := &adminapi.Report{
		Slice: &adminapi.Slice{Budget: 1000, Listed: 1000, From: "", To: "b/k (after upload u)", Advanced: true},
		Digests: &adminapi.DigestReport{Slice: &adminapi.Slice{Budget: 500, Listed: 120, From: "blobs/x", CompletedCycle: true,
			Covered: covered, Cycles: 3, Advanced: true}},
	}
	var b strings.Builder
	writeSlices(&b, r)
	out := b.String()
	for _, want := range []string{
		"Uploads: a slice of 1000 of at most 1000 uploads, from the start to b/k (after upload u); the whole keyspace not covered yet",
		"Blobs: a slice of 120 of at most 500 objects, from blobs/x to the end, completing a cycle; the whole keyspace last covered " + when(covered) + " (3 cycle(s))",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	r.Slice.Advanced = false
	b.Reset()
	writeSlices(&b, r)
	if !strings.Contains(b.String(), "(the next pass lists it again)") {
		t.Errorf("a slice that did not advance is not said to be listed again:\n%s", b.String())
	}
	b.Reset()
	writeSlices(&b, &adminapi.Report{})
	if b.Len() != 0 {
		t.Errorf("an unbounded pass printed %q", b.String())
	}
}
