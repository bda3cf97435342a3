//go:build integration

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/logbuf"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// The tests of serve: the whole command in-process, against a stand-in
// backend and an embedded or external etcd.

// standInBackend is a stand-in S3 server: it answers every request with its
// current status, and records whether requests arrived signed.
type standInBackend struct {
	*httptest.Server
	status   atomic.Int32
	requests atomic.Int32
	unsigned atomic.Int32
}

func newBackend(t *testing.T) *standInBackend {
	t.Helper()
	b := &standInBackend{}
	b.status.Store(http.StatusOK)
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKBACKEND/") {
			b.unsigned.Add(1)
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(int(b.status.Load()))
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListAllMyBucketsResult><Buckets></Buckets></ListAllMyBucketsResult>`)
	}))
	t.Cleanup(b.Close)
	return b
}

// runningServe is a serve command running in-process.
type runningServe struct {
	addrs  serving
	logs   *logbuf.Buffer
	cancel context.CancelFunc
	done   chan struct{} // closed when serve returns
	code   int           // its exit code, once done is closed
	// cliEnv lets the admin commands find the admin token serve generated:
	// it names serve's data directory.
	cliEnv []string
}

// adminToken returns the admin token serve generated in its data
// directory.
func (s *runningServe) adminToken(t *testing.T) string {
	t.Helper()
	dir, _ := strings.CutPrefix(s.cliEnv[0], "SWEEPGATE_ETCD_EMBEDDED_DATA_DIR=")
	b, err := os.ReadFile(filepath.Join(dir, config.AdminTokenFileName))
	if err != nil {
		t.Fatalf("the generated admin token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// stop sends the equivalent of SIGTERM and returns the exit code.
func (s *runningServe) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
		return s.code
	case <-time.After(45 * time.Second):
		t.Fatal("serve did not stop within 45s of its context ending")
		return -1
	}
}

// baseArgs runs serve on free loopback ports with an embedded etcd in a
// temporary directory, against b.
func baseArgs(t *testing.T, b *standInBackend) []string {
	return []string{
		"--listen=127.0.0.1:0",
		"--admin-listen=127.0.0.1:0",
		"--etcd-embedded-data-dir=" + filepath.Join(t.TempDir(), "etcd"),
		"--etcd-embedded-client-url=http://127.0.0.1:0",
		"--etcd-embedded-peer-url=http://127.0.0.1:0",
		"--backend-endpoint=" + b.URL,
		"--backend-access-key=AKBACKEND",
		"--backend-secret-key=backend-secret-value",
		"--log-format=json",
		"--shutdown-drain-delay=0s",
	}
}

func startServe(t *testing.T, args ...string) *runningServe {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &runningServe{logs: &logbuf.Buffer{}, cancel: cancel, done: make(chan struct{}),
		cliEnv: []string{"SWEEPGATE_ETCD_EMBEDDED_DATA_DIR=" + argValue(args, "--etcd-embedded-data-dir")}}
	ready := make(chan serving, 1)
	c := &app{
		stdout: io.Discard, stderr: s.logs, version: "v0.0.0-test",
		onServing: func(a serving) { ready <- a },
	}
	go func() {
		defer close(s.done)
		s.code = c.run(ctx, append([]string{"serve"}, args...))
	}()
	select {
	case s.addrs = <-ready:
	case <-s.done:
		cancel()
		t.Fatalf("serve exited with %d before serving:\n%s", s.code, s.logs)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("serve did not start within 60s:\n%s", s.logs)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(45 * time.Second):
		}
	})
	return s
}

func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// signedGet sends GET / (ListBuckets) signed with SigV4, as an S3 client
// would.
func signedGet(t *testing.T, client *http.Client, url, accessKey, secret string) (int, string) {
	t.Helper()
	resp, body := signedDo(t, client, http.MethodGet, url+"/", accessKey, secret)
	return resp.StatusCode, body
}

// signedDo sends an empty-bodied request signed with SigV4, as an S3
// client would, and returns the response (its body read) and the body.
func signedDo(t *testing.T, client *http.Client, method, url, accessKey, secret string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(nil)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, hash, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("signed %s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestServeEmbedded(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	s := startServe(t, append(baseArgs(t, b), "--credential=AKCLIENT:client-secret-value:alice", "--log-level=debug")...)
	admin := "http://" + s.addrs.Admin
	s3 := "http://" + s.addrs.S3
	hc := &http.Client{Timeout: 10 * time.Second}

	if !s.addrs.EmbeddedEtcd || len(s.addrs.EtcdEndpoints) != 1 {
		t.Errorf("serving %+v, want one embedded etcd endpoint", s.addrs)
	}
	if code, body := get(t, hc, admin+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, hc, admin+"/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}

	// The gateway is wired with the configured credentials: the backend's
	// own key and the extra client key pass, a wrong secret does not, and
	// what reaches the backend is re-signed with the backend's key.
	if code, body := signedGet(t, hc, s3, "AKBACKEND", "backend-secret-value"); code != http.StatusOK {
		t.Errorf("ListBuckets with the backend's key = %d %s", code, body)
	}
	if code, body := signedGet(t, hc, s3, "AKCLIENT", "client-secret-value"); code != http.StatusOK {
		t.Errorf("ListBuckets with a configured client key = %d %s", code, body)
	}
	if code, body := signedGet(t, hc, s3, "AKCLIENT", "wrong"); code != http.StatusForbidden || !strings.Contains(body, "<Code>SignatureDoesNotMatch</Code>") {
		t.Errorf("ListBuckets with a wrong secret = %d %s", code, body)
	}
	if n := b.unsigned.Load(); n != 0 {
		t.Errorf("%d requests reached the backend without the backend's signature", n)
	}

	code, metrics := get(t, hc, admin+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, w := range []string{
		"go_goroutines", "process_cpu_seconds_total", `sweepgate_build_info{goversion="go`,
		`version="v0.0.0-test"`, "sweepgate_requests_total", "sweepgate_auth_failures_total", "sweepgate_log_lines_dropped_total",
		"promhttp_metric_handler_requests_total", `sweepgate_etcd_up{endpoint="http://127.0.0.1:`,
		"sweepgate_etcd_db_size_bytes{", `sweepgate_etcd_db_quota_bytes{endpoint="http://127.0.0.1:`,
	} {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}

	// Readiness follows the backend.
	b.status.Store(http.StatusInternalServerError)
	if code, body := get(t, hc, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: backend:") {
		t.Errorf("/readyz with a failing backend = %d %q", code, body)
	}
	if code, _ := get(t, hc, admin+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz must not follow dependencies, got %d", code)
	}
	b.status.Store(http.StatusOK)
	if code, body := get(t, hc, admin+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the backend recovered = %d %q", code, body)
	}
	if code, _ := get(t, hc, admin+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope = %d, want 404", code)
	}

	checkServeSessionsAndStop(t, s, hc, admin)
}

