package gateway

import (
	"net/http"
	"net/url"
)

// Operation names an S3 API operation. The set is closed and small so that it
// can label metrics without letting clients create series.
type Operation string

// The operations the gateway tells apart. Sub-resource calls it does not name
// (bucket policy, tagging, ACLs, ...) are OpOther: they pass through all the same.
const (
	OpListBuckets             Operation = "ListBuckets"
	OpCreateBucket            Operation = "CreateBucket"
	OpDeleteBucket            Operation = "DeleteBucket"
	OpHeadBucket              Operation = "HeadBucket"
	OpGetBucketLocation       Operation = "GetBucketLocation"
	OpListObjects             Operation = "ListObjects"
	OpListObjectsV2           Operation = "ListObjectsV2"
	OpListObjectVersions      Operation = "ListObjectVersions"
	OpDeleteObjects           Operation = "DeleteObjects"
	OpPutObject               Operation = "PutObject"
	OpCopyObject              Operation = "CopyObject"
	OpGetObject               Operation = "GetObject"
	OpHeadObject              Operation = "HeadObject"
	OpDeleteObject            Operation = "DeleteObject"
	OpCreateMultipartUpload   Operation = "CreateMultipartUpload"
	OpUploadPart              Operation = "UploadPart"
	OpUploadPartCopy          Operation = "UploadPartCopy"
	OpListParts               Operation = "ListParts"
	OpCompleteMultipartUpload Operation = "CompleteMultipartUpload"
	OpAbortMultipartUpload    Operation = "AbortMultipartUpload"
	OpListMultipartUploads    Operation = "ListMultipartUploads"
	OpOther                   Operation = "Other"
)

// IsMultipart reports whether op is one of the multipart calls whose sessions
// sweepgate records.
func (op Operation) IsMultipart() bool {
	switch op {
	case OpCreateMultipartUpload, OpUploadPart, OpUploadPartCopy, OpListParts,
		OpCompleteMultipartUpload, OpAbortMultipartUpload, OpListMultipartUploads:
		return true
	}
	return false
}

// bucketSubresources are query parameters that turn a bucket request into a
// configuration call rather than a listing or the bucket itself.
var bucketSubresources = []string{
	"accelerate", "acl", "analytics", "cors", "encryption", "intelligent-tiering",
	"inventory", "lifecycle", "logging", "metrics", "notification", "object-lock",
	"ownershipControls", "policy", "policyStatus", "publicAccessBlock", "replication",
	"requestPayment", "tagging", "versioning", "website",
}

// objectSubresources are query parameters that turn an object request into a
// call on the object's attributes rather than its bytes.
var objectSubresources = []string{
	"acl", "attributes", "legal-hold", "restore", "retention", "select", "tagging", "torrent",
}

func hasAny(q url.Values, names []string) bool {
	for _, n := range names {
		if _, ok := q[n]; ok {
			return true
		}
	}
	return false
}

// classify names the S3 operation of a request from its method, the presence
// of a bucket and key, its query parameters and the copy-source header.
func classify(r *http.Request, bucket, key string) Operation {
	q := r.URL.Query()
	has := func(name string) bool { _, ok := q[name]; return ok }
	switch {
	case bucket == "":
		if r.Method == http.MethodGet {
			return OpListBuckets
		}
		return OpOther
	case key == "":
		if hasAny(q, bucketSubresources) {
			return OpOther
		}
		switch r.Method {
		case http.MethodPut:
			return OpCreateBucket
		case http.MethodDelete:
			return OpDeleteBucket
		case http.MethodHead:
			return OpHeadBucket
		case http.MethodPost:
			if has("delete") {
				return OpDeleteObjects
			}
		case http.MethodGet:
			switch {
			case has("uploads"):
				return OpListMultipartUploads
			case has("location"):
				return OpGetBucketLocation
			case has("versions"):
				return OpListObjectVersions
			case q.Get("list-type") == "2":
				return OpListObjectsV2
			default:
				return OpListObjects
			}
		}
		return OpOther
	}
	if hasAny(q, objectSubresources) {
		return OpOther
	}
	copySource := r.Header.Get("X-Amz-Copy-Source") != ""
	switch r.Method {
	case http.MethodPut:
		switch {
		case has("uploadId") && has("partNumber") && copySource:
			return OpUploadPartCopy
		case has("uploadId") && has("partNumber"):
			return OpUploadPart
		case copySource:
			return OpCopyObject
		default:
			return OpPutObject
		}
	case http.MethodPost:
		switch {
		case has("uploads"):
			return OpCreateMultipartUpload
		case has("uploadId"):
			return OpCompleteMultipartUpload
		}
	case http.MethodGet:
		if has("uploadId") {
			return OpListParts
		}
		return OpGetObject
	case http.MethodHead:
		return OpHeadObject
	case http.MethodDelete:
		if has("uploadId") {
			return OpAbortMultipartUpload
		}
		return OpDeleteObject
	}
	return OpOther
}
