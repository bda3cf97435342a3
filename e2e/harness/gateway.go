package harness

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Credential is one entry of the gateway's client credentials table.
type Credential struct {
	AccessKey string
	SecretKey string
	Principal string
}

// Options adjust the gateway that StartGateway and Start run. The zero value
// is the default set-up: embedded etcd, the backend's own credentials
// accepted, virtual-hosted-style requests for the domain localhost.
type Options struct {
	// Credentials are added to the gateway's client credentials table.
	Credentials []Credential
	// RejectBackendCredentials turns off the default acceptance of the
	// backend's own credentials from clients.
	RejectBackendCredentials bool
	// MaxClockSkew is the allowed request time skew; zero keeps the
	// gateway's default.
	MaxClockSkew time.Duration
	// Domains are the base domains of virtual-hosted-style requests; nil
	// means [localhost].
	Domains []string
	// EtcdEndpoints selects an external etcd; empty runs the embedded one.
	EtcdEndpoints []string
	// EtcdShards, when set, is etcd.shards (each {name, endpoints,
	// buckets, ...}): the gateway runs no embedded etcd.
	EtcdShards []map[string]any
	// EtcdPrefix is the key prefix; empty keeps the gateway's default.
	EtcdPrefix string
	// LogLevel is the gateway's log level; empty means
	// SWEEPGATE_E2E_LOG_LEVEL, or info (debug includes embedded etcd's
	// chatter, which buries the gateway's own lines in a failure's log).
	LogLevel string
	// Config is merged over the generated configuration (maps merge key by
	// key, everything else replaces), for settings that later features add.
	Config map[string]any
	// Env is added to the gateway's environment (which otherwise has no
	// SWEEPGATE_ variables).
	Env []string
	// Args are added after `serve --config FILE`.
	Args []string
	// Binary runs another sweepgate binary than this tree's (a previous
	// release, see BuildRelease); empty runs BuildSweepgate's.
	Binary string
	// AdminTLS, when set, makes the admin listener serve HTTPS with its
	// files (admin.tls_cert_file, admin.tls_key_file): AdminEndpoint is
	// then https://, and the harness trusts Roots to reach it.
	AdminTLS *AdminTLS
}

// Gateway is a running sweepgate binary.
type Gateway struct {
	// Endpoint is the plain-HTTP S3 endpoint, http://127.0.0.1:PORT.
	Endpoint string
	// TLSEndpoint is the HTTPS S3 endpoint, https://127.0.0.1:PORT, served
	// with Cert.
	TLSEndpoint string
	// AdminEndpoint serves /metrics, /healthz and /readyz: http://, or
	// https:// with Options.AdminTLS.
	AdminEndpoint string
	// Cert is the TLS listener's certificate; Cert.Pool trusts it.
	Cert *TLSCert
	// Dir holds the configuration, the log and the embedded etcd's data.
	Dir        string
	ConfigFile string
	LogFile    string
	// EtcdDataDir is the embedded etcd's data directory (empty with an
	// external etcd).
	EtcdDataDir string
	// EtcdClientURL is the embedded etcd's client URL (empty with an
	// external etcd). In shard mode it is the URL of the default shard
	// that stands in for the embedded etcd.
	EtcdClientURL string
	// AdminTokenFile is where the gateway keeps the admin token it
	// generates when its configuration sets none: the file admin-token of
	// its etcd.embedded.data_dir (which the harness sets with an external
	// etcd too, so that the file lands in Dir).
	AdminTokenFile string
	// adminToken is the admin token the configuration sets, if any.
	adminToken string
	// adminTLS is Options.AdminTLS; nil for a plain admin listener.
	adminTLS *AdminTLS
	// shards are the gateway's shards in shard mode (ShardCount); nil
	// otherwise.
	shards *shardSet
	// etcdEndpoints is Options.EtcdEndpoints.
	etcdEndpoints []string

	t    testing.TB
	bin  string
	args []string
	env  []string
	// extraEnv is added to env by RestartWith, for that start and the
	// ones after it.
	extraEnv []string

	// ports are the ports of the harness's choosing that the gateway's
	// configuration listens on.
	ports []int

	mu   sync.Mutex
	proc *process
}

