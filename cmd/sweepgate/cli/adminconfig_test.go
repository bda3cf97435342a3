//go:build integration

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/config"
)

func TestListenURL(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]string{
		"127.0.0.1:9001":   "http://127.0.0.1:9001",
		":9501":            "http://127.0.0.1:9501",
		"0.0.0.0:9001":     "http://127.0.0.1:9001",
		"[::]:9001":        "http://[::1]:9001",
		"[::1]:9001":       "http://[::1]:9001",
		"gw.internal:9001": "http://gw.internal:9001",
	} {
		if got, err := listenURL(listen); err != nil || got != want {
			t.Errorf("listenURL(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
	for _, listen := range []string{"", "127.0.0.1:0", "nonsense"} {
		if got, err := listenURL(listen); err == nil {
			t.Errorf("listenURL(%q) = %q, want an error", listen, got)
		}
	}
}

// TestAdminCommandsReadTheConfiguration: without --admin and a token, the
// commands take admin.listen and the token from the configuration file
// and the environment, as serve would.
func TestAdminCommandsReadTheConfiguration(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedSessions(t, st)
	base, _ := newTokenAdminServer(t, st, testToken)
	addr := strings.TrimPrefix(base, "http://")
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join("data", config.AdminTokenFileName), testToken+"\n", 0o600)
	generated := write("generated.yaml", "admin:\n  listen: "+addr+"\netcd:\n  embedded:\n    data_dir: "+filepath.Join(dir, "data")+"\n", 0o600)
	configured := write("configured.yaml", "admin:\n  listen: "+addr+"\n  token: "+testToken+"\n", 0o600)
	elsewhere := write("elsewhere.yaml", "admin:\n  listen: "+addr+"\netcd:\n  embedded:\n    data_dir: "+filepath.Join(dir, "none")+"\n", 0o600)

	tests := []struct {
		name    string
		env     []string
		args    []string
		want    int
		wantErr string
	}{
		{"--config, generated token", nil, []string{"--config", generated}, ExitOK, ""},
		{"$SWEEPGATE_CONFIG, generated token", []string{"SWEEPGATE_CONFIG=" + generated}, nil, ExitOK, ""},
		{"--config, admin.token", nil, []string{"--config", configured}, ExitOK, ""},
		{"environment only", []string{"SWEEPGATE_ADMIN_LISTEN=" + addr, "SWEEPGATE_ETCD_EMBEDDED_DATA_DIR=" + filepath.Join(dir, "data")}, nil, ExitOK, ""},
		{"no token there", nil, []string{"--config", elsewhere}, ExitUnauthorized, "looked for " + filepath.Join(dir, "none", config.AdminTokenFileName)},
		{"an explicit token wins", []string{adminTokenEnv + "=wrong-token-but-long-enough"}, []string{"--config", generated}, ExitUnauthorized, "refused the token from $SWEEPGATE_ADMIN_TOKEN"},
		{"a missing configuration", nil, []string{"--config", filepath.Join(dir, "missing.yaml")}, ExitUsage, "the configuration: config file"},
		{"a broken configuration", nil, []string{"--config", write("broken.yaml", "admin:\n  lisen: x\n", 0o600)}, ExitUsage, "unknown setting admin.lisen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runCLI(t, tt.env, append([]string{"sessions", "list"}, tt.args...)...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.want, out, errOut)
			}
			if tt.want == ExitOK && !strings.Contains(out, "up-active") {
				t.Errorf("no session list:\n%s", out)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q, want it to say %q", errOut, tt.wantErr)
			}
			if strings.Contains(out+errOut, testToken) {
				t.Errorf("output shows the token:\n%s%s", out, errOut)
			}
		})
	}
}
