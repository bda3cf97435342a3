package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// required is the smallest set of settings that validates.
var requiredFlags = []string{
	"--backend-endpoint=http://127.0.0.1:9100",
	"--backend-access-key=AKBACKEND",
	"--backend-secret-key=backend-secret",
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sweepgate.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, args, environ []string) *Config {
	t.Helper()
	c, err := Load(args, environ)
	if err != nil {
		t.Fatalf("Load(%q, %q): %v", args, environ, err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, requiredFlags, nil)
	want := &Config{
		Listen:                   ":9000",
		Region:                   "us-east-1",
		Backend:                  Backend{Endpoint: "http://127.0.0.1:9100", Region: "us-east-1", AccessKey: "AKBACKEND", SecretKey: "backend-secret"},
		AcceptBackendCredentials: true,
		MaxClockSkew:             15 * time.Minute,
		Etcd: Etcd{
			Prefix:         "/sweepgate/",
			DialTimeout:    5 * time.Second,
			RequestTimeout: 3 * time.Second,
			Embedded: EmbeddedEtcd{
				DataDir:                 ".data/etcd",
				ClientURL:               "http://127.0.0.1:2379",
				PeerURL:                 "http://127.0.0.1:2380",
				AutoCompactionMode:      "periodic",
				AutoCompactionRetention: "1h",
				QuotaBackendBytes:       2 << 30,
			},
		},
		Sessions: Sessions{
			Enabled:              true,
			EnforceOwnership:     true,
			IdempotencyRetention: 24 * time.Hour,
			Retention:            7 * 24 * time.Hour,
			ReconcileInterval:    time.Minute,
			ReconcileAfter:       time.Minute,
			StuckLimit:           time.Hour,
			CompleteHold:         30 * time.Second,
		},
		Reclaim: Reclaim{
			Enabled:                  true,
			Grace:                    24 * time.Hour,
			DeleteAfter:              24 * time.Hour,
			StuckLimit:               24 * time.Hour,
			ClockSkew:                5 * time.Minute,
			MaxDelete:                10000,
			MaxDeleteFraction:        0.25,
			MaxDeleteUploads:         1000,
			MaxDeleteUploadsFraction: 0.25,
			MaxMark:                  10000,
			MaxMarkFraction:          0.5,
			Interval:                 time.Hour,
			BatchSize:                1000,
			Parallel:                 8,
			BackendTimeout:           30 * time.Second,
			ElectionTTL:              15 * time.Second,
			MissingCheckBudget:       1000,
			BackendIdentity:          "default",
		},
		Digests: Digests{
			Verify:             true,
			MaxBody:            4 << 20,
			TrashWindow:        7 * 24 * time.Hour,
			PlacementGrace:     24 * time.Hour,
			MaxDelete:          10000,
			MaxDeleteFraction:  0.25,
			MaxMark:            10000,
			MaxMarkFraction:    0.5,
			TombstoneRetention: 7 * 24 * time.Hour,
			GuardSettle:        2 * time.Minute,
			DeleteParallel:     4,
		},
		Limits:   Limits{BodyReadTimeout: 2 * time.Minute},
		Admin:    Admin{Listen: "127.0.0.1:9001"},
		Log:      Log{Format: "text", Level: "info"},
		Shutdown: Shutdown{DrainDelay: 5 * time.Second, Timeout: 30 * time.Second},
		Tracing:  Tracing{SampleRatio: 1},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %s\nwant %s", c, want)
	}
	if !c.UsesEmbeddedEtcd() {
		t.Error("no etcd endpoints should mean embedded etcd")
	}
	if l, err := c.Layout(); err != nil || !l.Empty() {
		t.Errorf("default layout = %+v, %v; want an empty one (digest reclamation off)", l, err)
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `
listen: "127.0.0.1:1001"
domains: [file.example.com]
max_clock_skew: 1m
backend:
  endpoint: http://file:9100
  access_key: AKFILE
  secret_key: file-secret
credentials:
  - {access_key: AKF, secret_key: sf}
`)
	other := writeFile(t, "listen: \"127.0.0.1:1009\"\n")
	env := func(kv ...string) []string { return append([]string{EnvPrefix + "CONFIG=" + file}, kv...) }

	tests := []struct {
		name    string
		args    []string
		environ []string
		check   func(*Config) string
	}{
		{"file over default", nil, env(), func(c *Config) string {
			return c.Listen + " " + c.MaxClockSkew.String()
		}},
		{"env over file", nil, env("SWEEPGATE_LISTEN=127.0.0.1:1002"), func(c *Config) string { return c.Listen }},
		{"flag over env", []string{"--listen=127.0.0.1:1003"}, env("SWEEPGATE_LISTEN=127.0.0.1:1002"), func(c *Config) string { return c.Listen }},
		{"flag over file", []string{"--listen=127.0.0.1:1003"}, env(), func(c *Config) string { return c.Listen }},
		{"empty env is unset", nil, env("SWEEPGATE_LISTEN="), func(c *Config) string { return c.Listen }},
		{"env list replaces file list", nil, env("SWEEPGATE_DOMAINS=a.example.com, b.example.com"), func(c *Config) string {
			return strings.Join(c.Domains, " ")
		}},
		{"repeated list flag", []string{"--domains=x.example.com", "--domains", "y.example.com,z.example.com"}, env(), func(c *Config) string {
			return strings.Join(c.Domains, " ")
		}},
		{"credentials env over file", nil, env("SWEEPGATE_CREDENTIALS=AKE:se:alice"), func(c *Config) string {
			return fmt.Sprint(c.Credentials[0].AccessKey, " ", string(c.Credentials[0].SecretKey), " ", c.Credentials[0].Principal, " ", len(c.Credentials))
		}},
		{"credential flags over env", []string{"--credential=AK1:s1", "--credential", "AK2:s:2:bob"}, env("SWEEPGATE_CREDENTIALS=AKE:se"), func(c *Config) string {
			var parts []string
			for _, cr := range c.Credentials {
				parts = append(parts, cr.AccessKey+"/"+string(cr.SecretKey)+"/"+cr.Principal)
			}
			return strings.Join(parts, " ")
		}},
		{"bare bool flag", []string{"--accept-backend-credentials"}, env("SWEEPGATE_ACCEPT_BACKEND_CREDENTIALS=false"), func(c *Config) string {
			return fmt.Sprint(c.AcceptBackendCredentials)
		}},
		{"bool flag false over env", []string{"--accept-backend-credentials=false"}, env("SWEEPGATE_ACCEPT_BACKEND_CREDENTIALS=true"), func(c *Config) string {
			return fmt.Sprint(c.AcceptBackendCredentials)
		}},
		{"config flag over config env", []string{"--config", other}, env(), func(c *Config) string { return c.Listen }},
		{"region follows backend region", []string{"--backend-region=eu-west-1"}, env(), func(c *Config) string {
			return c.Region + " " + c.ClientRegion()
		}},
		{"region set explicitly", nil, env("SWEEPGATE_REGION=r1", "SWEEPGATE_BACKEND_REGION=r2"), func(c *Config) string {
			return c.Region + " " + c.Backend.Region
		}},
	}
	want := []string{
		"127.0.0.1:1001 1m0s",
		"127.0.0.1:1002",
		"127.0.0.1:1003",
		"127.0.0.1:1003",
		"127.0.0.1:1001",
		"a.example.com b.example.com",
		"x.example.com y.example.com z.example.com",
		"AKE se alice 1",
		"AK1/s1/AK1 AK2/s:2/bob",
		"true",
		"false",
		// The second file sets only listen, so the backend must come from
		// flags here.
		"127.0.0.1:1009",
		"eu-west-1 eu-west-1",
		"r1 r2",
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.name == "config flag over config env" {
				args = append(args, requiredFlags...)
			}
			c := mustLoad(t, args, tt.environ)
			if got := tt.check(c); got != want[i] {
				t.Errorf("got %q, want %q", got, want[i])
			}
		})
	}
}

func TestYAMLErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "listen: :1\nlisten_addr: :2\n", []string{"test.yaml:2:1", "unknown setting listen_addr"}},
		{"unknown nested key", "backend:\n  endpiont: http://x\n", []string{"test.yaml:2:3", "unknown setting backend.endpiont"}},
		{"flag spelling in YAML", "max-clock-skew: 1m\n", []string{"did you mean max_clock_skew?"}},
		{"misplaced key", "endpoint: http://x\n", []string{"unknown setting endpoint", "did you mean backend.endpoint?"}},
		{"group is a scalar", "backend: http://x\n", []string{"backend must be a mapping"}},
		{"top level list", "- a\n- b\n", []string{"top level must be a mapping"}},
		{"list is a scalar", "domains: a.example.com\n", []string{"domains must be a list"}},
		{"scalar is a list", "listen: [a, b]\n", []string{"listen must be a single value"}},
		{"bad duration", "max_clock_skew: 15\n", []string{"test.yaml:1:17", "max_clock_skew", "not a duration"}},
		{"bad bool", "accept_backend_credentials: maybe\n", []string{"not a boolean"}},
		{"bad int", "etcd:\n  embedded:\n    quota_backend_bytes: 2GiB\n", []string{"quota_backend_bytes", "whole number"}},
		{"duplicate key", "listen: :1\nlisten: :2\n", []string{"listen is set twice"}},
		{"alias", "a: &x :1\n", []string{"unknown setting a"}},
		{"alias value", "log:\n  level: &l debug\n  format: *l\n", []string{"anchors and aliases"}},
		{"merge key", "base: &b {listen: ':1'}\n<<: *b\n", []string{"unknown setting <<"}},
		{"anchored group", "backend: &b {endpoint: 'http://x'}\n", []string{"anchors and aliases"}},
		{"two documents", "listen: :1\n---\nlisten: :2\n", []string{"only one YAML document"}},
		{"syntax", "listen: [\n", []string{"test.yaml"}},
		{"credential unknown key", "credentials:\n  - {access_key: a, secret_key: b, role: x}\n", []string{"unknown key role"}},
		{"credential not mapping", "credentials: [a:b]\n", []string{"each item must be a mapping"}},
		{"credential missing secret", "credentials:\n  - {access_key: a}\n", []string{"access_key and secret_key are required"}},
		{"complex key", "? [a]\n: b\n", []string{"keys must be plain names"}},
		{"secret not echoed", "backend:\n  secret_key: [s3cr3t-value]\n", []string{"backend.secret_key must be a single value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := LoadYAML(Defaults(), []byte(tt.yaml), "test.yaml")
			if err == nil {
				t.Fatalf("LoadYAML accepted:\n%s", tt.yaml)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error leaks a secret: %q", err)
			}
		})
	}
}