// gatewayReadyTimeout bounds the wait for /readyz, which includes starting
// embedded etcd.
const gatewayReadyTimeout = 90 * time.Second

// gatewayStopGrace is how long a SIGTERM may take before the harness kills
// the gateway and fails the test: a gateway must stop cleanly.
const gatewayStopGrace = 30 * time.Second

var build struct {
	once sync.Once
	path string
	err  error
}

// BuildSweepgate returns the path of a sweepgate binary: SWEEPGATE_BIN, or
// ./cmd/sweepgate built once per test process into a temporary directory
// (removed by Main). SWEEPGATE_E2E_RACE=1 builds it with the race detector.
func BuildSweepgate(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SWEEPGATE_BIN"); p != "" {
		return p
	}
	build.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			build.err = err
			return
		}
		dir, err := os.MkdirTemp("", "sweepgate-e2e-bin-")
		if err != nil {
			build.err = fmt.Errorf("temp dir for the build: %w", err)
			return
		}
		addSharedCleanup(func() { os.RemoveAll(dir) })
		goBin, err := exec.LookPath("go")
		if err != nil {
			build.err = fmt.Errorf("go tool not on PATH: %w", err)
			return
		}
		path := filepath.Join(dir, "sweepgate")
		args := []string{"build", "-o", path}
		if os.Getenv("SWEEPGATE_E2E_RACE") == "1" {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/sweepgate")
		cmd := exec.Command(goBin, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
			return
		}
		build.path = path
	})
	if build.err != nil {
		t.Fatalf("harness: build sweepgate: %v", build.err)
	}
	return build.path
}

// StartGateway writes a configuration for a gateway in front of m and runs
// `sweepgate serve --config FILE` with it, waiting until /readyz on the admin
// listener answers 200. t.Cleanup stops it (and fails the test if it does
// not stop cleanly); its log is printed when the test fails.
func StartGateway(t testing.TB, m *MinIO, opts Options) *Gateway {
	t.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = BuildSweepgate(t)
	}
	var set *shardSet
	if n := ShardCount(); n > 0 && len(opts.EtcdShards) == 0 {
		set = shardSetFor(t, m, opts, n)
		opts = set.options(t, opts)
	}
	dir := t.TempDir()
	g := &Gateway{
		Dir:        dir,
		ConfigFile: filepath.Join(dir, "config.yaml"),
		LogFile:    filepath.Join(dir, "sweepgate.log"),
		Cert:       NewTLSCert(t, dir),
		t:          t,
		bin:        bin,
		shards:     set,
		// Empty in shard mode, where shards says where the state is.
		etcdEndpoints: opts.EtcdEndpoints,
	}
	g.args = append([]string{"serve", "--config", g.ConfigFile}, opts.Args...)
	g.env = childEnv([]string{"SWEEPGATE_", "AWS_"}, opts.Env...)
	g.adminToken = configuredAdminToken(opts)
	g.adminTLS = opts.AdminTLS
	dumpLogOnFailure(t, "sweepgate", g.LogFile)

	external := len(opts.EtcdEndpoints) > 0 || len(opts.EtcdShards) > 0
	nports, attempt := 5, 0
	if external {
		nports = 3 // no embedded etcd
	}
	serverLaunch{
		what:  "sweepgate",
		ports: nports,
		logs:  []string{g.LogFile},
		start: func(ports []int) ([]portHolder, error) {
			// A fresh etcd data dir per attempt: a half-started etcd leaves
			// member state bound to the old peer URL.
			attempt++
			g.EtcdDataDir = ""
			if !external {
				g.EtcdDataDir = filepath.Join(dir, fmt.Sprintf("etcd-%d", attempt))
				g.AdminTokenFile = filepath.Join(g.EtcdDataDir, adminTokenFileName)
			} else {
				g.AdminTokenFile = filepath.Join(dir, "data", adminTokenFileName)
			}
			if err := g.writeConfig(m, opts, ports); err != nil {
				t.Fatalf("harness: %v", err)
			}
			if err := g.start(); err != nil {
				return nil, err
			}
			return g.holders(), nil
		},
		kill: g.Kill,
	}.launch(t)
	if set != nil && set.standIn {
		// The etcd the gateway would have embedded is its default shard.
		g.EtcdClientURL = set.clusters[0].Endpoint(0)
	}
	admins.Store(g.AdminEndpoint, g)
	t.Cleanup(func() {
		admins.Delete(g.AdminEndpoint)
		if err := g.stop(); err != nil {
			t.Errorf("harness: %v", err)
		}
	})
	return g
}

