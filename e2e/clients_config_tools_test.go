//go:build e2e

package e2e

// TestClientsConfig's s3cmd, rclone and boto3 calls.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// s3cmdConfig drives s3cmd: mb, put (one file multipart, one with
// --acl-private), ls, info of a bucket and an object, get, setacl
// --acl-public and --acl-private, setpolicy and delpolicy, setlifecycle,
// getlifecycle and dellifecycle, del of one key and del --recursive (a
// DeleteObjects), rb.
func s3cmdConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	c := newCLI(t, requireCLI(t, "s3cmd", "s3cmd"))
	config := writeS3cmdConfig(t, e, c.dir)
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

// writeS3cmdConfig writes an s3cmd configuration for e's gateway into dir
// and returns its path.
func writeS3cmdConfig(t *testing.T, e *harness.Env, dir string) string {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimPrefix(e.Endpoint, "http://"), "https://")
	config := filepath.Join(dir, "s3cfg")
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
	return config
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