// TestJSONFile loads a configuration written as JSON, which is YAML too:
// tools (the e2e harness among them) generate files that way.
func TestJSONFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `{
  "listen": "127.0.0.1:9000",
  "domains": ["localhost"],
  "backend": {"endpoint": "http://127.0.0.1:9100", "region": "us-east-1", "access_key": "AK", "secret_key": "SK"},
  "credentials": [{"access_key": "C1", "secret_key": "S1", "principal": ""}],
  "accept_backend_credentials": false,
  "max_clock_skew": "5m0s",
  "etcd": {"embedded": {"data_dir": "/tmp/x", "client_url": "http://127.0.0.1:12379", "peer_url": "http://127.0.0.1:12380"}},
  "admin": {"listen": "127.0.0.1:9001"},
  "log": {"format": "json", "level": "debug"}
}`)
	c := mustLoad(t, []string{"--config", path}, nil)
	if c.MaxClockSkew != 5*time.Minute || c.AcceptBackendCredentials || c.Credentials[0].Principal != "C1" || c.Log.Level != "debug" {
		t.Errorf("JSON file loaded as %s", c)
	}
}

func TestYAMLNullAndEmpty(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"", "---\n", "# only a comment\n", "~\n", "listen:\nbackend:\n", "etcd:\n  embedded: ~\n"} {
		c := Defaults()
		if err := LoadYAML(c, []byte(doc), "test.yaml"); err != nil {
			t.Errorf("LoadYAML(%q): %v", doc, err)
		}
		if !reflect.DeepEqual(c, Defaults()) {
			t.Errorf("LoadYAML(%q) changed settings: %s", doc, c)
		}
	}
}

