//go:build e2e

package e2e

// Security: no secret ends up in a log, a metric, an error body, command
// output or a help text.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// signatureRE finds the signature of an Authorization header.
var signatureRE = regexp.MustCompile(`Signature=([0-9a-f]{64})`)

// TestSecurityNoSecretsLeak runs a workload with distinctive secrets (a
// client secret, the backend's secret, the admin token and a near miss of
// it) through every path that logs — successes, refused signatures, expired
// and altered presigned URLs, a body cut short, multipart calls, admin
// calls with and without the token — and checks that none of the secrets,
// none of the Authorization headers' signatures and none of the presigned
// URLs' X-Amz-Signature values appears in the gateway's log (at debug
// level, with its configuration dump), in /metrics, in the admin API's and
// status page's answers, in the S3 error bodies, in `serve --help` and
// `config check --against-running` run with the secrets in their
// environment, or in the errors of a configuration that fails to load.
func TestSecurityNoSecretsLeak(t *testing.T) {
	t.Parallel()
	client := harness.Credential{AccessKey: "AKIALEAKCHECK0001", SecretKey: "CliSecret-" + randomToken(t, 16), Principal: "leak-checker"}
	adminToken := "AdmTok-" + randomToken(t, 16)
	nearMiss := adminToken[:len(adminToken)-4] + "zzzz"
	e := harness.Start(t, harness.Options{
		Credentials:              []harness.Credential{client},
		RejectBackendCredentials: true,
		LogLevel:                 "debug",
		Env:                      []string{"SWEEPGATE_ADMIN_TOKEN=" + adminToken},
	})
	e.RequireGateway(t)
	secrets := map[string]string{
		"client secret":          client.SecretKey,
		"backend secret":         e.MinIO.SecretKey,
		"admin token":            adminToken,
		"near miss of the token": nearMiss,
	}
	// signatures holds every signature a request carried, by where it came
	// from; texts holds every text the gateway produced that is checked.
	signatures := map[string]string{}
	texts := map[string]string{}
	ctx := t.Context()
	hc := e.HTTPClient(t)
	bucket := e.Bucket(t)

	rec := &harness.Recorder{}
	c := e.SDK(t, harness.WithCredentials(client.AccessKey, client.SecretKey), harness.WithTransport(rec.Wrap))
	mcRec := &harness.Recorder{}
	mc := e.MinioGo(t, harness.WithCredentials(client.AccessKey, client.SecretKey), harness.WithTransport(mcRec.Wrap))
	wrongRec := &harness.Recorder{}
	wrong := e.SDK(t, harness.WithCredentials(client.AccessKey, "not-"+client.SecretKey), harness.WithTransport(wrongRec.Wrap))

	d := harness.NewData(7601, 300*kib)
	id := leakOrdinaryWork(t, c, mc, bucket, d)
	// Refused signatures.
	_, err := wrong.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("refused"), Body: bytes.NewReader([]byte("x"))})
	requireAPIError(t, err, "SignatureDoesNotMatch")
	// The signature the gateway expected must not come back in the error
	// or the log: it would be a valid signature for that request.
	at := time.Now()
	forged := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "forged"), []byte("forged"))
	if err := harness.SignV4(ctx, forged, client.AccessKey, "guess-"+client.SecretKey, e.Region, harness.SHA256Hex([]byte("forged")), at); err != nil {
		t.Fatal(err)
	}
	right := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "forged"), []byte("forged"))
	if err := harness.SignV4(ctx, right, client.AccessKey, client.SecretKey, e.Region, harness.SHA256Hex([]byte("forged")), at); err != nil {
		t.Fatal(err)
	}
	signatures["the signature the gateway expected"] = signatureRE.FindStringSubmatch(right.Header.Get("Authorization"))[1]
	signatures["a forged request's signature"] = signatureRE.FindStringSubmatch(forged.Header.Get("Authorization"))[1]
	resp := do(t, hc, forged)
	_, body, _ := harness.ReadS3Error(resp)
	texts["the error body of a forged request"] = body
	leakPresigned(t, e, c, hc, client, bucket, d, texts, signatures)
	for _, r := range append(append(rec.Requests(), mcRec.Requests()...), wrongRec.Requests()...) {
		if m := signatureRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			signatures[fmt.Sprintf("Authorization of %s %s", r.Method, r.Path)] = m[1]
		}
	}
	if len(signatures) < 10 {
		t.Fatalf("only %d signatures recorded; the workload did not run as meant", len(signatures))
	}

	leakAdmin(t, e, bucket, id, adminToken, nearMiss, texts)

	metrics, err := e.Gateway.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	texts["/metrics"] = metrics

	// serve --help with every secret in its environment and on its
	// command line.
	secretEnv := []string{
		"SWEEPGATE_ADMIN_TOKEN=" + adminToken,
		"SWEEPGATE_BACKEND_SECRET_KEY=" + e.MinIO.SecretKey,
		"SWEEPGATE_CREDENTIALS=" + client.AccessKey + ":" + client.SecretKey + ":" + client.Principal,
	}
	_, out, errOut := runSweepgate(t, secretEnv, "serve", "--config", e.Gateway.ConfigFile, "--admin-token", adminToken, "--help")
	if !strings.Contains(out+errOut, "admin.token") {
		t.Fatalf("serve --help does not describe admin.token:\n%s%s", out, errOut)
	}
	texts["serve --help"] = out + errOut
	leakConfigCheck(t, e, secretEnv, texts)

	secrets["the short admin token"] = leakConfigErrors(t, e, client, adminToken, nearMiss, texts)

	// The gateway's own log, last: everything above has been logged.
	log := e.Gateway.Log()
	for _, want := range []string{`"msg":"configuration"`, "[redacted]", `"msg":"request"`, "admin API: request refused"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the gateway's log has no %s; the check would prove nothing", want)
		}
	}
	texts["the gateway's log"] = log

	t.Logf("looked for %d secrets and %d signatures in %d texts (%d bytes of log)", len(secrets), len(signatures), len(texts), len(log))
	requireNoneIn(t, texts, secrets, signatures)
}