// holders returns the ports the running gateway must hold: those of its
// configuration that the harness chose.
func (g *Gateway) holders() []portHolder {
	p := g.current()
	hs := make([]portHolder, 0, len(g.ports))
	for _, port := range g.ports {
		hs = append(hs, portHolder{p, port})
	}
	return hs
}

// writeConfig writes the YAML configuration (as JSON, which is YAML) with
// the listeners on ports: S3, S3 over TLS, admin, and the embedded etcd's
// client and peer URLs when there is no external etcd. g.ports records
// those the configuration still has once opts.Config is merged in.
func (g *Gateway) writeConfig(m *MinIO, opts Options, ports []int) error {
	g.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	g.TLSEndpoint = fmt.Sprintf("https://127.0.0.1:%d", ports[1])
	g.AdminEndpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	adminCfg := map[string]any{"listen": fmt.Sprintf("127.0.0.1:%d", ports[2])}
	if t := opts.AdminTLS; t != nil {
		g.AdminEndpoint = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
		adminCfg["tls_cert_file"], adminCfg["tls_key_file"] = t.CertFile, t.KeyFile
	}

	domains := opts.Domains
	if domains == nil {
		domains = []string{"localhost"}
	}
	creds := make([]map[string]any, 0, len(opts.Credentials))
	for _, c := range opts.Credentials {
		creds = append(creds, map[string]any{
			"access_key": c.AccessKey,
			"secret_key": c.SecretKey,
			"principal":  c.Principal,
		})
	}
	etcd := map[string]any{}
	if opts.EtcdPrefix != "" {
		etcd["prefix"] = opts.EtcdPrefix
	}
	if len(opts.EtcdEndpoints) > 0 || len(opts.EtcdShards) > 0 {
		if len(opts.EtcdEndpoints) > 0 {
			etcd["endpoints"] = opts.EtcdEndpoints
		}
		if len(opts.EtcdShards) > 0 {
			etcd["shards"] = opts.EtcdShards
		}
		g.EtcdClientURL = ""
		// Unused by etcd, but where the generated admin token goes.
		etcd["embedded"] = map[string]any{"data_dir": filepath.Dir(g.AdminTokenFile)}
	} else {
		g.EtcdClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[3])
		etcd["embedded"] = map[string]any{
			"data_dir":   g.EtcdDataDir,
			"client_url": g.EtcdClientURL,
			"peer_url":   fmt.Sprintf("http://127.0.0.1:%d", ports[4]),
		}
	}
	level := opts.LogLevel
	if level == "" {
		level = os.Getenv("SWEEPGATE_E2E_LOG_LEVEL")
	}
	if level == "" {
		level = "info"
	}
	cfg := map[string]any{
		"listen":        strings.TrimPrefix(g.Endpoint, "http://"),
		"tls_listen":    strings.TrimPrefix(g.TLSEndpoint, "https://"),
		"tls_cert_file": g.Cert.CertFile,
		"tls_key_file":  g.Cert.KeyFile,
		"region":        m.Region,
		"domains":       domains,
		"backend": map[string]any{
			"endpoint":   m.Endpoint,
			"region":     m.Region,
			"access_key": m.AccessKey,
			"secret_key": m.SecretKey,
		},
		"credentials":                creds,
		"accept_backend_credentials": !opts.RejectBackendCredentials,
		"etcd":                       etcd,
		"admin":                      adminCfg,
		"log":                        map[string]any{"format": "json", "level": level},
		// Tests stop gateways often and have no load balancer to drain
		// from; a test of the drain sets its own in Options.Config.
		"shutdown": map[string]any{"drain_delay": "0s"},
	}
	if opts.MaxClockSkew > 0 {
		cfg["max_clock_skew"] = opts.MaxClockSkew.String()
	}
	mergeConfig(cfg, opts.Config)
	g.ports = configuredPorts(cfg, ports)
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode gateway config: %w", err)
	}
	if err := os.WriteFile(g.ConfigFile, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write gateway config: %w", err)
	}
	return nil
}

