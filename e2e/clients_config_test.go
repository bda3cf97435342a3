//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
	"github.com/minio/minio-go/v7/pkg/tags"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestClientsConfig drives ordinary S3 use through the gateway in its
// default configuration (no digest namespaces or sources, so no key is
// protected) with real clients: the aws CLI, s3cmd, rclone, minio-go,
// aws-sdk-go-v2 and boto3. Besides objects and transfers it sets and reads
// back bucket configurations (tagging, versioning, lifecycle, policy,
// ACL) and object configurations (tagging, ACL), lists with prefixes,
// delimiters and page sizes, deletes in batches and uses presigned URLs,
// checking each answer and, where a client cannot show it, the backend.
// A call the gateway refuses fails the test, also when the client shrugs
// the refusal off: afterwards the gateway's log must hold no request it
// labelled Unsupported (refused before it reached the backend). With
// SWEEPGATE_E2E_TARGET=minio the same calls run against MinIO itself,
// which is how a call MinIO does not serve is told apart from one the
// gateway refuses.
func TestClientsConfig(t *testing.T) {
	e := harness.Start(t)
	direct := e.DirectSDK(t)
	t.Run("clients", func(t *testing.T) {
		t.Run("aws-cli", func(t *testing.T) {
			t.Parallel()
			t.Run("bucket-configuration", func(t *testing.T) { t.Parallel(); awsCLIBucketConfig(t, e, direct) })
			t.Run("bucket-policy-lifecycle", func(t *testing.T) { t.Parallel(); awsCLIBucketPolicyLifecycle(t, e, direct) })
			t.Run("objects", func(t *testing.T) { t.Parallel(); awsCLIObjects(t, e, direct) })
			t.Run("transfers", func(t *testing.T) { t.Parallel(); awsCLITransfers(t, e, direct) })
		})
		t.Run("s3cmd", func(t *testing.T) { t.Parallel(); s3cmdConfig(t, e, direct) })
		t.Run("rclone", func(t *testing.T) { t.Parallel(); rcloneConfig(t, e, direct) })
		t.Run("minio-go", func(t *testing.T) { t.Parallel(); minioGoConfig(t, e, direct) })
		t.Run("aws-sdk-go-v2", func(t *testing.T) { t.Parallel(); sdkConfig(t, e, direct) })
		t.Run("boto3", func(t *testing.T) { t.Parallel(); boto3Config(t, e, direct) })
	})
	if e.Gateway == nil {
		return
	}
	var refused []string
	for line := range strings.SplitSeq(e.Gateway.Log(), "\n") {
		if strings.Contains(line, `"msg":"request"`) && strings.Contains(line, `"op":"Unsupported"`) {
			refused = append(refused, line)
		}
	}
	if len(refused) > 0 {
		t.Fatalf("the gateway refused %d requests of ordinary client use as Unsupported:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}

// publicPolicy is a bucket policy that lets anyone list bucket and read
// and write its objects: what MinIO's GetBucketPolicyStatus calls public.
// MinIO asks whether an anonymous ListBucket and PutObject on the bucket
// itself, with no object name, would be allowed, which a resource
// arn:aws:s3:::BUCKET/* does not match: the object statement names
// arn:aws:s3:::BUCKET* instead.
func publicPolicy(bucket string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[`+
		`{"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:ListBucket"],"Resource":["arn:aws:s3:::%[1]s"]},`+
		`{"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:GetObject","s3:PutObject"],"Resource":["arn:aws:s3:::%[1]s*"]}]}`, bucket)
}

// policyStatements reduces a bucket policy document to sorted
// "Effect Action Resource" lines, whether the document writes Action and
// Resource as strings or lists.
func policyStatements(t *testing.T, doc string) []string {
	t.Helper()
	var p struct {
		Statement []struct {
			Effect   string
			Action   json.RawMessage
			Resource json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatalf("bucket policy %q: %v", doc, err)
	}
	list := func(raw json.RawMessage) []string {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			return []string{one}
		}
		var many []string
		if err := json.Unmarshal(raw, &many); err != nil {
			t.Fatalf("bucket policy %q: %v", doc, err)
		}
		return many
	}
	var out []string
	for _, s := range p.Statement {
		for _, a := range list(s.Action) {
			for _, r := range list(s.Resource) {
				out = append(out, s.Effect+" "+a+" "+r)
			}
		}
	}
	sort.Strings(out)
	return out
}

// requirePublicPolicy checks that doc is publicPolicy(bucket).
func requirePublicPolicy(t *testing.T, doc, bucket string) {
	t.Helper()
	want := []string{
		"Allow s3:GetObject arn:aws:s3:::" + bucket + "*",
		"Allow s3:ListBucket arn:aws:s3:::" + bucket,
		"Allow s3:PutObject arn:aws:s3:::" + bucket + "*",
	}
	if got := policyStatements(t, doc); !slices.Equal(got, want) {
		t.Fatalf("bucket policy %s: statements %v, want %v", doc, got, want)
	}
}

// requireBackendError checks that a call to the backend failed with one
// of codes.
func requireBackendError(t *testing.T, what string, err error, codes ...string) {
	t.Helper()
	if code := apiErrorCode(err); !slices.Contains(codes, code) {
		t.Fatalf("%s on the backend: %v, want %s", what, err, strings.Join(codes, " or "))
	}
}

// requireBackendBucketTags checks on the backend that bucket carries
// exactly want (no tag set at all when want is empty).
func requireBackendBucketTags(t *testing.T, direct *s3.Client, bucket string, want map[string]string) {
	t.Helper()
	out, err := direct.GetBucketTagging(t.Context(), &s3.GetBucketTaggingInput{Bucket: aws.String(bucket)})
	if len(want) == 0 {
		requireBackendError(t, "GetBucketTagging "+bucket, err, "NoSuchTagSet")
		return
	}
	if err != nil {
		t.Fatalf("GetBucketTagging %s on the backend: %v", bucket, err)
	}
	got := map[string]string{}
	for _, tag := range out.TagSet {
		got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("bucket %s has tags %v on the backend, want %v", bucket, got, want)
	}
}

// requireBackendVersioning checks on the backend the versioning status of
// bucket.
func requireBackendVersioning(t *testing.T, direct *s3.Client, bucket string, want s3types.BucketVersioningStatus) {
	t.Helper()
	out, err := direct.GetBucketVersioning(t.Context(), &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("GetBucketVersioning %s on the backend: %v", bucket, err)
	}
	if out.Status != want {
		t.Fatalf("bucket %s has versioning %q on the backend, want %q", bucket, out.Status, want)
	}
}

// requireBackendObjectTags checks on the backend the tags of bucket/key.
func requireBackendObjectTags(t *testing.T, direct *s3.Client, bucket, key string, want map[string]string) {
	t.Helper()
	out, err := direct.GetObjectTagging(t.Context(), &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObjectTagging %s/%s on the backend: %v", bucket, key, err)
	}
	got := map[string]string{}
	for _, tag := range out.TagSet {
		got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s/%s has tags %v on the backend, want %v", bucket, key, got, want)
	}
}

// requireBackendPolicy checks on the backend that bucket has
// publicPolicy(bucket), or no policy when present is false.
func requireBackendPolicy(t *testing.T, direct *s3.Client, bucket string, present bool) {
	t.Helper()
	out, err := direct.GetBucketPolicy(t.Context(), &s3.GetBucketPolicyInput{Bucket: aws.String(bucket)})
	if !present {
		requireBackendError(t, "GetBucketPolicy "+bucket, err, "NoSuchBucketPolicy")
		return
	}
	if err != nil {
		t.Fatalf("GetBucketPolicy %s on the backend: %v", bucket, err)
	}
	requirePublicPolicy(t, aws.ToString(out.Policy), bucket)
}

// requireBackendNoLifecycle checks that bucket has no lifecycle
// configuration on the backend.
func requireBackendNoLifecycle(t *testing.T, direct *s3.Client, bucket string) {
	t.Helper()
	_, err := direct.GetBucketLifecycleConfiguration(t.Context(), &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	requireBackendError(t, "GetBucketLifecycleConfiguration "+bucket, err, "NoSuchLifecycleConfiguration")
}

// requireBackendPrivateACL checks on the backend that the ACL of bucket
// (or of bucket/key) grants FULL_CONTROL to its owner and nothing else.
func requireBackendPrivateACL(t *testing.T, direct *s3.Client, bucket, key string) {
	t.Helper()
	var grants []s3types.Grant
	if key == "" {
		out, err := direct.GetBucketAcl(t.Context(), &s3.GetBucketAclInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatalf("GetBucketAcl %s on the backend: %v", bucket, err)
		}
		grants = out.Grants
	} else {
		out, err := direct.GetObjectAcl(t.Context(), &s3.GetObjectAclInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GetObjectAcl %s/%s on the backend: %v", bucket, key, err)
		}
		grants = out.Grants
	}
	if len(grants) != 1 || grants[0].Permission != s3types.PermissionFullControl || grants[0].Grantee == nil || grants[0].Grantee.URI != nil {
		t.Fatalf("the backend's ACL of %s/%s: %+v, want FULL_CONTROL for the owner only", bucket, key, grants)
	}
}

// requireBackendUploads checks on the backend which uploads of bucket/key
// are in progress. MinIO lists the uploads of exactly the key its prefix
// names, not of every key that starts with it.
func requireBackendUploads(t *testing.T, direct *s3.Client, bucket, key string, want ...string) {
	t.Helper()
	out, err := direct.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(key)})
	if err != nil {
		t.Fatalf("ListMultipartUploads %s/%s on the backend: %v", bucket, key, err)
	}
	var got []string
	for _, u := range out.Uploads {
		got = append(got, aws.ToString(u.UploadId))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("uploads of %s/%s on the backend: %v, want %v", bucket, key, got, want)
	}
}

// httpGetBody GETs url with a plain HTTP client, as a browser or curl
// given a presigned URL would, and returns the body of a 200 answer.
func httpGetBody(t *testing.T, hc *http.Client, url string) []byte {
	t.Helper()
	return requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, url, nil)), http.StatusOK)
}

// tryCLI runs a command-line client like cli.run but returns its failure
// instead of failing the test.
func tryCLI(t *testing.T, c *cli, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, args...)
	cmd.Env = c.env
	cmd.Dir = c.dir
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// awsRunner runs the aws CLI against one endpoint with the env's
// credentials, path-style addressing, JSON output and no retries.
type awsRunner struct {
	c        *cli
	endpoint string
}

// newAWSRunner prepares the aws CLI with a configuration of its own. It
// sets s3.signature_version to s3v4: aws CLI v1 would otherwise make
// `aws s3 presign` URLs with Signature Version 2 (AWSAccessKeyId,
// Signature, Expires), which the gateway refuses as it verifies only
// AWS4-HMAC-SHA256 (aws CLI v2, Debian's awscli, presigns with V4 anyway).
func newAWSRunner(t *testing.T, e *harness.Env) *awsRunner {
	t.Helper()
	c := newCLI(t, requireCLI(t, "aws", "awscli"))
	config := filepath.Join(c.dir, "aws-config")
	if err := os.WriteFile(config, []byte("[default]\nregion = "+e.Region+"\noutput = json\n"+
		"s3 =\n    addressing_style = path\n    signature_version = s3v4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env,
		"AWS_ACCESS_KEY_ID="+e.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+e.SecretKey,
		"AWS_DEFAULT_REGION="+e.Region,
		"AWS_CONFIG_FILE="+config,
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(c.dir, "no-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PAGER=",
		"AWS_MAX_ATTEMPTS=1",
	)
	return &awsRunner{c: c, endpoint: e.Endpoint}
}

// run runs aws with args and returns its standard output.
func (a *awsRunner) run(t *testing.T, args ...string) string {
	t.Helper()
	return a.c.run(t, append([]string{"--endpoint-url", a.endpoint}, args...)...)
}

// json runs aws with args and decodes its JSON output into v.
func (a *awsRunner) json(t *testing.T, v any, args ...string) {
	t.Helper()
	out := a.run(t, args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("aws %s: output is not the JSON expected (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// excerptCLI returns the lines of out around the first that contains
// word (all of out if none does), to keep a failure's message short.
func excerptCLI(out, word string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, word) {
			return strings.Join(lines[max(0, i-5):min(len(lines), i+5)], "\n")
		}
	}
	return out
}

// awsTagSet is the TagSet of the aws CLI's tagging output.
type awsTagSet struct {
	TagSet []struct{ Key, Value string }
}

func (s awsTagSet) toMap() map[string]string {
	m := map[string]string{}
	for _, tag := range s.TagSet {
		m[tag.Key] = tag.Value
	}
	return m
}

// awsGrants is the output of get-bucket-acl and get-object-acl.
type awsGrants struct {
	Grants []struct {
		Grantee    struct{ ID, Type, URI string }
		Permission string
	}
}

// requireOwnerOnly checks that an ACL grants FULL_CONTROL to its owner and
// nothing else, which is what MinIO answers and what "private" means.
func (g awsGrants) requireOwnerOnly(t *testing.T, what string) {
	t.Helper()
	if len(g.Grants) != 1 || g.Grants[0].Permission != "FULL_CONTROL" || g.Grants[0].Grantee.URI != "" {
		t.Fatalf("%s: grants %+v; want FULL_CONTROL for the owner only", what, g.Grants)
	}
}

// The aws CLI starts a Python interpreter for every call, which costs
// about a second of CPU: the aws CLI subtests make each call once, check
// what a delete did on the backend rather than with another call, and
// make the buckets and objects they only need directly on the backend.

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

	type putOut struct{ ETag, VersionId string }
	var v1, v2 putOut
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

	// Listings.
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
		fmt.Sprintf("docs/a.txt %s %d latest=true", v2.VersionId, a2.Size),
		fmt.Sprintf("docs/a.txt %s %d latest=false", v1.VersionId, a1.Size),
	}; !slices.Equal(vs, want) {
		t.Fatalf("list-object-versions --prefix docs/a.txt:\n%s\nwant\n%s", strings.Join(vs, "\n"), strings.Join(want, "\n"))
	}

	// DeleteObjects: one document naming a key and an older version.
	var del struct {
		Deleted []struct{ Key, VersionId string }
		Errors  []any
	}
	a.json(t, &del, s3api("delete-objects", "--delete",
		fmt.Sprintf(`{"Objects":[{"Key":"other/c.txt"},{"Key":"docs/a.txt","VersionId":%q}]}`, v1.VersionId))...)
	var deleted []string
	for _, d := range del.Deleted {
		deleted = append(deleted, d.Key+" "+d.VersionId)
	}
	sort.Strings(deleted)
	if want := []string{"docs/a.txt " + v1.VersionId, "other/c.txt "}; len(del.Errors) != 0 || !slices.Equal(deleted, want) {
		t.Fatalf("delete-objects: deleted %q errors %v, want %q", deleted, del.Errors, want)
	}
	requireAbsent(t, direct, bucket, "other/c.txt")
	_, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("docs/a.txt"), VersionId: aws.String(v1.VersionId)})
	requireBackendError(t, "HeadObject of the deleted version", err, "NotFound", "NoSuchVersion")
	requireObject(t, direct, bucket, "docs/a.txt", a2)
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

// s3cmdConfig drives s3cmd: mb, put (one file multipart, one with
// --acl-private), ls, info of a bucket and an object, get, setacl
// --acl-public and --acl-private, setpolicy and delpolicy, setlifecycle,
// getlifecycle and dellifecycle, del of one key and del --recursive (a
// DeleteObjects), rb.
func s3cmdConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	c := newCLI(t, requireCLI(t, "s3cmd", "s3cmd"))
	host := strings.TrimPrefix(strings.TrimPrefix(e.Endpoint, "http://"), "https://")
	config := filepath.Join(c.dir, "s3cfg")
	if err := os.WriteFile(config, fmt.Appendf(nil, `[default]
access_key = %s
secret_key = %s
host_base = %s
host_bucket = %s
bucket_location = %s
use_https = False
check_ssl_certificate = False
signature_v2 = False
`, e.AccessKey, e.SecretKey, host, host, e.Region), 0o600); err != nil {
		t.Fatal(err)
	}
	s3c := func(args ...string) string { t.Helper(); return c.run(t, append([]string{"-c", config}, args...)...) }
	bucket := harness.BucketName(t)
	s3b := "s3://" + bucket

	s3c("mb", s3b)
	small := harness.NewData(930, 1000)
	small.WriteFile(t, filepath.Join(c.dir, "small.txt"))
	big := harness.NewData(931, 11*mib+1)
	big.WriteFile(t, filepath.Join(c.dir, "big.bin"))
	other := harness.NewData(932, 77)
	other.WriteFile(t, filepath.Join(c.dir, "other.bin"))
	s3c("put", "--mime-type=text/x-s3cmd", "small.txt", s3b+"/s3cmd/small.txt")
	s3c("put", "--multipart-chunk-size-mb=5", "big.bin", s3b+"/s3cmd/big.bin")
	s3c("put", "other.bin", s3b+"/s3cmd/sub/other.bin")
	requireObject(t, direct, bucket, "s3cmd/small.txt", small)
	requireObject(t, direct, bucket, "s3cmd/big.bin", big)
	requireMultipartETag(t, direct, bucket, "s3cmd/big.bin")

	out := s3c("ls", s3b+"/s3cmd/")
	for _, want := range []string{s3b + "/s3cmd/small.txt", s3b + "/s3cmd/big.bin", "DIR  " + s3b + "/s3cmd/sub/"} {
		if !strings.Contains(out, want) {
			t.Fatalf("s3cmd ls %s/s3cmd/ does not list %q:\n%s", s3b, want, out)
		}
	}
	if out := s3c("ls", "--recursive", s3b); !strings.Contains(out, s3b+"/s3cmd/sub/other.bin") {
		t.Fatalf("s3cmd ls --recursive does not list s3cmd/sub/other.bin:\n%s", out)
	}

	info := s3c("info", s3b+"/s3cmd/small.txt")
	for _, want := range []string{"File size: 1000", "MIME type: text/x-s3cmd", "FULL_CONTROL"} {
		if !strings.Contains(info, want) {
			t.Fatalf("s3cmd info of an object does not show %q:\n%s", want, info)
		}
	}
	s3c("get", s3b+"/s3cmd/small.txt", "small-down.txt")
	requireFile(t, filepath.Join(c.dir, "small-down.txt"), small)
	s3c("get", s3b+"/s3cmd/big.bin", "big-down.bin")
	requireFile(t, filepath.Join(c.dir, "big-down.bin"), big)

	// MinIO keeps every object private: it answers a PutObjectAcl whose
	// body grants FULL_CONTROL first with success and changes nothing, and
	// any canned ACL but private with NotImplemented. setacl --acl-public
	// reads the ACL (GET ?acl) and writes it back with a READ grant for
	// AllUsers added (PUT ?acl with an AccessControlPolicy body), which
	// MinIO ignores; setacl --acl-private then reads the ACL, finds it
	// private and says so without writing it. put --acl-private sets the
	// canned ACL on upload (x-amz-acl: private).
	if out := s3c("setacl", "--acl-public", s3b+"/s3cmd/small.txt"); !strings.Contains(out, "ACL set to Public") {
		t.Fatalf("s3cmd setacl --acl-public printed:\n%s", out)
	}
	if _, stderr, err := tryCLI(t, c, "-c", config, "--verbose", "setacl", "--acl-private", s3b+"/s3cmd/small.txt"); err != nil || !strings.Contains(stderr, "already Private") {
		t.Fatalf("s3cmd setacl --acl-private: %v\n%s", err, stderr)
	}
	s3c("put", "--acl-private", "other.bin", s3b+"/s3cmd/sub/other.bin")
	requireBackendPrivateACL(t, direct, bucket, "s3cmd/small.txt")
	requireBackendPrivateACL(t, direct, bucket, "s3cmd/sub/other.bin")

	// Bucket policy and lifecycle, and info of the bucket that shows them.
	policyFile := filepath.Join(c.dir, "policy.json")
	if err := os.WriteFile(policyFile, []byte(publicPolicy(bucket)), 0o600); err != nil {
		t.Fatal(err)
	}
	s3c("setpolicy", "policy.json", s3b)
	requireBackendPolicy(t, direct, bucket, true)
	lifecycleFile := filepath.Join(c.dir, "lifecycle.xml")
	if err := os.WriteFile(lifecycleFile, []byte(`<LifecycleConfiguration><Rule><ID>expire-tmp</ID><Filter><Prefix>tmp/</Prefix></Filter>`+
		`<Status>Enabled</Status><Expiration><Days>3</Days></Expiration></Rule></LifecycleConfiguration>`), 0o600); err != nil {
		t.Fatal(err)
	}
	s3c("setlifecycle", "lifecycle.xml", s3b)
	if out := s3c("getlifecycle", s3b); !strings.Contains(out, "expire-tmp") || !strings.Contains(out, "<Days>3</Days>") {
		t.Fatalf("s3cmd getlifecycle does not show the rule it set:\n%s", out)
	}
	info = s3c("info", s3b)
	for _, want := range []string{"s3:ListBucket", "s3:PutObject", "key prefix 'tmp/'", "FULL_CONTROL"} {
		if !strings.Contains(info, want) {
			t.Fatalf("s3cmd info of the bucket does not show %q:\n%s", want, info)
		}
	}
	s3c("delpolicy", s3b)
	requireBackendPolicy(t, direct, bucket, false)
	s3c("dellifecycle", s3b)
	requireBackendNoLifecycle(t, direct, bucket)

	// No s3cmd signurl: s3cmd 2.3 signs such URLs only with Signature
	// Version 2 (AWSAccessKeyId, Expires, Signature), which the gateway
	// refuses as it verifies only AWS4-HMAC-SHA256.

	s3c("del", s3b+"/s3cmd/small.txt")
	requireAbsent(t, direct, bucket, "s3cmd/small.txt")
	s3c("del", "--recursive", "--force", s3b+"/s3cmd/")
	requireAbsent(t, direct, bucket, "s3cmd/big.bin")
	requireAbsent(t, direct, bucket, "s3cmd/sub/other.bin")
	s3c("rb", s3b)
	requireNoBucket(t, direct, bucket)
}

// rcloneConfig drives rclone with an s3 remote of provider Minio: mkdir,
// copy (one file above the upload cutoff, so multipart), ls, lsjson, cat
// (whole and a range), link (a presigned URL), delete, deletefile, purge.
func rcloneConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	c, rc := newRclone(t, requireCLI(t, "rclone", "rclone"), e)
	bucket := harness.BucketName(t)
	remote := "gw:" + bucket

	up := filepath.Join(c.dir, "up")
	files := map[string]harness.Data{
		"big.bin":     harness.NewData(940, 11*mib+3),
		"small.txt":   harness.NewData(941, 300),
		"sub/one.bin": harness.NewData(942, 4*kib),
		"sub/two.bin": harness.NewData(943, 5),
	}
	for name, d := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(up, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		d.WriteFile(t, filepath.Join(up, name))
	}
	rc("mkdir", remote)
	rc("copy", up, remote+"/rc")
	for name, d := range files {
		requireObject(t, direct, bucket, "rc/"+name, d)
	}
	requireMultipartETag(t, direct, bucket, "rc/big.bin")

	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(rc("ls", remote+"/rc")), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	sort.Strings(lines)
	var want []string
	for name, d := range files {
		want = append(want, fmt.Sprintf("%d %s", d.Size, name))
	}
	sort.Strings(want)
	if !slices.Equal(lines, want) {
		t.Fatalf("rclone ls: %q, want %q", lines, want)
	}
	var listed []struct {
		Path  string
		Size  int64
		IsDir bool
	}
	if err := json.Unmarshal([]byte(rc("lsjson", remote+"/rc")), &listed); err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, l := range listed {
		top = append(top, fmt.Sprintf("%s dir=%v", l.Path, l.IsDir))
	}
	sort.Strings(top)
	if want := []string{"big.bin dir=false", "small.txt dir=false", "sub dir=true"}; !slices.Equal(top, want) {
		t.Fatalf("rclone lsjson (one level, with a delimiter): %v, want %v", top, want)
	}

	if got := rc("cat", remote+"/rc/small.txt"); got != string(files["small.txt"].Bytes()) {
		t.Fatalf("rclone cat small.txt: %d bytes that differ", len(got))
	}
	if got := rc("cat", "--offset", "6000000", "--count", "1000", remote+"/rc/big.bin"); got != string(files["big.bin"].Range(6000000, 1000)) {
		t.Fatalf("rclone cat --offset 6000000 --count 1000 big.bin: %d bytes that differ", len(got))
	}
	url := strings.TrimSpace(rc("link", "--expire", "5m", remote+"/rc/sub/one.bin"))
	if got := httpGetBody(t, e.HTTPClient(t), url); !bytes.Equal(got, files["sub/one.bin"].Bytes()) {
		t.Fatalf("GET of the URL rclone link made returned %d bytes that differ", len(got))
	}

	rc("delete", remote+"/rc/sub")
	requireAbsent(t, direct, bucket, "rc/sub/one.bin")
	requireAbsent(t, direct, bucket, "rc/sub/two.bin")
	rc("deletefile", remote+"/rc/small.txt")
	requireAbsent(t, direct, bucket, "rc/small.txt")
	requireObject(t, direct, bucket, "rc/big.bin", files["big.bin"])
	rc("purge", remote)
	requireNoBucket(t, direct, bucket)
}

// minioGoConfig drives minio-go: bucket tagging, versioning, policy and
// lifecycle set, read back and removed; object tagging, ACL and stat;
// listings with versions and a delimiter; RemoveObjects of every version;
// presigned GET and PUT.
func minioGoConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	ctx := t.Context()
	mc := e.MinioGo(t)
	bucket := harness.BucketName(t)
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: e.Region}); err != nil {
		t.Fatalf("MakeBucket: %v", err)
	}
	if loc, err := mc.GetBucketLocation(ctx, bucket); err != nil || loc != e.Region {
		t.Fatalf("GetBucketLocation: %q %v, want %q", loc, err, e.Region)
	}
	code := func(err error) string { return minio.ToErrorResponse(err).Code }

	// Bucket tagging.
	wantTags := map[string]string{"team": "storage", "client": "minio-go"}
	bt, err := tags.NewTags(wantTags, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.SetBucketTagging(ctx, bucket, bt); err != nil {
		t.Fatalf("SetBucketTagging: %v", err)
	}
	got, err := mc.GetBucketTagging(ctx, bucket)
	if err != nil || !maps.Equal(got.ToMap(), wantTags) {
		t.Fatalf("GetBucketTagging: %v %v, want %v", got, err, wantTags)
	}
	requireBackendBucketTags(t, direct, bucket, wantTags)
	if err := mc.RemoveBucketTagging(ctx, bucket); err != nil {
		t.Fatalf("RemoveBucketTagging: %v", err)
	}
	if _, err := mc.GetBucketTagging(ctx, bucket); code(err) != "NoSuchTagSet" {
		t.Fatalf("GetBucketTagging after RemoveBucketTagging: %v, want NoSuchTagSet", err)
	}

	// Versioning: on, suspended, on again for the objects below.
	for _, step := range []struct {
		set  func(context.Context, string) error
		want string
	}{{mc.EnableVersioning, minio.Enabled}, {mc.SuspendVersioning, minio.Suspended}, {mc.EnableVersioning, minio.Enabled}} {
		if err := step.set(ctx, bucket); err != nil {
			t.Fatalf("setting versioning %s: %v", step.want, err)
		}
		v, err := mc.GetBucketVersioning(ctx, bucket)
		if err != nil || v.Status != step.want {
			t.Fatalf("GetBucketVersioning: %+v %v, want %s", v, err, step.want)
		}
	}
	requireBackendVersioning(t, direct, bucket, s3types.BucketVersioningStatusEnabled)

	// Policy.
	if err := mc.SetBucketPolicy(ctx, bucket, publicPolicy(bucket)); err != nil {
		t.Fatalf("SetBucketPolicy: %v", err)
	}
	doc, err := mc.GetBucketPolicy(ctx, bucket)
	if err != nil {
		t.Fatalf("GetBucketPolicy: %v", err)
	}
	requirePublicPolicy(t, doc, bucket)
	if err := mc.SetBucketPolicy(ctx, bucket, ""); err != nil {
		t.Fatalf("SetBucketPolicy with an empty policy (DeleteBucketPolicy): %v", err)
	}
	if doc, err := mc.GetBucketPolicy(ctx, bucket); err != nil || doc != "" {
		t.Fatalf("GetBucketPolicy after removing it: %q %v, want none", doc, err)
	}
	requireBackendPolicy(t, direct, bucket, false)

	// Lifecycle.
	lc := lifecycle.NewConfiguration()
	lc.Rules = []lifecycle.Rule{{
		ID:         "expire-tmp",
		Status:     "Enabled",
		RuleFilter: lifecycle.Filter{Prefix: "tmp/"},
		Expiration: lifecycle.Expiration{Days: 5},
	}}
	if err := mc.SetBucketLifecycle(ctx, bucket, lc); err != nil {
		t.Fatalf("SetBucketLifecycle: %v", err)
	}
	backendLC, err := direct.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	if err != nil || len(backendLC.Rules) != 1 || aws.ToString(backendLC.Rules[0].ID) != "expire-tmp" {
		t.Fatalf("GetBucketLifecycleConfiguration on the backend after SetBucketLifecycle: %+v %v", backendLC, err)
	}
	// minio-go's GetBucketLifecycle always adds withUpdatedAt=true (MinIO
	// then also answers when the configuration was last changed). Its
	// failures are reported with Errorf, so that the calls after it run.
	gotLC, err := mc.GetBucketLifecycle(ctx, bucket)
	if err != nil || len(gotLC.Rules) != 1 || gotLC.Rules[0].ID != "expire-tmp" || gotLC.Rules[0].RuleFilter.Prefix != "tmp/" || gotLC.Rules[0].Expiration.Days != 5 {
		t.Errorf("GetBucketLifecycle: %+v %v", gotLC, err)
	}
	if err := mc.SetBucketLifecycle(ctx, bucket, lifecycle.NewConfiguration()); err != nil {
		t.Fatalf("SetBucketLifecycle with no rules (DeleteBucketLifecycle): %v", err)
	}
	requireBackendNoLifecycle(t, direct, bucket)
	if _, err := mc.GetBucketLifecycle(ctx, bucket); code(err) != "NoSuchLifecycleConfiguration" {
		t.Errorf("GetBucketLifecycle after removing it: %v, want NoSuchLifecycleConfiguration", err)
	}

	// Objects: two versions of one key, and two more keys.
	put := func(key string, d harness.Data) minio.UploadInfo {
		t.Helper()
		info, err := mc.PutObject(ctx, bucket, key, d.Reader(), d.Size, minio.PutObjectOptions{
			ContentType: "application/x-minio-go", UserMetadata: map[string]string{"tool": "minio-go"}})
		if err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
		return info
	}
	v1 := put("mg/a.bin", harness.NewData(950, 333))
	second := harness.NewData(951, 444)
	v2 := put("mg/a.bin", second)
	put("mg/b.bin", harness.NewData(952, 55))
	put("mg/dir/c.bin", harness.NewData(953, 66))
	if v1.VersionID == "" || v2.VersionID == "" || v1.VersionID == v2.VersionID {
		t.Fatalf("PutObject in a versioned bucket: version ids %q and %q", v1.VersionID, v2.VersionID)
	}
	st, err := mc.StatObject(ctx, bucket, "mg/a.bin", minio.StatObjectOptions{})
	if err != nil || st.Size != second.Size || st.VersionID != v2.VersionID || st.ContentType != "application/x-minio-go" || st.UserMetadata["Tool"] != "minio-go" {
		t.Fatalf("StatObject mg/a.bin: %+v %v", st, err)
	}
	requireObjectMinioGo(t, mc, bucket, "mg/a.bin", second)

	// Object tagging and ACL.
	ot, err := tags.NewTags(map[string]string{"class": "cold"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.PutObjectTagging(ctx, bucket, "mg/a.bin", ot, minio.PutObjectTaggingOptions{}); err != nil {
		t.Fatalf("PutObjectTagging: %v", err)
	}
	gotOT, err := mc.GetObjectTagging(ctx, bucket, "mg/a.bin", minio.GetObjectTaggingOptions{})
	if err != nil || !maps.Equal(gotOT.ToMap(), map[string]string{"class": "cold"}) {
		t.Fatalf("GetObjectTagging: %v %v", gotOT, err)
	}
	requireBackendObjectTags(t, direct, bucket, "mg/a.bin", map[string]string{"class": "cold"})
	if err := mc.RemoveObjectTagging(ctx, bucket, "mg/a.bin", minio.RemoveObjectTaggingOptions{}); err != nil {
		t.Fatalf("RemoveObjectTagging: %v", err)
	}
	if gotOT, err := mc.GetObjectTagging(ctx, bucket, "mg/a.bin", minio.GetObjectTaggingOptions{}); err != nil || gotOT.Count() != 0 {
		t.Fatalf("GetObjectTagging after RemoveObjectTagging: %v %v", gotOT, err)
	}
	aclInfo, err := mc.GetObjectACL(ctx, bucket, "mg/a.bin")
	if err != nil {
		t.Fatalf("GetObjectACL: %v", err)
	}
	if canned := aclInfo.Metadata.Get("X-Amz-Acl"); canned != "private" || len(aclInfo.Grant) != 1 || aclInfo.Grant[0].Permission != "FULL_CONTROL" {
		t.Fatalf("GetObjectACL: canned %q, grants %+v; want private", canned, aclInfo.Grant)
	}

	// Listings.
	var versions []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "mg/", Recursive: true, WithVersions: true}) {
		if o.Err != nil {
			t.Fatalf("ListObjects with versions: %v", o.Err)
		}
		versions = append(versions, fmt.Sprintf("%s %s %d latest=%v", o.Key, o.VersionID, o.Size, o.IsLatest))
	}
	if len(versions) != 4 || versions[0] != fmt.Sprintf("mg/a.bin %s 444 latest=true", v2.VersionID) ||
		versions[1] != fmt.Sprintf("mg/a.bin %s 333 latest=false", v1.VersionID) {
		t.Fatalf("ListObjects with versions:\n%s", strings.Join(versions, "\n"))
	}
	var top []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "mg/"}) {
		if o.Err != nil {
			t.Fatalf("ListObjects with a delimiter: %v", o.Err)
		}
		top = append(top, o.Key)
	}
	if want := []string{"mg/a.bin", "mg/b.bin", "mg/dir/"}; !slices.Equal(top, want) {
		t.Fatalf("ListObjects with a delimiter: %v, want %v", top, want)
	}
	var page []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "mg/", Recursive: true, MaxKeys: 1, UseV1: true}) {
		if o.Err != nil {
			t.Fatalf("ListObjects (v1, one key a page): %v", o.Err)
		}
		page = append(page, o.Key)
	}
	if want := []string{"mg/a.bin", "mg/b.bin", "mg/dir/c.bin"}; !slices.Equal(page, want) {
		t.Fatalf("ListObjects (v1, one key a page): %v, want %v", page, want)
	}

	// Presigned PUT and GET.
	hc := e.HTTPClient(t)
	presigned := harness.NewData(954, 3*kib)
	pu, err := mc.PresignedPutObject(ctx, bucket, "mg/presigned.bin", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, do(t, hc, newRequest(t, http.MethodPut, pu.String(), presigned.Bytes())), http.StatusOK)
	requireObject(t, direct, bucket, "mg/presigned.bin", presigned)
	gu, err := mc.PresignedGetObject(ctx, bucket, "mg/presigned.bin", 5*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := httpGetBody(t, hc, gu.String()); !bytes.Equal(body, presigned.Bytes()) {
		t.Fatalf("presigned GET returned %d bytes that differ", len(body))
	}

	// RemoveObjects: every version of every key, in batches.
	objs := make(chan minio.ObjectInfo)
	go func() {
		defer close(objs)
		for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: true}) {
			select {
			case objs <- o:
			case <-ctx.Done():
				return
			}
		}
	}()
	for rerr := range mc.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		t.Fatalf("RemoveObjects %s %s: %v", rerr.ObjectName, rerr.VersionID, rerr.Err)
	}
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: true}) {
		t.Fatalf("after RemoveObjects of every version the bucket still lists %s %s (%v)", o.Key, o.VersionID, o.Err)
	}
	if err := mc.RemoveBucket(ctx, bucket); err != nil {
		t.Fatalf("RemoveBucket: %v", err)
	}
	requireNoBucket(t, direct, bucket)
}

// sdkConfig drives aws-sdk-go-v2's s3.Client through the same families:
// bucket tagging, versioning, lifecycle, policy (and its status), ACL and
// location; object tagging, ACL, attributes; ListObjects, ListObjectsV2
// and ListObjectVersions; DeleteObjects; presigned GET and PUT.
func sdkConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	ctx := t.Context()
	c := e.SDK(t)
	bucket := harness.BucketName(t)
	b := aws.String(bucket)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b}); err != nil {
		t.Fatalf("HeadBucket: %v", err)
	}
	if loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: b}); err != nil ||
		(loc.LocationConstraint != "" && string(loc.LocationConstraint) != e.Region) {
		t.Fatalf("GetBucketLocation: %+v %v", loc, err)
	}

	// Tagging.
	wantTags := map[string]string{"team": "storage", "client": "aws-sdk-go-v2"}
	var tagSet []s3types.Tag
	for k, v := range wantTags {
		tagSet = append(tagSet, s3types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	if _, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &s3types.Tagging{TagSet: tagSet}}); err != nil {
		t.Fatalf("PutBucketTagging: %v", err)
	}
	gt, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	if err != nil {
		t.Fatalf("GetBucketTagging: %v", err)
	}
	gotTags := map[string]string{}
	for _, tag := range gt.TagSet {
		gotTags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if !maps.Equal(gotTags, wantTags) {
		t.Fatalf("GetBucketTagging: %v, want %v", gotTags, wantTags)
	}
	if _, err := c.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucketTagging: %v", err)
	}
	_, err = c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	requireAPIError(t, err, "NoSuchTagSet")

	// Versioning.
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: b,
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	if v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: b}); err != nil || v.Status != s3types.BucketVersioningStatusEnabled {
		t.Fatalf("GetBucketVersioning: %+v %v", v, err)
	}

	// Lifecycle.
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: []s3types.LifecycleRule{{
			ID:         aws.String("expire-tmp"),
			Status:     s3types.ExpirationStatusEnabled,
			Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
			Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(9)},
		}}}}); err != nil {
		t.Fatalf("PutBucketLifecycleConfiguration: %v", err)
	}
	lc, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err != nil || len(lc.Rules) != 1 || aws.ToString(lc.Rules[0].ID) != "expire-tmp" || lc.Rules[0].Filter == nil ||
		aws.ToString(lc.Rules[0].Filter.Prefix) != "tmp/" || lc.Rules[0].Expiration == nil || aws.ToInt32(lc.Rules[0].Expiration.Days) != 9 {
		t.Fatalf("GetBucketLifecycleConfiguration: %+v %v", lc, err)
	}
	if _, err := c.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucketLifecycle: %v", err)
	}
	_, err = c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	requireAPIError(t, err, "NoSuchLifecycleConfiguration")

	// Policy and its status.
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(publicPolicy(bucket))}); err != nil {
		t.Fatalf("PutBucketPolicy: %v", err)
	}
	pol, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b})
	if err != nil {
		t.Fatalf("GetBucketPolicy: %v", err)
	}
	requirePublicPolicy(t, aws.ToString(pol.Policy), bucket)
	ps, err := c.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: b})
	if err != nil || ps.PolicyStatus == nil || !aws.ToBool(ps.PolicyStatus.IsPublic) {
		t.Fatalf("GetBucketPolicyStatus with a public policy: %+v %v", ps, err)
	}
	if _, err := c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucketPolicy: %v", err)
	}
	_, err = c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b})
	requireAPIError(t, err, "NoSuchBucketPolicy")

	// Bucket ACL.
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, ACL: s3types.BucketCannedACLPrivate}); err != nil {
		t.Fatalf("PutBucketAcl private: %v", err)
	}
	bacl, err := c.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: b})
	if err != nil || len(bacl.Grants) != 1 || bacl.Grants[0].Permission != s3types.PermissionFullControl {
		t.Fatalf("GetBucketAcl: %+v %v", bacl, err)
	}

	// Objects.
	first, second := harness.NewData(960, 400), harness.NewData(961, 800)
	v1 := putData(t, c, bucket, "sdk/a.bin", first)
	v2 := putData(t, c, bucket, "sdk/a.bin", second)
	putData(t, c, bucket, "sdk/b.bin", harness.NewData(962, 10))
	putData(t, c, bucket, "sdk/dir/c.bin", harness.NewData(963, 20))
	if aws.ToString(v1.VersionId) == "" || aws.ToString(v1.VersionId) == aws.ToString(v2.VersionId) {
		t.Fatalf("PutObject in a versioned bucket: version ids %q and %q", aws.ToString(v1.VersionId), aws.ToString(v2.VersionId))
	}
	key := aws.String("sdk/a.bin")
	if h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: key}); err != nil || aws.ToInt64(h.ContentLength) != second.Size ||
		aws.ToString(h.VersionId) != aws.ToString(v2.VersionId) {
		t.Fatalf("HeadObject: %+v %v", h, err)
	}

	if _, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: key,
		Tagging: &s3types.Tagging{TagSet: []s3types.Tag{{Key: aws.String("class"), Value: aws.String("warm")}}}}); err != nil {
		t.Fatalf("PutObjectTagging: %v", err)
	}
	ot, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: key})
	if err != nil || len(ot.TagSet) != 1 || aws.ToString(ot.TagSet[0].Key) != "class" || aws.ToString(ot.TagSet[0].Value) != "warm" {
		t.Fatalf("GetObjectTagging: %+v %v", ot, err)
	}
	// The older version's tags are its own.
	if ot, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: key, VersionId: v1.VersionId}); err != nil || len(ot.TagSet) != 0 {
		t.Fatalf("GetObjectTagging of version %s: %+v %v, want no tags", aws.ToString(v1.VersionId), ot, err)
	}
	if _, err := c.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: key}); err != nil {
		t.Fatalf("DeleteObjectTagging: %v", err)
	}
	requireBackendObjectTags(t, direct, bucket, "sdk/a.bin", map[string]string{})

	if _, err := c.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: b, Key: key, ACL: s3types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("PutObjectAcl private: %v", err)
	}
	oacl, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: key})
	if err != nil || len(oacl.Grants) != 1 || oacl.Grants[0].Permission != s3types.PermissionFullControl {
		t.Fatalf("GetObjectAcl: %+v %v", oacl, err)
	}

	attrs, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: key, VersionId: v1.VersionId,
		ObjectAttributes: []s3types.ObjectAttributes{s3types.ObjectAttributesEtag, s3types.ObjectAttributesObjectSize, s3types.ObjectAttributesStorageClass}})
	if err != nil || aws.ToInt64(attrs.ObjectSize) != first.Size || aws.ToString(attrs.ETag) != strings.Trim(aws.ToString(v1.ETag), `"`) {
		t.Fatalf("GetObjectAttributes of version %s: %+v %v", aws.ToString(v1.VersionId), attrs, err)
	}

	// Listings.
	l2, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("sdk/"), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	var got []string
	for _, o := range l2.Contents {
		got = append(got, aws.ToString(o.Key))
	}
	for _, p := range l2.CommonPrefixes {
		got = append(got, aws.ToString(p.Prefix))
	}
	if want := []string{"sdk/a.bin", "sdk/b.bin", "sdk/dir/"}; !slices.Equal(got, want) {
		t.Fatalf("ListObjectsV2 with a delimiter: %v, want %v", got, want)
	}
	got = nil
	pager := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("sdk/"), MaxKeys: aws.Int32(1)})
	pages := 0
	for pager.HasMorePages() {
		p, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListObjectsV2 page %d: %v", pages+1, err)
		}
		pages++
		if len(p.Contents) > 1 {
			t.Fatalf("ListObjectsV2 with MaxKeys 1: page %d has %d keys", pages, len(p.Contents))
		}
		for _, o := range p.Contents {
			got = append(got, aws.ToString(o.Key))
		}
	}
	// MinIO may answer the last key as truncated and then an empty page.
	if want := []string{"sdk/a.bin", "sdk/b.bin", "sdk/dir/c.bin"}; !slices.Equal(got, want) || pages < 3 {
		t.Fatalf("ListObjectsV2 one key a page: %v in %d pages, want %v one a page", got, pages, want)
	}
	l1, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: b, Prefix: aws.String("sdk/"), Marker: aws.String("sdk/a.bin"), MaxKeys: aws.Int32(1)})
	if err != nil || len(l1.Contents) != 1 || aws.ToString(l1.Contents[0].Key) != "sdk/b.bin" || !aws.ToBool(l1.IsTruncated) {
		t.Fatalf("ListObjects after sdk/a.bin, one key: %+v %v", l1, err)
	}
	lv, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("sdk/")})
	if err != nil {
		t.Fatalf("ListObjectVersions: %v", err)
	}
	var vs []s3types.ObjectIdentifier
	var desc []string
	for _, v := range lv.Versions {
		vs = append(vs, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		desc = append(desc, fmt.Sprintf("%s %s latest=%v", aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest)))
	}
	if len(desc) != 4 || desc[0] != fmt.Sprintf("sdk/a.bin %s latest=true", aws.ToString(v2.VersionId)) ||
		desc[1] != fmt.Sprintf("sdk/a.bin %s latest=false", aws.ToString(v1.VersionId)) {
		t.Fatalf("ListObjectVersions:\n%s", strings.Join(desc, "\n"))
	}

	// Presigned PUT and GET.
	hc := e.HTTPClient(t)
	presign := s3.NewPresignClient(c, s3.WithPresignExpires(5*time.Minute))
	presigned := harness.NewData(964, 2*kib)
	preq, err := presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("sdk/presigned.bin")})
	if err != nil {
		t.Fatal(err)
	}
	put := newRequest(t, preq.Method, preq.URL, presigned.Bytes())
	for k, v := range preq.SignedHeader {
		if k != "Host" {
			put.Header[k] = v
		}
	}
	requireStatus(t, do(t, hc, put), http.StatusOK)
	requireObject(t, direct, bucket, "sdk/presigned.bin", presigned)
	greq, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("sdk/presigned.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if body := httpGetBody(t, hc, greq.URL); !bytes.Equal(body, presigned.Bytes()) {
		t.Fatalf("presigned GET returned %d bytes that differ", len(body))
	}

	// DeleteObjects: every version listed above.
	del, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &s3types.Delete{Objects: vs}})
	if err != nil {
		t.Fatalf("DeleteObjects: %v", err)
	}
	if len(del.Errors) != 0 || len(del.Deleted) != len(vs) {
		t.Fatalf("DeleteObjects of %d versions: %d deleted, errors %+v", len(vs), len(del.Deleted), del.Errors)
	}
	lv, err = c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("sdk/")})
	if err != nil {
		t.Fatalf("ListObjectVersions after DeleteObjects: %v", err)
	}
	if len(lv.Versions) != 1 || aws.ToString(lv.Versions[0].Key) != "sdk/presigned.bin" || len(lv.DeleteMarkers) != 0 {
		t.Fatalf("ListObjectVersions after DeleteObjects: versions %+v delete markers %+v, want only sdk/presigned.bin", lv.Versions, lv.DeleteMarkers)
	}
}

