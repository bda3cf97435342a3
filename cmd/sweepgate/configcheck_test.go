package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
)

// TestConfigCheck: `sweepgate config check` on a valid configuration
// prints every setting as key = value and exits 0; on an invalid one it
// prints every problem and exits 1; a bad command line exits 2. Neither
// ever prints a secret, and nothing is started (the file names no
// reachable backend or etcd).
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets := []string{"backend-secret-7f3a9c", "client-secret-51bd0e", "admin-token-c0ffee-0123456789", "env-secret-9d1e44"}
	valid := filepath.Join(dir, "valid.yaml")
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(valid, `backend:
  endpoint: http://192.0.2.1:9100
  access_key: AKBACKEND
  secret_key: `+secrets[0]+`
credentials:
  - access_key: AKAPP
    secret_key: `+secrets[1]+`
    principal: app
admin:
  token: `+secrets[2]+`
etcd:
  endpoints: [http://192.0.2.1:2379]
`)
	code, out, errOut := runCLI(t, nil, "config", "check", "--config", valid, "--listen=127.0.0.1:9555")
	if code != cli.ExitOK {
		t.Fatalf("valid: exit %d, stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		"\nlisten = \"127.0.0.1:9555\"\n", // the flag over the file's default
		"\nbackend.endpoint = \"http://192.0.2.1:9100\"\n",
		"\nbackend.secret_key = \"[redacted]\"\n",
		"\nadmin.token = \"[redacted]\"\n",
		"\ncredentials = [AKAPP:[redacted]:app]\n",
		"\nadmin.tls_cert_file = \"\"\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("valid: output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, " = "); n < 90 {
		t.Errorf("valid: %d settings printed, want every one", n)
	}

	invalid := filepath.Join(dir, "invalid.yaml")
	write(invalid, `backend:
  endpoint: http://192.0.2.1:9100
  access_key: AKBACKEND
  secret_key: `+secrets[0]+`
admin:
  token: `+secrets[2]+`
  tls_cert_file: `+filepath.Join(dir, "missing.crt")+`
reclaim:
  grace: -1s
`)
	code, out2, errOut2 := runCLI(t, []string{"SWEEPGATE_CREDENTIALS=AKENV:" + secrets[3]}, "config", "check", "--config", invalid)
	if code != cli.ExitError {
		t.Fatalf("invalid: exit %d, want %d; stdout:\n%s", code, cli.ExitError, out2)
	}
	for _, want := range []string{"invalid configuration", "reclaim.grace", "admin.tls_key_file", "required when admin.tls_cert_file is set", "missing.crt"} {
		if !strings.Contains(errOut2, want) {
			t.Errorf("invalid: stderr lacks %q:\n%s", want, errOut2)
		}
	}
	if strings.Contains(out2, " = ") {
		t.Errorf("invalid: printed settings:\n%s", out2)
	}

	// A certificate pair that does not load is invalid too, as it would
	// stop serve.
	notPEM := filepath.Join(dir, "not.pem")
	write(notPEM, "not a certificate\n")
	code, _, errOut3 := runCLI(t, nil, "config", "check", "--config", valid,
		"--admin-tls-cert-file="+notPEM, "--admin-tls-key-file="+notPEM)
	if code != cli.ExitError || !strings.Contains(errOut3, "admin.tls_cert_file/admin.tls_key_file") {
		t.Errorf("a pair that does not load: exit %d, stderr:\n%s", code, errOut3)
	}

	code, _, errOut4 := runCLI(t, nil, "config", "check", "--config", valid, "--no-such-flag")
	if code != cli.ExitUsage {
		t.Errorf("bad flag: exit %d, want %d; stderr:\n%s", code, cli.ExitUsage, errOut4)
	}
	if code, help, _ := runCLI(t, nil, "config", "check", "--help"); code != cli.ExitOK || !strings.Contains(help, "--against-running") {
		t.Errorf("config check --help: exit %d:\n%s", code, help)
	}

	all := out + errOut + out2 + errOut2 + errOut3 + errOut4
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("the output shows the secret %q", s)
		}
	}
}
