package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAdminTLSValidation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	for _, p := range []string{cert, key} {
		if err := os.WriteFile(p, []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing.key")
	tests := []struct {
		name    string
		args    []string
		wantErr []string // each must appear; none: valid
	}{
		{name: "neither"},
		{name: "both", args: []string{"--admin-tls-cert-file=" + cert, "--admin-tls-key-file=" + key}},
		{name: "cert only", args: []string{"--admin-tls-cert-file=" + cert},
			wantErr: []string{"admin.tls_key_file", "required when admin.tls_cert_file is set"}},
		{name: "key only", args: []string{"--admin-tls-key-file=" + key},
			wantErr: []string{"admin.tls_cert_file", "required when admin.tls_key_file is set"}},
		{name: "unreadable key", args: []string{"--admin-tls-cert-file=" + cert, "--admin-tls-key-file=" + missing},
			wantErr: []string{"admin.tls_key_file", missing, "no such file"}},
		{name: "a directory", args: []string{"--admin-tls-cert-file=" + dir, "--admin-tls-key-file=" + key},
			wantErr: []string{"admin.tls_cert_file", "not a regular file"}},
		{name: "no admin listener", args: []string{"--admin-listen=", "--admin-tls-cert-file=" + cert, "--admin-tls-key-file=" + key},
			wantErr: []string{"admin.tls_cert_file", "admin.listen is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(append(slices.Clone(requiredFlags), tt.args...), nil)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if tt.name == "both" && (c.Admin.TLSCertFile != cert || c.Admin.TLSKeyFile != key) {
					t.Errorf("admin TLS files %q %q, want %q %q", c.Admin.TLSCertFile, c.Admin.TLSKeyFile, cert, key)
				}
				return
			}
			if err == nil {
				t.Fatal("Load accepted the configuration")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestAdminTLSRestartAndInEffect: a new admin certificate path applies at
// a reload, but turning the admin listener's TLS on or off waits for a
// restart, in what a reload reports, in what the process runs on, and in
// what config check shows.
func TestAdminTLSRestartAndInEffect(t *testing.T) {
	t.Parallel()
	plain := Defaults()
	tlsA := Defaults()
	tlsA.Admin.TLSCertFile, tlsA.Admin.TLSKeyFile = "/a.crt", "/a.key"
	tlsB := Defaults()
	tlsB.Admin.TLSCertFile, tlsB.Admin.TLSKeyFile = "/b.crt", "/b.key"
	tlsB.Listen = ":9999"
	tlsB.Backend.SecretKeyFile = "/new-secret"

	if got := RestartNeeded(tlsA, tlsB); !slices.Equal(got, []string{"listen"}) {
		t.Errorf("RestartNeeded(new cert paths): %v, want [listen]", got)
	}
	if got := RestartNeeded(plain, tlsA); !slices.Equal(got, []string{"admin.tls_cert_file", "admin.tls_key_file"}) {
		t.Errorf("RestartNeeded(TLS on): %v, want both admin TLS files", got)
	}
	if got := RestartNeeded(tlsA, plain); !slices.Equal(got, []string{"admin.tls_cert_file", "admin.tls_key_file"}) {
		t.Errorf("RestartNeeded(TLS off): %v, want both admin TLS files", got)
	}

	eff := InEffect(tlsA, tlsB)
	if eff.Admin.TLSCertFile != "/b.crt" || eff.Backend.SecretKeyFile != "/new-secret" || eff.Listen != tlsA.Listen {
		t.Errorf("InEffect: cert %q, secret file %q, listen %q; want the reloadable ones new, listen old",
			eff.Admin.TLSCertFile, eff.Backend.SecretKeyFile, eff.Listen)
	}
	if eff := InEffect(plain, tlsA); eff.Admin.TLSCertFile != "" {
		t.Errorf("InEffect after turning TLS on: cert %q, want none until a restart", eff.Admin.TLSCertFile)
	}
	if tlsA.Admin.TLSCertFile != "/a.crt" || tlsB.Listen != ":9999" {
		t.Error("InEffect changed its arguments")
	}

	running := values(plain)
	changes := Diff(running, tlsA)
	if len(changes) != 2 || changes[0].Key != "admin.tls_cert_file" || changes[0].Reload {
		t.Errorf("Diff(TLS on) = %+v, want both admin TLS files, needing a restart", changes)
	}
	changes = Diff(values(tlsA), tlsB)
	want := map[string]bool{"listen": false, "backend.secret_key_file": true, "admin.tls_cert_file": true, "admin.tls_key_file": true}
	if len(changes) != len(want) {
		t.Errorf("Diff = %+v, want %v", changes, want)
	}
	for _, c := range changes {
		if reload, ok := want[c.Key]; !ok || reload != c.Reload {
			t.Errorf("change %+v: want reload=%v (listed: %v)", c, reload, ok)
		}
	}
	if c := changes[0]; c.Key != "listen" || c.Running != `":9000"` || c.Candidate != `":9999"` {
		t.Errorf("first change %+v, want listen from \":9000\" to \":9999\"", c)
	}
}

// TestDiffSecrets: a secret shows only whether it is set, in both the
// values compared and the change; a key the running gateway does not name
// is not a change.
func TestDiffSecrets(t *testing.T) {
	t.Parallel()
	old := Defaults()
	old.Backend.SecretKey = "old-secret-value"
	old.Credentials = []Credential{{AccessKey: "AK1", SecretKey: "cred-secret-one", Principal: "p"}}
	next := Defaults()
	next.Backend.SecretKey = "new-secret-value"
	next.Credentials = []Credential{{AccessKey: "AK1", SecretKey: "cred-secret-two", Principal: "p"}, {AccessKey: "AK2", SecretKey: "cred-secret-three", Principal: "q"}}
	running := values(old)
	delete(running, "log.level")
	next.Log.Level = "debug"
	changes := Diff(running, next)
	if len(changes) != 1 || changes[0].Key != "credentials" || !changes[0].Secret || !changes[0].Reload {
		t.Fatalf("Diff = %+v, want only credentials (the added key), reloadable and secret", changes)
	}
	all := strings.Join(slices.Collect(func(yield func(string) bool) {
		for _, v := range running {
			if !yield(v) {
				return
			}
		}
	}), " ") + changes[0].Running + changes[0].Candidate
	for _, secret := range []string{"old-secret-value", "new-secret-value", "cred-secret-one", "cred-secret-two", "cred-secret-three"} {
		if strings.Contains(all, secret) {
			t.Errorf("a value shows the secret %q", secret)
		}
	}
}

// values returns c's settings as GET /admin/v1/config reports them.
func values(c *Config) map[string]string {
	m := make(map[string]string)
	for _, s := range Settings() {
		m[s.Key] = s.Value(c)
	}
	return m
}