// boto3Config runs testdata/boto3_clients_config.py, which does the
// ordinary boto3 calls and checks their answers, then fetches the
// presigned GET URL it made and checks the bucket on the backend.
func boto3Config(t *testing.T, e *harness.Env, direct *s3.Client) {
	script, err := filepath.Abs(filepath.Join("testdata", "boto3_clients_config.py"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, requireCLI(t, "python3", "python3-boto3"),
		"AWS_ACCESS_KEY_ID="+e.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+e.SecretKey,
		"AWS_DEFAULT_REGION="+e.Region,
		"AWS_CONFIG_FILE="+os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	)
	bucket := harness.BucketName(t)
	var out struct {
		Boto3, Botocore string
		Keys            []string
		PresignedGet    string `json:"presigned_get"`
		PresignedBody   string `json:"presigned_body"`
	}
	stdout := c.run(t, script, e.Endpoint, bucket)
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%s printed %q: %v", filepath.Base(script), stdout, err)
	}
	t.Logf("boto3 %s, botocore %s", out.Boto3, out.Botocore)
	if body := httpGetBody(t, e.HTTPClient(t), out.PresignedGet); string(body) != out.PresignedBody {
		t.Fatalf("GET of the URL boto3 presigned returned %q, want %q", body, out.PresignedBody)
	}
	requireBackendBucketTags(t, direct, bucket, map[string]string{"team": "storage", "client": "boto3"})
	requireBackendVersioning(t, direct, bucket, s3types.BucketVersioningStatusEnabled)
	requireAbsent(t, direct, bucket, "boto3/a.txt")
	requireAbsent(t, direct, bucket, "boto3/dir/b.txt")
	if want := []string{"boto3/keep.txt"}; !slices.Equal(out.Keys, want) {
		t.Fatalf("the script left %v, want %v", out.Keys, want)
	}
}
