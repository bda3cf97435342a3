package gateway

import (
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/sweepgate/sweepgate/s3err"
)

// Operation names an S3 API operation. The set is closed and small so that it
// can label metrics without letting clients create series.
type Operation string

// The operations the gateway serves: every row of operationRules names one.
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

	// Calls on an object's attributes rather than its bytes.
	OpGetObjectAttributes Operation = "GetObjectAttributes"
	OpGetObjectACL        Operation = "GetObjectAcl"
	OpPutObjectACL        Operation = "PutObjectAcl"
	OpGetObjectTagging    Operation = "GetObjectTagging"
	OpPutObjectTagging    Operation = "PutObjectTagging"
	OpDeleteObjectTagging Operation = "DeleteObjectTagging"
	OpGetObjectRetention  Operation = "GetObjectRetention"
	OpPutObjectRetention  Operation = "PutObjectRetention"
	OpGetObjectLegalHold  Operation = "GetObjectLegalHold"
	OpPutObjectLegalHold  Operation = "PutObjectLegalHold"

	// Calls on a bucket's configuration.
	OpGetBucketPolicy            Operation = "GetBucketPolicy"
	OpPutBucketPolicy            Operation = "PutBucketPolicy"
	OpDeleteBucketPolicy         Operation = "DeleteBucketPolicy"
	OpGetBucketPolicyStatus      Operation = "GetBucketPolicyStatus"
	OpGetBucketLifecycle         Operation = "GetBucketLifecycle"
	OpPutBucketLifecycle         Operation = "PutBucketLifecycle"
	OpDeleteBucketLifecycle      Operation = "DeleteBucketLifecycle"
	OpGetBucketEncryption        Operation = "GetBucketEncryption"
	OpPutBucketEncryption        Operation = "PutBucketEncryption"
	OpDeleteBucketEncryption     Operation = "DeleteBucketEncryption"
	OpGetObjectLockConfiguration Operation = "GetObjectLockConfiguration"
	OpPutObjectLockConfiguration Operation = "PutObjectLockConfiguration"
	OpGetBucketReplication       Operation = "GetBucketReplication"
	OpPutBucketReplication       Operation = "PutBucketReplication"
	OpDeleteBucketReplication    Operation = "DeleteBucketReplication"
	OpGetBucketVersioning        Operation = "GetBucketVersioning"
	OpPutBucketVersioning        Operation = "PutBucketVersioning"
	OpGetBucketNotification      Operation = "GetBucketNotification"
	OpPutBucketNotification      Operation = "PutBucketNotification"
	OpGetBucketACL               Operation = "GetBucketAcl"
	OpPutBucketACL               Operation = "PutBucketAcl"
	OpGetBucketCors              Operation = "GetBucketCors"
	OpPutBucketCors              Operation = "PutBucketCors"
	OpDeleteBucketCors           Operation = "DeleteBucketCors"
	OpGetBucketWebsite           Operation = "GetBucketWebsite"
	OpDeleteBucketWebsite        Operation = "DeleteBucketWebsite"
	OpGetBucketAccelerate        Operation = "GetBucketAccelerate"
	OpGetBucketRequestPayment    Operation = "GetBucketRequestPayment"
	OpGetBucketLogging           Operation = "GetBucketLogging"
	OpGetBucketTagging           Operation = "GetBucketTagging"
	OpPutBucketTagging           Operation = "PutBucketTagging"
	OpDeleteBucketTagging        Operation = "DeleteBucketTagging"

	// OpUnsupported labels a request the gateway refused without knowing
	// it as one of the operations above: it never reaches the backend.
	OpUnsupported Operation = "Unsupported"
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

// target is what a request's path addresses.
type target int

const (
	targetService target = iota // no bucket: "/"
	targetBucket                // a bucket, no key
	targetObject                // a key in a bucket
)

