//go:build integration

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/admintest"
)

func TestAdminTokenCLI(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedSessions(t, st)
	base, _ := newTokenAdminServer(t, st, testToken)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongFile, []byte("wrong-token-but-long-enough\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		env     []string
		args    []string
		want    int
		wantErr string
	}{
		{"no token", nil, nil, ExitUnauthorized, "requires a token, and none was found: set SWEEPGATE_ADMIN_TOKEN, pass --token-file FILE, or run the command with the gateway's configuration"},
		{"token from the environment", []string{adminTokenEnv + "=" + testToken}, nil, ExitOK, ""},
		{"token file flag", nil, []string{"--token-file", tokenFile}, ExitOK, ""},
		{"token file from the environment", []string{adminTokenFileEnv + "=" + tokenFile}, nil, ExitOK, ""},
		{"the flag wins over the environment", []string{adminTokenEnv + "=wrong-token-but-long-enough"}, []string{"--token-file=" + tokenFile}, ExitOK, ""},
		{"wrong token", []string{adminTokenEnv + "=wrong-token-but-long-enough"}, nil, ExitUnauthorized, "refused the token from $SWEEPGATE_ADMIN_TOKEN: it is not the gateway's admin token"},
		{"wrong token file", nil, []string{"--token-file", wrongFile}, ExitUnauthorized, "refused the token from --token-file " + wrongFile},
		{"missing token file", nil, []string{"--token-file", filepath.Join(dir, "missing")}, ExitError, "the admin token: token file: open"},
		{"no --token flag", []string{adminTokenEnv + "=" + testToken}, []string{"--token", testToken}, ExitUsage, "flag provided but not defined: -token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"sessions", "list", "--admin", base}, tt.args...)
			code, out, errOut := runCLI(t, tt.env, args...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.want, out, errOut)
			}
			if tt.want == ExitOK && !strings.Contains(out, "up-active") {
				t.Errorf("no session list:\n%s", out)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q, want it to say %q", errOut, tt.wantErr)
			}
			if strings.Contains(errOut+out, testToken) {
				t.Errorf("output shows the token:\n%s%s", out, errOut)
			}
		})
	}

	// Every admin command takes the token the same way.
	for _, args := range [][]string{
		{"sessions", "show", "backups", "up-pending"},
		{"reclaim", "status"},
		{"frontier", "list"},
		{"trash", "list"},
	} {
		code, _, errOut := runCLI(t, nil, append(args, "--admin", base)...)
		if code != ExitUnauthorized || !strings.Contains(errOut, "requires a token") {
			t.Errorf("%q without a token: exit %d, stderr %q", args, code, errOut)
		}
		code, _, errOut = runCLI(t, nil, append(args, "--admin", base, "--token-file", tokenFile)...)
		if code == ExitUnauthorized || code == ExitUsage {
			t.Errorf("%q with --token-file: exit %d, stderr %q", args, code, errOut)
		}
	}
}
