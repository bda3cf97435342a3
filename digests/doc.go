// Package digests owns content-addressed reclamation: deleting the blobs
// of a content-addressed layout (a registry's layers, an LFS store's
// objects) once nothing references them, and never one that something
// still does (docs/digests.md). It has two halves that meet only in etcd.
//
// On the request path, Service records what the sweep must know before
// any byte reaches the backend. The gateway hands it every write, read and
// delete in the layout (Serve, DeleteObjects): a reference object's
// digests are recorded as references (and its shard's reference revision
// advanced) before its body is sent; a deleted reference object's
// references move to the trash; a blob written through the gateway gets a
// placement while it is in flight, and in a verified namespace it is
// written once (hashed as it streams, copies and completes checked); a
// blob whose delete is under way (its guard armed) is refused with a
// retryable SlowDown and reads as missing; a referenced blob's delete is
// refused to anyone but an admin.
//
// In the elected reclaimer, Sweep deletes what nothing retains. It runs in
// every pass after the upload sweep, under the same pass number and term
// (sweep.Run), in phases recorded in its own cursor so that a pass cut
// short resumes where it stood:
//
//  1. Guards left armed by an earlier attempt are settled (every attempt),
//     except those whose recorded delete may still be executed by the
//     backend: they stay armed until its deadline plus the guard settle
//     time has passed (guards.go).
//  2. rebuild: the reference sources on the backend are compared with the
//     recorded references, when due, so references written around the
//     gateway are retained too.
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
// NewService and NewSweep build the two halves; Sweep.Run runs the sweep
// for one pass and returns its Report; ReadProgress reads how far the pass
// in progress got; Sweep.Explain says, by the same judgement code, what
// the sweep does with one blob and why.
package digests
