//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// cliTimeout bounds one command-line client call.
const cliTimeout = 5 * time.Minute

// cli is a command-line S3 client run with a clean environment.
type cli struct {
	path string
	env  []string
	dir  string
}

// requireCLI finds a command-line client: SWEEPGATE_E2E_<NAME> (for
// example SWEEPGATE_E2E_AWS=/usr/bin/aws), or name on PATH. A missing one is
// a failure, not a skip: the acceptance tests need it.
func requireCLI(t *testing.T, name, debianPackage string) string {
	t.Helper()
	if p := os.Getenv("SWEEPGATE_E2E_" + strings.ToUpper(name)); p != "" {
		name = p
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (%v): install the Debian package %s, as .ci/run does: "+
			"apt-get update && apt-get install -y awscli s3cmd rclone", name, err, debianPackage)
	}
	return path
}

// newCLI prepares to run a client with HOME in a temporary directory and
// none of the caller's AWS_, RCLONE_ or SWEEPGATE_ variables, plus env.
func newCLI(t *testing.T, path string, env ...string) *cli {
	dir := t.TempDir()
	base := []string{"HOME=" + dir}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "RCLONE_") || strings.HasPrefix(kv, "SWEEPGATE_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		base = append(base, kv)
	}
	return &cli{path: path, env: append(base, env...), dir: dir}
}

// run runs the client and returns its standard output, failing the test
// with everything it printed if it fails.
func (c *cli) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, args...)
	cmd.Env = c.env
	cmd.Dir = c.dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(c.path), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// requireFile checks that the file at path holds d's bytes.
func requireFile(t *testing.T, path string, d harness.Data) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum, n, err := harness.HashReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if n != d.Size || sum != d.SHA256() {
		t.Fatalf("%s: %d bytes sha256 %s, want %d bytes %s", path, n, sum, d.Size, d.SHA256())
	}
}

// requireMultipartETag checks on the backend that bucket/key was uploaded in
// parts (its ETag ends in -N).
func requireMultipartETag(t *testing.T, direct *s3.Client, bucket, key string) {
	t.Helper()
	h, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("HeadObject %s on the backend: %v", key, err)
	}
	if etag := strings.Trim(aws.ToString(h.ETag), `"`); !strings.Contains(etag, "-") {
		t.Fatalf("%s has ETag %s: it was not uploaded in parts, so this did not test a multipart upload", key, etag)
	}
}

func requireNoBucket(t *testing.T, direct *s3.Client, bucket string) {
	t.Helper()
	_, err := direct.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if code := apiErrorCode(err); code != "NotFound" && code != "NoSuchBucket" {
		t.Fatalf("bucket %s on the backend after removing it: %v", bucket, err)
	}
}

