//go:build e2e

package e2e

import (
	"encoding/xml"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// listingAnswer is what a listing says, whichever listing it is: the
// elements the four bucket listings share, and their entries.
type listingAnswer struct {
	XMLName        xml.Name
	Name           string   `xml:"Name"`
	Bucket         string   `xml:"Bucket"`
	Prefix         string   `xml:"Prefix"`
	Delimiter      string   `xml:"Delimiter"`
	Marker         string   `xml:"Marker"`
	NextMarker     string   `xml:"NextMarker"`
	StartAfter     string   `xml:"StartAfter"`
	KeyMarker      string   `xml:"KeyMarker"`
	UploadIDMarker string   `xml:"UploadIdMarker"`
	KeyCount       int      `xml:"KeyCount"`
	IsTruncated    bool     `xml:"IsTruncated"`
	Keys           []string `xml:"Contents>Key"`
	Versions       []string `xml:"Version>Key"`
	Uploads        []string `xml:"Upload>Key"`
	CommonPrefixes []string `xml:"CommonPrefixes>Prefix"`
	Code           string   `xml:"Code"`
}

// TestListingControlCharacters sends the listings of ceph's s3-tests that
// put a line break in a delimiter, prefix, marker or start-after
// (test_bucket_list_delimiter_unreadable, test_bucket_listv2_delimiter_unreadable,
// test_bucket_listv2_prefix_unreadable, test_bucket_list_marker_unreadable,
// test_bucket_listv2_startafter_unreadable), and the same in the other
// listings' filters, through sweepgate and to MinIO alone, and requires
// the same answers: status, keys, common prefixes and what the listing
// echoes. A line break in a parameter that selects the operation is still
// refused by the gateway.
func TestListingControlCharacters(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	keys := []string{"bar", "baz", "cab", "foo", "dir/bar", "quux", "a\nb", "a\nc", "x\ty"}
	for _, k := range keys {
		putData(t, direct, bucket, k, harness.NewData(uint64(len(k)), 16))
	}
	sdk := e.SDK(t)
	for _, k := range []string{"up\n1", "up\n2", "up/x"} {
		if _, err := sdk.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(k)}); err != nil {
			t.Fatalf("CreateMultipartUpload %q through the gateway: %v", k, err)
		}
	}

	hc := e.HTTPClient(t)
	list := func(t *testing.T, endpoint, accessKey, secretKey, rawQuery string) (int, listingAnswer) {
		t.Helper()
		req := newRequest(t, http.MethodGet, objectURL(endpoint, bucket, "")+"?"+rawQuery, nil)
		if err := harness.SignV4(t.Context(), req, accessKey, secretKey, e.Region, harness.EmptySHA256, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp := do(t, hc, req)
		body := requireStatus(t, resp, resp.StatusCode)
		var a listingAnswer
		if err := xml.Unmarshal(body, &a); err != nil {
			t.Fatalf("GET ?%s at %s: %s, body does not decode: %v\n%s", rawQuery, endpoint, resp.Status, err, body)
		}
		return resp.StatusCode, a
	}

	for _, tc := range listingControlCases(len(keys)) {
		t.Run(tc.name, func(t *testing.T) {
			gs, ga := list(t, e.Endpoint, e.AccessKey, e.SecretKey, tc.rawQuery)
			ms, ma := list(t, e.MinIO.Endpoint, e.MinIO.AccessKey, e.MinIO.SecretKey, tc.rawQuery)
			if gs != ms || !listingsEqual(ga, ma) {
				t.Fatalf("GET /%s?%s\n through sweepgate: %d %+v\n MinIO alone:      %d %+v", bucket, tc.rawQuery, gs, ga, ms, ma)
			}
			if gs != http.StatusOK && ga.Code == "" {
				t.Fatalf("GET ?%s: %d without an error code", tc.rawQuery, gs)
			}
			if !tc.want(ga) {
				t.Fatalf("GET ?%s: %d %+v is not what the listing should say", tc.rawQuery, gs, ga)
			}
			t.Logf("GET ?%s: %d, %d keys, %d versions, %d uploads, common prefixes %q, on both", tc.rawQuery, gs, len(ga.Keys), len(ga.Versions), len(ga.Uploads), ga.CommonPrefixes)
		})
	}

	// A client library sends them as it encodes them.
	t.Run("aws-sdk-go-v2", func(t *testing.T) { listingControlSDK(t, sdk, direct, bucket) })

	if e.Gateway == nil {
		return
	}
	// The parameters that select an operation: MinIO's router does not
	// see them across a line break, so the gateway refuses them.
	for _, rawQuery := range []string{"list-type=2%0A&prefix=a", "uploads=%0A&delimiter=%0A", "versions=%0D", "list-type=2&encoding-type=url%0A"} {
		t.Run("refused "+rawQuery, func(t *testing.T) {
			req := signed(t, e, newRequest(t, http.MethodGet, objectURL(e.Endpoint, bucket, "")+"?"+rawQuery, nil), harness.EmptySHA256)
			er := requireS3Error(t, do(t, hc, req), http.StatusBadRequest, "InvalidArgument")
			if !strings.Contains(er.Message, "control character") {
				t.Fatalf("GET ?%s: refused with %q, which does not name the control character", rawQuery, er.Message)
			}
		})
	}
}

// listingControlCase is a listing with control characters in its
// filters, and a check of its answer beyond its being MinIO's.
type listingControlCase struct {
	name, rawQuery string
	want           func(listingAnswer) bool
}

