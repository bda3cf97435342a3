package cli

import (
	"fmt"
	"io"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// writeSlices prints where a bounded pass's sweeps started and stopped in
// their keyspaces, and when each keyspace was last covered.
func writeSlices(w io.Writer, r *adminapi.Report) {
	writeSlice(w, "Uploads", "uploads", r.Slice)
	if r.Digests != nil {
		writeSlice(w, "Blobs", "objects", r.Digests.Slice)
	}
}

func writeSlice(w io.Writer, what, unit string, s *adminapi.Slice) {
	if s == nil {
		return
	}
	at := func(pos string) string {
		if pos == "" {
			return "the start"
		}
		return pos
	}
	fmt.Fprintf(w, "%s: a slice of %d of at most %d %s, from %s", what, s.Listed, s.Budget, unit, at(s.From))
	if s.CompletedCycle {
		fmt.Fprint(w, " to the end, completing a cycle")
	} else {
		fmt.Fprintf(w, " to %s", at(s.To))
	}
	if !s.Advanced {
		fmt.Fprint(w, " (the next pass lists it again)")
	}
	if s.Covered.IsZero() {
		fmt.Fprint(w, "; the whole keyspace not covered yet\n")
		return
	}
	fmt.Fprintf(w, "; the whole keyspace last covered %s (%d cycle(s))\n", when(s.Covered), s.Cycles)
}
