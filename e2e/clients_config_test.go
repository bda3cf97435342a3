//go:build e2e

package e2e

import (
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

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
