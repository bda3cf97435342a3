package gateway

import (
	"net/http/httptest"
	"testing"
)

func TestResolveRoute(t *testing.T) {
	domains := []string{"s3.example.com"}
	tests := []struct {
		method, target, host string
		header               map[string]string
		want                 Route
	}{
		{"GET", "/", "s3.example.com", nil, Route{"", "", OpListBuckets}},
		{"PUT", "/b", "gw:9000", nil, Route{"b", "", OpCreateBucket}},
		{"PUT", "/b/", "gw:9000", nil, Route{"b", "", OpCreateBucket}},
		{"HEAD", "/b", "gw", nil, Route{"b", "", OpHeadBucket}},
		{"DELETE", "/b", "gw", nil, Route{"b", "", OpDeleteBucket}},
		{"GET", "/b?list-type=2&prefix=a", "gw", nil, Route{"b", "", OpListObjectsV2}},
		{"GET", "/b", "gw", nil, Route{"b", "", OpListObjects}},
		{"GET", "/b?uploads", "gw", nil, Route{"b", "", OpListMultipartUploads}},
		{"GET", "/b?location", "gw", nil, Route{"b", "", OpGetBucketLocation}},
		{"GET", "/b?versions", "gw", nil, Route{"b", "", OpListObjectVersions}},
		{"GET", "/b?policy", "gw", nil, Route{"b", "", OpOther}},
		{"POST", "/b?delete", "gw", nil, Route{"b", "", OpDeleteObjects}},
		{"PUT", "/b/k/with/slashes", "gw", nil, Route{"b", "k/with/slashes", OpPutObject}},
		{"PUT", "/b/k", "gw", map[string]string{"X-Amz-Copy-Source": "/b/src"}, Route{"b", "k", OpCopyObject}},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "gw", nil, Route{"b", "k", OpUploadPart}},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "gw", map[string]string{"X-Amz-Copy-Source": "/b/src"}, Route{"b", "k", OpUploadPartCopy}},
		{"PUT", "/b/k?tagging", "gw", nil, Route{"b", "k", OpOther}},
		{"POST", "/b/k?uploads", "gw", nil, Route{"b", "k", OpCreateMultipartUpload}},
		{"POST", "/b/k?uploadId=u", "gw", nil, Route{"b", "k", OpCompleteMultipartUpload}},
		{"GET", "/b/k?uploadId=u", "gw", nil, Route{"b", "k", OpListParts}},
		{"DELETE", "/b/k?uploadId=u", "gw", nil, Route{"b", "k", OpAbortMultipartUpload}},
		{"GET", "/b/k", "gw", nil, Route{"b", "k", OpGetObject}},
		{"HEAD", "/b/k", "gw", nil, Route{"b", "k", OpHeadObject}},
		{"DELETE", "/b/k", "gw", nil, Route{"b", "k", OpDeleteObject}},
		{"GET", "/b/a%20b%2Fc", "gw", nil, Route{"b", "a b/c", OpGetObject}},
		// Virtual-hosted style: the bucket is in the host.
		{"GET", "/k/x", "bkt.s3.example.com:9000", nil, Route{"bkt", "k/x", OpGetObject}},
		{"GET", "/?list-type=2", "bkt.S3.Example.com", nil, Route{"bkt", "", OpListObjectsV2}},
		{"PUT", "/", "bkt.s3.example.com", nil, Route{"bkt", "", OpCreateBucket}},
		// A host outside the configured domains is path-style.
		{"GET", "/b/k", "bkt.other.com", nil, Route{"b", "k", OpGetObject}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.host+tt.target, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			r.Host = tt.host
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			if got := resolveRoute(r, domains); got != tt.want {
				t.Errorf("resolveRoute = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBackendPath(t *testing.T) {
	tests := []struct {
		route        Route
		path, rawURL string
	}{
		{Route{}, "/", "/"},
		{Route{Bucket: "b"}, "/b", "/b"},
		{Route{Bucket: "b", Key: "dir/file.txt"}, "/b/dir/file.txt", "/b/dir/file.txt"},
		{Route{Bucket: "b", Key: "a b+c=d&e~f"}, "/b/a b+c=d&e~f", "/b/a%20b%2Bc%3Dd%26e~f"},
		{Route{Bucket: "b", Key: "ሴ"}, "/b/ሴ", "/b/%E1%88%B4"},
		{Route{Bucket: "b", Key: "./../x"}, "/b/./../x", "/b/./../x"},
	}
	for _, tt := range tests {
		path, raw := backendPath(tt.route)
		if path != tt.path || raw != tt.rawURL {
			t.Errorf("backendPath(%+v) = %q, %q; want %q, %q", tt.route, path, raw, tt.path, tt.rawURL)
		}
	}
}
