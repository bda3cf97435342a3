//go:build integration

package gateway

// The differential suite's vocabulary: the S3 APIs as the documentation
// defines them and the query parameters S3 and MinIO know, which the
// generator draws from.

import (
	"net/http"
	"slices"
	"strings"
)

// diffParam is a query parameter the generator may send, with the values
// it picks from ("" sends the bare name). "@upload" and "@mine" stand for
// the owner's and mallory's upload ids.
type diffParam struct {
	name   string
	values []string
}

// diffParams: every sub-resource and multipart parameter S3 defines (and
// MinIO's extensions), then the ordinary parameters of listings and reads.
var diffParams = []diffParam{
	{"acl", nil}, {"attributes", nil}, {"legal-hold", nil}, {"restore", nil}, {"retention", nil},
	{"select", nil}, {"select-type", []string{"2"}}, {"tagging", nil}, {"torrent", nil},
	{"uploads", nil}, {"uploadId", []string{"@upload", "@mine", "bogus-upload-id", ""}},
	{"partNumber", []string{"1", "2", "0", ""}}, {"versionId", []string{"null", "3f1c9a6e-0d6b-4c1e-9a53-1b2b8f1e2c3d"}},
	{"versions", nil}, {"list-type", []string{"2", "1", "02"}}, {"delete", nil}, {"location", nil},
	{"policy", nil}, {"policyStatus", nil}, {"lifecycle", nil}, {"cors", nil}, {"encryption", nil},
	{"object-lock", nil}, {"replication", nil}, {"versioning", nil}, {"notification", nil},
	{"website", nil}, {"accelerate", nil}, {"requestPayment", nil}, {"logging", nil},
	{"metrics", nil}, {"analytics", nil}, {"inventory", nil}, {"intelligent-tiering", nil},
	{"ownershipControls", nil}, {"publicAccessBlock", nil}, {"events", []string{"s3:ObjectCreated:*"}},
	{"lambdaArn", []string{"arn:minio:s3-object-lambda::fn:webhook"}}, {"replication-metrics", []string{"2", ""}},
	{"metadata", []string{"true"}}, {"replication-reset-status", nil}, {"replication-reset", nil},
	{"replication-check", nil},
	// Headers a presigning SDK may hoist into the query: the backend must
	// not read them from there when the gateway does not.
	{"X-Amz-Copy-Source", []string{"/" + diffPlainBucket + "/obj"}}, {"X-Amz-Checksum-Mode", []string{"ENABLED"}},
	{"X-Amz-Meta-Snowball-Auto-Extract", []string{"true"}}, {"X-Amz-Write-Offset-Bytes", []string{"0"}},
	{"X-Amz-Tagging", []string{"k=v"}},
}

var diffOrdinaryParams = []diffParam{
	{"prefix", []string{"dir/", "blobs/", ""}}, {"delimiter", []string{"/"}}, {"max-keys", []string{"2"}},
	{"marker", []string{"a"}}, {"continuation-token", []string{"x"}}, {"start-after", []string{"a"}},
	{"fetch-owner", []string{"true"}}, {"encoding-type", []string{"url"}}, {"key-marker", []string{"a"}},
	{"max-uploads", []string{"5"}}, {"max-parts", []string{"5"}}, {"part-number-marker", []string{"1"}},
	{"response-content-type", []string{"text/plain"}}, {"x-id", []string{"GetObject", "PutObject", "DeleteObject"}},
	{"max-buckets", []string{"5"}}, {"version-id-marker", []string{"null"}}, {"upload-id-marker", []string{"x"}},
	{"response-cache-control", []string{"no-cache"}}, {"id", []string{"config1"}},
}

// diffControls are the control characters the generator writes into
// query values (percent-encoded): line breaks, which MinIO's route
// patterns do not match across, and the others.
var diffControls = []string{"\n", "\r", "\r\n", "\t", "\x00", "\x01", "\x1f", "\x7f", "a\nb"}

// diffListingFilters are, for each bucket listing, the parameters that
// only choose which entries it returns, as S3 defines them (ceph's
// s3-tests send "\n" in them): a control character there must pass the
// gateway, and nowhere else.
var diffListingFilters = map[string][]string{
	"ListObjects":          {"prefix", "delimiter", "marker"},
	"ListObjectsV2":        {"prefix", "delimiter", "start-after", "continuation-token"},
	"ListObjectVersions":   {"prefix", "delimiter", "key-marker", "version-id-marker"},
	"ListMultipartUploads": {"prefix", "delimiter", "key-marker", "upload-id-marker"},
}

func diffIsListingFilter(name string) bool {
	for _, names := range diffListingFilters {
		if slices.Contains(names, name) {
			return true
		}
	}
	return false
}

