package gateway

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

func TestResolveRoute(t *testing.T) {
	domains := []string{"s3.example.com"}
	tests := []struct {
		method, target, host string
		header               map[string]string
		want                 Route
	}{
		{"GET", "/", "s3.example.com", nil, Route{"", "", s3op.ListBuckets}},
		{"GET", "//", "gw", nil, Route{"", "", s3op.ListBuckets}},
		{"PUT", "/b", "gw:9000", nil, Route{"b", "", s3op.CreateBucket}},
		{"PUT", "/b/", "gw:9000", nil, Route{"b", "", s3op.CreateBucket}},
		{"HEAD", "/b", "gw", nil, Route{"b", "", s3op.HeadBucket}},
		{"DELETE", "/b", "gw", nil, Route{"b", "", s3op.DeleteBucket}},
		{"GET", "/b?list-type=2&prefix=a", "gw", nil, Route{"b", "", s3op.ListObjectsV2}},
		{"GET", "/b", "gw", nil, Route{"b", "", s3op.ListObjects}},
		{"GET", "/b?uploads", "gw", nil, Route{"b", "", s3op.ListMultipartUploads}},
		{"GET", "/b?location", "gw", nil, Route{"b", "", s3op.GetBucketLocation}},
		{"GET", "/b?versions", "gw", nil, Route{"b", "", s3op.ListObjectVersions}},
		{"GET", "/b?policy", "gw", nil, Route{"b", "", s3op.GetBucketPolicy}},
		{"PUT", "/b?tagging", "gw", nil, Route{"b", "", s3op.PutBucketTagging}},
		{"DELETE", "/b?lifecycle", "gw", nil, Route{"b", "", s3op.DeleteBucketLifecycle}},
		{"POST", "/b?delete", "gw", nil, Route{"b", "", s3op.DeleteObjects}},
		{"POST", "/b?delete=", "gw", nil, Route{"b", "", s3op.DeleteObjects}},
		{"PUT", "/b/k/with/slashes", "gw", nil, Route{"b", "k/with/slashes", s3op.PutObject}},
		{"PUT", "/b/k?x-id=PutObject", "gw", nil, Route{"b", "k", s3op.PutObject}},
		{"GET", "/b/k?X-Amz-Checksum-Mode=ENABLED&X-Amz-Algorithm=AWS4-HMAC-SHA256", "gw", nil, Route{"b", "k", s3op.GetObject}},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "/b/src"}, Route{"b", "k", s3op.CopyObject}},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "b/src%3Fx?versionId=v1"}, Route{"b", "k", s3op.CopyObject}},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "gw", nil, Route{"b", "k", s3op.UploadPart}},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "gw", map[string]string{"X-Amz-Copy-Source": "/b/src"}, Route{"b", "k", s3op.UploadPartCopy}},
		{"PUT", "/b/k?tagging", "gw", nil, Route{"b", "k", s3op.PutObjectTagging}},
		{"GET", "/b/k?acl&versionId=v", "gw", nil, Route{"b", "k", s3op.GetObjectACL}},
		{"POST", "/b/k?uploads", "gw", nil, Route{"b", "k", s3op.CreateMultipartUpload}},
		{"POST", "/b/k?uploadId=u", "gw", nil, Route{"b", "k", s3op.CompleteMultipartUpload}},
		{"GET", "/b/k?uploadId=u&max-parts=10", "gw", nil, Route{"b", "k", s3op.ListParts}},
		{"DELETE", "/b/k?uploadId=u", "gw", nil, Route{"b", "k", s3op.AbortMultipartUpload}},
		{"GET", "/b/k?versionId=v&response-content-type=text%2Fplain", "gw", nil, Route{"b", "k", s3op.GetObject}},
		{"HEAD", "/b/k?partNumber=1", "gw", nil, Route{"b", "k", s3op.HeadObject}},
		{"DELETE", "/b/k", "gw", nil, Route{"b", "k", s3op.DeleteObject}},
		{"GET", "/b/a%20b%2Fc", "gw", nil, Route{"b", "a b/c", s3op.GetObject}},
		{"GET", "/b/dir/", "gw", nil, Route{"b", "dir/", s3op.GetObject}},
		{"GET", "/b/a.b/..c/...", "gw", nil, Route{"b", "a.b/..c/...", s3op.GetObject}},
		// A control character in a listing's filters, which MinIO's router
		// never reads (ceph s3-tests' *_unreadable listings).
		{"GET", "/b?delimiter=%0A", "gw", nil, Route{"b", "", s3op.ListObjects}},
		{"GET", "/b?marker=%0A&prefix=%0D%09&max-keys=2", "gw", nil, Route{"b", "", s3op.ListObjects}},
		{"GET", "/b?list-type=2&delimiter=%0A", "gw", nil, Route{"b", "", s3op.ListObjectsV2}},
		{"GET", "/b?list-type=2&prefix=%0A", "gw", nil, Route{"b", "", s3op.ListObjectsV2}},
		{"GET", "/b?list-type=2&start-after=%0A&continuation-token=%01", "gw", nil, Route{"b", "", s3op.ListObjectsV2}},
		{"GET", "/b?versions&prefix=%7F&delimiter=%0A&key-marker=%00&version-id-marker=%0A", "gw", nil, Route{"b", "", s3op.ListObjectVersions}},
		{"GET", "/b?uploads&prefix=%0A&delimiter=%0A&key-marker=%0A&upload-id-marker=%0A", "gw", nil, Route{"b", "", s3op.ListMultipartUploads}},
		// Virtual-hosted style: the bucket is in the host.
		{"GET", "/k/x", "bkt.s3.example.com:9000", nil, Route{"bkt", "k/x", s3op.GetObject}},
		{"GET", "/?list-type=2", "bkt.S3.Example.com", nil, Route{"bkt", "", s3op.ListObjectsV2}},
		{"PUT", "/", "bkt.s3.example.com", nil, Route{"bkt", "", s3op.CreateBucket}},
		// A host outside the configured domains is path-style.
		{"GET", "/b/k", "bkt.other.com", nil, Route{"b", "k", s3op.GetObject}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.host+tt.target, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			r.Host = tt.host
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			got, err := resolveRoute(r, domains)
			if err != nil || got != tt.want {
				t.Errorf("resolveRoute = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestResolveRouteRefuses: what the backend could read as another
// operation or another key is refused with the S3 error a client expects,
// and labelled s3op.Unsupported.
func TestResolveRouteRefuses(t *testing.T) {
	domains := []string{"s3.example.com"}
	tests := []struct {
		method, target, host string
		header               map[string]string
		code                 string
	}{
		// A sub-resource added to a call whose route ignores it.
		{"DELETE", "/b/blobs/x?acl", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/blobs/x?retention", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/k?uploadId=u&tagging", "gw", nil, "InvalidArgument"},
		{"PUT", "/b/k?partNumber=1&uploadId=u&acl", "gw", nil, "InvalidArgument"},
		{"POST", "/b/k?uploadId=u&attributes", "gw", nil, "InvalidArgument"},
		{"GET", "/b?uploads&metrics", "gw", nil, "InvalidArgument"},
		{"POST", "/b?delete&tagging", "gw", nil, "InvalidArgument"},
		{"PUT", "/b/k?retention", "gw", map[string]string{"X-Amz-Copy-Source": "/b/src"}, "InvalidArgument"},
		{"PUT", "/b/k?acl", "gw", map[string]string{"X-Amz-Copy-Source": "/b/src"}, "InvalidArgument"},
		{"PUT", "/b/k?uploadId=u", "gw", nil, "InvalidArgument"},
		// An upload id or part number that is blank.
		{"DELETE", "/b/k?uploadId=", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/k?uploadId", "gw", nil, "InvalidArgument"},
		{"POST", "/b/k?uploadId=%20", "gw", nil, "InvalidArgument"},
		{"GET", "/b/k?uploadId=", "gw", nil, "InvalidArgument"},
		{"PUT", "/b/k?partNumber=&uploadId=u", "gw", nil, "InvalidArgument"},
		// Routes the gateway does not serve.
		{"POST", "/b/k?delete", "gw", nil, "NotImplemented"},
		{"POST", "/b/k", "gw", nil, "NotImplemented"},
		{"POST", "/b", "gw", nil, "NotImplemented"},
		{"GET", "/b/k?torrent", "gw", nil, "InvalidArgument"},
		{"POST", "/b/k?select&select-type=2", "gw", nil, "NotImplemented"},
		{"PUT", "/b?website", "gw", nil, "InvalidArgument"},
		{"GET", "/b?metrics", "gw", nil, "InvalidArgument"},
		{"GET", "/b?list-type=1", "gw", nil, "InvalidArgument"},
		{"GET", "/?events", "gw", nil, "InvalidArgument"},
		{"PATCH", "/b/k", "gw", nil, "NotImplemented"},
		{"OPTIONS", "/b/k", "gw", nil, "NotImplemented"},
		// Query strings two parsers could read two ways.
		{"DELETE", "/b/k?uploadId=u;acl", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/k?%75ploadId=u", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/k?upload+Id=u", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/k?versionId=a&versionId=b", "gw", nil, "InvalidArgument"},
		{"GET", "/b/k?versionId=%zz", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/k?uploadId=a%0Ab", "gw", nil, "InvalidArgument"},
		{"GET", "/b?uploads=%0D", "gw", nil, "InvalidArgument"},
		// A control character anywhere but in a listing's filters: in a
		// parameter the router reads, in a listing's other parameters, in
		// a filter's name on another operation, and on a request that
		// matches no operation.
		{"GET", "/b?list-type=2%0A&prefix=a", "gw", nil, "InvalidArgument"},
		{"GET", "/b?list-type=2&prefix=a&encoding-type=url%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/b?versions=%0A&prefix=%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/b?list-type=2&max-keys=1%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/b?list-type=2&marker=%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/b?key-marker=%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/b?tagging&prefix=%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/?prefix=%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/?continuation-token=%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/b/k?prefix=%0A", "gw", nil, "InvalidArgument"},
		{"GET", "/b/k?uploadId=u&prefix=%0A", "gw", nil, "InvalidArgument"},
		{"PUT", "/b/k?partNumber=1%0A&uploadId=u", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/k?versionId=%0A", "gw", nil, "InvalidArgument"},
		{"POST", "/b?prefix=%0A", "gw", nil, "InvalidArgument"},
		{"PATCH", "/b?delimiter=%0A", "gw", nil, "InvalidArgument"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "/b/src?versionId=%0A"}, "InvalidArgument"},
		// Keys the backend would store under another name.
		{"DELETE", "/b//blobs/x", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/a//b", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/./blobs/x", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/x/../blobs/x", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/x/%2E%2E/blobs/x", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/%2Fblobs/x", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/x/%20..%20/y", "gw", nil, "InvalidArgument"},
		{"DELETE", "/b/x\\..\\y", "gw", nil, "InvalidArgument"},
		{"DELETE", "//blobs/x", "bkt.s3.example.com", nil, "InvalidArgument"},
		{"GET", "//k", "gw", nil, "InvalidArgument"},
		{"GET", "/../k", "gw", nil, "InvalidBucketName"},
		// Copy sources the backend would read as another object.
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "//b/blobs/x"}, "InvalidArgument"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "/b//blobs/x"}, "InvalidArgument"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "/b/x/../blobs/x"}, "InvalidArgument"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "/b/k?versionId=v&acl"}, "InvalidArgument"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "/b/k#frag"}, "InvalidArgument"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "s3:b/k"}, "InvalidArgument"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "no-slash"}, "InvalidArgument"},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "gw", map[string]string{"X-Amz-Copy-Source": "/b//k"}, "InvalidArgument"},
		// Headers that make MinIO route the request elsewhere.
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Meta-Snowball-Auto-Extract": "true"}, "NotImplemented"},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Write-Offset-Bytes": "0"}, "NotImplemented"},
		{"POST", "/b?delete", "gw", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "NotImplemented"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.host+tt.target, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://"+tt.host+"/", nil)
			u, err := url.ParseRequestURI(tt.target)
			if err != nil {
				t.Fatalf("target %q: %v", tt.target, err)
			}
			r.URL = u
			r.Host = tt.host
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			got, err := resolveRoute(r, domains)
			if err == nil || s3err.As(err).Code != tt.code || got.Operation != s3op.Unsupported {
				t.Errorf("resolveRoute = %+v, %v; want s3op.Unsupported and %s", got, err, tt.code)
			}
		})
	}
}
