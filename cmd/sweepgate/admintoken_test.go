//go:build integration

package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/config"
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
		{"no token", nil, nil, exitUnauthorized, "requires a token, and none was found: set SWEEPGATE_ADMIN_TOKEN, pass --token-file FILE, or run the command with the gateway's configuration"},
		{"token from the environment", []string{adminTokenEnv + "=" + testToken}, nil, exitOK, ""},
		{"token file flag", nil, []string{"--token-file", tokenFile}, exitOK, ""},
		{"token file from the environment", []string{adminTokenFileEnv + "=" + tokenFile}, nil, exitOK, ""},
		{"the flag wins over the environment", []string{adminTokenEnv + "=wrong-token-but-long-enough"}, []string{"--token-file=" + tokenFile}, exitOK, ""},
		{"wrong token", []string{adminTokenEnv + "=wrong-token-but-long-enough"}, nil, exitUnauthorized, "refused the token from $SWEEPGATE_ADMIN_TOKEN: it is not the gateway's admin token"},
		{"wrong token file", nil, []string{"--token-file", wrongFile}, exitUnauthorized, "refused the token from --token-file " + wrongFile},
		{"missing token file", nil, []string{"--token-file", filepath.Join(dir, "missing")}, exitError, "the admin token: token file: open"},
		{"no --token flag", []string{adminTokenEnv + "=" + testToken}, []string{"--token", testToken}, exitUsage, "flag provided but not defined: -token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"sessions", "list", "--admin", base}, tt.args...)
			code, out, errOut := runCLI(t, tt.env, args...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.want, out, errOut)
			}
			if tt.want == exitOK && !strings.Contains(out, "up-active") {
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
		if code != exitUnauthorized || !strings.Contains(errOut, "requires a token") {
			t.Errorf("%q without a token: exit %d, stderr %q", args, code, errOut)
		}
		code, _, errOut = runCLI(t, nil, append(args, "--admin", base, "--token-file", tokenFile)...)
		if code == exitUnauthorized || code == exitUsage {
			t.Errorf("%q with --token-file: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestServeAdminToken(t *testing.T) {
	t.Parallel()
	b := newBackend(t)

	t.Run("token", func(t *testing.T) {
		t.Parallel()
		s := startServe(t, append(baseArgs(t, b), "--admin-token="+testToken, "--log-level=debug")...)
		base := "http://" + s.addrs.Admin
		if resp, body := adminRequestWith(t, "GET", base+"/admin/v1/sessions", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("without the token: %d %s", resp.StatusCode, body)
		}
		if resp, body := adminRequestWith(t, "GET", base+"/admin/v1/sessions", "Bearer "+testToken); resp.StatusCode != http.StatusOK {
			t.Errorf("with the token: %d %s", resp.StatusCode, body)
		}
		if resp, body := adminRequestWith(t, "GET", base+"/readyz", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("readyz: %d %s", resp.StatusCode, body)
		}
		s.stop(t)
		logs := s.logs.String()
		if strings.Contains(logs, testToken) {
			t.Errorf("the log holds the token:\n%s", logs)
		}
		if !strings.Contains(logs, `"admin_token":"admin.token"`) || strings.Contains(logs, "generated") {
			t.Errorf("the start-up line should say the token comes from admin.token, and none was generated:\n%s", logs)
		}
	})

	t.Run("no token beyond loopback", func(t *testing.T) {
		t.Parallel()
		// A listener on every address is no more open than one on
		// loopback: the generated token guards it.
		args := append(baseArgs(t, b), "--admin-listen=0.0.0.0:0")
		s := startServe(t, args...)
		_, port, _ := net.SplitHostPort(s.addrs.Admin)
		base := "http://127.0.0.1:" + port
		if resp, body := adminRequestWith(t, "GET", base+"/admin/v1/sessions", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("without the token: %d %s", resp.StatusCode, body)
		}
		if resp, body := adminRequestWith(t, "GET", base+"/admin/v1/sessions", "Bearer "+s.adminToken(t)); resp.StatusCode != http.StatusOK {
			t.Errorf("with the generated token: %d %s", resp.StatusCode, body)
		}
		s.stop(t)
		if logs := s.logs.String(); !strings.Contains(logs, `"admin_token":"generated: `) {
			t.Errorf("the start-up line does not say the token was generated:\n%s", logs)
		}
	})

	t.Run("no admin listener", func(t *testing.T) {
		t.Parallel()
		args := append(baseArgs(t, b), "--admin-listen=")
		s := startServe(t, args...)
		s.stop(t)
		if _, err := os.Stat(filepath.Join(argValue(args, "--etcd-embedded-data-dir"), config.AdminTokenFileName)); err == nil {
			t.Error("a token was generated for no admin listener")
		}
	})

	t.Run("bad token file", func(t *testing.T) {
		t.Parallel()
		short := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		c := &cli{stdout: io.Discard, stderr: &stderr}
		code := c.run(t.Context(), append([]string{"serve"}, append(baseArgs(t, b), "--admin-token-file="+short)...))
		if code != exitError || !strings.Contains(stderr.String(), "admin.token_file") || !strings.Contains(stderr.String(), "shorter than 16") {
			t.Errorf("exit %d, stderr:\n%s", code, &stderr)
		}
	})
}