// selector is a query parameter that selects an operation: present with
// any value when value is "", present with exactly value otherwise. An
// identifier (an upload id, a part number) must also not be blank: MinIO
// routes "uploadId=" to the multipart calls all the same, and aborts every
// upload of the key for it.
type selector struct {
	name, value string
	identifier  bool
}

// operationRule describes one operation the gateway serves: the method,
// the target and the query parameters that select it, the other query
// parameters it accepts, and whether it is a copy (carries
// x-amz-copy-source).
type operationRule struct {
	op        Operation
	method    string
	target    target
	selectors []selector
	params    []string
	copy      bool
}

// Optional parameters shared by several operations.
var (
	responseOverrides = []string{
		"response-cache-control", "response-content-disposition", "response-content-encoding",
		"response-content-language", "response-content-type", "response-expires",
	}
	readObjectParams = append([]string{"versionId", "partNumber"}, responseOverrides...)
	versionParam     = []string{"versionId"}
)

// sel builds the selectors of a rule from parameter names, each matching
// any value; uploadId and partNumber are identifiers.
func sel(names ...string) []selector {
	s := make([]selector, len(names))
	for i, n := range names {
		s[i] = selector{name: n, identifier: n == "uploadId" || n == "partNumber"}
	}
	return s
}

// operationRules is every operation the gateway serves, one row each. The
// rows are in the order in which the backend (MinIO's router,
// cmd/api-router.go) tries its routes, so that the first row a request
// matches is the operation the backend will execute; a request must then
// carry no query parameter that its row does not list. What matches no row,
// or carries more than its row lists, is refused and never forwarded:
// MinIO ignores parameters its route does not name, so an extra parameter
// could make the gateway and the backend read one request two ways.
//
// Routes MinIO has but the gateway does not serve (S3 Select, restore,
// object lambda, listen-notification, MinIO's metadata listings and
// replication extensions, POST-policy uploads, and the calls MinIO answers
// NotImplemented) have no row.
var operationRules = []operationRule{
	{op: OpListBuckets, method: http.MethodGet, target: targetService,
		params: []string{"max-buckets", "continuation-token", "prefix", "bucket-region"}},

	// Object operations.
	{op: OpHeadObject, method: http.MethodHead, target: targetObject, params: readObjectParams},
	{op: OpGetObjectAttributes, method: http.MethodGet, target: targetObject, selectors: sel("attributes"),
		params: []string{"versionId"}},
	{op: OpUploadPartCopy, method: http.MethodPut, target: targetObject, selectors: sel("partNumber", "uploadId"), copy: true},
	{op: OpUploadPart, method: http.MethodPut, target: targetObject, selectors: sel("partNumber", "uploadId")},
	{op: OpListParts, method: http.MethodGet, target: targetObject, selectors: sel("uploadId"),
		params: []string{"max-parts", "part-number-marker", "encoding-type"}},
	{op: OpCompleteMultipartUpload, method: http.MethodPost, target: targetObject, selectors: sel("uploadId")},
	{op: OpCreateMultipartUpload, method: http.MethodPost, target: targetObject, selectors: sel("uploads")},
	{op: OpAbortMultipartUpload, method: http.MethodDelete, target: targetObject, selectors: sel("uploadId")},
	{op: OpGetObjectACL, method: http.MethodGet, target: targetObject, selectors: sel("acl"), params: versionParam},
	{op: OpPutObjectACL, method: http.MethodPut, target: targetObject, selectors: sel("acl"), params: versionParam},
	{op: OpGetObjectTagging, method: http.MethodGet, target: targetObject, selectors: sel("tagging"), params: versionParam},
	{op: OpPutObjectTagging, method: http.MethodPut, target: targetObject, selectors: sel("tagging"), params: versionParam},
	{op: OpDeleteObjectTagging, method: http.MethodDelete, target: targetObject, selectors: sel("tagging"), params: versionParam},
	{op: OpGetObjectRetention, method: http.MethodGet, target: targetObject, selectors: sel("retention"), params: versionParam},
	{op: OpGetObjectLegalHold, method: http.MethodGet, target: targetObject, selectors: sel("legal-hold"), params: versionParam},
	{op: OpGetObject, method: http.MethodGet, target: targetObject, params: readObjectParams},
	{op: OpCopyObject, method: http.MethodPut, target: targetObject, copy: true},
	{op: OpPutObjectRetention, method: http.MethodPut, target: targetObject, selectors: sel("retention"), params: versionParam},
	{op: OpPutObjectLegalHold, method: http.MethodPut, target: targetObject, selectors: sel("legal-hold"), params: versionParam},
	{op: OpPutObject, method: http.MethodPut, target: targetObject},
	{op: OpDeleteObject, method: http.MethodDelete, target: targetObject, params: versionParam},

	// Bucket operations.
	{op: OpGetBucketLocation, method: http.MethodGet, target: targetBucket, selectors: sel("location")},
	{op: OpGetBucketPolicy, method: http.MethodGet, target: targetBucket, selectors: sel("policy")},
	// withUpdatedAt (sent by minio-go) only adds a response header.
	{op: OpGetBucketLifecycle, method: http.MethodGet, target: targetBucket, selectors: sel("lifecycle"),
		params: []string{"withUpdatedAt"}},
	{op: OpGetBucketEncryption, method: http.MethodGet, target: targetBucket, selectors: sel("encryption")},
	{op: OpGetObjectLockConfiguration, method: http.MethodGet, target: targetBucket, selectors: sel("object-lock")},
	{op: OpGetBucketReplication, method: http.MethodGet, target: targetBucket, selectors: sel("replication")},
	{op: OpGetBucketVersioning, method: http.MethodGet, target: targetBucket, selectors: sel("versioning")},
	{op: OpGetBucketNotification, method: http.MethodGet, target: targetBucket, selectors: sel("notification")},
	{op: OpGetBucketACL, method: http.MethodGet, target: targetBucket, selectors: sel("acl")},
	{op: OpPutBucketACL, method: http.MethodPut, target: targetBucket, selectors: sel("acl")},
	{op: OpGetBucketCors, method: http.MethodGet, target: targetBucket, selectors: sel("cors")},
	{op: OpPutBucketCors, method: http.MethodPut, target: targetBucket, selectors: sel("cors")},
	{op: OpDeleteBucketCors, method: http.MethodDelete, target: targetBucket, selectors: sel("cors")},
	{op: OpGetBucketWebsite, method: http.MethodGet, target: targetBucket, selectors: sel("website")},
	{op: OpGetBucketAccelerate, method: http.MethodGet, target: targetBucket, selectors: sel("accelerate")},
	{op: OpGetBucketRequestPayment, method: http.MethodGet, target: targetBucket, selectors: sel("requestPayment")},
	{op: OpGetBucketLogging, method: http.MethodGet, target: targetBucket, selectors: sel("logging")},
	{op: OpGetBucketTagging, method: http.MethodGet, target: targetBucket, selectors: sel("tagging")},
	{op: OpDeleteBucketWebsite, method: http.MethodDelete, target: targetBucket, selectors: sel("website")},
	{op: OpDeleteBucketTagging, method: http.MethodDelete, target: targetBucket, selectors: sel("tagging")},
	{op: OpListMultipartUploads, method: http.MethodGet, target: targetBucket, selectors: sel("uploads"),
		params: []string{"delimiter", "encoding-type", "key-marker", "max-uploads", "prefix", "upload-id-marker"}},
	{op: OpListObjectsV2, method: http.MethodGet, target: targetBucket, selectors: []selector{{name: "list-type", value: "2"}},
		params: []string{"continuation-token", "delimiter", "encoding-type", "fetch-owner", "max-keys", "prefix", "start-after"}},
	{op: OpListObjectVersions, method: http.MethodGet, target: targetBucket, selectors: sel("versions"),
		params: []string{"delimiter", "encoding-type", "key-marker", "max-keys", "prefix", "version-id-marker"}},
	{op: OpGetBucketPolicyStatus, method: http.MethodGet, target: targetBucket, selectors: sel("policyStatus")},
	{op: OpPutBucketLifecycle, method: http.MethodPut, target: targetBucket, selectors: sel("lifecycle")},
	{op: OpPutBucketReplication, method: http.MethodPut, target: targetBucket, selectors: sel("replication")},
	{op: OpPutBucketEncryption, method: http.MethodPut, target: targetBucket, selectors: sel("encryption")},
	{op: OpPutBucketPolicy, method: http.MethodPut, target: targetBucket, selectors: sel("policy")},
	{op: OpPutObjectLockConfiguration, method: http.MethodPut, target: targetBucket, selectors: sel("object-lock")},
	{op: OpPutBucketTagging, method: http.MethodPut, target: targetBucket, selectors: sel("tagging")},
	{op: OpPutBucketVersioning, method: http.MethodPut, target: targetBucket, selectors: sel("versioning")},
	{op: OpPutBucketNotification, method: http.MethodPut, target: targetBucket, selectors: sel("notification")},
	{op: OpCreateBucket, method: http.MethodPut, target: targetBucket},
	{op: OpHeadBucket, method: http.MethodHead, target: targetBucket},
	{op: OpDeleteObjects, method: http.MethodPost, target: targetBucket, selectors: sel("delete")},
	{op: OpDeleteBucketPolicy, method: http.MethodDelete, target: targetBucket, selectors: sel("policy")},
	{op: OpDeleteBucketReplication, method: http.MethodDelete, target: targetBucket, selectors: sel("replication")},
	{op: OpDeleteBucketLifecycle, method: http.MethodDelete, target: targetBucket, selectors: sel("lifecycle")},
	{op: OpDeleteBucketEncryption, method: http.MethodDelete, target: targetBucket, selectors: sel("encryption")},
	{op: OpDeleteBucket, method: http.MethodDelete, target: targetBucket},
	{op: OpListObjects, method: http.MethodGet, target: targetBucket,
		params: []string{"delimiter", "encoding-type", "marker", "max-keys", "prefix"}},
}