// leakConfigErrors runs serve with configurations that fail to load,
// holding the secrets, and adds its errors to texts: they must name what is
// wrong without quoting them. It returns the short admin token it tried.
func leakConfigErrors(t *testing.T, e *harness.Env, client harness.Credential, adminToken, nearMiss string, texts map[string]string) (shortToken string) {
	t.Helper()
	// Listeners and etcd point elsewhere in case one did load.
	elsewhere := []string{
		"SWEEPGATE_LISTEN=127.0.0.1:0", "SWEEPGATE_TLS_LISTEN=", "SWEEPGATE_ADMIN_LISTEN=127.0.0.1:0",
		"SWEEPGATE_ETCD_EMBEDDED_DATA_DIR=" + t.TempDir(),
		"SWEEPGATE_ETCD_EMBEDDED_CLIENT_URL=http://127.0.0.1:0", "SWEEPGATE_ETCD_EMBEDDED_PEER_URL=http://127.0.0.1:0",
	}
	shortToken = "short" + nearMiss[:4]
	for _, tc := range []struct {
		what, names string
		env         []string
	}{
		{"a short admin token", "admin.token", []string{"SWEEPGATE_ADMIN_TOKEN=" + shortToken}},
		{"a credential without a secret separator", "SWEEPGATE_CREDENTIALS", []string{"SWEEPGATE_CREDENTIALS=" + client.SecretKey}},
		{"an admin token and a token file", "admin.token_file", []string{"SWEEPGATE_ADMIN_TOKEN=" + adminToken, "SWEEPGATE_ADMIN_TOKEN_FILE=" + filepath.Join(t.TempDir(), "none")}},
	} {
		code, out, errOut := runSweepgate(t, append(slices.Clone(elsewhere), tc.env...), "serve", "--config", e.Gateway.ConfigFile)
		if code == 0 || !strings.Contains(out+errOut, tc.names) {
			t.Fatalf("serve with %s: exit %d, want a failure naming %s:\n%s%s", tc.what, code, tc.names, out, errOut)
		}
		texts["the error of a configuration with "+tc.what] = out + errOut
	}
	return shortToken
}

// leakPresigned uses presigned URLs of client's: one used, one expired, one
// altered, and one whose body (of d) is cut short. It adds the error bodies
// to texts and the URLs' signatures to signatures.
func leakPresigned(t *testing.T, e *harness.Env, c *s3.Client, hc *http.Client, client harness.Credential, bucket string, d harness.Data, texts, signatures map[string]string) {
	t.Helper()
	ctx := t.Context()
	presign := s3.NewPresignClient(c)
	pget, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("plain")})
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, do(t, hc, newRequest(t, http.MethodGet, pget.URL, nil)), http.StatusOK)
	expired := secPresign(t, e, client, http.MethodGet, objectURL(e.Endpoint, bucket, "plain"), time.Now().Add(-time.Hour), time.Minute)
	resp := do(t, hc, newRequest(t, http.MethodGet, expired, nil))
	_, body, _ := harness.ReadS3Error(resp)
	texts["the error body of an expired URL"] = body
	altered := secPresign(t, e, client, http.MethodGet, objectURL(e.Endpoint, bucket, "plain"), time.Now(), time.Hour)
	requireS3Error(t, do(t, hc, newRequest(t, http.MethodGet, strings.Replace(altered, "/plain?", "/other?", 1), nil)), http.StatusForbidden, "SignatureDoesNotMatch")
	cut := secPresign(t, e, client, http.MethodPut, objectURL(e.Endpoint, bucket, "cut"), time.Now(), time.Hour)
	if r := sendTruncated(t, newRequest(t, http.MethodPut, cut, nil), d.Bytes(), 1000); r != nil {
		r.Body.Close()
	}
	for what, u := range map[string]string{"presigned GET": pget.URL, "expired URL": expired, "altered URL": altered, "cut-short PUT": cut} {
		signatures[what] = mustQuery(t, u, "X-Amz-Signature")
	}
}

