package reclaim

import (
	"context"

	"github.com/sweepgate/sweepgate/s3client"
)

// The object calls of the digest sweep, in the names its files use.

// errNoSuchKey says the backend does not have the object.
var errNoSuchKey = s3client.ErrNoSuchKey

// errTooLarge says an object is larger than the caller reads.
var errTooLarge = s3client.ErrTooLarge

// Object is one object of a backend listing.
type Object = s3client.Object

type objectPage = s3client.ObjectPage

func (c s3) listObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (objectPage, error) {
	return c.ListObjects(ctx, bucket, prefix, startAfter, max)
}

func (c s3) headObject(ctx context.Context, bucket, key string) (s3client.ObjectInfo, error) {
	return c.Head(ctx, bucket, key)
}

func (c s3) getObject(ctx context.Context, bucket, key string, limit int64) ([]byte, string, error) {
	return c.Get(ctx, bucket, key, s3client.GetOptions{}, limit)
}

func (c s3) deleteObjects(ctx context.Context, bucket string, keys []string) (map[string]string, error) {
	return c.DeleteObjects(ctx, bucket, keys)
}

func (c s3) uploadInFlight(ctx context.Context, bucket, key string) (bool, error) {
	return c.UploadInFlight(ctx, bucket, key)
}
