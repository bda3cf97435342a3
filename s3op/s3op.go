// Package s3op names the S3 operations sweepgate serves: one closed set,
// shared by the gateway's routing table, the multipart and digest services
// it hands requests to, and the metrics and logs that label requests by
// operation.
package s3op

// Operation names an S3 API operation. The set is closed and small so that it
// can label metrics without letting clients create series.
type Operation string

// The operations the gateway serves: every row of its routing table
// (gateway.operationRules) names one.
const (
	ListBuckets             Operation = "ListBuckets"
	CreateBucket            Operation = "CreateBucket"
	DeleteBucket            Operation = "DeleteBucket"
	HeadBucket              Operation = "HeadBucket"
	GetBucketLocation       Operation = "GetBucketLocation"
	ListObjects             Operation = "ListObjects"
	ListObjectsV2           Operation = "ListObjectsV2"
	ListObjectVersions      Operation = "ListObjectVersions"
	DeleteObjects           Operation = "DeleteObjects"
	PutObject               Operation = "PutObject"
	CopyObject              Operation = "CopyObject"
	GetObject               Operation = "GetObject"
	HeadObject              Operation = "HeadObject"
	DeleteObject            Operation = "DeleteObject"
	CreateMultipartUpload   Operation = "CreateMultipartUpload"
	UploadPart              Operation = "UploadPart"
	UploadPartCopy          Operation = "UploadPartCopy"
	ListParts               Operation = "ListParts"
	CompleteMultipartUpload Operation = "CompleteMultipartUpload"
	AbortMultipartUpload    Operation = "AbortMultipartUpload"
	ListMultipartUploads    Operation = "ListMultipartUploads"

	// Calls on an object's attributes rather than its bytes.
	GetObjectAttributes Operation = "GetObjectAttributes"
	GetObjectACL        Operation = "GetObjectAcl"
	PutObjectACL        Operation = "PutObjectAcl"
	GetObjectTagging    Operation = "GetObjectTagging"
	PutObjectTagging    Operation = "PutObjectTagging"
	DeleteObjectTagging Operation = "DeleteObjectTagging"
	GetObjectRetention  Operation = "GetObjectRetention"
	PutObjectRetention  Operation = "PutObjectRetention"
	GetObjectLegalHold  Operation = "GetObjectLegalHold"
	PutObjectLegalHold  Operation = "PutObjectLegalHold"

	// Calls on a bucket's configuration.
	GetBucketPolicy            Operation = "GetBucketPolicy"
	PutBucketPolicy            Operation = "PutBucketPolicy"
	DeleteBucketPolicy         Operation = "DeleteBucketPolicy"
	GetBucketPolicyStatus      Operation = "GetBucketPolicyStatus"
	GetBucketLifecycle         Operation = "GetBucketLifecycle"
	PutBucketLifecycle         Operation = "PutBucketLifecycle"
	DeleteBucketLifecycle      Operation = "DeleteBucketLifecycle"
	GetBucketEncryption        Operation = "GetBucketEncryption"
	PutBucketEncryption        Operation = "PutBucketEncryption"
	DeleteBucketEncryption     Operation = "DeleteBucketEncryption"
	GetObjectLockConfiguration Operation = "GetObjectLockConfiguration"
	PutObjectLockConfiguration Operation = "PutObjectLockConfiguration"
	GetBucketReplication       Operation = "GetBucketReplication"
	PutBucketReplication       Operation = "PutBucketReplication"
	DeleteBucketReplication    Operation = "DeleteBucketReplication"
	GetBucketVersioning        Operation = "GetBucketVersioning"
	PutBucketVersioning        Operation = "PutBucketVersioning"
	GetBucketNotification      Operation = "GetBucketNotification"
	PutBucketNotification      Operation = "PutBucketNotification"
	GetBucketACL               Operation = "GetBucketAcl"
	PutBucketACL               Operation = "PutBucketAcl"
	GetBucketCors              Operation = "GetBucketCors"
	PutBucketCors              Operation = "PutBucketCors"
	DeleteBucketCors           Operation = "DeleteBucketCors"
	GetBucketWebsite           Operation = "GetBucketWebsite"
	DeleteBucketWebsite        Operation = "DeleteBucketWebsite"
	GetBucketAccelerate        Operation = "GetBucketAccelerate"
	GetBucketRequestPayment    Operation = "GetBucketRequestPayment"
	GetBucketLogging           Operation = "GetBucketLogging"
	GetBucketTagging           Operation = "GetBucketTagging"
	PutBucketTagging           Operation = "PutBucketTagging"
	DeleteBucketTagging        Operation = "DeleteBucketTagging"

	// Unsupported labels a request the gateway refused without knowing
	// it as one of the operations above: it never reaches the backend.
	Unsupported Operation = "Unsupported"
)

// IsMultipart reports whether op is one of the multipart calls whose sessions
// sweepgate records.
func (op Operation) IsMultipart() bool {
	switch op {
	case CreateMultipartUpload, UploadPart, UploadPartCopy, ListParts,
		CompleteMultipartUpload, AbortMultipartUpload, ListMultipartUploads:
		return true
	}
	return false
}
