package digestsweep

import (
	"errors"
	"slices"

	"github.com/sweepgate/sweepgate/s3client"
)

// A bucket the backend refuses to the reclaimer's key (AccessDenied, its
// policy) is reported, not fatal to the pass:
//
//   - A denied namespace is skipped whole: none of its blobs is judged, so
//     none gets a tombstone, has one advanced or is deleted, and nothing is
//     inferred from its blobs being missing from the listing (nothing in
//     the sweep is). The other namespaces are judged as usual. A bounded
//     sweep that met one does not move its coverage record.
//   - A denied reference source (or content namespace, which the rebuild
//     reads as one) leaves the references it holds unknown, so the rebuild
//     is not complete and the sweep keeps every blob for the pass: no
//     namespace is judged, no tombstone written, nothing deleted.
//
// Either way the bucket is named in the report's DeniedBuckets, counted
// once a pass and logged. Any other failure is handled as before.

// isDenied reports whether err is the backend's AccessDenied.
func isDenied(err error) bool { return errors.Is(err, s3client.ErrAccessDenied) }

// denied records that the backend refused bucket, the bucket of the
// namespace or reference source called name (what: "namespace" or
// "source").
func (s *digestSweep) denied(bucket, what, name string, err error) {
	s.log.Warn("digest sweep: the backend denies the reclaimer's key the bucket of a "+what+" (AccessDenied); "+deniedEffect[what],
		"pass", s.cur.Pass, what, name, "bucket", bucket, "err", err)
	if slices.Contains(s.cur.Report.DeniedBuckets, bucket) {
		return
	}
	s.cur.Report.DeniedBuckets = append(s.cur.Report.DeniedBuckets, bucket)
	s.metrics.DeniedBucket()
}

// deniedEffect is what a denial does to the pass, by what was denied.
var deniedEffect = map[string]string{
	"namespace": "its blobs are not judged this pass",
	"source":    "the references it holds are unknown, so every blob is kept this pass",
}
