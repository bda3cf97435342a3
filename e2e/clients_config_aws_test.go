//go:build e2e

package e2e

// TestClientsConfig's aws CLI calls.

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// awsCLIBucketConfig sets and reads back, with aws s3api, a bucket's
// tagging, versioning and ACL, and asks for its location.
func awsCLIBucketConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	a := newAWSRunner(t, e)
	bucket := e.Bucket(t)
	s3api := func(op string, args ...string) []string {
		return append([]string{"s3api", op, "--bucket", bucket}, args...)
	}

	a.run(t, s3api("head-bucket")...)
	var loc struct{ LocationConstraint *string }
	a.json(t, &loc, s3api("get-bucket-location")...)
	if l := aws.ToString(loc.LocationConstraint); l != "" && l != e.Region {
		t.Fatalf("get-bucket-location: %q, want empty or %q", l, e.Region)
	}

	// Tagging.
	a.run(t, s3api("put-bucket-tagging", "--tagging", `{"TagSet":[{"Key":"team","Value":"storage"},{"Key":"env","Value":"e2e"}]}`)...)
	var ts awsTagSet
	a.json(t, &ts, s3api("get-bucket-tagging")...)
	if want := map[string]string{"team": "storage", "env": "e2e"}; !maps.Equal(ts.toMap(), want) {
		t.Fatalf("get-bucket-tagging: %v, want %v", ts.toMap(), want)
	}
	a.run(t, s3api("delete-bucket-tagging")...)
	requireBackendBucketTags(t, direct, bucket, nil)

	// Versioning.
	a.run(t, s3api("put-bucket-versioning", "--versioning-configuration", "Status=Enabled")...)
	var ver struct{ Status string }
	a.json(t, &ver, s3api("get-bucket-versioning")...)
	if ver.Status != "Enabled" {
		t.Fatalf("get-bucket-versioning after enabling it: %q", ver.Status)
	}
	requireBackendVersioning(t, direct, bucket, s3types.BucketVersioningStatusEnabled)

	// ACL.
	var acl awsGrants
	a.json(t, &acl, s3api("get-bucket-acl")...)
	acl.requireOwnerOnly(t, "get-bucket-acl")
	a.run(t, s3api("put-bucket-acl", "--acl", "private")...)
	requireBackendPrivateACL(t, direct, bucket, "")
}

// awsCLIBucketPolicyLifecycle sets, reads back and deletes a bucket's
// lifecycle and policy with aws s3api, and asks for the policy's status.
func awsCLIBucketPolicyLifecycle(t *testing.T, e *harness.Env, direct *s3.Client) {
	a := newAWSRunner(t, e)
	bucket := e.Bucket(t)
	s3api := func(op string, args ...string) []string {
		return append([]string{"s3api", op, "--bucket", bucket}, args...)
	}

	// Lifecycle.
	a.run(t, s3api("put-bucket-lifecycle-configuration", "--lifecycle-configuration",
		`{"Rules":[{"ID":"expire-tmp","Status":"Enabled","Filter":{"Prefix":"tmp/"},"Expiration":{"Days":7}}]}`)...)
	var lc struct {
		Rules []struct {
			ID, Status string
			Filter     struct{ Prefix string }
			Expiration struct{ Days int }
		}
	}
	a.json(t, &lc, s3api("get-bucket-lifecycle-configuration")...)
	if len(lc.Rules) != 1 || lc.Rules[0].ID != "expire-tmp" || lc.Rules[0].Status != "Enabled" ||
		lc.Rules[0].Filter.Prefix != "tmp/" || lc.Rules[0].Expiration.Days != 7 {
		t.Fatalf("get-bucket-lifecycle-configuration: %+v", lc.Rules)
	}
	a.run(t, s3api("delete-bucket-lifecycle")...)
	requireBackendNoLifecycle(t, direct, bucket)

	// Policy and its status.
	a.run(t, s3api("put-bucket-policy", "--policy", publicPolicy(bucket))...)
	var pol struct{ Policy string }
	a.json(t, &pol, s3api("get-bucket-policy")...)
	requirePublicPolicy(t, pol.Policy, bucket)
	// MinIO writes IsPublic as TRUE, which botocore reads as false (it
	// takes only "true" for true), so the aws CLI prints false with or
	// without the gateway: what MinIO answered is checked in the response
	// body --debug shows.
	if _, stderr, err := tryCLI(t, a.c, append([]string{"--endpoint-url", a.endpoint, "--debug"}, s3api("get-bucket-policy-status")...)...); err != nil ||
		!strings.Contains(stderr, "<IsPublic>TRUE</IsPublic>") {
		t.Fatalf("get-bucket-policy-status with a public policy: %v; the response body does not say <IsPublic>TRUE</IsPublic>:\n%s", err, excerptCLI(stderr, "PolicyStatus"))
	}
	a.run(t, s3api("delete-bucket-policy")...)
	requireBackendPolicy(t, direct, bucket, false)
}