func checkServeSessionsAndStop(t *testing.T, s *runningServe, hc *http.Client, admin string) {
	t.Helper()
	// Sessions are on by default: the admin API reads them, the gauge
	// counts them (every state, 0 included, once its first count is done)
	// and the store's etcd requests are timed.
	if resp, body := adminRequestWith(t, "GET", admin+"/admin/v1/sessions", "Bearer "+s.adminToken(t)); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"sessions": []`) {
		t.Errorf("/admin/v1/sessions = %d %s", resp.StatusCode, body)
	}
	if code, _, errOut := runCLI(t, s.cliEnv, "sessions", "show", "--admin", admin, "b", "nope"); code != cli.ExitNotFound {
		t.Errorf("sessions show of an unknown upload: exit %d, stderr %q", code, errOut)
	}
	deadline := time.Now().Add(10 * time.Second)
	var metrics string
	for {
		_, metrics = get(t, hc, admin+"/metrics")
		if strings.Contains(metrics, `sweepgate_sessions{state="cleanup_pending"} 0`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range []string{`sweepgate_sessions{state="active"} 0`, `sweepgate_sessions{state="cleanup_pending"} 0`,
		`sweepgate_etcd_request_duration_seconds_bucket{op="txn"`, "sweepgate_sessions_recounts_total 0"} {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}

	if code := s.stop(t); code != cli.ExitOK {
		t.Errorf("exit %d after a clean shutdown, want 0:\n%s", code, s.logs)
	}
	logs := s.logs.String()
	for _, w := range []string{`"msg":"sweepgate serving"`, `"etcd":"embedded"`, `"listen":"` + s.addrs.S3 + `"`, `"admin_listen":"` + s.addrs.Admin + `"`, `"msg":"sweepgate stopped"`} {
		if !strings.Contains(logs, w) {
			t.Errorf("logs lack %s", w)
		}
	}
	if strings.Count(logs, `"msg":"sweepgate serving"`) != 1 {
		t.Error("want exactly one startup line")
	}
	// Debug logging prints the whole configuration; the secrets stay out.
	if !strings.Contains(logs, `"msg":"configuration"`) {
		t.Error("debug logs lack the configuration")
	}
	for _, secret := range []string{"backend-secret-value", "client-secret-value"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain the secret %q", secret)
		}
	}
	if strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("a clean run logged errors:\n%s", logs)
	}
}

// TestServeExternalEtcd runs serve on an external etcd that then goes
// away: the gateway stays ready (it still serves what needs no session),
// and /etcdz says etcd is gone.
func TestServeExternalEtcd(t *testing.T) {
	t.Parallel()
	etcd, _ := etcdtest.Start(t)
	b := newBackend(t)
	s := startServe(t, append(baseArgs(t, b), "--etcd-endpoints="+strings.Join(etcd.Endpoints(), ","), "--etcd-dial-timeout=2s", "--etcd-request-timeout=1s", "--credential=AKCLIENT:client-secret-value:alice")...)
	if s.addrs.EmbeddedEtcd {
		t.Error("serve started an embedded etcd although endpoints were given")
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	admin := "http://" + s.addrs.Admin
	if code, body := get(t, hc, admin+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d %q", code, body)
	}
	if code, body := get(t, hc, admin+"/etcdz"); code != http.StatusOK {
		t.Errorf("/etcdz = %d %q", code, body)
	}
	etcd.Close()
	waitEtcdz(t, hc, admin, http.StatusServiceUnavailable)
	if code, body := get(t, hc, admin+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with etcd gone = %d %q, want 200: the gateway still serves", code, body)
	}
	if code, body := signedGet(t, hc, "http://"+s.addrs.S3, "AKCLIENT", "client-secret-value"); code != http.StatusOK {
		t.Errorf("ListBuckets with etcd gone = %d %q", code, body)
	}
	if code := s.stop(t); code != cli.ExitOK {
		t.Errorf("exit %d, want 0", code)
	}
	if !strings.Contains(s.logs.String(), `"etcd":"external"`) {
		t.Error("startup line does not say etcd is external")
	}
}

// waitEtcdz waits up to 15 s for /etcdz to answer want.
func waitEtcdz(t *testing.T, hc *http.Client, admin string, want int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := get(t, hc, admin+"/etcdz")
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/etcdz = %d %q, want %d", code, body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestServeStartsWithoutEtcd starts serve while its etcd does not answer:
// it serves and is ready, refuses a multipart call at once with a
// retryable SlowDown, and reports etcd's state on /etcdz.
func TestServeStartsWithoutEtcd(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	s := startServe(t, append(baseArgs(t, b), "--etcd-endpoints=http://127.0.0.1:1", "--etcd-dial-timeout=300ms", "--etcd-request-timeout=500ms", "--credential=AKCLIENT:client-secret-value:alice")...)
	hc := &http.Client{Timeout: 10 * time.Second}
	admin := "http://" + s.addrs.Admin
	if code, body := get(t, hc, admin+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz without etcd = %d %q, want 200", code, body)
	}
	if code, body := get(t, hc, admin+"/etcdz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "etcd unavailable") {
		t.Errorf("/etcdz without etcd = %d %q, want 503", code, body)
	}
	s3 := "http://" + s.addrs.S3
	if code, body := signedGet(t, hc, s3, "AKCLIENT", "client-secret-value"); code != http.StatusOK {
		t.Errorf("ListBuckets without etcd = %d %q", code, body)
	}
	before := b.requests.Load()
	start := time.Now()
	resp, body := signedDo(t, hc, http.MethodPost, s3+"/bucket/key?uploads", "AKCLIENT", "client-secret-value")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "<Code>SlowDown</Code>") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("CreateMultipartUpload without etcd = %d Retry-After %q %q, want 503 SlowDown with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	if n := b.requests.Load() - before; n != 0 {
		t.Errorf("the refused multipart call sent %d requests to the backend", n)
	}
	if !strings.Contains(s.logs.String(), "etcd does not answer") || !strings.Contains(s.logs.String(), "127.0.0.1:1") {
		t.Errorf("the log does not say etcd does not answer:\n%s", s.logs)
	}
	if code := s.stop(t); code != cli.ExitOK {
		t.Errorf("exit %d, want 0", code)
	}
}

// TestServeWithoutSessionsNeedsNoEtcd: with sessions off, serve starts no
// etcd and dials none, even one that cannot be reached.
func TestServeWithoutSessionsNeedsNoEtcd(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	s := startServe(t, append(baseArgs(t, b), "--etcd-endpoints=http://127.0.0.1:1", "--sessions-enabled=false", "--credential=AKCLIENT:client-secret-value:alice")...)
	hc := &http.Client{Timeout: 10 * time.Second}
	admin := "http://" + s.addrs.Admin
	if code, body := get(t, hc, admin+"/etcdz"); code != http.StatusOK || !strings.Contains(body, "not used") {
		t.Errorf("/etcdz with sessions off = %d %q", code, body)
	}
	if code, body := signedGet(t, hc, "http://"+s.addrs.S3, "AKCLIENT", "client-secret-value"); code != http.StatusOK {
		t.Errorf("ListBuckets = %d %q", code, body)
	}
	if code := s.stop(t); code != cli.ExitOK {
		t.Errorf("exit %d, want 0", code)
	}
	if !strings.Contains(s.logs.String(), `"etcd":"none (sessions off)"`) {
		t.Errorf("startup line does not say no etcd is used:\n%s", s.logs)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key, and
// returns their paths and a pool that trusts the certificate.
func selfSignedCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sweepgate test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestServeTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSignedCert(t)
	b := newBackend(t)
	s := startServe(t, append(baseArgs(t, b), "--listen=", "--tls-listen=127.0.0.1:0", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile)...)
	if s.addrs.S3 != "" || s.addrs.S3TLS == "" {
		t.Fatalf("serving %+v, want HTTPS only", s.addrs)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
	}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+s.addrs.S3TLS+"/", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS request: %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("HTTPS served %s, want HTTP/2", resp.Proto)
	}
	if code, body := signedGet(t, hc, "https://"+s.addrs.S3TLS, "AKBACKEND", "backend-secret-value"); code != http.StatusOK {
		t.Errorf("signed request over HTTPS = %d %s", code, body)
	}
	if code := s.stop(t); code != cli.ExitOK {
		t.Errorf("exit %d, want 0", code)
	}
}

func TestServeStartFailures(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Not defer: the parallel subtests run after this function returns.
	t.Cleanup(func() { taken.Close() })
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	caFile, _, _ := selfSignedCert(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"port taken", []string{"--listen=" + taken.Addr().String()}, "address already in use"},
		{"admin port taken", []string{"--admin-listen=" + taken.Addr().String()}, "admin.listen"},
		{"missing certificate", []string{"--tls-listen=127.0.0.1:0", "--tls-cert-file=/nonexistent/cert.pem", "--tls-key-file=/nonexistent/key.pem"}, "tls_cert_file"},
		{"data dir is a file", []string{"--etcd-embedded-data-dir=" + notADir}, "etcd"},
		// etcd.ca_file fills the shard's: its etcd is dialled over TLS, and
		// the start fails only for want of an answer.
		{"shard's etcd down", []string{"--etcd-shards=[{name: a, endpoints: [https://127.0.0.1:1]}]", "--etcd-ca-file=" + caFile, "--etcd-dial-timeout=1s"},
			"the default shard a must answer at start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"serve"}, baseArgs(t, b)...), tt.args...)
			code, _, errOut := runCLI(t, nil, args...)
			if code != cli.ExitError {
				t.Errorf("exit %d, want %d", code, cli.ExitError)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr does not mention %q:\n%s", tt.want, errOut)
			}
		})
	}
}

// testToken is an admin token for serve's --admin-token.
const testToken = "s3cr3t-admin-token-0123456789"

// adminRequestWith sends a request with the Authorization header
// authorization (none when empty) and returns the answer and its body.
func adminRequestWith(t *testing.T, method, u, authorization string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}
