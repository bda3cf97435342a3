//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// connWatch records the TLS connection each request of a client went
// over, so that a test can tell a kept connection from a new one and see
// the certificate a connection was made with.
type connWatch struct {
	mu     sync.Mutex
	reused bool
	serial string
}

func (w *connWatch) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.reused = info.Reused
			if c, ok := info.Conn.(*tls.Conn); ok {
				w.serial = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
			}
		}}
		return next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// last returns whether the last request reused its connection, and the
// serial of that connection's certificate.
func (w *connWatch) last() (reused bool, serial string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reused, w.serial
}

// certSerial returns the serial number of c's certificate, as its file
// holds it now.
func certSerial(t *testing.T, c *harness.TLSCert) string {
	t.Helper()
	raw, err := os.ReadFile(c.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s holds no PEM block", c.CertFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", c.CertFile, err)
	}
	return cert.SerialNumber.String()
}

// reloadRig is a gateway whose credentials come from a credentials_file,
// with S3 clients that trust its certificate and the one that replaces it.
type reloadRig struct {
	t         *testing.T
	e         *harness.Env
	g         *harness.Gateway
	bucket    string
	credsFile string
	next      *harness.TLSCert // the certificate the test rotates to
	roots     *x509.CertPool
}

func newReloadRig(t *testing.T, creds ...string) *reloadRig {
	dir := t.TempDir()
	r := &reloadRig{t: t, credsFile: filepath.Join(dir, "credentials.yaml")}
	writeCredentials(t, r.credsFile, creds...)
	r.e = harness.Start(t, harness.Options{Config: map[string]any{"credentials_file": r.credsFile}})
	r.e.RequireGateway(t)
	r.g, r.bucket = r.e.Gateway, r.e.Bucket(t)
	r.next = harness.NewTLSCert(t, dir)
	r.roots = x509.NewCertPool()
	for _, c := range []*harness.TLSCert{r.g.Cert, r.next} {
		raw, _ := os.ReadFile(c.CertFile)
		r.roots.AppendCertsFromPEM(raw)
	}
	return r
}

// client returns an S3 client of the TLS listener signing with ak and sk,
// and what watches its connections.
func (r *reloadRig) client(ak, sk string) (*s3.Client, *connWatch) {
	w := new(connWatch)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: r.roots, MinVersion: tls.VersionTLS12}
	r.t.Cleanup(tr.CloseIdleConnections)
	return harness.NewS3Client(r.g.TLSEndpoint, r.e.Region, ak, sk, w.wrap(tr), true), w
}

func (r *reloadRig) put(c *s3.Client, key string) error {
	_, err := c.PutObject(r.t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(r.bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("reload")),
	})
	return err
}

// TestReloadCredentialsAndCertificate rotates a client's secret, removes
// and adds keys, and replaces the S3 TLS certificate under a running
// gateway, then sends SIGHUP: the new keys and certificate apply at once,
// the old secret and removed key are refused, and a connection opened
// before the reload stays open. A reload whose credentials file or
// certificate is broken changes nothing (not even its valid parts), says
// why, and leaves the process serving.
func TestReloadCredentialsAndCertificate(t *testing.T) {
	r := newReloadRig(t, "AKROTATE:secret-one-0123456789", "AKREMOVED:secret-removed-0123456789")
	oldSerial := certSerial(t, r.g.Cert)
	rotating, watch := r.client("AKROTATE", "secret-one-0123456789")
	removed, _ := r.client("AKREMOVED", "secret-removed-0123456789")
	for name, c := range map[string]*s3.Client{"AKROTATE": rotating, "AKREMOVED": removed} {
		if err := r.put(c, "before/"+name); err != nil {
			t.Fatalf("%s before the reload: %v", name, err)
		}
	}
	if _, serial := watch.last(); serial != oldSerial {
		t.Fatalf("the first connection presented certificate %s, want %s", serial, oldSerial)
	}

	// Rotate everything, then SIGHUP.
	writeCredentials(t, r.credsFile, "AKROTATE:secret-two-0123456789", "AKADDED:secret-added-0123456789")
	installCert(t, r.next, r.g.Cert)
	signalGateway(t, r.g, syscall.SIGHUP)
	awaitReloads(t, r.g, "success", 1)

	expectRefused(t, r.put(rotating, "after/old-secret"), "SignatureDoesNotMatch", "the rotated-out secret")
	if reused, serial := watch.last(); !reused || serial != oldSerial {
		t.Errorf("the connection opened before the reload: reused %v, certificate %s; want the same connection, still on certificate %s", reused, serial, oldSerial)
	}
	expectRefused(t, r.put(removed, "after/removed"), "InvalidAccessKeyId", "the removed key")
	rotated, watchNew := r.client("AKROTATE", "secret-two-0123456789")
	if err := r.put(rotated, "after/rotated"); err != nil {
		t.Fatalf("the rotated secret after the reload: %v", err)
	}
	if _, serial := watchNew.last(); serial != certSerial(t, r.next) {
		t.Errorf("a new connection after the reload presented certificate %s, want the new one %s", serial, certSerial(t, r.next))
	}
	added, _ := r.client("AKADDED", "secret-added-0123456789")
	if err := r.put(added, "after/added"); err != nil {
		t.Fatalf("the added key after the reload: %v", err)
	}
	r.refusedReloadsChangeNothing(added)
}