// awsCLIObjects writes objects with aws s3api in a versioned bucket and
// uses their ranges, tagging, ACL and attributes, lists them with
// ListObjects, ListObjectsV2 (prefix, delimiter, max-keys, fetch-owner,
// continuation token) and ListObjectVersions, and deletes a key and an
// older version in one DeleteObjects.
func awsCLIObjects(t *testing.T, e *harness.Env, direct *s3.Client) {
	a := newAWSRunner(t, e)
	bucket := e.Bucket(t)
	s3api := func(op string, args ...string) []string {
		return append([]string{"s3api", op, "--bucket", bucket}, args...)
	}
	if _, err := direct.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("PutBucketVersioning on the backend: %v", err)
	}
	a1, a2 := harness.NewData(900, 700), harness.NewData(901, 1500)
	a1.WriteFile(t, filepath.Join(a.c.dir, "a1"))
	a2.WriteFile(t, filepath.Join(a.c.dir, "a2"))
	putData(t, direct, bucket, "docs/sub/d.txt", harness.NewData(902, 20))
	putData(t, direct, bucket, "other/c.txt", harness.NewData(903, 30))

	var v1, v2 awsPutOut
	a.json(t, &v1, s3api("put-object", "--key", "docs/a.txt", "--body", "a1")...)
	a.json(t, &v2, s3api("put-object", "--key", "docs/a.txt", "--body", "a2", "--content-type", "text/plain", "--metadata", "owner=aws-cli")...)
	if v1.VersionId == "" || v2.VersionId == "" || v1.VersionId == v2.VersionId {
		t.Fatalf("put-object in a versioned bucket: version ids %q and %q", v1.VersionId, v2.VersionId)
	}
	requireObject(t, direct, bucket, "docs/a.txt", a2)

	var head struct {
		ContentLength int64
		ContentType   string
		VersionId     string
		Metadata      map[string]string
	}
	a.json(t, &head, s3api("head-object", "--key", "docs/a.txt")...)
	if head.ContentLength != a2.Size || head.VersionId != v2.VersionId || head.ContentType != "text/plain" || head.Metadata["owner"] != "aws-cli" {
		t.Fatalf("head-object docs/a.txt: %+v", head)
	}
	var get struct {
		ContentLength int64
		ContentRange  string
	}
	a.json(t, &get, s3api("get-object", "--key", "docs/a.txt", "--range", "bytes=100-199", "a2-range")...)
	if got, err := os.ReadFile(filepath.Join(a.c.dir, "a2-range")); err != nil || !bytes.Equal(got, a2.Range(100, 100)) {
		t.Fatalf("get-object --range bytes=100-199: %d bytes that differ (%v)", len(got), err)
	}
	if want := fmt.Sprintf("bytes 100-199/%d", a2.Size); get.ContentRange != want || get.ContentLength != 100 {
		t.Fatalf("get-object --range bytes=100-199: Content-Range %q, length %d; want %q, 100", get.ContentRange, get.ContentLength, want)
	}

	// Object tagging.
	a.run(t, s3api("put-object-tagging", "--key", "docs/a.txt", "--tagging", `{"TagSet":[{"Key":"class","Value":"hot"}]}`)...)
	var ts awsTagSet
	a.json(t, &ts, s3api("get-object-tagging", "--key", "docs/a.txt")...)
	if want := map[string]string{"class": "hot"}; !maps.Equal(ts.toMap(), want) {
		t.Fatalf("get-object-tagging: %v, want %v", ts.toMap(), want)
	}
	a.run(t, s3api("delete-object-tagging", "--key", "docs/a.txt")...)
	requireBackendObjectTags(t, direct, bucket, "docs/a.txt", map[string]string{})

	// Object ACL.
	var acl awsGrants
	a.json(t, &acl, s3api("get-object-acl", "--key", "docs/a.txt")...)
	acl.requireOwnerOnly(t, "get-object-acl")
	a.run(t, s3api("put-object-acl", "--key", "docs/a.txt", "--acl", "private")...)
	requireBackendPrivateACL(t, direct, bucket, "docs/a.txt")

	awsCLIListings(t, a, bucket, v1, v2, a1.Size, a2.Size)
	awsCLIDeleteObjects(t, a, direct, bucket, v1.VersionId, a2)
}

// awsPutOut is what the aws CLI's put-object prints.
type awsPutOut struct{ ETag, VersionId string }

