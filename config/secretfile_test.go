package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSecret writes content to a new file named name in a temporary
// directory and returns its path.
func writeSecret(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSecretFilesAreRead(t *testing.T) {
	t.Parallel()
	secret := writeSecret(t, "backend-secret", "  TOPSECRET-backend\n")
	creds := writeSecret(t, "credentials.yaml", `
- access_key: AKFILE1
  secret_key: TOPSECRET-one
  principal: alice
- {access_key: AKFILE2, secret_key: "TOPSECRET:two,three"}
`)
	c := mustLoad(t, []string{
		"--backend-endpoint=http://127.0.0.1:9100",
		"--backend-access-key=AKBACKEND",
		"--backend-secret-key-file=" + secret,
		"--credential=AKFLAG:TOPSECRET-flag",
		"--credentials-file=" + creds,
	}, nil)
	if c.Backend.SecretKey != "TOPSECRET-backend" {
		t.Errorf("backend secret from the file: got %q", string(c.Backend.SecretKey))
	}
	got := make(map[string]Credential)
	for _, cr := range c.ClientCredentials() {
		got[cr.AccessKey] = cr
	}
	want := map[string]Credential{
		"AKFLAG":    {AccessKey: "AKFLAG", SecretKey: "TOPSECRET-flag", Principal: "AKFLAG"},
		"AKFILE1":   {AccessKey: "AKFILE1", SecretKey: "TOPSECRET-one", Principal: "alice"},
		"AKFILE2":   {AccessKey: "AKFILE2", SecretKey: "TOPSECRET:two,three", Principal: "AKFILE2"},
		"AKBACKEND": {AccessKey: "AKBACKEND", SecretKey: "TOPSECRET-backend", Principal: "AKBACKEND"},
	}
	if len(got) != len(want) {
		t.Errorf("got %d credentials, want %d: %v", len(got), len(want), got)
	}
	for ak, w := range want {
		if got[ak] != w {
			t.Errorf("credential %s: got %+v, want %+v", ak, got[ak], w)
		}
	}
	if strings.Contains(c.String(), "TOPSECRET") {
		t.Errorf("the configuration's text shows a secret read from a file: %s", c)
	}
}

func TestSecretFileErrors(t *testing.T) {
	t.Parallel()
	base := []string{"--backend-endpoint=http://127.0.0.1:9100", "--backend-access-key=AKBACKEND"}
	dir := t.TempDir()
	secret := writeSecret(t, "secret", "TOPSECRET-backend\n")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"both secret and file", []string{"--backend-secret-key=TOPSECRET-x", "--backend-secret-key-file=" + secret},
			[]string{"backend.secret_key_file", "not both"}},
		{"missing secret file", []string{"--backend-secret-key-file=" + filepath.Join(dir, "none")},
			[]string{"backend.secret_key_file", "secret file", "no such file"}},
		{"empty secret file", []string{"--backend-secret-key-file=" + writeSecret(t, "empty", "\n\n")},
			[]string{"backend.secret_key_file", "is empty"}},
		{"no secret at all", nil, []string{"backend.secret_key", "required (or backend.secret_key_file)"}},
		{"missing credentials file", []string{"--backend-secret-key-file=" + secret, "--credentials-file=" + filepath.Join(dir, "none")},
			[]string{"credentials_file", "credentials file", "no such file"}},
		{"credentials file not a list", []string{"--backend-secret-key-file=" + secret,
			"--credentials-file=" + writeSecret(t, "map.yaml", "access_key: AK\nsecret_key: TOPSECRET-m\n")},
			[]string{"credentials_file", "map.yaml:1:1", "must be a list"}},
		{"credentials file item without secret", []string{"--backend-secret-key-file=" + secret,
			"--credentials-file=" + writeSecret(t, "nosecret.yaml", "- access_key: AK\n  principal: TOPSECRET-p\n")},
			[]string{"credentials_file", "access_key and secret_key are required"}},
		{"credentials file with an unknown key", []string{"--backend-secret-key-file=" + secret,
			"--credentials-file=" + writeSecret(t, "unknown.yaml", "- access_key: AK\n  secret_key: TOPSECRET-u\n  role: admin\n")},
			[]string{"credentials_file", "unknown key role"}},
		{"empty credentials file", []string{"--backend-secret-key-file=" + secret,
			"--credentials-file=" + writeSecret(t, "empty.yaml", "# nothing\n")},
			[]string{"credentials_file", "lists no credentials"}},
		{"key in the file and on the command line", []string{"--backend-secret-key-file=" + secret, "--credential=AK:TOPSECRET-f",
			"--credentials-file=" + writeSecret(t, "dup.yaml", "- {access_key: AK, secret_key: TOPSECRET-d}\n")},
			[]string{"credentials", "listed twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(append(append([]string(nil), base...), tt.args...), nil)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "TOPSECRET") {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}

func TestRestartNeeded(t *testing.T) {
	t.Parallel()
	base := []string{"--backend-endpoint=http://127.0.0.1:9100", "--backend-access-key=AKBACKEND"}
	load := func(args ...string) *Config {
		return mustLoad(t, append(append([]string(nil), base...), args...), nil)
	}
	old := load("--backend-secret-key=old-secret", "--credential=AK:old")
	rotated := load("--backend-secret-key=new-secret", "--credential=AK:new", "--credential=AK2:two")
	if got := RestartNeeded(old, rotated); len(got) != 0 {
		t.Errorf("rotated secrets and credentials: restart needed for %v, want none", got)
	}
	moved := load("--backend-secret-key=old-secret", "--credential=AK:old", "--listen=:9100", "--reclaim-grace=2h")
	got := RestartNeeded(old, moved)
	if len(got) != 2 || got[0] != "listen" || got[1] != "reclaim.grace" {
		t.Errorf("moved listener and grace: restart needed for %v, want [listen reclaim.grace]", got)
	}
}