// matches reports whether a request of method on t, with query q and
// (when copy) an x-amz-copy-source, is one the backend routes to rule.
func (rule *operationRule) matches(method string, t target, q query, copy bool) bool {
	if rule.method != method || rule.target != t || (rule.copy && !copy) {
		return false
	}
	for _, s := range rule.selectors {
		v, ok := q.get(s.name)
		if !ok || (s.value != "" && v != s.value) {
			return false
		}
	}
	return true
}

// accepts reports whether rule takes the query parameter name. Every
// operation also takes the SDKs' operation hint (x-id) and every x-amz-*
// parameter: a presigned URL's signature, which the gateway verifies and
// removes, and the headers a presigning SDK hoists into the query
// (X-Amz-Checksum-Mode, for one), which the gateway's signature check
// covers and which MinIO, like the gateway, reads only from headers.
func (rule *operationRule) accepts(name string) bool {
	if slices.ContainsFunc(rule.selectors, func(s selector) bool { return s.name == name }) {
		return true
	}
	return slices.Contains(rule.params, name) || name == "x-id" ||
		strings.HasPrefix(strings.ToLower(name), "x-amz-")
}

// classify names the operation of a request from its method, its target,
// its query parameters and its headers, or refuses it: the request matches
// no row of operationRules, carries a parameter its row does not list, or
// carries a header that would make the backend read it as another
// operation.
func classify(r *http.Request, t target) (Operation, error) {
	q, err := parseQuery(r.URL.RawQuery, isListingFilter)
	if err != nil {
		return OpUnsupported, err
	}
	if err := checkRoutingHeaders(r); err != nil {
		return OpUnsupported, err
	}
	copy := len(r.Header.Values("X-Amz-Copy-Source")) > 0
	for i := range operationRules {
		rule := &operationRules[i]
		if !rule.matches(r.Method, t, q, copy) {
			continue
		}
		for _, p := range q {
			if !rule.accepts(p.name) {
				return OpUnsupported, s3err.ErrInvalidArgument.WithMessage("The query parameter %q is not accepted on %s through sweepgate.", p.name, rule.op)
			}
			if p.control && !allowsControl(rule.op, p.name) {
				return OpUnsupported, errControl(p.name)
			}
		}
		if copy && !rule.copy {
			return OpUnsupported, s3err.ErrInvalidArgument.WithMessage("x-amz-copy-source is not accepted on %s.", rule.op)
		}
		for _, s := range rule.selectors {
			if v, _ := q.get(s.name); s.identifier && strings.TrimSpace(v) == "" {
				return OpUnsupported, s3err.ErrInvalidArgument.WithMessage("The query parameter %q of %s must not be empty.", s.name, rule.op)
			}
		}
		return rule.op, nil
	}
	for _, p := range q {
		if p.control {
			return OpUnsupported, errControl(p.name)
		}
	}
	return OpUnsupported, errNotServed(r.Method, t, q)
}