// awsCLIListings lists bucket with the aws CLI's list-objects-v2,
// list-objects and list-object-versions, paginated and with a delimiter;
// docs/a.txt has the versions v1 and v2, of size1 and size2 bytes.
func awsCLIListings(t *testing.T, a *awsRunner, bucket string, v1, v2 awsPutOut, size1, size2 int64) {
	s3api := func(op string, args ...string) []string {
		return append([]string{"s3api", op, "--bucket", bucket}, args...)
	}
	type listing struct {
		Contents []struct {
			Key   string
			Owner *struct{ ID string }
		}
		CommonPrefixes        []struct{ Prefix string }
		IsTruncated           bool
		NextContinuationToken string
	}
	list := func(args ...string) listing {
		t.Helper()
		var l listing
		a.json(t, &l, s3api(args[0], args[1:]...)...)
		return l
	}
	names := func(l listing) []string {
		var ks []string
		for _, c := range l.Contents {
			ks = append(ks, c.Key)
		}
		for _, p := range l.CommonPrefixes {
			ks = append(ks, p.Prefix+" (prefix)")
		}
		return ks
	}
	if l := list("list-objects", "--prefix", "docs/", "--delimiter", "/"); !slices.Equal(names(l), []string{"docs/a.txt", "docs/sub/ (prefix)"}) || l.IsTruncated {
		t.Fatalf("list-objects --prefix docs/ --delimiter /: %v truncated=%v, want [docs/a.txt docs/sub/ (prefix)]", names(l), l.IsTruncated)
	}
	first := list("list-objects-v2", "--prefix", "docs/", "--max-keys", "1", "--fetch-owner", "--no-paginate")
	if !slices.Equal(names(first), []string{"docs/a.txt"}) || !first.IsTruncated || first.NextContinuationToken == "" || first.Contents[0].Owner == nil {
		t.Fatalf("list-objects-v2 --prefix docs/ --max-keys 1 --fetch-owner: %v truncated=%v token %q; want [docs/a.txt] with its owner, truncated, with a token",
			names(first), first.IsTruncated, first.NextContinuationToken)
	}
	if next := list("list-objects-v2", "--prefix", "docs/", "--delimiter", "/", "--continuation-token", first.NextContinuationToken, "--no-paginate"); !slices.Equal(names(next), []string{"docs/sub/ (prefix)"}) || next.IsTruncated {
		t.Fatalf("list-objects-v2 --prefix docs/ --delimiter / --continuation-token: %v truncated=%v, want [docs/sub/ (prefix)]", names(next), next.IsTruncated)
	}
	var versions struct {
		Versions []struct {
			Key, VersionId string
			IsLatest       bool
			Size           int64
		}
	}
	a.json(t, &versions, s3api("list-object-versions", "--prefix", "docs/a.txt")...)
	var vs []string
	for _, v := range versions.Versions {
		vs = append(vs, fmt.Sprintf("%s %s %d latest=%v", v.Key, v.VersionId, v.Size, v.IsLatest))
	}
	if want := []string{
		fmt.Sprintf("docs/a.txt %s %d latest=true", v2.VersionId, size2),
		fmt.Sprintf("docs/a.txt %s %d latest=false", v1.VersionId, size1),
	}; !slices.Equal(vs, want) {
		t.Fatalf("list-object-versions --prefix docs/a.txt:\n%s\nwant\n%s", strings.Join(vs, "\n"), strings.Join(want, "\n"))
	}
}

// awsCLIDeleteObjects deletes other/c.txt and the version oldVersion of
// docs/a.txt of bucket in one delete-objects with the aws CLI; docs/a.txt
// must then still hold latest.
func awsCLIDeleteObjects(t *testing.T, a *awsRunner, direct *s3.Client, bucket, oldVersion string, latest harness.Data) {
	s3api := func(op string, args ...string) []string {
		return append([]string{"s3api", op, "--bucket", bucket}, args...)
	}
	var del struct {
		Deleted []struct{ Key, VersionId string }
		Errors  []any
	}
	a.json(t, &del, s3api("delete-objects", "--delete",
		fmt.Sprintf(`{"Objects":[{"Key":"other/c.txt"},{"Key":"docs/a.txt","VersionId":%q}]}`, oldVersion))...)
	var deleted []string
	for _, d := range del.Deleted {
		deleted = append(deleted, d.Key+" "+d.VersionId)
	}
	sort.Strings(deleted)
	if want := []string{"docs/a.txt " + oldVersion, "other/c.txt "}; len(del.Errors) != 0 || !slices.Equal(deleted, want) {
		t.Fatalf("delete-objects: deleted %q errors %v, want %q", deleted, del.Errors, want)
	}
	requireAbsent(t, direct, bucket, "other/c.txt")
	_, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("docs/a.txt"), VersionId: aws.String(oldVersion)})
	requireBackendError(t, "HeadObject of the deleted version", err, "NotFound", "NoSuchVersion")
	requireObject(t, direct, bucket, "docs/a.txt", latest)
}