// configuredPorts returns those of ports that the configuration cfg listens
// on (a test's Config may turn a listener off or move it).
func configuredPorts(cfg map[string]any, ports []int) []int {
	var addrs []string
	str := func(m map[string]any, k string) {
		if v, ok := m[k].(string); ok {
			addrs = append(addrs, strings.TrimPrefix(strings.TrimPrefix(v, "http://"), "https://"))
		}
	}
	str(cfg, "listen")
	str(cfg, "tls_listen")
	if admin, ok := cfg["admin"].(map[string]any); ok {
		str(admin, "listen")
	}
	if etcd, ok := cfg["etcd"].(map[string]any); ok {
		if emb, ok := etcd["embedded"].(map[string]any); ok {
			str(emb, "client_url")
			str(emb, "peer_url")
		}
	}
	var out []int
	for _, p := range ports {
		if slices.Contains(addrs, fmt.Sprintf("127.0.0.1:%d", p)) {
			out = append(out, p)
		}
	}
	return out
}

// adminTokenFileName is the file of etcd.embedded.data_dir where a gateway
// keeps the admin token it generates (config.AdminTokenFileName).
const adminTokenFileName = "admin-token"

// admins holds the running gateways by AdminEndpoint, for AdminTokenOf.
var admins sync.Map

// AdminToken returns the token the gateway's admin API wants: the one its
// options configure (admin.token or admin.token_file, in Config or Env),
// else the one it generated in AdminTokenFile; empty when neither is
// there.
func (g *Gateway) AdminToken() string {
	if g.adminToken != "" {
		return g.adminToken
	}
	b, err := os.ReadFile(g.AdminTokenFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// AdminTokenOf returns the admin token of the running gateway whose
// AdminEndpoint is adminEndpoint (see AdminToken); empty when no gateway
// of this process serves it.
func AdminTokenOf(adminEndpoint string) string {
	if g, ok := admins.Load(strings.TrimRight(adminEndpoint, "/")); ok {
		return g.(*Gateway).AdminToken()
	}
	return ""
}

// configuredAdminToken returns the admin token opts configure, the
// environment before the file as serve reads them; empty when they leave
// it to the gateway to generate one.
func configuredAdminToken(opts Options) string {
	var token, file string
	if admin, ok := opts.Config["admin"].(map[string]any); ok {
		token, _ = admin["token"].(string)
		file, _ = admin["token_file"].(string)
	}
	for _, kv := range opts.Env {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "SWEEPGATE_ADMIN_TOKEN":
			token, file = v, ""
		case "SWEEPGATE_ADMIN_TOKEN_FILE":
			token, file = "", v
		}
	}
	if token == "" && file != "" {
		if b, err := os.ReadFile(file); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	return token
}

// mergeConfig merges src into dst: nested maps key by key, other values
// replace.
func mergeConfig(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				dv = maps.Clone(dv)
				mergeConfig(dv, sv)
				dst[k] = dv
				continue
			}
		}
		dst[k] = v
	}
}