// leakAdmin calls the admin API, and its command-line clients, with the
// admin token and with a near miss of it, and adds what they answered to
// texts; upload id in bucket is one the API can show.
func leakAdmin(t *testing.T, e *harness.Env, bucket, id, adminToken, nearMiss string, texts map[string]string) {
	t.Helper()
	ctx := t.Context()
	adminGet := func(path, authorization string) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Gateway.AdminEndpoint+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp := do(t, http.DefaultClient, req)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Status + "\n" + string(b)
	}
	for _, path := range []string{"/admin/v1/sessions", "/admin/v1/reclaim/status", "/status", "/admin/v1/sessions/" + bucket + "/" + url.PathEscape(id)} {
		texts["admin "+path+" with the token"] = adminGet(path, "Bearer "+adminToken)
		texts["admin "+path+" with a near miss"] = adminGet(path, "Bearer "+nearMiss)
	}
	for _, env := range [][]string{{"SWEEPGATE_ADMIN_TOKEN=" + adminToken}, {"SWEEPGATE_ADMIN_TOKEN=" + nearMiss}} {
		_, out, errOut := runSweepgate(t, env, "reclaim", "status", "--admin", e.Gateway.AdminEndpoint)
		texts["sweepgate reclaim status with "+strings.SplitN(env[0], "=", 2)[0]] = out + errOut
	}
}

// leakOrdinaryWork does ordinary work in bucket with both clients: puts of
// d, a listing, a completed and an aborted multipart upload, a delete. It
// returns the completed upload's id.
func leakOrdinaryWork(t *testing.T, c *s3.Client, mc *minio.Client, bucket string, d harness.Data) (uploadID string) {
	t.Helper()
	ctx := t.Context()
	putData(t, c, bucket, "plain", d)
	requireObject(t, c, bucket, "plain", d)
	if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, bucket, "minio-go", d.Reader(), d.Size, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	p := harness.NewData(7602, 5*mib)
	id := createUpload(t, c, bucket, "multipart")
	parts := []s3types.CompletedPart{mustUploadPart(t, c, bucket, "multipart", id, 1, p.Section(0, p.Size))}
	if _, err := completeUpload(ctx, c, bucket, "multipart", id, parts); err != nil {
		t.Fatal(err)
	}
	if err := abortUpload(ctx, c, bucket, "aborted", createUpload(t, c, bucket, "aborted")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("minio-go")}); err != nil {
		t.Fatal(err)
	}
	return id
}

// requireNoneIn checks that none of the texts holds any of the secrets or
// the signatures, each named by what it is.
func requireNoneIn(t *testing.T, texts, secrets, signatures map[string]string) {
	t.Helper()
	for where, text := range texts {
		for what, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the %s:\n%s", where, what, excerpt(text, s))
			}
		}
		for what, sig := range signatures {
			if strings.Contains(text, sig) {
				t.Errorf("%s holds %s:\n%s", where, what, excerpt(text, sig))
			}
		}
	}
}

// excerpt returns the line of text around the first occurrence of s.
func excerpt(text, s string) string {
	i := strings.Index(text, s)
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text) - i
	}
	line := text[start : i+end]
	if len(line) > 600 {
		line = line[:600] + "..."
	}
	return "  " + line
}

// leakConfigCheck runs config check with the secrets in its environment,
// against the running gateway, and keeps what it prints: the
// configuration and the differences it lists.
func leakConfigCheck(t *testing.T, e *harness.Env, secretEnv []string, texts map[string]string) {
	t.Helper()
	code, out, errOut := runSweepgate(t, secretEnv, "config", "check", "--config", e.Gateway.ConfigFile, "--against-running")
	if code != 0 || !strings.Contains(out, "admin.token = \"[redacted]\"") || !strings.Contains(out, "# Compared with") {
		t.Fatalf("config check --against-running: exit %d\n%s%s", code, out, errOut)
	}
	texts["config check --against-running"] = out + errOut
}
