//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	pemFile string
	pool    *x509.CertPool
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, pemFile: filepath.Join(dir, name+".pem"), pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	writePEMFile(t, ca.pemFile, "CERTIFICATE", der)
	return ca
}

// issue writes a server certificate for 127.0.0.1 and localhost with
// serial, signed by ca, and its key, to certFile and keyFile.
func (ca *testCA) issue(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "sweepgate admin"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEMFile(t, keyFile, "PRIVATE KEY", keyDER)
	writePEMFile(t, certFile, "CERTIFICATE", der)
}

func writePEMFile(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// servedSerial opens a new TLS connection to addr, verified with roots,
// and returns the serial of the certificate it presents.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestAdminTLS runs a gateway whose admin listener serves HTTPS with a
// certificate from a CA made here: plain HTTP gets nothing from it; the
// admin commands and the healthcheck reach it with --admin-ca (or
// $SWEEPGATE_ADMIN_CA) and refuse it, with a certificate error, without
// the CA or with another; the status page's cookie is Secure; a reload
// serves a replaced certificate (and a broken one keeps it); and
// `sweepgate config check` against it tells a reloadable change from a
// restart-only one.
func TestAdminTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "admin-ca")
	wrong := newTestCA(t, dir, "other-ca")
	certFile, keyFile := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	ca.issue(t, certFile, keyFile, 100)
	e := harness.Start(t, harness.Options{AdminTLS: &harness.AdminTLS{CertFile: certFile, KeyFile: keyFile, Roots: ca.pool}})
	e.RequireGateway(t)
	g := e.Gateway
	admin := g.AdminEndpoint
	if !strings.HasPrefix(admin, "https://") {
		t.Fatalf("admin endpoint %s, want https", admin)
	}
	addr := strings.TrimPrefix(admin, "https://")
	token := adminTokenEnv(admin)
	if len(token) == 0 {
		t.Fatal("no admin token for the gateway")
	}

	// Plain HTTP: no answer of the admin API, probes included.
	for _, path := range []string{"/healthz", "/admin/v1/sessions"} {
		resp, err := http.Get("http://" + addr + path)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "ok") && path == "/healthz" {
				t.Errorf("plain HTTP %s: %s %q, want no answer of the listener", path, resp.Status, body)
			}
		}
	}

	// The commands: with the CA they work, without it or with another
	// they refuse the certificate and say how to trust it.
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		return runSweepgate(t, append(append([]string{}, token...), env...), args...)
	}
	if code, out, errOut := run(nil, "sessions", "list", "--admin", admin, "--admin-ca", ca.pemFile); code != 0 {
		t.Fatalf("sessions list with --admin-ca: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run([]string{"SWEEPGATE_ADMIN_CA=" + ca.pemFile}, "sessions", "list", "--admin", addr); code != 0 {
		t.Fatalf("sessions list with $SWEEPGATE_ADMIN_CA and host:port: exit %d\n%s%s", code, out, errOut)
	}
	for name, args := range map[string][]string{
		"no CA":       {"sessions", "list", "--admin", admin},
		"another CA":  {"sessions", "list", "--admin", admin, "--admin-ca", wrong.pemFile},
		"healthcheck": {"healthcheck", "--admin", admin},
	} {
		code, out, errOut := run(nil, args...)
		if code != 1 || !strings.Contains(errOut, "certificate is not trusted") || !strings.Contains(errOut, "--admin-ca") {
			t.Errorf("%s: exit %d, want 1 with a certificate error naming --admin-ca\n%s%s", name, code, out, errOut)
		}
	}
	if code, out, errOut := run(nil, "sessions", "list", "--admin", "http://"+addr, "--admin-ca", ca.pemFile); code != 2 || !strings.Contains(errOut, "https://") {
		t.Errorf("an http:// URL with --admin-ca: exit %d, want 2 saying https://\n%s%s", code, out, errOut)
	}

	// The healthcheck: with the CA by flag, and, as in a container, with
	// the gateway's configuration (https from admin.tls_cert_file) and
	// the CA in the environment.
	if code, out, errOut := run(nil, "healthcheck", "--admin", admin, "--admin-ca", ca.pemFile); code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("healthcheck with --admin-ca: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run([]string{"SWEEPGATE_ADMIN_CA=" + ca.pemFile}, "healthcheck", "--ready", "--config", g.ConfigFile); code != 0 || !strings.Contains(out, admin+"/readyz") {
		t.Errorf("healthcheck --ready with the configuration: exit %d\n%s%s", code, out, errOut)
	}

	// Over TLS, the status page's cookie is Secure.
	tokenValue := strings.TrimPrefix(token[0], "SWEEPGATE_ADMIN_TOKEN=")
	client := g.AdminClient()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.PostForm(admin+"/login", url.Values{"token": {tokenValue}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || !cs[0].Secure {
		t.Errorf("sign-in over TLS: %s with cookies %v, want one Secure cookie", resp.Status, cs)
	}

	checkAdminCertRotation(t, admin, ca, certFile, keyFile, run)
	checkAgainstRunning(t, g, ca)
}

// checkAgainstRunning runs `sweepgate config check --against-running` with
// g's own configuration (nothing differs), then with a candidate that adds
// a client credential (applies at reload) and changes reclaim.grace (needs
// a restart). The command finds the listener, https, and the token
// serve generated through the candidate configuration, as an operator's
// would: no SWEEPGATE_ADMIN_TOKEN, which would also set admin.token in
// the candidate.
func checkAgainstRunning(t *testing.T, g *harness.Gateway, ca *testCA) {
	t.Helper()
	caEnv := []string{"SWEEPGATE_ADMIN_CA=" + ca.pemFile}
	code, out, errOut := runSweepgate(t, caEnv, "config", "check", "--config", g.ConfigFile, "--against-running")
	if code != 0 || !strings.Contains(out, "# no setting differs.") {
		t.Fatalf("config check of the running configuration: exit %d\n%s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(g.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["credentials"] = []map[string]any{{"access_key": "AKCANDIDATE", "secret_key": "candidate-secret-3e9f1a", "principal": "cand"}}
	cfg["reclaim"] = map[string]any{"grace": "7h"}
	candidate := filepath.Join(t.TempDir(), "candidate.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(candidate, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runSweepgate(t, caEnv, "config", "check", "--config", candidate, "--against-running")
	if code != 0 {
		t.Fatalf("config check of the candidate: exit %d\n%s%s", code, out, errOut)
	}
	_, diff, _ := strings.Cut(out, "# Compared with")
	for _, want := range []string{
		"\ncredentials: [] -> [AKCANDIDATE:[redacted]:cand] (applies at reload)\n",
		"\nreclaim.grace: 24h0m0s -> 7h0m0s (needs a restart)\n",
		"# 2 settings differ: 1 apply at reload",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("config check of the candidate does not say %q:\n%s", want, diff)
		}
	}
	if strings.Contains(out+errOut, "candidate-secret-3e9f1a") {
		t.Error("config check printed the candidate's secret")
	}
}

// checkAdminCertRotation replaces the admin listener's certificate files
// and reloads: new connections get the new certificate. A pair that does
// not match is refused, and the certificate in effect stays.
func checkAdminCertRotation(t *testing.T, admin string, ca *testCA, certFile, keyFile string, run func([]string, ...string) (int, string, string)) {
	t.Helper()
	addr := strings.TrimPrefix(admin, "https://")
	dir := t.TempDir()
	if got := servedSerial(t, addr, ca.pool); got != 100 {
		t.Fatalf("served serial %d, want 100", got)
	}
	ca.issue(t, certFile, keyFile, 200)
	if got := servedSerial(t, addr, ca.pool); got != 100 {
		t.Fatalf("before the reload: served serial %d, want still 100", got)
	}
	if code, out, errOut := run(nil, "reload", "--admin", admin, "--admin-ca", ca.pemFile); code != 0 || !strings.Contains(out, "Reloaded") {
		t.Fatalf("reload: exit %d\n%s%s", code, out, errOut)
	}
	if got := servedSerial(t, addr, ca.pool); got != 200 {
		t.Errorf("after the reload: served serial %d, want 200", got)
	}
	ca.issue(t, certFile, filepath.Join(dir, "stray.key"), 300) // the key no longer matches
	if code, out, errOut := run(nil, "reload", "--admin", admin, "--admin-ca", ca.pemFile); code != 1 || !strings.Contains(errOut, "admin.tls_cert_file") {
		t.Errorf("reload of a mismatched pair: exit %d, want 1 naming admin.tls_cert_file\n%s%s", code, out, errOut)
	}
	if got := servedSerial(t, addr, ca.pool); got != 200 {
		t.Errorf("after a refused reload: served serial %d, want 200", got)
	}
	// A good pair again, for what follows (config check loads it).
	ca.issue(t, certFile, keyFile, 400)

}