// start runs the binary with the current configuration and waits for
// readiness.
func (g *Gateway) start() error {
	g.mu.Lock()
	env := append(slices.Clone(g.env), g.extraEnv...)
	g.mu.Unlock()
	proc, err := startProcess("sweepgate", g.LogFile, g.bin, g.args, env)
	if err != nil {
		return err
	}
	client := g.AdminClient()
	client.Timeout = 2 * time.Second
	if err := waitHTTP(g.t.Context(), proc, g.AdminEndpoint+"/readyz", client, gatewayReadyTimeout, isStatus(http.StatusOK)); err != nil {
		proc.kill()
		return err
	}
	g.mu.Lock()
	g.proc = proc
	g.mu.Unlock()
	return nil
}

func (g *Gateway) current() *process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proc
}

// stop sends SIGTERM and waits; it reports a gateway that had to be killed
// or that exited with an error.
func (g *Gateway) stop() error {
	p := g.current()
	if p == nil {
		return nil
	}
	if done, _ := p.exited(); done {
		return nil
	}
	if err := p.stop(gatewayStopGrace); err != nil {
		return fmt.Errorf("stop sweepgate (pid %d): %w", p.pid(), err)
	}
	return nil
}

// Stop stops the gateway with SIGTERM, failing the test if it does not stop
// cleanly within 30 seconds.
func (g *Gateway) Stop() {
	g.t.Helper()
	if err := g.stop(); err != nil {
		g.t.Fatalf("harness: %v", err)
	}
}

// Kill ends the gateway with SIGKILL, as a crash would.
func (g *Gateway) Kill() {
	if p := g.current(); p != nil {
		p.kill()
	}
}

// Running reports whether the gateway process is alive.
func (g *Gateway) Running() bool {
	p := g.current()
	if p == nil {
		return false
	}
	done, _ := p.exited()
	return !done
}

// Restart stops the gateway (if it is running) and starts it again with the
// same configuration, ports and etcd data, waiting for readiness.
func (g *Gateway) Restart() {
	g.t.Helper()
	if err := g.stop(); err != nil {
		g.t.Fatalf("harness: %v", err)
	}
	if err := g.start(); err != nil {
		g.t.Fatalf("harness: restart sweepgate: %v", err)
	}
	if err := checkHolders(g.holders()); err != nil {
		g.t.Fatalf("harness: restarted sweepgate does not hold its ports: %v", err)
	}
}

// RestartWith restarts the gateway like Restart, with env added to its
// environment (KEY=VALUE each) for this start and later ones until the
// next RestartWith; RestartWith() restarts it with its own environment.
func (g *Gateway) RestartWith(env ...string) {
	g.t.Helper()
	g.mu.Lock()
	g.extraEnv = slices.Clone(env)
	g.mu.Unlock()
	g.Restart()
}

// PID returns the gateway's process id.
func (g *Gateway) PID() int {
	if p := g.current(); p != nil {
		return p.pid()
	}
	return 0
}

// Log returns what the gateway has written to its log so far (all of it,
// across restarts).
func (g *Gateway) Log() string {
	b, err := os.ReadFile(g.LogFile)
	if err != nil {
		return ""
	}
	return string(b)
}

// Addr returns host:port of the plain-HTTP S3 listener.
func (g *Gateway) Addr() string { return strings.TrimPrefix(g.Endpoint, "http://") }

// Port returns the port of the plain-HTTP S3 listener.
func (g *Gateway) Port() int {
	_, p, _ := strings.Cut(g.Addr(), ":")
	n, _ := strconv.Atoi(p)
	return n
}

// TLSConfig returns a client TLS configuration that trusts the gateway's
// certificate.
func (g *Gateway) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: g.Cert.Pool, MinVersion: tls.VersionTLS12}
}

// TLSClient returns an HTTP client that trusts the gateway's certificate.
func (g *Gateway) TLSClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = g.TLSConfig()
	return &http.Client{Transport: tr}
}