// awsCLITransfers uses the aws CLI's high-level commands (cp of a file
// large enough to go multipart, sync, presign, rm --recursive, which
// deletes key by key) and the s3api multipart and part calls: the
// object cp uploaded is read by part number and its parts counted with
// get-object-attributes, and an upload made with create-multipart-upload
// is listed and aborted.
func awsCLITransfers(t *testing.T, e *harness.Env, direct *s3.Client) {
	a := newAWSRunner(t, e)
	bucket := e.Bucket(t)
	s3api := func(op string, args ...string) []string {
		return append([]string{"s3api", op, "--bucket", bucket}, args...)
	}

	// The CLI's default multipart_chunksize is 8 MiB: two parts.
	big := harness.NewData(920, 12*mib+7)
	big.WriteFile(t, filepath.Join(a.c.dir, "big.bin"))
	a.run(t, "s3", "cp", "big.bin", "s3://"+bucket+"/big/big.bin")
	requireMultipartETag(t, direct, bucket, "big/big.bin")
	requireObject(t, direct, bucket, "big/big.bin", big)
	var part struct {
		ContentLength int64
		PartsCount    int
	}
	a.json(t, &part, s3api("get-object", "--key", "big/big.bin", "--part-number", "2", "part2")...)
	if part.ContentLength != 4*mib+7 || part.PartsCount != 2 {
		t.Fatalf("get-object --part-number 2: %+v, want %d bytes of 2 parts", part, 4*mib+7)
	}
	if got, err := os.ReadFile(filepath.Join(a.c.dir, "part2")); err != nil || !bytes.Equal(got, big.Range(8*mib, 4*mib+7)) {
		t.Fatalf("get-object --part-number 2: %d bytes that differ (%v)", len(got), err)
	}
	var attrs struct {
		ETag        string
		ObjectSize  int64
		ObjectParts struct{ TotalPartsCount int }
	}
	a.json(t, &attrs, s3api("get-object-attributes", "--key", "big/big.bin", "--object-attributes", "ETag", "ObjectSize", "ObjectParts")...)
	if attrs.ObjectSize != big.Size || attrs.ObjectParts.TotalPartsCount != 2 || !strings.HasSuffix(attrs.ETag, "-2") {
		t.Fatalf("get-object-attributes big/big.bin: %+v, want %d bytes in 2 parts", attrs, big.Size)
	}

	// An upload created, listed and aborted with s3api. MinIO lists the
	// uploads of the key the prefix names exactly.
	var created struct{ UploadId string }
	a.json(t, &created, s3api("create-multipart-upload", "--key", "mp/abandoned.bin")...)
	var uploads struct {
		Uploads []struct{ Key, UploadId string }
	}
	a.json(t, &uploads, s3api("list-multipart-uploads", "--prefix", "mp/abandoned.bin")...)
	if len(uploads.Uploads) != 1 || uploads.Uploads[0].UploadId != created.UploadId || uploads.Uploads[0].Key != "mp/abandoned.bin" {
		t.Fatalf("list-multipart-uploads --prefix mp/abandoned.bin: %+v, want upload %s", uploads.Uploads, created.UploadId)
	}
	a.run(t, s3api("abort-multipart-upload", "--key", "mp/abandoned.bin", "--upload-id", created.UploadId)...)
	requireBackendUploads(t, direct, bucket, "mp/abandoned.bin")

	up := filepath.Join(a.c.dir, "up")
	files := map[string]harness.Data{
		"a.txt":       harness.NewData(921, 100),
		"b/c.txt":     harness.NewData(922, 2*kib),
		"b/d/e.bin":   harness.NewData(923, 64*kib),
		"b/d/f g.bin": harness.NewData(924, 1),
	}
	for name, d := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(up, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		d.WriteFile(t, filepath.Join(up, name))
	}
	a.run(t, "s3", "sync", "up", "s3://"+bucket+"/sync")
	for name, d := range files {
		requireObject(t, direct, bucket, "sync/"+name, d)
	}

	url := strings.TrimSpace(a.run(t, "s3", "presign", "s3://"+bucket+"/sync/b/c.txt", "--expires-in", "300"))
	if got := httpGetBody(t, e.HTTPClient(t), url); !bytes.Equal(got, files["b/c.txt"].Bytes()) {
		t.Fatalf("GET of the URL aws s3 presign made returned %d bytes that differ", len(got))
	}

	a.run(t, "s3", "rm", "--recursive", "s3://"+bucket+"/sync/")
	for name := range files {
		requireAbsent(t, direct, bucket, "sync/"+name)
	}
	requireObject(t, direct, bucket, "big/big.bin", big)
}
