package config

// The settings table's tests: every setting has one name in each source
// (flag, environment, YAML), and the help and docs/configuration.md list
// them all.

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the settings table")

// sampleValue returns, for each kind of setting, a value in flag syntax and
// the same value in YAML, so that every setting can be set through each
// source.
func sampleValue(t *testing.T, s Setting) (text, yamlValue string) {
	t.Helper()
	switch s.field(&Config{}).(type) {
	case *string, *Secret:
		return "sample-" + s.Flag, `"sample-` + s.Flag + `"`
	case *bool:
		// The opposite of the default, so that setting it shows.
		if s.Default == "true" {
			return "false", "false"
		}
		return "true", "true"
	case *time.Duration:
		return "42s", "42s"
	case *int64:
		return "12345", "12345"
	case *float64:
		// Unlike every fraction's default (0.25, 0.5).
		return "0.375", "0.375"
	case *[]string:
		return "a.example,b.example", "[a.example, b.example]"
	case *[]Credential:
		return "AKS:sec:pr", "[{access_key: AKS, secret_key: sec, principal: pr}]"
	case *[]BackendIdentity:
		return "ro:AKRO:sec:ret", "[{name: ro, access_key: AKRO, secret_key: \"sec:ret\"}]"
	case *[]DigestNamespace, *[]DigestSource:
		return "bkt/pre/,other/", "[bkt/pre/, other/]"
	case *[]EtcdShard:
		v := "[{name: a, endpoints: [http://e1:2379, http://e2:2379], buckets: [b1, b2]}, {name: b, endpoints: [http://e3:2379], prefix: /p/, username: u}]"
		return v, v
	}
	t.Fatalf("no sample for %s", s.Key)
	return "", ""
}

func nestYAML(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
		}
	}
	b.WriteString(" " + value + "\n")
	return b.String()
}

// TestEverySettingHasOneName sets each setting through its flag, its
// environment variable and its YAML key, and checks that all three reach
// the same field: the names come from one table and cannot drift.
func TestEverySettingHasOneName(t *testing.T) {
	t.Parallel()
	for _, s := range Settings() {
		t.Run(s.Key, func(t *testing.T) {
			text, yv := sampleValue(t, s)
			want := Defaults()
			if err := s.setText(want, []string{text}); err != nil {
				t.Fatal(err)
			}

			fromFlag := Defaults()
			fs, values, _ := newFlagSet("test")
			if err := fs.Parse([]string{"--" + s.Flag + "=" + text}); err != nil {
				t.Fatalf("flag --%s: %v", s.Flag, err)
			}
			if err := s.setText(fromFlag, values[s.Flag].values); err != nil {
				t.Fatal(err)
			}

			fromEnv := Defaults()
			if err := applyEnv(fromEnv, envMap([]string{s.Env + "=" + text})); err != nil {
				t.Fatalf("env %s: %v", s.Env, err)
			}

			fromYAML := Defaults()
			if err := LoadYAML(fromYAML, []byte(nestYAML(s.Key, yv)), "test.yaml"); err != nil {
				t.Fatalf("yaml %s: %v", s.Key, err)
			}

			for name, got := range map[string]*Config{"flag": fromFlag, "env": fromEnv, "yaml": fromYAML} {
				if !reflect.DeepEqual(got, want) {
					t.Errorf("via %s: got %s\nwant %s", name, got, want)
				}
			}
			if reflect.DeepEqual(want, Defaults()) {
				t.Errorf("sample value %q equals the default; the test proves nothing", text)
			}
		})
	}
}

func TestSettingNames(t *testing.T) {
	t.Parallel()
	flags, envs := map[string]bool{}, map[string]bool{}
	for _, s := range Settings() {
		if flags[s.Flag] || envs[s.Env] {
			t.Errorf("%s: flag or environment name used twice", s.Key)
		}
		flags[s.Flag], envs[s.Env] = true, true
		if !flagPerItem[s.Key] {
			if want := strings.NewReplacer(".", "-", "_", "-").Replace(s.Key); s.Flag != want {
				t.Errorf("%s: flag %q, want %q", s.Key, s.Flag, want)
			}
		}
		if !strings.HasPrefix(s.Env, EnvPrefix) || strings.ToUpper(s.Env) != s.Env {
			t.Errorf("%s: environment name %q", s.Key, s.Env)
		}
		if s.Usage == "" || s.Arg == "" {
			t.Errorf("%s: missing usage or argument name", s.Key)
		}
	}
	// The names the brief and the docs promise.
	for flagName, env := range map[string]string{
		"backend-endpoint":       "SWEEPGATE_BACKEND_ENDPOINT",
		"credential":             "SWEEPGATE_CREDENTIALS",
		"etcd-embedded-data-dir": "SWEEPGATE_ETCD_EMBEDDED_DATA_DIR",
		"admin-listen":           "SWEEPGATE_ADMIN_LISTEN",
		"digests-namespace":      "SWEEPGATE_DIGESTS_NAMESPACES",
		"digests-source":         "SWEEPGATE_DIGESTS_SOURCES",
		"digests-planes":         "SWEEPGATE_DIGESTS_PLANES",
	} {
		if !flags[flagName] || !envs[env] {
			t.Errorf("missing flag --%s or env %s", flagName, env)
		}
	}
}

// flagPerItem are the list settings whose flag names one item, so it is
// singular, unlike their key.
var flagPerItem = map[string]bool{"credentials": true, "backend.identities": true, "digests.namespaces": true, "digests.sources": true}

func TestHelpMentionsEverySetting(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	WriteHelp(&b)
	help := b.String()
	for _, s := range Settings() {
		for _, w := range []string{"--" + s.Flag + " ", "env:  " + s.Env + "\n", "yaml: " + s.Key + "\n"} {
			if s.isBool() && w == "--"+s.Flag+" " {
				w = "--" + s.Flag + "["
			}
			if !strings.Contains(help, w) {
				t.Errorf("help does not mention %q", w)
			}
		}
		if s.Default != "" && !strings.Contains(help, `"`+s.Default+`"`) {
			t.Errorf("help does not show the default of %s", s.Key)
		}
	}
	for _, w := range []string{"--config FILE", ConfigEnv} {
		if !strings.Contains(help, w) {
			t.Errorf("help does not mention %q", w)
		}
	}
	for i, line := range strings.Split(help, "\n") {
		if len(line) > 80 {
			t.Errorf("help line %d is %d characters long: %q", i+1, len(line), line)
		}
	}
}

// TestConfigurationDoc fails when docs/configuration.md and the settings
// table disagree. Run it with -update to rewrite the document.
func TestConfigurationDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "configuration.md")
	want := Markdown()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./config -run TestConfigurationDoc -update)", err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date with config.Settings; run go test ./config -run TestConfigurationDoc -update", path)
	}
	for _, s := range Settings() {
		for _, name := range []string{"`" + s.Key + "`", "--" + s.Flag, "`" + s.Env + "`"} {
			if !strings.Contains(string(got), name) {
				t.Errorf("%s does not mention %s", path, name)
			}
		}
	}
}