// errNotServed refuses a request that matches no operation, naming what it
// asked for.
func errNotServed(method string, t target, q query) error {
	what := map[target]string{targetService: "the service", targetBucket: "a bucket", targetObject: "an object"}[t]
	if len(q) > 0 {
		names := make([]string, len(q))
		for i, p := range q {
			names[i] = p.name
		}
		return s3err.ErrNotImplemented.WithMessage("sweepgate does not serve %s on %s with the query parameters %s.", method, what, strings.Join(names, ", "))
	}
	return s3err.ErrNotImplemented.WithMessage("sweepgate does not serve %s on %s.", method, what)
}

// checkRoutingHeaders refuses the headers that make MinIO route a request
// to another operation than its method, path and query name: a copy
// source that is repeated or not of the form the router recognises (a
// value without "/" or "%2F" is stored as a plain PUT), a zip to extract
// into many keys, an append, and a POST-policy (browser form) upload.
func checkRoutingHeaders(r *http.Request) error {
	if cs := r.Header.Values("X-Amz-Copy-Source"); len(cs) > 1 {
		return s3err.ErrInvalidArgument.WithMessage("More than one x-amz-copy-source header.")
	} else if len(cs) == 1 && !strings.Contains(cs[0], "/") && !strings.Contains(cs[0], "%2F") {
		return s3err.ErrInvalidArgument.WithMessage("Invalid copy source %q: want /BUCKET/KEY[?versionId=ID].", cs[0])
	}
	if len(r.Header.Values("X-Amz-Meta-Snowball-Auto-Extract")) > 0 {
		return s3err.ErrNotImplemented.WithMessage("Extracting archives on upload (x-amz-meta-snowball-auto-extract) is not supported through sweepgate.")
	}
	if len(r.Header.Values("X-Amz-Write-Offset-Bytes")) > 0 {
		return s3err.ErrNotImplemented.WithMessage("Appending to objects (x-amz-write-offset-bytes) is not supported through sweepgate.")
	}
	if isPostPolicy(r) {
		return errPostPolicy
	}
	return nil
}

// errPostPolicy refuses a POST-policy (browser form) upload. Its
// signature is in the form, not in the request, so it is answered before
// the request's own signature is checked.
var errPostPolicy = s3err.ErrNotImplemented.WithMessage("POST-policy (browser form) uploads are not supported through sweepgate: upload with PUT or a presigned PUT URL.")

// isPostPolicy reports whether MinIO would take r for a POST-policy
// upload: a POST whose media type is multipart/form-data.
func isPostPolicy(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}