// TestAWSCLI drives the aws command-line client through the gateway: s3 mb,
// cp up (large enough to go multipart) and down, ls, rm, rb, and the s3api
// calls put-object, get-object, head-object and list-objects-v2.
func TestAWSCLI(t *testing.T) {
	aws := requireCLI(t, "aws", "awscli")
	e := harness.Start(t)
	direct := e.DirectSDK(t)
	c := newCLI(t, aws)
	config := filepath.Join(c.dir, "aws-config")
	if err := os.WriteFile(config, []byte("[default]\nregion = "+e.Region+"\ns3 =\n    addressing_style = path\n"), 0o600); err != nil {
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
	t.Logf("using %s", strings.TrimSpace(c.run(t, "--version")))
	ep := []string{"--endpoint-url", e.Endpoint}
	bucket := harness.BucketName(t)

	c.run(t, append(ep, "s3", "mb", "s3://"+bucket)...)
	big := harness.NewData(800, 20*mib+5)
	big.WriteFile(t, filepath.Join(c.dir, "big.bin"))
	c.run(t, append(ep, "s3", "cp", "big.bin", "s3://"+bucket+"/dir/big.bin")...)
	requireMultipartETag(t, direct, bucket, "dir/big.bin")
	requireObject(t, direct, bucket, "dir/big.bin", big)
	c.run(t, append(ep, "s3", "cp", "s3://"+bucket+"/dir/big.bin", "big-down.bin")...)
	requireFile(t, filepath.Join(c.dir, "big-down.bin"), big)
	if out := c.run(t, append(ep, "s3", "ls", "s3://"+bucket+"/dir/")...); !strings.Contains(out, "big.bin") {
		t.Fatalf("aws s3 ls does not list big.bin:\n%s", out)
	}

	small := harness.NewData(801, 3*kib)
	small.WriteFile(t, filepath.Join(c.dir, "small.txt"))
	c.run(t, append(ep, "s3api", "put-object", "--bucket", bucket, "--key", "dir/small.txt", "--body", "small.txt",
		"--content-type", "text/plain", "--metadata", "tool=aws-cli")...)
	var got struct {
		ContentType   string
		ContentLength int64
		Metadata      map[string]string
	}
	if err := json.Unmarshal([]byte(c.run(t, append(ep, "s3api", "get-object", "--bucket", bucket, "--key", "dir/small.txt", "small-down.txt")...)), &got); err != nil {
		t.Fatal(err)
	}
	requireFile(t, filepath.Join(c.dir, "small-down.txt"), small)
	if got.ContentType != "text/plain" || got.ContentLength != small.Size || got.Metadata["tool"] != "aws-cli" {
		t.Fatalf("get-object: %+v", got)
	}
	if err := json.Unmarshal([]byte(c.run(t, append(ep, "s3api", "head-object", "--bucket", bucket, "--key", "dir/small.txt")...)), &got); err != nil {
		t.Fatal(err)
	}
	if got.ContentLength != small.Size || got.Metadata["tool"] != "aws-cli" {
		t.Fatalf("head-object: %+v", got)
	}
	var list struct {
		Contents []struct {
			Key  string
			Size int64
		}
	}
	if err := json.Unmarshal([]byte(c.run(t, append(ep, "s3api", "list-objects-v2", "--bucket", bucket, "--prefix", "dir/")...)), &list); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, fmt.Sprintf("%s:%d", o.Key, o.Size))
	}
	if want := []string{fmt.Sprintf("dir/big.bin:%d", big.Size), fmt.Sprintf("dir/small.txt:%d", small.Size)}; !slices.Equal(keys, want) {
		t.Fatalf("list-objects-v2: %v, want %v", keys, want)
	}

	c.run(t, append(ep, "s3", "rm", "s3://"+bucket+"/dir/big.bin")...)
	requireAbsent(t, direct, bucket, "dir/big.bin")
	c.run(t, append(ep, "s3", "rb", "--force", "s3://"+bucket)...)
	requireNoBucket(t, direct, bucket)
}

