package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const goodToken = "0123456789abcdef-TOKEN"

func TestAdminToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "\n  "+goodToken+"\n")

	tests := []struct {
		name    string
		args    []string
		environ []string
		yaml    string
		want    Secret
		wantErr []string
	}{
		{name: "none", want: ""},
		{name: "flag", args: []string{"--admin-token=" + goodToken}, want: goodToken},
		{name: "environment", environ: []string{"SWEEPGATE_ADMIN_TOKEN=" + goodToken}, want: goodToken},
		{name: "yaml", yaml: "admin:\n  token: " + goodToken + "\n", want: goodToken},
		{name: "file, trimmed", args: []string{"--admin-token-file=" + good}, want: goodToken},
		{name: "file from the environment", environ: []string{"SWEEPGATE_ADMIN_TOKEN_FILE=" + good}, want: goodToken},
		{name: "both", args: []string{"--admin-token=" + goodToken, "--admin-token-file=" + good},
			wantErr: []string{"admin.token_file (--admin-token-file, SWEEPGATE_ADMIN_TOKEN_FILE): set admin.token or admin.token_file, not both"}},
		{name: "short", args: []string{"--admin-token=short-0123"},
			wantErr: []string{"admin.token (--admin-token, SWEEPGATE_ADMIN_TOKEN): the token is shorter than 16 characters"}},
		{name: "space", args: []string{"--admin-token=0123456789 abcdefgh"}, wantErr: []string{"admin.token", "holds a space"}},
		{name: "not ASCII", args: []string{"--admin-token=0123456789abcdefé"}, wantErr: []string{"admin.token", "outside ASCII"}},
		{name: "short file", args: []string{"--admin-token-file=" + file("short", "short-0123\n")},
			wantErr: []string{"admin.token_file", "the token in " + dir, "shorter than 16 characters"}},
		{name: "empty file", args: []string{"--admin-token-file=" + file("empty", " \n")}, wantErr: []string{"admin.token_file", "is empty"}},
		{name: "missing file", args: []string{"--admin-token-file=" + filepath.Join(dir, "missing")}, wantErr: []string{"admin.token_file", "no such file"}},
		{name: "huge file", args: []string{"--admin-token-file=" + file("huge", strings.Repeat("x", 5000))}, wantErr: []string{"admin.token_file", "larger than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{}, requiredFlags...)
			if tt.yaml != "" {
				args = append(args, "--config="+writeFile(t, tt.yaml))
			}
			c, err := Load(append(args, tt.args...), tt.environ)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("Load accepted the configuration")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				for _, secret := range []string{goodToken, "short-0123", "0123456789 abcdefgh"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q shows the token", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.AdminToken()
			if err != nil || got != tt.want {
				t.Errorf("AdminToken() = %q, %v; want %q", string(got), err, string(tt.want))
			}
		})
	}
}

func TestAdminTokenNeverPrinted(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, append(append([]string{}, requiredFlags...), "--admin-token="+goodToken), nil)
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c, "admin", c.Admin)
	for name, out := range map[string]string{
		"String": c.String(), "%+v": fmt.Sprintf("%+v", *c), "%#v": fmt.Sprintf("%#v", c), "slog": logs.String(),
	} {
		if strings.Contains(out, goodToken) {
			t.Errorf("%s shows the token: %s", name, out)
		}
	}
}

func TestLoadOrCreateAdminToken(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data", "etcd")
	path := filepath.Join(dir, AdminTokenFileName)

	tok, created, err := LoadOrCreateAdminToken(path)
	if err != nil || !created {
		t.Fatalf("first call: created %v, %v", created, err)
	}
	if len(tok) != 2*generatedTokenBytes || checkToken(string(tok)) != nil {
		t.Errorf("generated token of %d characters, or of a bad form", len(tok))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %04o, want 0600", st.Mode().Perm())
	}
	if dst, err := os.Stat(dir); err != nil || dst.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v, %v; want mode 0700", dst.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only the token file", len(entries))
	}

	again, created, err := LoadOrCreateAdminToken(path)
	if err != nil || created || again != tok {
		t.Errorf("second call: created %v, %v, same token %v", created, err, again == tok)
	}

	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateAdminToken(path); err == nil || !strings.Contains(err.Error(), "mode 0640") || strings.Contains(err.Error(), string(tok)) {
		t.Errorf("a file others may read: %v, want a refusal naming its mode", err)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateAdminToken(path); err == nil || !strings.Contains(err.Error(), "shorter than 16") {
		t.Errorf("a bad token in the file: %v", err)
	}
}

// TestLoadOrCreateAdminTokenRace: processes that start at once over one
// directory end with one token.
func TestLoadOrCreateAdminTokenRace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), AdminTokenFileName)
	const n = 8
	toks := make([]Secret, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { toks[i], _, errs[i] = LoadOrCreateAdminToken(path) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Errorf("call %d: %v, same token %v", i, errs[i], toks[i] == toks[0])
		}
	}
}

func TestAdminHosts(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, append(append([]string{}, requiredFlags...), "--admin-hosts=Admin.Internal.,[::1],10.0.0.7"), nil)
	if want := []string{"admin.internal", "::1", "10.0.0.7"}; !slices.Equal(c.Admin.Hosts, want) {
		t.Errorf("admin.hosts = %q, want %q", c.Admin.Hosts, want)
	}
	for _, bad := range []string{"admin.internal:9001", "http://admin.internal", "admin..internal", "a b", "*.example.com"} {
		_, err := Load(append(append([]string{}, requiredFlags...), "--admin-hosts="+bad), nil)
		if err == nil || !strings.Contains(err.Error(), "admin.hosts") {
			t.Errorf("admin.hosts %q: %v, want it refused", bad, err)
		}
	}
	for h, want := range map[string]string{
		"LocalHost.": "localhost", "[::1]": "::1", "::ffff:127.0.0.1": "127.0.0.1", " gw ": "gw",
	} {
		if got := NormalizeHost(h); got != want {
			t.Errorf("NormalizeHost(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestLoadClient: the commands' view of the configuration follows serve's
// precedence, environment over file, and does not ask for the settings
// only serve needs.
func TestLoadClient(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "admin:\n  listen: 127.0.0.1:9501\netcd:\n  embedded:\n    data_dir: /srv/sweepgate/etcd\n")
	c, err := LoadClient(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Listen != "127.0.0.1:9501" || c.GeneratedAdminTokenPath() != "/srv/sweepgate/etcd/admin-token" {
		t.Errorf("from the file: admin.listen %q, token path %q", c.Admin.Listen, c.GeneratedAdminTokenPath())
	}
	c, err = LoadClient("", []string{ConfigEnv + "=" + file, "SWEEPGATE_ADMIN_LISTEN=:9601"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Listen != ":9601" || c.Etcd.Embedded.DataDir != "/srv/sweepgate/etcd" {
		t.Errorf("environment over $SWEEPGATE_CONFIG's file: %q, %q", c.Admin.Listen, c.Etcd.Embedded.DataDir)
	}
	c, err = LoadClient("", nil)
	if err != nil || c.Admin.Listen != "127.0.0.1:9001" || c.GeneratedAdminTokenPath() != filepath.Join(".data", "etcd", AdminTokenFileName) {
		t.Errorf("defaults: %v, %+v", err, c)
	}
	if _, err := LoadClient(writeFile(t, "admin:\n  tokn: x\n"), nil); err == nil || !strings.Contains(err.Error(), "unknown setting admin.tokn") {
		t.Errorf("a misspelled key: %v", err)
	}
}
