//go:build integration

package deploy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
)

// chartPod is what the tests read of the Deployment's pod template.
type chartPod struct {
	Spec struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int              `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               chartSecurity    `yaml:"securityContext"`
				InitContainers                []chartContainer `yaml:"initContainers"`
				Containers                    []chartContainer `yaml:"containers"`
				Volumes                       []map[string]any `yaml:"volumes"`
				Rest                          map[string]any   `yaml:",inline"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type chartSecurity struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
	Rest map[string]any `yaml:",inline"`
}

type chartContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string         `yaml:"name"`
		Value     string         `yaml:"value"`
		ValueFrom map[string]any `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe    *chartProbe   `yaml:"startupProbe"`
	LivenessProbe   *chartProbe   `yaml:"livenessProbe"`
	ReadinessProbe  *chartProbe   `yaml:"readinessProbe"`
	SecurityContext chartSecurity `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
	Rest map[string]any `yaml:",inline"`
}

type chartProbe struct {
	HTTPGet struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
	Rest map[string]any `yaml:",inline"`
}

// TestHelmChart renders the chart with its defaults and with the
// production values and checks what a user relies on: both listeners
// serve TLS and plain HTTP is off, the backend's own key is not accepted
// from clients, the rendered configuration loads and validates as serve
// loads it in the pod, it holds no secret, every file it names is mounted
// from a Secret, the configuration check runs first with the same view,
// readiness does not depend on etcd, the pods are locked down, a
// disruption budget and a network policy cover them (the admin port only
// from the peers allowed), and the monitoring objects are there when
// asked for and absent otherwise.
func TestHelmChart(t *testing.T) {
	for name, files := range renders {
		t.Run(name, func(t *testing.T) {
			objs := parseManifests(t, render(t, files...))
			dep, ok := objs["Deployment/"+releaseName]
			if !ok {
				t.Fatalf("no Deployment %s in %v", releaseName, slices.Sorted(maps.Keys(objs)))
			}
			var pod chartPod
			dep.as(t, &pod)
			if len(pod.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want the gateway alone", len(pod.Spec.Template.Spec.Containers))
			}
			c := pod.Spec.Template.Spec.Containers[0]
			cfg := checkChartConfig(t, objs, pod, c)
			checkChartInit(t, pod, c)
			checkChartProbes(t, c)
			checkChartSecurity(t, pod)
			checkChartPorts(t, c, cfg)
			if grace := time.Duration(pod.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; grace <= cfg.Shutdown.DrainDelay+cfg.Shutdown.Timeout {
				t.Errorf("terminationGracePeriodSeconds %v does not cover shutdown.drain_delay %v plus shutdown.timeout %v",
					grace, cfg.Shutdown.DrainDelay, cfg.Shutdown.Timeout)
			}
			labels := pod.Spec.Template.Metadata.Labels
			if sel := pod.Spec.Selector.MatchLabels; len(sel) == 0 || !isSubset(sel, labels) {
				t.Errorf("the Deployment's selector %v does not select its pods %v", sel, labels)
			}
			checkChartServices(t, objs, c, labels)
			checkChartDisruption(t, objs, labels)
			checkChartNetworkPolicy(t, objs, c, labels)
			checkChartMonitoring(t, objs, name == "production")
		})
	}
}

// checkChartConfig reads the ConfigMap's config.yaml as rendered (what
// the chart promises by default: TLS on both listeners, no plain listen,
// accept_backend_credentials false, no secret inlined), then loads it as
// serve loads it in the pod: the image's environment, the pod's, and the
// files the pod mounts, under a root of the test's.
func checkChartConfig(t *testing.T, objs map[string]manifest, pod chartPod, c chartContainer) *config.Config {
	t.Helper()
	if len(c.Args) != 3 || c.Args[0] != "serve" || c.Args[1] != "--config" || c.Args[2] != chartConfigPath {
		t.Fatalf("the container runs %q, want serve --config %s", c.Args, chartConfigPath)
	}
	cmName := ""
	for _, v := range pod.Spec.Template.Spec.Volumes {
		if cm, ok := v["configMap"].(map[string]any); ok {
			cmName, _ = cm["name"].(string)
		}
	}
	cm, ok := objs["ConfigMap/"+cmName]
	if !ok {
		t.Fatalf("the pods mount ConfigMap %q, which the chart does not render", cmName)
	}
	var data struct {
		Data map[string]string `yaml:"data"`
	}
	cm.as(t, &data)
	if keys := slices.Sorted(maps.Keys(data.Data)); !slices.Equal(keys, []string{"config.yaml"}) {
		t.Errorf("the ConfigMap holds %v, want config.yaml alone", keys)
	}
	text := data.Data["config.yaml"]
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	checkRawConfig(t, raw)

	mounts := chartMounts(t, pod, c)
	root := t.TempDir()
	cfgFile := filepath.Join(root, "config.yaml")
	loadable, err := yaml.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte(strings.ReplaceAll(string(loadable), " /etc/", " "+root+"/etc/")), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := chartEnviron(t, c)
	// The files the configuration names, as the Secrets would fill them.
	cfg, err := config.LoadClient(cfgFile, environ)
	if err != nil {
		t.Fatalf("the rendered configuration does not load: %v", err)
	}
	for key, path := range chartFiles(cfg) {
		if path == "" {
			continue
		}
		inPod := strings.TrimPrefix(path, root)
		if !mounts.fromSecret(inPod) {
			t.Errorf("%s is %s, which no Secret volume mounts", key, inPod)
		}
		writeChartFile(t, path, key)
	}
	cfg, err = config.Load([]string{"--config", cfgFile}, environ)
	if err != nil {
		t.Fatalf("the rendered configuration does not load as serve loads it: %v", err)
	}
	checkChartConfigCheck(t, cfgFile, environ)
	if cfg.Admin.TLSCertFile == "" || cfg.Admin.TLSKeyFile == "" {
		t.Errorf("in the pod the admin listener serves plain HTTP (admin.tls_cert_file %q, admin.tls_key_file %q)",
			cfg.Admin.TLSCertFile, cfg.Admin.TLSKeyFile)
	}
	if cfg.Listen != "" || cfg.TLSListen == "" || cfg.AcceptBackendCredentials {
		t.Errorf("in the pod the gateway listens on %q (plain) and %q (TLS), accept_backend_credentials %v: want TLS only, false",
			cfg.Listen, cfg.TLSListen, cfg.AcceptBackendCredentials)
	}
	if !strings.HasPrefix(cfg.CredentialsFile, root) || cfg.Admin.TokenFile == "" || cfg.Backend.SecretKeyFile == "" {
		t.Errorf("the client keys, the admin token and the backend's secret should be files: %q, %q, %q",
			cfg.CredentialsFile, cfg.Admin.TokenFile, cfg.Backend.SecretKeyFile)
	}
	if len(cfg.Etcd.Endpoints) == 0 {
		t.Error("no external etcd: an embedded etcd's data would not outlive its pod")
	}
	return cfg
}

// checkRawConfig checks the rendered config.yaml itself: the secure
// defaults, and no secret value among its keys.
func checkRawConfig(t *testing.T, raw map[string]any) {
	t.Helper()
	if v, ok := raw["accept_backend_credentials"]; !ok || v != false {
		t.Errorf("accept_backend_credentials is %v, want false written out (the gateway's default is true)", v)
	}
	if v := raw["listen"]; v != nil && v != "" {
		t.Errorf("listen is %v: plain HTTP should be off", v)
	}
	for _, key := range []string{"tls_listen", "tls_cert_file", "tls_key_file"} {
		if s, _ := raw[key].(string); s == "" {
			t.Errorf("%s is not set: the S3 listener should serve TLS", key)
		}
	}
	admin, _ := raw["admin"].(map[string]any)
	for _, key := range []string{"tls_cert_file", "tls_key_file"} {
		if s, _ := admin[key].(string); !strings.HasPrefix(s, "/etc/sweepgate/") {
			t.Errorf("admin.%s is %q: the admin listener should serve TLS from a mounted Secret", key, s)
		}
	}
	// No setting that holds a secret value, only the files.
	backend, _ := raw["backend"].(map[string]any)
	etcd, _ := raw["etcd"].(map[string]any)
	for key, present := range map[string]bool{
		"credentials":        raw["credentials"] != nil,
		"admin.token":        admin["token"] != nil,
		"backend.secret_key": backend["secret_key"] != nil,
		"backend.access_key": backend["access_key"] != nil,
		"etcd.password":      etcd["password"] != nil,
	} {
		if present {
			t.Errorf("the ConfigMap sets %s: secrets belong in Secrets", key)
		}
	}
	ids, _ := backend["identities"].([]any)
	for _, id := range ids {
		if m, _ := id.(map[string]any); m["secret_key"] != nil {
			t.Errorf("the ConfigMap inlines backend identity %v's secret", m["name"])
		}
	}
}

// chartEnviron is the gateway's environment in the pod: the image's, then
// the pod's (a Secret's value stands in for itself).
func chartEnviron(t *testing.T, c chartContainer) []string {
	t.Helper()
	env := dockerfileEnv(t)
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			ref, _ := e.ValueFrom["secretKeyRef"].(map[string]any)
			if ref["name"] == nil || ref["key"] == nil {
				t.Errorf("env %s comes from %v, want a Secret's key", e.Name, e.ValueFrom)
			}
			env[e.Name] = "from-the-secret"
		}
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	if unknown := config.UnknownEnv(environ); len(unknown) > 0 {
		t.Errorf("the pod sets %v, which are no settings", unknown)
	}
	return environ
}

