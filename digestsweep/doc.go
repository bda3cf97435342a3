// Package digestsweep is the sweep of content-addressed reclamation: in
// the elected reclaimer it deletes the blobs of a content-addressed layout
// that nothing references, and never one that something still does
// (docs/digests.md). What the sweep judges by is recorded on the request
// path by package digests (its Service), which this package may import
// but which never imports it; the two halves meet only in etcd.
//
// Sweep runs in every pass after the upload sweep, under the same pass
// number and term (sweep.Run), in phases recorded in its own cursor so
// that a pass cut short resumes where it stood:
//
//  1. Guards left armed by an earlier attempt are settled (every attempt),
//     except those whose recorded delete may still be executed by the
//     backend: they stay armed until its deadline plus the guard settle
//     time has passed (guards.go).
//  2. rebuild: the reference sources on the backend are compared with the
//     recorded references, when due, so references written around the
//     gateway are retained too. Each listed object is compared with its
//     record by digests.RecordChecker.
//  3. tombstones: every stored blob is judged against the retained set
//     (references, unexpired trash, placements, uploads in flight) at one
//     etcd revision; blobs outside it move pending -> ready over passes,
//     each step only once a rebuild started after the previous decision;
//     blobs inside it make their tombstones skipped. The breaker then
//     checks the deletions against its ceilings.
//  4. collect: ready tombstones confirmed in this pass are guarded, each
//     delete attempt recorded on its guards before it is sent, their bytes
//     deleted, and the guards released once no delete can still land.
//  5. prune: terminal tombstones, expired trash and stale placements are
//     removed in bounded batches, and the tombstones counted.
//
// Every write the sweep makes is fenced by the reclaimer's term and
// compares the reference revision its verdict came from, so a reference
// recorded by the Service after the sweep read makes that write fail.
//
// NewSweep builds the sweep; Sweep.Run runs it for one pass and returns
// its Report; ReadProgress reads how far the pass in progress got;
// Sweep.Explain says, by the same judgement code, what the sweep does
// with one blob and why.
package digestsweep
