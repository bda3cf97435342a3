//go:build integration

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
)

// TestServeGeneratedAdminToken runs serve without admin.token: it
// generates a token in its data directory (mode 0600, never logged), the
// admin API wants it and refuses foreign Hosts, the commands find it
// through the same configuration, and a restart keeps it.
func TestServeGeneratedAdminToken(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	args := baseArgs(t, b)
	dataDir := argValue(args, "--etcd-embedded-data-dir")
	tokenFile := filepath.Join(dataDir, config.AdminTokenFileName)

	s := startServe(t, args...)
	st, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatalf("no generated token file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %04o, want 0600", st.Mode().Perm())
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	if len(token) < config.MinAdminTokenLength {
		t.Fatalf("generated token of %d characters", len(token))
	}

	base := "http://" + s.addrs.Admin
	if resp, body := adminRequestWith(t, "GET", base+"/admin/v1/sessions", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := adminRequestWith(t, "GET", base+"/admin/v1/sessions", "Bearer "+token); resp.StatusCode != http.StatusOK {
		t.Errorf("with the generated token: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/admin/v1/reclaim/run", strings.NewReader("{}"))
	req.Host = "rebound.evil.example"
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a foreign Host with the token: %d, want 403", resp.StatusCode)
	}

	// The commands find the token through serve's configuration: its data
	// directory in the environment here.
	if code, out, errOut := runCLI(t, nil, "sessions", "list", "--admin", base); code != cli.ExitUnauthorized || !strings.Contains(errOut, "requires a token") {
		t.Errorf("sessions list elsewhere: exit %d\n%s%s", code, out, errOut)
	}
	env := []string{"SWEEPGATE_ETCD_EMBEDDED_DATA_DIR=" + dataDir}
	if code, out, errOut := runCLI(t, env, "sessions", "list", "--admin", base); code != cli.ExitOK {
		t.Errorf("sessions list with the data directory: exit %d\n%s%s", code, out, errOut)
	}
	// With the configuration alone, the address comes from admin.listen.
	env = append(env, "SWEEPGATE_ADMIN_LISTEN="+s.addrs.Admin)
	if code, out, errOut := runCLI(t, env, "reclaim", "status"); code != cli.ExitOK || !strings.Contains(out, "Reclaimer") {
		t.Errorf("reclaim status with the configuration: exit %d\n%s%s", code, out, errOut)
	}

	s.stop(t)
	s2 := startServe(t, args...)
	if raw2, err := os.ReadFile(tokenFile); err != nil || string(raw2) != string(raw) {
		t.Errorf("the restart changed the token file (%v)", err)
	}
	if resp, body := adminRequestWith(t, "GET", "http://"+s2.addrs.Admin+"/admin/v1/sessions", "Bearer "+token); resp.StatusCode != http.StatusOK {
		t.Errorf("after the restart, with the token: %d %s", resp.StatusCode, body)
	}
	s2.stop(t)

	for i, logs := range []string{s.logs.String(), s2.logs.String()} {
		if strings.Contains(logs, token) {
			t.Fatalf("start %d: the log holds the token", i+1)
		}
		want := "generated an admin token"
		if i == 1 {
			want = "using the admin token generated at an earlier start"
		}
		if !strings.Contains(logs, want) || !strings.Contains(logs, tokenFile) {
			t.Errorf("start %d: the log does not say %q with the file %s:\n%s", i+1, want, tokenFile, logs)
		}
	}
}

// TestServeRefusesSharedTokenFile: a generated token file that other
// users may read is refused, not used.
func TestServeRefusesSharedTokenFile(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	args := baseArgs(t, b)
	dataDir := argValue(args, "--etcd-embedded-data-dir")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dataDir, config.AdminTokenFileName)
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, nil, append([]string{"serve"}, args...)...)
	if code != cli.ExitError || !strings.Contains(errOut, "mode 0644") || !strings.Contains(errOut, tokenFile) {
		t.Errorf("exit %d, want %d naming the file and its mode:\n%s", code, cli.ExitError, errOut)
	}
}

// argValue returns the value of --name=VALUE in args.
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}