// listing names the bucket listing api is, or "" when it is none.
func (api *diffAPI) listing() string {
	if api.method != http.MethodGet || api.target != "bucket" {
		return ""
	}
	switch strings.Join(api.selector, "&") {
	case "":
		return "ListObjects"
	case "list-type=2":
		return "ListObjectsV2"
	case "versions":
		return "ListObjectVersions"
	case "uploads":
		return "ListMultipartUploads"
	}
	return ""
}

// diffMultipartParams are drawn more often: their mix-ups with
// sub-resources are where one request has two meanings.
var diffMultipartParams = []string{"uploadId", "partNumber", "uploads", "versionId"}

func diffParamNamed(name string) diffParam {
	for _, p := range append(slices.Clip(diffParams), diffOrdinaryParams...) {
		if p.name == name {
			return p
		}
	}
	return diffParam{name, []string{"x"}}
}

// diffAPI is the shape of one S3 API request, as the S3 documentation
// (and MinIO's extensions) define it, whether or not the gateway serves
// it: method, target, the query parameters that select it ("name" or
// "name=value") and those it may carry.
type diffAPI struct {
	method   string
	target   string // "service", "bucket" or "object"
	selector []string
	optional []string
	copy     bool
}

func diffAPIs() []diffAPI {
	var apis []diffAPI
	add := func(method, target string, selector []string, optional ...string) {
		apis = append(apis, diffAPI{method: method, target: target, selector: selector, optional: optional})
	}
	get, put, del, head, post := http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodPost
	add(get, "service", nil, "max-buckets", "prefix", "continuation-token")
	add(get, "service", []string{"events"})
	add(put, "bucket", nil)
	add(head, "bucket", nil)
	add(del, "bucket", nil)
	add(get, "bucket", nil, "prefix", "delimiter", "marker", "max-keys", "encoding-type")
	add(get, "bucket", []string{"list-type=2"}, "prefix", "delimiter", "continuation-token", "start-after", "fetch-owner", "max-keys", "encoding-type")
	add(get, "bucket", []string{"list-type=2", "metadata=true"}, "prefix")
	add(get, "bucket", []string{"versions"}, "prefix", "delimiter", "key-marker", "version-id-marker", "max-keys", "encoding-type")
	add(get, "bucket", []string{"versions", "metadata=true"})
	add(get, "bucket", []string{"uploads"}, "prefix", "delimiter", "key-marker", "upload-id-marker", "max-uploads", "encoding-type")
	add(get, "bucket", []string{"location"})
	add(post, "bucket", []string{"delete"})
	add(get, "bucket", []string{"policyStatus"})
	add(get, "bucket", []string{"replication-metrics=2"})
	add(get, "bucket", []string{"events"}, "prefix")
	for _, sub := range []string{"policy", "lifecycle", "encryption", "replication", "tagging", "cors", "website",
		"ownershipControls", "publicAccessBlock"} {
		add(get, "bucket", []string{sub})
		add(put, "bucket", []string{sub})
		add(del, "bucket", []string{sub})
	}
	for _, sub := range []string{"versioning", "notification", "object-lock", "acl", "accelerate", "requestPayment", "logging"} {
		add(get, "bucket", []string{sub})
		add(put, "bucket", []string{sub})
	}
	for _, sub := range []string{"intelligent-tiering", "analytics", "inventory", "metrics"} {
		add(get, "bucket", []string{sub}, "id")
		add(put, "bucket", []string{sub, "id"})
		add(del, "bucket", []string{sub, "id"})
	}
	read := []string{"versionId", "partNumber", "response-content-type", "response-cache-control"}
	add(get, "object", nil, read...)
	add(head, "object", nil, read...)
	add(put, "object", nil)
	add(del, "object", nil, "versionId")
	apis = append(apis, diffAPI{method: put, target: "object", copy: true})
	add(post, "object", []string{"uploads"})
	add(put, "object", []string{"partNumber", "uploadId"})
	apis = append(apis, diffAPI{method: put, target: "object", selector: []string{"partNumber", "uploadId"}, copy: true})
	add(get, "object", []string{"uploadId"}, "max-parts", "part-number-marker", "encoding-type")
	add(post, "object", []string{"uploadId"})
	add(del, "object", []string{"uploadId"})
	for _, sub := range []string{"tagging", "acl", "retention", "legal-hold"} {
		add(get, "object", []string{sub}, "versionId")
		add(put, "object", []string{sub}, "versionId")
	}
	add(del, "object", []string{"tagging"}, "versionId")
	add(get, "object", []string{"attributes"}, "versionId")
	add(post, "object", []string{"restore"}, "versionId")
	add(post, "object", []string{"select", "select-type=2"})
	add(get, "object", []string{"torrent"})
	add(get, "object", []string{"lambdaArn"})
	return apis
}
