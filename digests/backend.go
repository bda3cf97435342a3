package digests

import (
	"context"
	"errors"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Backend is the S3 calls the digest sweep makes: listing the namespaces
// and the reference sources, reading reference objects, looking at and
// deleting blobs, and asking whether a blob's key has a multipart upload
// in flight. Each call is bounded by the implementation's own timeout.
type Backend interface {
	// ListObjects returns one page of at most max objects of bucket under
	// prefix whose keys sort after startAfter ("" for the beginning), or
	// ErrNoSuchBucket.
	ListObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (ObjectPage, error)
	// HeadObject returns an object's size and ETag, or ErrNoSuchKey. Any
	// other failure leaves existence unknown.
	HeadObject(ctx context.Context, bucket, key string) (ObjectInfo, error)
	// GetObject reads an object whole, at most limit bytes (ErrTooLarge
	// past it), with its ETag; a missing object is ErrNoSuchKey.
	GetObject(ctx context.Context, bucket, key string, limit int64) ([]byte, string, error)
	// DeleteObjects deletes up to 1000 keys of bucket in one request and
	// returns the keys the backend reported failing, with their error
	// codes; every other key is gone. An error means the outcome is
	// unknown for every key.
	DeleteObjects(ctx context.Context, bucket string, keys []string) (map[string]string, error)
	// UploadInFlight reports whether the backend has a multipart upload of
	// exactly bucket/key (false when the bucket does not exist).
	UploadInFlight(ctx context.Context, bucket, key string) (bool, error)
}

// The answers of a Backend that the sweep acts on.
var (
	ErrNoSuchBucket = errors.New("reclaim: backend has no such bucket")
	ErrNoSuchKey    = errors.New("reclaim: backend has no such object")
	ErrTooLarge     = errors.New("reclaim: object larger than the parse limit")
)

// Object is one object of a backend listing.
type Object struct {
	Key      string
	Size     int64
	ETag     string
	Modified time.Time
}

// ObjectPage is one page of a listing.
type ObjectPage struct {
	Objects []Object
	// Next is the key to start the following page after; Done says there
	// is none.
	Next string
	Done bool
}

// ObjectInfo is what a HEAD says about an object.
type ObjectInfo struct {
	Size int64
	ETag string
}

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
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) UnknownRefs(int64)                             {}
func (noMetrics) BreakerRefused()                               {}
func (noMetrics) Deleted(int64, int64)                          {}
func (noMetrics) Tombstones(map[etcdstore.TombstoneState]int64) {}
