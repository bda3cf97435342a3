package digestsweep

import (
	"context"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// Backend is the S3 calls the digest sweep makes: listing the namespaces
// and the reference sources, reading reference objects, looking at and
// deleting blobs, and asking whether a blob's key has a multipart upload
// in flight. *s3client.Client is the one implementation outside tests;
// its answers (s3client.ErrNoSuchBucket, ErrNoSuchKey, ErrTooLarge) are the
// ones the sweep acts on, and it never retries, so an unclear delete
// comes back as an error the collector settles by looking again.
type Backend interface {
	// ListObjects returns one page of at most max objects of bucket under
	// prefix whose keys sort after startAfter ("" for the beginning), or
	// s3client.ErrNoSuchBucket.
	ListObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (s3client.ObjectPage, error)
	// ListObjectsNext returns the page that follows prev in the same
	// listing, continuing it with prev's token when prev has one.
	ListObjectsNext(ctx context.Context, bucket, prefix string, prev s3client.ObjectPage, max int) (s3client.ObjectPage, error)
	// Head returns an object's size and ETag, or s3client.ErrNoSuchKey.
	// Any other failure leaves existence unknown.
	Head(ctx context.Context, bucket, key string) (s3client.ObjectInfo, error)
	// Get reads an object whole, at most limit bytes (s3client.ErrTooLarge
	// past it), with its ETag; a missing object is s3client.ErrNoSuchKey.
	Get(ctx context.Context, bucket, key string, opt s3client.GetOptions, limit int64) ([]byte, string, error)
	// DeleteObjects deletes up to 1000 keys of bucket in one request and
	// returns the keys the backend reported failing, with their error
	// codes; every other key is gone. An error means the outcome is
	// unknown for every key.
	DeleteObjects(ctx context.Context, bucket string, keys []string) (map[string]string, error)
	// Versioning returns a bucket's versioning state.
	Versioning(ctx context.Context, bucket string) (s3client.Versioning, error)
	// ListVersions returns a page of the versions and delete markers of
	// whole keys of bucket under prefix that sort after keyMarker.
	ListVersions(ctx context.Context, bucket, prefix, keyMarker string, max int) (s3client.VersionPage, error)
	// KeyVersions returns every version and delete marker of exactly key.
	KeyVersions(ctx context.Context, bucket, key string) ([]s3client.ObjectVersion, error)
	// UploadInFlight reports whether the backend has a multipart upload of
	// exactly bucket/key (false when the bucket does not exist).
	UploadInFlight(ctx context.Context, bucket, key string) (bool, error)
}

var _ Backend = (*s3client.Client)(nil)

// SweepMetrics receives what the sweep counts for monitoring.
type SweepMetrics interface {
	// UnknownRefs counts references the rebuild found written around the
	// gateway.
	UnknownRefs(n int64)
	// BreakerRefused counts a pass whose deletions the breaker refused.
	BreakerRefused()
	// Deleted counts blobs the collector deleted, and their bytes.
	Deleted(blobs, bytes int64)
	// Tombstones sets the tombstones by state after a sweep.
	Tombstones(counts map[etcdstore.TombstoneState]int64)
	// DeniedBucket counts a bucket the backend refused to the sweep
	// (AccessDenied), once a pass.
	DeniedBucket()
	// LayoutMismatch sets how many live gateways serve another layout.
	LayoutMismatch(n int)
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) UnknownRefs(int64)                             {}
func (noMetrics) BreakerRefused()                               {}
func (noMetrics) Deleted(int64, int64)                          {}
func (noMetrics) Tombstones(map[etcdstore.TombstoneState]int64) {}
func (noMetrics) DeniedBucket()                                 {}
func (noMetrics) LayoutMismatch(int)                            {}