// chartFiles returns the files a configuration names, by setting.
func chartFiles(cfg *config.Config) map[string]string {
	files := map[string]string{
		"tls_cert_file": cfg.TLSCertFile, "tls_key_file": cfg.TLSKeyFile,
		"credentials_file": cfg.CredentialsFile, "admin.token_file": cfg.Admin.TokenFile,
		"backend.secret_key_file": cfg.Backend.SecretKeyFile, "backend.ca_file": cfg.Backend.CAFile,
		"etcd.ca_file": cfg.Etcd.CAFile, "etcd.cert_file": cfg.Etcd.CertFile, "etcd.key_file": cfg.Etcd.KeyFile,
		"etcd.password_file":  cfg.Etcd.PasswordFile,
		"admin.tls_cert_file": cfg.Admin.TLSCertFile, "admin.tls_key_file": cfg.Admin.TLSKeyFile,
	}
	for _, id := range cfg.Backend.Identities {
		files["backend.identities "+id.Name] = id.SecretKeyFile
	}
	return files
}

// writeChartFile writes a stand-in for the Secret key behind a file: a
// self-signed certificate and its key for certificates, CAs and keys.
func writeChartFile(t *testing.T, path, key string) {
	t.Helper()
	content := "stand-in-secret-" + strconv.Itoa(len(key))
	switch {
	case key == "credentials_file":
		content = "- {access_key: client, secret_key: client-secret-long-enough, principal: client}\n"
	case key == "admin.token_file":
		content = strings.Repeat("ab", 32)
	case strings.HasSuffix(key, "cert_file") || strings.HasSuffix(key, "ca_file"):
		content, _ = selfSigned(t)
	case strings.HasSuffix(key, "key_file"):
		_, content = selfSigned(t)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkChartPorts checks that the container ports are the listeners'.
func checkChartPorts(t *testing.T, c chartContainer, cfg *config.Config) {
	t.Helper()
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, listen := range map[string]string{"s3": cfg.TLSListen, "admin": cfg.Admin.Listen} {
		if _, port, err := net.SplitHostPort(listen); err != nil || port != strconv.Itoa(ports[name]) {
			t.Errorf("container port %s is %d, but the gateway listens on %q", name, ports[name], listen)
		}
	}
	if _, plain := ports["s3-plain"]; plain {
		t.Error("the container exposes a plain HTTP port")
	}
}

var (
	selfSignedOnce                sync.Once
	selfSignedCert, selfSignedKey string
)

// selfSigned returns one self-signed certificate and its key, in PEM.
func selfSigned(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	selfSignedOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sweepgate-test"},
			NotBefore: time.Unix(0, 0), NotAfter: time.Unix(0, 0).Add(100 * 365 * 24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			DNSNames:    []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		selfSignedCert = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		selfSignedKey = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	})
	return selfSignedCert, selfSignedKey
}

// checkChartConfigCheck runs what the chart's initContainer runs,
// `sweepgate config check --config F`, in process on the rendered
// configuration with the pod's environment: the rollout's gate must pass
// the chart's own output.
func checkChartConfigCheck(t *testing.T, cfgFile string, environ []string) {
	t.Helper()
	var out, errOut bytes.Buffer
	client := &cli.Client{Stdout: &out, Stderr: &errOut, Environ: environ}
	for _, cmd := range cli.Commands() {
		if cmd.Name != "config" {
			continue
		}
		if code := cmd.Run(client, t.Context(), []string{"check", "--config", cfgFile}); code != cli.ExitOK {
			t.Errorf("sweepgate config check refuses the rendered configuration (exit %d): %s", code, errOut.String())
		}
		return
	}
	t.Error("sweepgate has no config command for the initContainer to run")
}
