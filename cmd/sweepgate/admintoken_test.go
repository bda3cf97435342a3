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

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
)

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
		c := &app{stdout: io.Discard, stderr: &stderr}
		code := c.run(t.Context(), append([]string{"serve"}, append(baseArgs(t, b), "--admin-token-file="+short)...))
		if code != cli.ExitError || !strings.Contains(stderr.String(), "admin.token_file") || !strings.Contains(stderr.String(), "shorter than 16") {
			t.Errorf("exit %d, stderr:\n%s", code, &stderr)
		}
	})
}
