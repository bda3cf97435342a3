//go:build integration

package deploy

// The compose set-up's tests: the services, their configuration and
// mounts, and the Prometheus and Grafana they provision, against the code.

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sweepgate/sweepgate/config"
)

// compose is what the test reads of a Compose file.
type compose struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Hostname    string            `yaml:"hostname"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   dependsOn         `yaml:"depends_on"`
}

// dependsOn reads both forms of depends_on: a list of names, or a map of
// name to condition.
type dependsOn []string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	var list []string
	if err := n.Decode(&list); err == nil {
		*d = list
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k := range m {
		*d = append(*d, k)
	}
	slices.Sort(*d)
	return nil
}

// interpolation matches what Compose substitutes: ${VAR}, ${VAR:-default},
// ${VAR-default}, $VAR, and $$ for a dollar.
var interpolation = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate substitutes the defaults, as Compose does with none of the
// variables set, and fails on a variable that has no default.
func interpolate(t *testing.T, text string) string {
	t.Helper()
	return interpolation.ReplaceAllStringFunc(text, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := interpolation.FindStringSubmatch(m)
		if sub[3] != "" || !strings.Contains(m, "-") {
			t.Errorf("%s: %s has no default; the file must work with nothing set", composeFile, m)
			return ""
		}
		return sub[2]
	})
}

// loadCompose reads compose.yaml as Compose would with no variables set.
func loadCompose(t *testing.T) compose {
	t.Helper()
	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal([]byte(interpolate(t, string(data))), &c); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return c
}

// mounts returns a service's bind mounts, container path to host path
// (relative to this directory), and its named volumes, container path to
// volume.
func (s composeService) mounts() (binds, named map[string]string) {
	binds, named = map[string]string{}, map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		src, dst := parts[0], parts[1]
		if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
			binds[dst] = src
		} else {
			named[dst] = src
		}
	}
	return binds, named
}

// containerPorts returns the container ports a service publishes.
func (s composeService) containerPorts() []string {
	var out []string
	for _, p := range s.Ports {
		out = append(out, p[strings.LastIndexByte(p, ':')+1:])
	}
	return out
}

// settingEnv is every environment variable that names a setting.
func settingEnv() map[string]bool {
	out := map[string]bool{config.ConfigEnv: true}
	for _, s := range config.Settings() {
		out[s.Env] = true
	}
	return out
}

var sweepgateEnv = regexp.MustCompile(`\bSWEEPGATE_[A-Z0-9_]+`)

// dockerfileEnv reads the SWEEPGATE_ variables the image sets with ENV.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	out := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ENV ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				out[k] = v
			}
		}
	}
	return out
}

// TestCompose checks compose.yaml without Docker: the services it needs
// are there and agree with each other (etcd members, the endpoints the
// replicas use, the backend's credentials, the scrape targets and mounted
// files), every SWEEPGATE_ variable it or the image sets is a real
// setting, and the replicas' configuration loads and validates as
// `sweepgate serve` would load it.
func TestCompose(t *testing.T) {
	c := loadCompose(t)
	known := settingEnv()
	for _, f := range []string{composeFile, "README.md", "../Dockerfile"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range sweepgateEnv.FindAllString(string(data), -1) {
			if !known[name] {
				t.Errorf("%s names %s, which is no setting (sweepgate serve --help lists them)", f, name)
			}
		}
	}

	for name, s := range c.Services {
		for _, dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %s depends on %s, which is not a service", name, dep)
			}
		}
		binds, named := s.mounts()
		for _, src := range binds {
			if _, err := os.Stat(src); err != nil {
				t.Errorf("service %s mounts %s: %v", name, src, err)
			}
		}
		for _, vol := range named {
			if _, ok := c.Volumes[vol]; !ok {
				t.Errorf("service %s mounts volume %s, which is not declared", name, vol)
			}
		}
	}

	// Three etcd members that name each other.
	var etcdClientURLs []string
	for _, name := range []string{"etcd1", "etcd2", "etcd3"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		checkEtcdMember(t, c, name, s)
		etcdClientURLs = append(etcdClientURLs, s.Environment["ETCD_ADVERTISE_CLIENT_URLS"])
	}
	minio, ok := c.Services["minio"]
	if !ok {
		t.Fatal("no service minio")
	}
	checkMinIOBuild(t, minio)

	// Two replicas of one image and one configuration.
	replicas := []string{"sweepgate1", "sweepgate2"}
	image := dockerfileEnv(t)
	var admin string
	for _, name := range replicas {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if s.Build == nil || filepath.Clean(s.Build.Context) != ".." || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s is not built from the repository's Dockerfile: %+v", name, s.Build)
		}
		other := c.Services[replicas[0]]
		if s.Image != other.Image || !slices.Equal(s.Command, other.Command) || !slices.Equal(s.Volumes, other.Volumes) ||
			fmt.Sprint(s.Environment) != fmt.Sprint(other.Environment) {
			t.Errorf("%s and %s differ in more than host name and ports", name, replicas[0])
		}
		for _, dep := range []string{"minio", "etcd1", "etcd2", "etcd3"} {
			if !slices.Contains(s.DependsOn, dep) {
				t.Errorf("%s does not wait for %s", name, dep)
			}
		}
		cfg := loadReplicaConfig(t, name, s, image)
		if !slices.Equal(cfg.Etcd.Endpoints, etcdClientURLs) {
			t.Errorf("%s uses etcd %v, the cluster serves %v", name, cfg.Etcd.Endpoints, etcdClientURLs)
		}
		if u, err := url.Parse(cfg.Backend.Endpoint); err != nil || u.Hostname() != "minio" || u.Port() != "9000" {
			t.Errorf("%s's backend is %s, want the minio service's S3 port, http://minio:9000", name, cfg.Backend.Endpoint)
		}
		if cfg.Backend.AccessKey != minio.Environment["MINIO_ROOT_USER"] || string(cfg.Backend.SecretKey) != minio.Environment["MINIO_ROOT_PASSWORD"] {
			t.Errorf("%s signs with other credentials than MinIO's root user", name)
		}
		if cfg.UsesEmbeddedEtcd() || !cfg.Sessions.Enabled || !cfg.Reclaim.Enabled {
			t.Errorf("%s: embedded etcd %v, sessions %v, reclaim %v; want the cluster, sessions and a reclaimer", name,
				cfg.UsesEmbeddedEtcd(), cfg.Sessions.Enabled, cfg.Reclaim.Enabled)
		}
		_, s3Port, _ := net.SplitHostPort(cfg.Listen)
		_, adminPort, _ := net.SplitHostPort(cfg.Admin.Listen)
		for _, p := range []string{s3Port, adminPort} {
			if !slices.Contains(s.containerPorts(), p) {
				t.Errorf("%s does not publish its port %s (publishes %v)", name, p, s.containerPorts())
			}
		}
		admin = adminPort
	}

	checkPrometheus(t, c, replicas, admin)
	checkGrafana(t, c)
}

// checkEtcdMember checks one member's name, URLs, cluster list and data.
func checkEtcdMember(t *testing.T, c compose, name string, s composeService) {
	t.Helper()
	repo, tag, _ := strings.Cut(s.Image, ":")
	if repo != "gcr.io/etcd-development/etcd" && repo != "quay.io/coreos/etcd" {
		t.Errorf("%s runs %s, not the official etcd image", name, s.Image)
	}
	if want := "v" + etcdMinor(t) + "."; !strings.HasPrefix(tag, want) {
		t.Errorf("%s runs etcd %s; go.mod's client is %s*", name, tag, want)
	}
	env := s.Environment
	if env["ETCD_NAME"] != name || s.Hostname != name {
		t.Errorf("%s: ETCD_NAME %q, hostname %q; want both %s", name, env["ETCD_NAME"], s.Hostname, name)
	}
	if got, want := env["ETCD_ADVERTISE_CLIENT_URLS"], "http://"+name+":2379"; got != want {
		t.Errorf("%s advertises clients %s, want %s", name, got, want)
	}
	members := map[string]string{}
	for _, m := range strings.Split(env["ETCD_INITIAL_CLUSTER"], ",") {
		n, u, _ := strings.Cut(m, "=")
		members[n] = u
		if _, ok := c.Services[n]; !ok || u != "http://"+n+":2380" {
			t.Errorf("%s's initial cluster names %s at %s, which is no etcd service", name, n, u)
		}
	}
	if len(members) != 3 || members[name] != env["ETCD_INITIAL_ADVERTISE_PEER_URLS"] {
		t.Errorf("%s: initial cluster %v, advertised peer URL %s", name, members, env["ETCD_INITIAL_ADVERTISE_PEER_URLS"])
	}
	if _, named := s.mounts(); named[env["ETCD_DATA_DIR"]] == "" {
		t.Errorf("%s keeps its data in %s, which is no volume", name, env["ETCD_DATA_DIR"])
	}
}

// etcdMinor returns the major.minor version of go.mod's etcd client.
func etcdMinor(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`go\.etcd\.io/etcd/client/v3 v(\d+\.\d+)\.`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go.etcd.io/etcd/client/v3")
	}
	return string(m[1])
}

// loadReplicaConfig loads a replica's configuration as serve would inside
// its container: its --config file (the host file mounted there), the
// image's environment and the service's on top.
func loadReplicaConfig(t *testing.T, name string, s composeService, image map[string]string) *config.Config {
	t.Helper()
	if len(s.Command) != 3 || s.Command[0] != "serve" || s.Command[1] != "--config" {
		t.Fatalf("%s runs %q, want serve --config FILE", name, s.Command)
	}
	binds, _ := s.mounts()
	hostFile, ok := binds[s.Command[2]]
	if !ok {
		t.Fatalf("%s's config %s is not mounted", name, s.Command[2])
	}
	var environ []string
	for k, v := range image {
		if _, ok := s.Environment[k]; !ok {
			environ = append(environ, k+"="+v)
		}
	}
	for k, v := range s.Environment {
		environ = append(environ, k+"="+v)
	}
	if unknown := config.UnknownEnv(environ); len(unknown) > 0 {
		t.Errorf("%s: unknown settings %v", name, unknown)
	}
	cfg, err := config.Load([]string{"--config", hostFile}, environ)
	if err != nil {
		t.Fatalf("%s's configuration does not load: %v", name, err)
	}
	return cfg
}

// checkPrometheus checks that Prometheus scrapes every replica's admin
// port and evaluates the rules file this package tests.
func checkPrometheus(t *testing.T, c compose, replicas []string, adminPort string) {
	t.Helper()
	s, ok := c.Services["prometheus"]
	if !ok {
		t.Error("no service prometheus")
		return
	}
	binds, _ := s.mounts()
	var pc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	data, err := os.ReadFile(promFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &pc); err != nil {
		t.Fatalf("%s: %v", promFile, err)
	}
	if binds["/etc/prometheus/prometheus.yml"] != "./"+promFile {
		t.Errorf("prometheus does not run with %s", promFile)
	}
	if len(pc.RuleFiles) != 1 || binds[pc.RuleFiles[0]] != "./"+alertsFile {
		t.Errorf("prometheus loads rules %v, which are not %s as mounted (%v)", pc.RuleFiles, alertsFile, binds)
	}
	var targets []string
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	var want []string
	for _, r := range replicas {
		want = append(want, net.JoinHostPort(r, adminPort))
	}
	slices.Sort(targets)
	if !slices.Equal(targets, want) {
		t.Errorf("prometheus scrapes %v, want every replica's admin listener %v", targets, want)
	}
}

// checkGrafana checks that Grafana provisions the dashboard this package
// tests, over the Prometheus service.
func checkGrafana(t *testing.T, c compose) {
	t.Helper()
	s, ok := c.Services["grafana"]
	if !ok {
		t.Error("no service grafana")
		return
	}
	binds, _ := s.mounts()
	provisioning, ok := binds["/etc/grafana/provisioning"]
	if !ok {
		t.Fatal("grafana has no provisioning mounted")
	}
	var dashboards struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	var datasources struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	for file, v := range map[string]any{"dashboards/sweepgate.yml": &dashboards, "datasources/prometheus.yml": &datasources} {
		decodeYAML(t, filepath.Join(provisioning, file), v)
	}
	if len(dashboards.Providers) != 1 || binds[path.Join(dashboards.Providers[0].Options.Path, "sweepgate.json")] != "./"+dashboardFile {
		t.Errorf("grafana's dashboard provider does not read the mounted %s (%+v, %v)", dashboardFile, dashboards, binds)
	}
	if len(datasources.Datasources) != 1 || datasources.Datasources[0].Type != "prometheus" {
		t.Fatalf("grafana's data sources: %+v", datasources)
	}
	u, err := url.Parse(datasources.Datasources[0].URL)
	if _, ok := c.Services[u.Hostname()]; err != nil || !ok || u.Hostname() != "prometheus" {
		t.Errorf("grafana's data source %s is not the prometheus service", datasources.Datasources[0].URL)
	}
}

// checkMinIOBuild checks that the compose file's MinIO is built from the
// module version the tests run (the Makefile's MINIO_VERSION), not an image
// that no longer receives updates.
func checkMinIOBuild(t *testing.T, s composeService) {
	t.Helper()
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MINIO_VERSION := (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no MINIO_VERSION")
	}
	if s.Build == nil || s.Build.Args["MINIO_VERSION"] != string(m[1]) {
		t.Fatalf("service minio is not built with MINIO_VERSION %s, the version the tests run: %+v", m[1], s.Build)
	}
	dockerfile, err := os.ReadFile(filepath.Join(s.Build.Context, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "go install -trimpath github.com/minio/minio@${MINIO_VERSION}") {
		t.Errorf("%s/Dockerfile does not build github.com/minio/minio at MINIO_VERSION", s.Build.Context)
	}
}