// TestS3cmd drives s3cmd through the gateway: mb, put (multipart), ls, get,
// info, del, rb.
func TestS3cmd(t *testing.T) {
	s3cmd := requireCLI(t, "s3cmd", "s3cmd")
	e := harness.Start(t)
	direct := e.DirectSDK(t)
	c := newCLI(t, s3cmd)
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
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
multipart_chunk_size_mb = 5
`, e.AccessKey, e.SecretKey, u.Host, u.Host, e.Region), 0o600); err != nil {
		t.Fatal(err)
	}
	s3c := func(args ...string) string { t.Helper(); return c.run(t, append([]string{"-c", config}, args...)...) }
	t.Logf("using %s", strings.TrimSpace(s3c("--version")))
	bucket := harness.BucketName(t)

	s3c("mb", "s3://"+bucket)
	big := harness.NewData(810, 12*mib+1)
	big.WriteFile(t, filepath.Join(c.dir, "big.bin"))
	s3c("put", "big.bin", "s3://"+bucket+"/s3cmd/big.bin")
	requireMultipartETag(t, direct, bucket, "s3cmd/big.bin")
	requireObject(t, direct, bucket, "s3cmd/big.bin", big)
	small := harness.NewData(811, 1000)
	small.WriteFile(t, filepath.Join(c.dir, "small.bin"))
	s3c("put", "--mime-type=application/x-s3cmd", "small.bin", "s3://"+bucket+"/s3cmd/small.bin")
	requireObject(t, direct, bucket, "s3cmd/small.bin", small)

	out := s3c("ls", "s3://"+bucket+"/s3cmd/")
	for _, k := range []string{"s3cmd/big.bin", "s3cmd/small.bin"} {
		if !strings.Contains(out, k) {
			t.Fatalf("s3cmd ls does not list %s:\n%s", k, out)
		}
	}
	s3c("get", "s3://"+bucket+"/s3cmd/big.bin", "big-down.bin")
	requireFile(t, filepath.Join(c.dir, "big-down.bin"), big)
	s3c("get", "s3://"+bucket+"/s3cmd/small.bin", "small-down.bin")
	requireFile(t, filepath.Join(c.dir, "small-down.bin"), small)
	if info := s3c("info", "s3://"+bucket+"/s3cmd/small.bin"); !strings.Contains(info, "application/x-s3cmd") {
		t.Fatalf("s3cmd info does not show the MIME type:\n%s", info)
	}
	s3c("del", "s3://"+bucket+"/s3cmd/big.bin", "s3://"+bucket+"/s3cmd/small.bin")
	requireAbsent(t, direct, bucket, "s3cmd/big.bin")
	requireAbsent(t, direct, bucket, "s3cmd/small.bin")
	s3c("rb", "s3://"+bucket)
	requireNoBucket(t, direct, bucket)
}

// TestRclone drives rclone through the gateway with an s3 remote of provider
// Minio: mkdir, copy up (one file large enough to go multipart), lsjson,
// check, copy down, delete, purge.
func TestRclone(t *testing.T) {
	rclone := requireCLI(t, "rclone", "rclone")
	e := harness.Start(t)
	direct := e.DirectSDK(t)
	c, rc := newRclone(t, rclone, e)
	t.Logf("using %s", strings.SplitN(rc("version"), "\n", 2)[0])
	bucket := harness.BucketName(t)

	up := filepath.Join(c.dir, "up")
	if err := os.MkdirAll(filepath.Join(up, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]harness.Data{
		"big.bin":       harness.NewData(820, 11*mib+3),
		"small.txt":     harness.NewData(821, 100),
		"sub/empty.bin": harness.NewData(822, 0),
	}
	for name, d := range files {
		d.WriteFile(t, filepath.Join(up, name))
	}

	rc("mkdir", "gw:"+bucket)
	rc("copy", up, "gw:"+bucket+"/rc")
	for name, d := range files {
		requireObject(t, direct, bucket, "rc/"+name, d)
	}
	requireMultipartETag(t, direct, bucket, "rc/big.bin")
	var listed []struct {
		Path string
		Size int64
	}
	if err := json.Unmarshal([]byte(rc("lsjson", "-R", "--files-only", "gw:"+bucket+"/rc")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(files) {
		t.Fatalf("lsjson listed %d files, want %d: %+v", len(listed), len(files), listed)
	}
	for _, l := range listed {
		if d, ok := files[l.Path]; !ok || d.Size != l.Size {
			t.Fatalf("lsjson lists %s with %d bytes", l.Path, l.Size)
		}
	}
	rc("check", up, "gw:"+bucket+"/rc")
	down := filepath.Join(c.dir, "down")
	rc("copy", "gw:"+bucket+"/rc", down)
	for name, d := range files {
		requireFile(t, filepath.Join(down, name), d)
	}
	rc("deletefile", "gw:"+bucket+"/rc/small.txt")
	requireAbsent(t, direct, bucket, "rc/small.txt")
	rc("purge", "gw:"+bucket)
	requireNoBucket(t, direct, bucket)
}

// newRclone returns a runner for rclone with the remote "gw" aimed at e's
// endpoint (path-style, e's credentials and region), and the function that
// runs it with one retry and 5 MiB upload cutoff and chunks, so that a
// file above 5 MiB goes up in parts.
func newRclone(t *testing.T, rclone string, e *harness.Env) (*cli, func(args ...string) string) {
	c := newCLI(t, rclone)
	if err := os.WriteFile(filepath.Join(c.dir, "rclone.conf"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env,
		"RCLONE_CONFIG="+filepath.Join(c.dir, "rclone.conf"),
		"RCLONE_CONFIG_GW_TYPE=s3",
		"RCLONE_CONFIG_GW_PROVIDER=Minio",
		"RCLONE_CONFIG_GW_ACCESS_KEY_ID="+e.AccessKey,
		"RCLONE_CONFIG_GW_SECRET_ACCESS_KEY="+e.SecretKey,
		"RCLONE_CONFIG_GW_ENDPOINT="+e.Endpoint,
		"RCLONE_CONFIG_GW_REGION="+e.Region,
		"RCLONE_CONFIG_GW_FORCE_PATH_STYLE=true",
	)
	rc := func(args ...string) string {
		t.Helper()
		return c.run(t, append(args, "--retries", "1", "--low-level-retries", "1", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M")...)
	}
	return c, rc
}
