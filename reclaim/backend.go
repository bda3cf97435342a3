package reclaim

import (
	"github.com/sweepgate/sweepgate/s3client"
)

// errNoSuchUpload and errNoSuchBucket say the backend does not have the
// upload or the bucket (any more).
var (
	errNoSuchUpload = s3client.ErrNoSuchUpload
	errNoSuchBucket = s3client.ErrNoSuchBucket
)

// s3 makes the S3 calls the reclaimer needs, each bounded by the backend
// timeout so that a hung backend stops a pass instead of holding it
// forever.
type s3 struct{ *s3client.Client }

// uploadsOf returns the uploads of bucket that a listing page holds.
func uploadsOf(bucket string, listed []s3client.Upload) []Upload {
	out := make([]Upload, len(listed))
	for i, u := range listed {
		out[i] = Upload{Bucket: bucket, Key: u.Key, UploadID: u.UploadID, Initiated: u.Initiated}
	}
	return out
}