func TestExampleYAMLLoads(t *testing.T) {
	t.Parallel()
	path := writeFile(t, ExampleYAML())
	c := mustLoad(t, []string{"--config", path}, nil)
	if c.Backend.Endpoint != "http://127.0.0.1:9100" || len(c.Credentials) != 1 || c.Etcd.Prefix != "/sweepgate/" {
		t.Errorf("example file loaded as %s", c)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"missing backend endpoint", []string{"--backend-access-key=a", "--backend-secret-key=b"},
			[]string{"backend.endpoint (--backend-endpoint, SWEEPGATE_BACKEND_ENDPOINT): required"}},
		{"missing backend keys", []string{"--backend-endpoint=http://x:1"},
			[]string{"backend.access_key", "backend.secret_key", "required"}},
		{"backend URL scheme", []string{"--backend-endpoint=ftp://x"}, []string{"scheme must be http or https"}},
		{"backend URL without scheme", []string{"--backend-endpoint=127.0.0.1:9100"}, []string{"backend.endpoint"}},
		{"backend URL path", []string{"--backend-endpoint=http://x/base"}, []string{"must not have a path"}},
		{"backend URL user", []string{"--backend-endpoint=http://u:p@x"}, []string{"must not carry credentials"}},
		{"backend CA for a plain-HTTP backend", []string{"--backend-ca-file=ca.pem"}, []string{"backend.ca_file", "https://"}},
		{"backend CA missing", []string{"--backend-endpoint=https://x:1", "--backend-ca-file=/nonexistent/ca.pem"}, []string{"backend.ca_file", "no such file"}},
		{"listen", []string{"--listen=9000"}, []string{"listen", "host:port"}},
		{"listen port", []string{"--listen=:http-alt"}, []string{"not a number"}},
		{"nothing to serve", []string{"--listen="}, []string{"nothing to serve"}},
		{"tls without cert", []string{"--tls-listen=:9443"}, []string{"tls_cert_file", "tls_key_file", "required when tls_listen is set"}},
		{"cert without tls", []string{"--tls-cert-file=c.pem", "--tls-key-file=k.pem"}, []string{"tls_listen is empty"}},
		{"admin on S3 port", []string{"--admin-listen=:9000"}, []string{"admin.listen", "same address"}},
		{"domain with scheme", []string{"--domains=https://s3.example.com"}, []string{"without a scheme"}},
		{"domain with port", []string{"--domains=s3.example.com:9000"}, []string{"no port"}},
		{"region with slash", []string{"--region=us/east"}, []string{"region", "'/'"}},
		{"duplicate credential", []string{"--credential=a:b", "--credential=a:c"}, []string{"listed twice"}},
		{"access key with slash", []string{"--credential=a/b:c"}, []string{"must not contain '/'"}},
		{"nobody can sign in", []string{"--accept-backend-credentials=false"}, []string{"no client could sign in"}},
		{"clock skew", []string{"--max-clock-skew=0s"}, []string{"max_clock_skew", "must be positive"}},
		{"etcd endpoint", []string{"--etcd-endpoints=ftp://x:1"}, []string{"etcd.endpoints", "scheme"}},
		{"dial timeout", []string{"--etcd-dial-timeout=-1s"}, []string{"etcd.dial_timeout"}},
		{"embedded host name", []string{"--etcd-embedded-client-url=http://db.local:2379"}, []string{"etcd.embedded.client_url", "IP address"}},
		{"same embedded urls", []string{"--etcd-embedded-peer-url=http://127.0.0.1:2379"}, []string{"same as etcd.embedded.client_url"}},
		{"compaction mode", []string{"--etcd-embedded-auto-compaction-mode=weekly"}, []string{"periodic or revision"}},
		{"compaction retention", []string{"--etcd-embedded-auto-compaction-mode=revision"}, []string{"auto_compaction_retention", "whole number"}},
		{"data dir", []string{"--etcd-embedded-data-dir="}, []string{"data_dir", "required"}},
		{"log format", []string{"--log-format=xml"}, []string{"text or json"}},
		{"log level", []string{"--log-level=verbose"}, []string{"debug, info, warn or error"}},
		{"reclaim grace", []string{"--reclaim-grace=0s"}, []string{"reclaim.grace (--reclaim-grace, SWEEPGATE_RECLAIM_GRACE): must be positive"}},
		{"reclaim durations", []string{"--reclaim-delete-after=-1h", "--reclaim-stuck-limit=0s", "--reclaim-clock-skew=0s", "--reclaim-interval=0s", "--reclaim-backend-timeout=0s"},
			[]string{"reclaim.delete_after", "reclaim.stuck_limit", "reclaim.clock_skew", "reclaim.interval", "reclaim.backend_timeout"}},
		{"reclaim fraction zero", []string{"--reclaim-max-delete-fraction=0"}, []string{"reclaim.max_delete_fraction", "greater than 0 and at most 1", "got 0"}},
		{"reclaim fraction above one", []string{"--reclaim-max-delete-fraction=1.5"}, []string{"reclaim.max_delete_fraction", "got 1.5"}},
		{"etcd TLS with the embedded etcd", []string{"--etcd-ca-file=/ca.pem"}, []string{"etcd.ca_file", "external cluster"}},
		{"etcd cert without key", []string{"--etcd-endpoints=https://e:2379", "--etcd-cert-file=/c.pem"}, []string{"etcd.cert_file", "go together"}},
		{"etcd user without password", []string{"--etcd-endpoints=https://e:2379", "--etcd-username=sg"}, []string{"etcd.username", "go together"}},
		{"etcd password in the clear", []string{"--etcd-endpoints=http://e:2379", "--etcd-username=sg", "--etcd-password-file=/pw"}, []string{"etcd.endpoints", "must be https://"}},
		{"etcd CA in the clear", []string{"--etcd-endpoints=e:2379", "--etcd-ca-file=/ca.pem"}, []string{"etcd.endpoints", "must be https://"}},
		{"negative drain delay", []string{"--shutdown-drain-delay=-1s"}, []string{"shutdown.drain_delay", "must not be negative"}},
		{"zero shutdown timeout", []string{"--shutdown-timeout=0s"}, []string{"shutdown.timeout", "must be positive"}},
		{"reclaim fraction negative", []string{"--reclaim-max-delete-fraction=-0.1"}, []string{"reclaim.max_delete_fraction"}},
		{"reclaim max delete zero", []string{"--reclaim-max-delete=0"}, []string{"reclaim.max_delete", "reclaim.dry_run", "-1 for no absolute limit"}},
		{"reclaim max delete negative", []string{"--reclaim-max-delete=-2"}, []string{"reclaim.max_delete", "got -2"}},
		{"reclaim batch zero", []string{"--reclaim-batch-size=0"}, []string{"reclaim.batch_size", "1 to 1000"}},
		{"reclaim batch too big", []string{"--reclaim-batch-size=1001"}, []string{"reclaim.batch_size", "got 1001"}},
		{"reclaim parallel", []string{"--reclaim-parallel=0"}, []string{"reclaim.parallel", "1 to 256"}},
		{"reclaim election ttl short", []string{"--reclaim-election-ttl=500ms"}, []string{"reclaim.election_ttl", "at least 1s"}},
		{"reclaim election ttl fraction", []string{"--reclaim-election-ttl=1500ms"}, []string{"reclaim.election_ttl", "whole seconds"}},
		{"reclaim missing budget", []string{"--reclaim-missing-check-budget=0"}, []string{"reclaim.missing_check_budget"}},
		{"reclaim pass uploads negative", []string{"--reclaim-pass-uploads=-1"}, []string{"reclaim.pass_uploads", "must not be negative"}},
		{"digests pass blobs below a page", []string{"--reclaim-batch-size=100", "--digests-pass-blobs=99"}, []string{"digests.pass_blobs", "at least reclaim.batch_size (100)", "got 99"}},
		{"tracing endpoint", []string{"--tracing-endpoint=http://otel:4317"}, []string{"tracing.endpoint", "host:port"}},
		{"tracing ratio", []string{"--tracing-sample-ratio=1.5"}, []string{"tracing.sample_ratio", "between 0 and 1"}},
		{"tracing insecure and CA", []string{"--tracing-endpoint=otel:4317", "--tracing-insecure", "--tracing-ca-file=/ca.pem"}, []string{"tracing.ca_file", "tracing.insecure"}},
		{"tracing CA missing", []string{"--tracing-endpoint=otel:4317", "--tracing-ca-file=/nonexistent/ca.pem"}, []string{"tracing.ca_file", "no such file"}},
		{"tracing off with its options", []string{"--tracing-insecure"}, []string{"tracing.endpoint", "tracing is off"}},
		{"several at once", []string{"--log-level=verbose", "--log-format=xml", "--listen=x"}, []string{"log.level", "log.format", "listen"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, requiredFlags...), tt.args...)
			if strings.HasPrefix(tt.name, "missing") {
				args = tt.args
			}
			_, err := Load(args, nil)
			if err == nil {
				t.Fatal("Load accepted the configuration")
			}
			var ue *UsageError
			if errors.As(err, &ue) {
				t.Errorf("validation error reported as a usage error: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidConfigurations(t *testing.T) {
	t.Parallel()
	tests := [][]string{
		{"--listen=", "--tls-listen=:9443", "--tls-cert-file=c", "--tls-key-file=k"},
		{"--listen=127.0.0.1:0", "--admin-listen=127.0.0.1:0", "--etcd-embedded-client-url=http://127.0.0.1:0", "--etcd-embedded-peer-url=http://127.0.0.1:0"},
		{"--admin-listen="},
		{"--etcd-endpoints=10.0.0.1:2379,http://10.0.0.2:2379,unix:///run/etcd.sock", "--etcd-embedded-data-dir="},
		{"--domains=S3.Example.COM."},
		{"--accept-backend-credentials=false", "--credential=AK:S"},
		{"--etcd-embedded-auto-compaction-mode=revision", "--etcd-embedded-auto-compaction-retention=10000"},
		{"--log-level=DEBUG", "--log-format=JSON"},
		{"--reclaim-max-delete=-1", "--reclaim-max-delete-fraction=1", "--reclaim-batch-size=1", "--reclaim-parallel=256", "--reclaim-election-ttl=1s"},
		{"--tracing-endpoint=127.0.0.1:4317", "--tracing-insecure", "--tracing-sample-ratio=0"},
		// A replica without sessions has no reclaimer; the default
		// reclaim.enabled does not make that an error.
		{"--sessions-enabled=false"},
	}
	for _, args := range tests {
		c, err := Load(append(append([]string{}, requiredFlags...), args...), nil)
		if err != nil {
			t.Errorf("Load(%q): %v", args, err)
			continue
		}
		if args[0] == "--domains=S3.Example.COM." && c.Domains[0] != "s3.example.com" {
			t.Errorf("domain not normalized: %q", c.Domains)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--max-clock-skew=soon"}, "max-clock-skew"},
		{[]string{"--accept-backend-credentials=perhaps"}, "accept-backend-credentials"},
		{[]string{"--credential=justakey"}, "ACCESS_KEY:SECRET"},
		{[]string{"--credential=AK:"}, "must not be empty"},
		{[]string{"--listen"}, "needs an argument"},
		{[]string{"--reclaim-max-delete-fraction=quarter"}, "reclaim-max-delete-fraction"},
		{[]string{"--reclaim-max-delete-fraction=NaN"}, "not a number"},
		{[]string{"--reclaim-batch-size=1.5"}, "not a whole number"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		_, err := Load(tt.args, nil)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("Load(%q) = %v, want a *UsageError", tt.args, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %q, want it to mention %q", tt.args, err, tt.want)
		}
	}
	for _, h := range []string{"-h", "--help", "-help"} {
		if _, err := Load([]string{h}, nil); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("Load(%q) = %v, want flag.ErrHelp", h, err)
		}
	}
}

func TestEnvParsing(t *testing.T) {
	t.Parallel()
	environ := []string{
		"SWEEPGATE_BACKEND_ENDPOINT=http://127.0.0.1:9100",
		"SWEEPGATE_BACKEND_ACCESS_KEY=AKB",
		"SWEEPGATE_BACKEND_SECRET_KEY=sb",
		"SWEEPGATE_CREDENTIALS=AK1:s1:alice, AK2:s2 ,AK3:s:3:carol",
		"SWEEPGATE_ETCD_ENDPOINTS=http://10.0.0.1:2379,http://10.0.0.2:2379",
		"SWEEPGATE_MAX_CLOCK_SKEW=90s",
		"SWEEPGATE_ACCEPT_BACKEND_CREDENTIALS=0",
		"SWEEPGATE_ETCD_EMBEDDED_QUOTA_BACKEND_BYTES=1073741824",
		"NOT_OURS=1",
		"SWEEPGATE_TYPO=1",
	}
	c := mustLoad(t, nil, environ)
	want := []Credential{{"AK1", "s1", "alice", ""}, {"AK2", "s2", "AK2", ""}, {"AK3", "s:3", "carol", ""}}
	if !reflect.DeepEqual(c.Credentials, want) {
		t.Errorf("credentials = %#v, want %#v", c.Credentials, want)
	}
	if len(c.Etcd.Endpoints) != 2 || c.UsesEmbeddedEtcd() {
		t.Errorf("etcd endpoints = %q", c.Etcd.Endpoints)
	}
	if c.MaxClockSkew != 90*time.Second || c.AcceptBackendCredentials || c.Etcd.Embedded.QuotaBackendBytes != 1<<30 {
		t.Errorf("env not applied: %s", c)
	}
	if got := UnknownEnv(environ); !reflect.DeepEqual(got, []string{"SWEEPGATE_TYPO"}) {
		t.Errorf("UnknownEnv = %q, want [SWEEPGATE_TYPO]", got)
	}

	_, err := Load(nil, append(environ, "SWEEPGATE_MAX_CLOCK_SKEW=fast", "SWEEPGATE_CREDENTIALS=AKX:s3cr3t-value:p,nocolon"))
	if err == nil {
		t.Fatal("bad environment accepted")
	}
	for _, w := range []string{"SWEEPGATE_MAX_CLOCK_SKEW", `"fast" is not a duration`, "SWEEPGATE_CREDENTIALS"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error leaks a secret: %q", err)
	}
}

func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	if _, err := Load([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, nil); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	big := writeFile(t, "# "+strings.Repeat("x", MaxFileSize)+"\n")
	if _, err := Load([]string{"--config", big}, nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, []string{
		"--backend-endpoint=http://127.0.0.1:9100",
		"--backend-access-key=AKBACKEND",
		"--backend-secret-key=TOPSECRET-backend",
		"--credential=AKCLIENT:TOPSECRET-client:alice",
	}, nil)
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c, "backend", c.Backend, "creds", c.ClientCredentials())
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", c, "secret", c.Backend.SecretKey)
	outputs := map[string]string{
		"String": c.String(),
		"%v":     fmt.Sprintf("%v", c),
		"%+v":    fmt.Sprintf("%+v", *c),
		"%#v":    fmt.Sprintf("%#v", c),
		"%v cr":  fmt.Sprintf("%v %+v %#v", c.Credentials, c.Backend, c.ClientCredentials()),
		"slog":   logs.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, "TOPSECRET") {
			t.Errorf("%s leaks a secret: %s", name, out)
		}
		if !strings.Contains(out, "AKBACKEND") && name != "%v cr" {
			t.Errorf("%s lost the non-secret fields: %s", name, out)
		}
	}
	if string(c.Backend.SecretKey) != "TOPSECRET-backend" {
		t.Error("the secret itself must stay usable")
	}
}

func TestClientCredentials(t *testing.T) {
	t.Parallel()
	base := []string{"--backend-endpoint=http://x:1", "--backend-access-key=AKB", "--backend-secret-key=sb"}
	tests := []struct {
		args []string
		want []Credential
	}{
		{nil, []Credential{{"AKB", "sb", "AKB", ""}}},
		{[]string{"--credential=AK1:s1"}, []Credential{{"AK1", "s1", "AK1", ""}, {"AKB", "sb", "AKB", ""}}},
		{[]string{"--credential=AKB:sb:ops"}, []Credential{{"AKB", "sb", "ops", ""}}},
		{[]string{"--credential=AK1:s1:alice", "--accept-backend-credentials=false"}, []Credential{{"AK1", "s1", "alice", ""}}},
	}
	for _, tt := range tests {
		c := mustLoad(t, append(append([]string{}, base...), tt.args...), nil)
		if got := c.ClientCredentials(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: ClientCredentials() = %#v, want %#v", tt.args, got, tt.want)
		}
	}
}
