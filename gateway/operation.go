package gateway

import (
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

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
	op        s3op.Operation
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
	{op: s3op.ListBuckets, method: http.MethodGet, target: targetService,
		params: []string{"max-buckets", "continuation-token", "prefix", "bucket-region"}},

	// Object operations.
	{op: s3op.HeadObject, method: http.MethodHead, target: targetObject, params: readObjectParams},
	{op: s3op.GetObjectAttributes, method: http.MethodGet, target: targetObject, selectors: sel("attributes"),
		params: []string{"versionId"}},
	{op: s3op.UploadPartCopy, method: http.MethodPut, target: targetObject, selectors: sel("partNumber", "uploadId"), copy: true},
	{op: s3op.UploadPart, method: http.MethodPut, target: targetObject, selectors: sel("partNumber", "uploadId")},
	{op: s3op.ListParts, method: http.MethodGet, target: targetObject, selectors: sel("uploadId"),
		params: []string{"max-parts", "part-number-marker", "encoding-type"}},
	{op: s3op.CompleteMultipartUpload, method: http.MethodPost, target: targetObject, selectors: sel("uploadId")},
	{op: s3op.CreateMultipartUpload, method: http.MethodPost, target: targetObject, selectors: sel("uploads")},
	{op: s3op.AbortMultipartUpload, method: http.MethodDelete, target: targetObject, selectors: sel("uploadId")},
	{op: s3op.GetObjectACL, method: http.MethodGet, target: targetObject, selectors: sel("acl"), params: versionParam},
	{op: s3op.PutObjectACL, method: http.MethodPut, target: targetObject, selectors: sel("acl"), params: versionParam},
	{op: s3op.GetObjectTagging, method: http.MethodGet, target: targetObject, selectors: sel("tagging"), params: versionParam},
	{op: s3op.PutObjectTagging, method: http.MethodPut, target: targetObject, selectors: sel("tagging"), params: versionParam},
	{op: s3op.DeleteObjectTagging, method: http.MethodDelete, target: targetObject, selectors: sel("tagging"), params: versionParam},
	{op: s3op.GetObjectRetention, method: http.MethodGet, target: targetObject, selectors: sel("retention"), params: versionParam},
	{op: s3op.GetObjectLegalHold, method: http.MethodGet, target: targetObject, selectors: sel("legal-hold"), params: versionParam},
	{op: s3op.GetObject, method: http.MethodGet, target: targetObject, params: readObjectParams},
	{op: s3op.CopyObject, method: http.MethodPut, target: targetObject, copy: true},
	{op: s3op.PutObjectRetention, method: http.MethodPut, target: targetObject, selectors: sel("retention"), params: versionParam},
	{op: s3op.PutObjectLegalHold, method: http.MethodPut, target: targetObject, selectors: sel("legal-hold"), params: versionParam},
	{op: s3op.PutObject, method: http.MethodPut, target: targetObject},
	{op: s3op.DeleteObject, method: http.MethodDelete, target: targetObject, params: versionParam},

	// Bucket operations.
	{op: s3op.GetBucketLocation, method: http.MethodGet, target: targetBucket, selectors: sel("location")},
	{op: s3op.GetBucketPolicy, method: http.MethodGet, target: targetBucket, selectors: sel("policy")},
	// withUpdatedAt (sent by minio-go) only adds a response header.
	{op: s3op.GetBucketLifecycle, method: http.MethodGet, target: targetBucket, selectors: sel("lifecycle"),
		params: []string{"withUpdatedAt"}},
	{op: s3op.GetBucketEncryption, method: http.MethodGet, target: targetBucket, selectors: sel("encryption")},
	{op: s3op.GetObjectLockConfiguration, method: http.MethodGet, target: targetBucket, selectors: sel("object-lock")},
	{op: s3op.GetBucketReplication, method: http.MethodGet, target: targetBucket, selectors: sel("replication")},
	{op: s3op.GetBucketVersioning, method: http.MethodGet, target: targetBucket, selectors: sel("versioning")},
	{op: s3op.GetBucketNotification, method: http.MethodGet, target: targetBucket, selectors: sel("notification")},
	{op: s3op.GetBucketACL, method: http.MethodGet, target: targetBucket, selectors: sel("acl")},
	{op: s3op.PutBucketACL, method: http.MethodPut, target: targetBucket, selectors: sel("acl")},
	{op: s3op.GetBucketCors, method: http.MethodGet, target: targetBucket, selectors: sel("cors")},
	{op: s3op.PutBucketCors, method: http.MethodPut, target: targetBucket, selectors: sel("cors")},
	{op: s3op.DeleteBucketCors, method: http.MethodDelete, target: targetBucket, selectors: sel("cors")},
	{op: s3op.GetBucketWebsite, method: http.MethodGet, target: targetBucket, selectors: sel("website")},
	{op: s3op.GetBucketAccelerate, method: http.MethodGet, target: targetBucket, selectors: sel("accelerate")},
	{op: s3op.GetBucketRequestPayment, method: http.MethodGet, target: targetBucket, selectors: sel("requestPayment")},
	{op: s3op.GetBucketLogging, method: http.MethodGet, target: targetBucket, selectors: sel("logging")},
	{op: s3op.GetBucketTagging, method: http.MethodGet, target: targetBucket, selectors: sel("tagging")},
	{op: s3op.DeleteBucketWebsite, method: http.MethodDelete, target: targetBucket, selectors: sel("website")},
	{op: s3op.DeleteBucketTagging, method: http.MethodDelete, target: targetBucket, selectors: sel("tagging")},
	{op: s3op.ListMultipartUploads, method: http.MethodGet, target: targetBucket, selectors: sel("uploads"),
		params: []string{"delimiter", "encoding-type", "key-marker", "max-uploads", "prefix", "upload-id-marker"}},
	{op: s3op.ListObjectsV2, method: http.MethodGet, target: targetBucket, selectors: []selector{{name: "list-type", value: "2"}},
		params: []string{"continuation-token", "delimiter", "encoding-type", "fetch-owner", "max-keys", "prefix", "start-after"}},
	{op: s3op.ListObjectVersions, method: http.MethodGet, target: targetBucket, selectors: sel("versions"),
		params: []string{"delimiter", "encoding-type", "key-marker", "max-keys", "prefix", "version-id-marker"}},
	{op: s3op.GetBucketPolicyStatus, method: http.MethodGet, target: targetBucket, selectors: sel("policyStatus")},
	{op: s3op.PutBucketLifecycle, method: http.MethodPut, target: targetBucket, selectors: sel("lifecycle")},
	{op: s3op.PutBucketReplication, method: http.MethodPut, target: targetBucket, selectors: sel("replication")},
	{op: s3op.PutBucketEncryption, method: http.MethodPut, target: targetBucket, selectors: sel("encryption")},
	{op: s3op.PutBucketPolicy, method: http.MethodPut, target: targetBucket, selectors: sel("policy")},
	{op: s3op.PutObjectLockConfiguration, method: http.MethodPut, target: targetBucket, selectors: sel("object-lock")},
	{op: s3op.PutBucketTagging, method: http.MethodPut, target: targetBucket, selectors: sel("tagging")},
	{op: s3op.PutBucketVersioning, method: http.MethodPut, target: targetBucket, selectors: sel("versioning")},
	{op: s3op.PutBucketNotification, method: http.MethodPut, target: targetBucket, selectors: sel("notification")},
	{op: s3op.CreateBucket, method: http.MethodPut, target: targetBucket},
	{op: s3op.HeadBucket, method: http.MethodHead, target: targetBucket},
	{op: s3op.DeleteObjects, method: http.MethodPost, target: targetBucket, selectors: sel("delete")},
	{op: s3op.DeleteBucketPolicy, method: http.MethodDelete, target: targetBucket, selectors: sel("policy")},
	{op: s3op.DeleteBucketReplication, method: http.MethodDelete, target: targetBucket, selectors: sel("replication")},
	{op: s3op.DeleteBucketLifecycle, method: http.MethodDelete, target: targetBucket, selectors: sel("lifecycle")},
	{op: s3op.DeleteBucketEncryption, method: http.MethodDelete, target: targetBucket, selectors: sel("encryption")},
	{op: s3op.DeleteBucket, method: http.MethodDelete, target: targetBucket},
	{op: s3op.ListObjects, method: http.MethodGet, target: targetBucket,
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
func classify(r *http.Request, t target) (s3op.Operation, error) {
	q, err := parseQuery(r.URL.RawQuery, isListingFilter)
	if err != nil {
		return s3op.Unsupported, err
	}
	if err := checkRoutingHeaders(r); err != nil {
		return s3op.Unsupported, err
	}
	copy := len(r.Header.Values("X-Amz-Copy-Source")) > 0
	for i := range operationRules {
		rule := &operationRules[i]
		if !rule.matches(r.Method, t, q, copy) {
			continue
		}
		for _, p := range q {
			if !rule.accepts(p.name) {
				return s3op.Unsupported, s3err.ErrInvalidArgument.WithMessage("The query parameter %q is not accepted on %s through sweepgate.", p.name, rule.op)
			}
			if p.control && !allowsControl(rule.op, p.name) {
				return s3op.Unsupported, errControl(p.name)
			}
		}
		if copy && !rule.copy {
			return s3op.Unsupported, s3err.ErrInvalidArgument.WithMessage("x-amz-copy-source is not accepted on %s.", rule.op)
		}
		for _, s := range rule.selectors {
			if v, _ := q.get(s.name); s.identifier && strings.TrimSpace(v) == "" {
				return s3op.Unsupported, s3err.ErrInvalidArgument.WithMessage("The query parameter %q of %s must not be empty.", s.name, rule.op)
			}
		}
		return rule.op, nil
	}
	for _, p := range q {
		if p.control {
			return s3op.Unsupported, errControl(p.name)
		}
	}
	return s3op.Unsupported, errNotServed(r.Method, t, q)
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
