// Package reclaim is sweepgate's elected reclaimer: it deletes the parts of
// abandoned multipart uploads on the backend without ever deleting live
// work.
//
// One reclaimer acts at a time (Elector, an etcd election whose term is the
// leader key's create revision), and every etcd write it makes carries a
// fence on that term, so a paused former leader cannot act. A pass
// reconciles first, inventories the backend in bounded pages, judges every
// upload against the sessions as they were at one etcd revision (Classify),
// builds the whole plan, checks it against the breaker, and only then marks
// idle sessions expired and deletes uploads that stayed expired. Uploads
// without a session are held for a person (Adopt, DeleteOrphans). Each pass
// records its progress, so an interrupted pass is resumed, and leaves a
// report; Plan builds the same plan and changes nothing.
//
// When Config.Digests is set, every pass also runs the digest sweep
// (package digests) after the upload sweep, through sweep.Sweep, under the
// same pass number and term, and keeps its report as the pass report's
// "digests" section.
package reclaim