// listingControlCases are TestListingControlCharacters' listings of a
// bucket holding keyCount objects.
func listingControlCases(keyCount int) []listingControlCase {
	return []listingControlCase{
		{"test_bucket_list_delimiter_unreadable", "delimiter=%0A", func(a listingAnswer) bool {
			return a.Delimiter == "\n" && slices.Contains(a.CommonPrefixes, "a\n") && slices.Contains(a.Keys, "bar") && !slices.Contains(a.Keys, "a\nb")
		}},
		{"test_bucket_listv2_delimiter_unreadable", "list-type=2&delimiter=%0A", func(a listingAnswer) bool {
			return a.Delimiter == "\n" && slices.Contains(a.CommonPrefixes, "a\n") && slices.Contains(a.Keys, "foo")
		}},
		{"test_bucket_listv2_prefix_unreadable", "list-type=2&prefix=%0A", func(a listingAnswer) bool {
			return a.Prefix == "\n" && len(a.Keys) == 0 && len(a.CommonPrefixes) == 0
		}},
		{"test_bucket_list_marker_unreadable", "marker=%0A", func(a listingAnswer) bool {
			return a.Marker == "\n" && len(a.Keys) == keyCount
		}},
		{"test_bucket_listv2_startafter_unreadable", "list-type=2&start-after=%0A", func(a listingAnswer) bool {
			return a.StartAfter == "\n" && len(a.Keys) == keyCount
		}},
		{"ListObjectsV2 prefix with a line break", "list-type=2&prefix=a%0A", func(a listingAnswer) bool {
			return slices.Equal(a.Keys, []string{"a\nb", "a\nc"})
		}},
		{"ListObjects prefix with a tab", "prefix=x%09", func(a listingAnswer) bool { return slices.Equal(a.Keys, []string{"x\ty"}) }},
		{"ListObjectVersions delimiter and key-marker", "versions&delimiter=%0A&key-marker=%0A", func(a listingAnswer) bool {
			return slices.Contains(a.CommonPrefixes, "a\n") && slices.Contains(a.Versions, "bar")
		}},
		// MinIO lists uploads without grouping them by a delimiter.
		{"ListMultipartUploads delimiter", "uploads&delimiter=%0A", func(a listingAnswer) bool {
			return a.Delimiter == "\n" && slices.Equal(a.Uploads, []string{"up\n1", "up\n2", "up/x"})
		}},
		// MinIO lists the uploads of the one key a prefix names.
		{"ListMultipartUploads prefix", "uploads&prefix=up%0A1", func(a listingAnswer) bool {
			return a.Prefix == "up\n1" && slices.Equal(a.Uploads, []string{"up\n1"})
		}},
		{"ListMultipartUploads prefix of two keys", "uploads&prefix=up%0A", func(a listingAnswer) bool { return a.Prefix == "up\n" }},
		// Whatever MinIO answers (it refuses a key-marker outside the
		// prefix as NotImplemented), the gateway answers the same.
		{"ListMultipartUploads prefix and key-marker", "uploads&prefix=up%0A&key-marker=up%0A1", func(listingAnswer) bool { return true }},
		{"ListMultipartUploads key-marker outside the prefix", "uploads&prefix=up%0A&key-marker=%0A", func(listingAnswer) bool { return true }},
		{"ListMultipartUploads upload-id-marker", "uploads&key-marker=up%0A1&upload-id-marker=%0A", func(listingAnswer) bool { return true }},
	}
}

// listingControlSDK lists with a delimiter of "\n" through aws-sdk-go-v2,
// through sweepgate (sdk) and to MinIO alone (direct), and requires the
// same keys and common prefixes.
func listingControlSDK(t *testing.T, sdk, direct *s3.Client, bucket string) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Delimiter: aws.String("\n")}
	g, err := sdk.ListObjectsV2(t.Context(), in)
	if err != nil {
		t.Fatalf("ListObjectsV2 delimiter \"\\n\" through sweepgate: %v", err)
	}
	m, err := direct.ListObjectsV2(t.Context(), in)
	if err != nil {
		t.Fatalf("ListObjectsV2 delimiter \"\\n\" on MinIO: %v", err)
	}
	keysOf := func(o *s3.ListObjectsV2Output) (ks, ps []string) {
		for _, c := range o.Contents {
			ks = append(ks, aws.ToString(c.Key))
		}
		for _, p := range o.CommonPrefixes {
			ps = append(ps, aws.ToString(p.Prefix))
		}
		return ks, ps
	}
	gk, gp := keysOf(g)
	mk, mp := keysOf(m)
	if !slices.Equal(gk, mk) || !slices.Equal(gp, mp) {
		t.Fatalf("through sweepgate: keys %q prefixes %q; MinIO alone: keys %q prefixes %q", gk, gp, mk, mp)
	}
}

// listingsEqual reports whether two listings say the same.
func listingsEqual(a, b listingAnswer) bool {
	return a.XMLName == b.XMLName && a.Name == b.Name && a.Bucket == b.Bucket && a.Prefix == b.Prefix &&
		a.Delimiter == b.Delimiter && a.Marker == b.Marker && a.NextMarker == b.NextMarker && a.StartAfter == b.StartAfter &&
		a.KeyMarker == b.KeyMarker && a.UploadIDMarker == b.UploadIDMarker && a.KeyCount == b.KeyCount &&
		a.IsTruncated == b.IsTruncated && slices.Equal(a.Keys, b.Keys) && slices.Equal(a.Versions, b.Versions) &&
		slices.Equal(a.Uploads, b.Uploads) && slices.Equal(a.CommonPrefixes, b.CommonPrefixes) && a.Code == b.Code
}