// refusedReloadsChangeNothing breaks the credentials file, then the
// certificate, and checks that each reload is refused with its reason and
// changes nothing, then mends them; inEffect is a client whose key is in
// effect throughout.
func (r *reloadRig) refusedReloadsChangeNothing(inEffect *s3.Client) {
	t, g := r.t, r.g
	if err := os.WriteFile(r.credsFile, []byte("- access_key: AKLATE\n  principal: nobody\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	status, body := adminReload(t, g)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, `"reload_failed"`) || !strings.Contains(body, "credentials_file") {
		t.Errorf("reload with a broken credentials file: %d %s; want 422 reload_failed naming credentials_file", status, body)
	}
	signalGateway(t, g, syscall.SIGHUP)
	awaitReloads(t, g, "failure", 2)
	if s, _ := readMetrics(t, g); s["sweepgate_config_last_reload_successful"] != 0 {
		t.Errorf("sweepgate_config_last_reload_successful = %v after a refused reload, want 0", s["sweepgate_config_last_reload_successful"])
	}
	if err := r.put(inEffect, "after/broken-credentials"); err != nil {
		t.Errorf("the keys in effect after a refused reload: %v", err)
	}

	// A broken certificate refuses the whole reload: the valid credentials
	// file read with it is not applied either.
	writeCredentials(t, r.credsFile, "AKROTATE:secret-two-0123456789", "AKADDED:secret-added-0123456789", "AKLATE:secret-late-0123456789")
	if err := os.WriteFile(g.Cert.CertFile, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := sweepgateCmd(t, g.AdminEndpoint, "reload"); code != 1 || !strings.Contains(errOut, "tls_cert_file") {
		t.Errorf("sweepgate reload with a broken certificate: exit %d, %q; want 1 naming tls_cert_file", code, errOut)
	}
	late, _ := r.client("AKLATE", "secret-late-0123456789")
	expectRefused(t, r.put(late, "after/late"), "InvalidAccessKeyId", "a key from a refused reload")
	if err := r.put(inEffect, "after/broken-cert"); err != nil {
		t.Errorf("the keys in effect after a refused reload: %v", err)
	}

	// Mended, the reload applies, and says no restart is needed.
	installCert(t, r.next, g.Cert)
	status, body = adminReload(t, g)
	var res struct {
		RestartNeeded []string `json:"restart_needed"`
	}
	if err := json.Unmarshal([]byte(body), &res); status != http.StatusOK || err != nil || res.RestartNeeded == nil || len(res.RestartNeeded) != 0 {
		t.Errorf("reload after mending: %d %s; want 200 with restart_needed []", status, body)
	}
	if code, out, errOut := sweepgateCmd(t, g.AdminEndpoint, "reload"); code != 0 || !strings.Contains(out, "Reloaded") {
		t.Errorf("sweepgate reload: exit %d, %q %q; want 0 and Reloaded", code, out, errOut)
	}
	if err := r.put(late, "after/mended"); err != nil {
		t.Errorf("the key added by the mended reload: %v", err)
	}
	if !g.Running() {
		t.Fatal("the gateway stopped during the reloads")
	}
}

// writeCredentials writes a credentials_file listing AK:SECRET pairs.
func writeCredentials(t *testing.T, path string, pairs ...string) {
	t.Helper()
	var b strings.Builder
	for _, p := range pairs {
		ak, sk, _ := strings.Cut(p, ":")
		b.WriteString("- {access_key: " + ak + ", secret_key: " + sk + "}\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// installCert copies from's certificate and key over the files of to,
// which the gateway's configuration names.
func installCert(t *testing.T, from, to *harness.TLSCert) {
	t.Helper()
	for src, dst := range map[string]string{from.CertFile: to.CertFile, from.KeyFile: to.KeyFile} {
		raw, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func signalGateway(t *testing.T, g *harness.Gateway, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(g.PID(), sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// awaitReloads waits until sweepgate_config_reloads_total{outcome} is n.
func awaitReloads(t *testing.T, g *harness.Gateway, outcome string, n float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, _ := readMetrics(t, g)
		got, _ := s.series("sweepgate_config_reloads_total", "outcome", outcome)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sweepgate_config_reloads_total{outcome=%q} = %v, want %v", outcome, got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminReload sends POST /admin/v1/reload and returns the answer.
func adminReload(t *testing.T, g *harness.Gateway) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.AdminEndpoint+"/admin/v1/reload", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.AdminToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /admin/v1/reload: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &doc) != nil {
		t.Errorf("POST /admin/v1/reload answered no JSON: %s", body)
	}
	return resp.StatusCode, string(body)
}

// expectRefused checks that err is the S3 error code.
func expectRefused(t *testing.T, err error, code, what string) {
	t.Helper()
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != code {
		t.Errorf("%s: got %v, want %s", what, err, code)
	}
}

// TestReloadBackendSecret rotates the secret of the MinIO user a client's
// backend identity signs as: until the gateway reloads the identity's
// secret_key_file, MinIO refuses the client's requests; after SIGHUP they
// go through again, and so does the reclaimer's readiness check, which
// signs as the same rotated user.
func TestReloadBackendSecret(t *testing.T) {
	t.Parallel()
	m := harness.StartMinIO(t)
	ctx := t.Context()
	if err := m.AddUser(ctx, "rotating", "rotating-secret-1", s3Policy([]string{"s3:*"}, identityShared)); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(t.TempDir(), "rotating.secret")
	if err := os.WriteFile(secretFile, []byte("rotating-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := harness.StartGateway(t, m, harness.Options{Config: map[string]any{
		"backend": map[string]any{"identities": []map[string]any{
			{"name": "rotating", "access_key": "rotating", "secret_key_file": secretFile},
		}},
		"credentials": []map[string]any{{"access_key": "app", "secret_key": "app-secret-12345", "backend": "rotating"}},
		"reclaim":     map[string]any{"backend_identity": "rotating", "buckets": []string{identityShared}},
	}})
	direct := harness.NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
	if _, err := direct.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(identityShared)}); err != nil {
		t.Fatal(err)
	}
	app := harness.NewS3Client(g.Endpoint, m.Region, "app", "app-secret-12345", http.DefaultTransport, true)
	put := func(key string) error {
		_, err := app.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(identityShared), Key: aws.String(key), Body: strings.NewReader("x")})
		return err
	}
	if err := put("before"); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	if err := m.SetUserSecret(ctx, "rotating", "rotating-secret-2"); err != nil {
		t.Fatal(err)
	}
	expectRefused(t, put("rotated-on-minio-only"), "SignatureDoesNotMatch", "a request signed with the secret MinIO no longer has")
	if err := os.WriteFile(secretFile, []byte("rotating-secret-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	signalGateway(t, g, syscall.SIGHUP)
	awaitReloads(t, g, "success", 1)
	if err := put("after"); err != nil {
		t.Errorf("after the reload: %v", err)
	}
	resp, err := http.Get(g.AdminEndpoint + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, resp, http.StatusOK)
}
