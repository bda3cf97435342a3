// Package digests is the request side of content-addressed reclamation:
// deleting the blobs of a content-addressed layout (a registry's layers,
// an LFS store's objects) once nothing references them, and never one
// that something still does (docs/digests.md). The sweep that deletes
// them is package digestsweep; the two halves meet only in etcd, and the
// sweep may import this package, never the reverse.
//
// Service records what the sweep must know before any byte reaches the
// backend. The gateway hands it every write, read and delete in the
// layout (Serve, DeleteObjects): a reference object's digests are
// recorded as references (and its shard's reference revision advanced)
// before its body is sent; a deleted reference object's references move
// to the trash; a blob written through the gateway gets a placement while
// it is in flight, and in a verified namespace it is written once (hashed
// as it streams, copies and completes checked); a blob whose delete is
// under way (its guard armed) is refused with a retryable SlowDown and
// reads as missing; a referenced blob's delete is refused to anyone but
// an admin.
//
// Every write the sweep makes is fenced by the reclaimer's term and
// compares the reference revision its verdict came from, so a reference
// the Service records after the sweep read makes that write fail.
//
// RecordChecker compares one reference object on the backend with its
// record and settles the record to what its bodies name. The Service
// uses it after a delete in a bucket that may hold versions, and the
// sweep's rebuild for every object it lists; it lives here so that both
// can use it without this package importing the sweep.
//
// NewService builds the Service; an empty layout turns it off.
package digests
