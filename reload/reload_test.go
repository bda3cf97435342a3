package reload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sweepgate/sweepgate/config"
)

// value reads a counter's or gauge's value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// loadArgs returns a load function reading a configuration from args,
// which the test may change between reloads.
func loadArgs(args *[]string) func() (*config.Config, error) {
	return func() (*config.Config, error) {
		return config.Load(append([]string{"--backend-endpoint=http://127.0.0.1:9100", "--backend-access-key=AK"}, *args...), nil)
	}
}

func TestReloadAppliesAllPartsOrNone(t *testing.T) {
	args := []string{"--backend-secret-key=one"}
	load := loadArgs(&args)
	first, err := load()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := New(first, load, slog.New(slog.DiscardHandler), reg)
	var applied []string
	failWith := ""
	r.Add(func(c *config.Config) (func(), error) {
		return func() { applied = append(applied, "secret="+string(c.Backend.SecretKey)) }, nil
	})
	r.Add(func(*config.Config) (func(), error) {
		if failWith != "" {
			return nil, errors.New(failWith)
		}
		return func() { applied = append(applied, "second") }, nil
	})
	reloads := func(outcome string) float64 {
		return value(t, r.reloads.WithLabelValues(outcome))
	}

	args = []string{"--backend-secret-key=two", "--listen=:9100"}
	restart, err := r.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(applied, ",") != "secret=two,second" {
		t.Errorf("applied %v, want both parts with the new secret", applied)
	}
	if len(restart) != 1 || restart[0] != "listen" {
		t.Errorf("restart needed for %v, want [listen]", restart)
	}
	// In effect: the new secret, but the listener of the start.
	if eff := r.InEffect(); string(eff.Backend.SecretKey) != "two" || eff.Listen != first.Listen {
		t.Errorf("in effect: secret %q, listen %q; want two and the start's %q", eff.Backend.SecretKey, eff.Listen, first.Listen)
	}

	// A part that cannot prepare: no part commits.
	applied, failWith = nil, "the second part is broken"
	args = []string{"--backend-secret-key=three", "--listen=:9100"}
	if _, err := r.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), failWith) {
		t.Errorf("reload with a broken part: %v, want its error", err)
	}
	if len(applied) != 0 {
		t.Errorf("a refused reload applied %v", applied)
	}
	if reloads("failure") != 1 || value(t, r.successful) != 0 {
		t.Errorf("after a refused reload: failures %v, successful %v; want 1, 0", reloads("failure"), value(t, r.successful))
	}

	// A configuration that does not load: no part is even asked.
	failWith = ""
	args = []string{"--backend-secret-key=four", "--listen=:9100", "--reclaim-grace=-1s"}
	if _, err := r.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "reclaim.grace") {
		t.Errorf("reload of an invalid configuration: %v, want the setting named", err)
	}
	if len(applied) != 0 {
		t.Errorf("an invalid configuration applied %v", applied)
	}

	// Mended: applied, and compared with the last configuration applied,
	// not the first.
	args = []string{"--backend-secret-key=five", "--listen=:9100"}
	restart, err = r.Reload(context.Background())
	if err != nil || len(restart) != 0 {
		t.Errorf("mended reload: restart %v, err %v; want none, nil", restart, err)
	}
	if strings.Join(applied, ",") != "secret=five,second" {
		t.Errorf("applied %v after mending", applied)
	}
	if reloads("success") != 2 || value(t, r.successful) != 1 {
		t.Errorf("after mending: successes %v, successful %v; want 2, 1", reloads("success"), value(t, r.successful))
	}
}

func TestCertificateReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := writeCert(t, certFile, keyFile, 1)
	cfg := &config.Config{TLSListen: ":9443", TLSCertFile: certFile, TLSKeyFile: keyFile}
	c, err := LoadCertificate(cfg, S3Files)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		got, _ := c.Get(nil)
		leaf, err := x509.ParseCertificate(got.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.Int64()
	}
	if serial() != first {
		t.Fatalf("serving serial %d, want %d", serial(), first)
	}

	second := writeCert(t, certFile, keyFile, 2)
	commit, err := c.Reload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if serial() != first {
		t.Error("preparing the reload swapped the certificate before its commit")
	}
	commit()
	if serial() != second {
		t.Errorf("after the commit: serial %d, want %d", serial(), second)
	}

	// A key that does not match the certificate: refused, the one in
	// effect kept.
	writeCert(t, certFile, filepath.Join(dir, "other.key"), 3)
	if _, err := c.Reload(cfg); err == nil || !strings.Contains(err.Error(), "tls_cert_file") {
		t.Errorf("reload of a mismatched pair: %v, want an error naming tls_cert_file", err)
	}
	if serial() != second {
		t.Errorf("after a refused reload: serial %d, want %d", serial(), second)
	}
}

// writeCert writes a self-signed certificate with the serial and its key.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) int64 {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Unix(0, 0).AddDate(100, 0, 0),
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	return serial
}

// TestAdminCertificate: the admin listener's pair loads, reloads and fails
// like the S3 listener's, its errors naming its own settings; a
// configuration that turns its TLS off changes nothing at a reload; and
// CheckCertificates loads every pair a configuration names.
func TestAdminCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	first := writeCert(t, certFile, keyFile, 7)
	cfg := &config.Config{Admin: config.Admin{Listen: "127.0.0.1:9001", TLSCertFile: certFile, TLSKeyFile: keyFile}}
	if err := CheckCertificates(cfg); err != nil {
		t.Fatalf("CheckCertificates of a good pair: %v", err)
	}
	c, err := LoadCertificate(cfg, AdminFiles)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		got, _ := c.Get(nil)
		leaf, err := x509.ParseCertificate(got.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.Int64()
	}
	off := &config.Config{Admin: config.Admin{Listen: "127.0.0.1:9001"}}
	commit, err := c.Reload(off)
	if err != nil {
		t.Fatalf("reload with TLS off: %v", err)
	}
	commit()
	if serial() != first {
		t.Errorf("a reload turning TLS off changed the certificate: serial %d", serial())
	}
	writeCert(t, certFile, filepath.Join(dir, "other.key"), 8)
	if _, err := c.Reload(cfg); err == nil || !strings.Contains(err.Error(), "admin.tls_cert_file") {
		t.Errorf("reload of a mismatched pair: %v, want an error naming admin.tls_cert_file", err)
	}
	if err := CheckCertificates(cfg); err == nil || !strings.Contains(err.Error(), "admin.tls_cert_file") {
		t.Errorf("CheckCertificates of a mismatched pair: %v, want an error naming admin.tls_cert_file", err)
	}
	if serial() != first {
		t.Errorf("after a refused reload: serial %d, want %d", serial(), first)
	}
}
