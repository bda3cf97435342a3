package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
