package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminURLScheme: the commands speak https when the URL says so, when
// a CA is given, or when the configuration they take the address from
// serves the admin listener on TLS; an http:// URL with a CA is refused.
func TestAdminURLScheme(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tlsConfig := filepath.Join(dir, "tls.yaml")
	if err := os.WriteFile(tlsConfig, []byte("admin:\n  listen: 0.0.0.0:9443\n  tls_cert_file: /etc/admin.crt\n  tls_key_file: /etc/admin.key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := "SWEEPGATE_ADMIN_CA=/etc/ca.pem"
	tests := []struct {
		name, flag, caFlag, config string
		environ                    []string
		want, wantErr              string
	}{
		{name: "host:port", flag: "127.0.0.1:9001", want: "http://127.0.0.1:9001"},
		{name: "https URL", flag: "https://gw.internal:9001/", want: "https://gw.internal:9001"},
		{name: "host:port with --admin-ca", flag: "127.0.0.1:9001", caFlag: "/etc/ca.pem", want: "https://127.0.0.1:9001"},
		{name: "host:port with the CA in the environment", flag: "127.0.0.1:9001", environ: []string{ca}, want: "https://127.0.0.1:9001"},
		{name: "http URL with a CA", flag: "http://127.0.0.1:9001", environ: []string{ca}, wantErr: "write https://"},
		{name: "the configuration's TLS listener", config: tlsConfig, want: "https://127.0.0.1:9443"},
		{name: "the default", want: "http://127.0.0.1:9001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{Environ: tt.environ, adminConfig: tt.config, adminCA: tt.caFlag}
			got, err := c.adminURL(tt.flag)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("adminURL(%q) = %q, %v; want an error saying %q", tt.flag, got, err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("adminURL(%q) = %q, %v; want %q", tt.flag, got, err, tt.want)
			}
		})
	}
}

// TestAdminCAFile: a CA file that does not read or holds no certificate
// is an error, never a fallback to trusting anything.
func TestAdminCAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{notPEM: "holds no PEM certificate", filepath.Join(dir, "missing.pem"): "no such file"} {
		c := &Client{adminCA: path}
		if _, err := c.adminHTTP(); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--admin-ca") {
			t.Errorf("CA %s: %v, want an error saying %q and naming --admin-ca", path, err, want)
		}
	}
}
