//go:build integration

package deploy

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sweepgate/sweepgate/config"
)

// kubeDir holds the plain Kubernetes manifests.
const kubeDir = "kubernetes"

// kubeObject is what the test reads of any manifest.
type kubeObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       kubeSpec          `yaml:"spec"`
}

type kubeSpec struct {
	// Deployment
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec podSpec `yaml:"spec"`
	} `yaml:"template"`
	// Service (its selector is a plain map, read apart)
	Ports []struct {
		Name       string `yaml:"name"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int             `yaml:"terminationGracePeriodSeconds"`
	Containers                    []kubeContainer `yaml:"containers"`
	Volumes                       []kubeVolume    `yaml:"volumes"`
}

type kubeContainer struct {
	Args []string `yaml:"args"`
	Env  []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  *kubeProbe `yaml:"livenessProbe"`
	ReadinessProbe *kubeProbe `yaml:"readinessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type kubeProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type kubeVolume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
}

// loadKube reads every document of every manifest, by kind and name, and
// the raw selector of each Service.
func loadKube(t *testing.T) (map[string]kubeObject, map[string]map[string]string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", kubeDir, err)
	}
	objs := map[string]kubeObject{}
	selectors := map[string]map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o kubeObject
			if err := node.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			id := o.Kind + "/" + o.Metadata.Name
			if _, dup := objs[id]; dup || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: %s is repeated or unnamed", f, id)
			}
			objs[id] = o
			if o.Kind == "Service" {
				var svc struct {
					Spec struct {
						Selector map[string]string `yaml:"selector"`
					} `yaml:"spec"`
				}
				if err := node.Decode(&svc); err != nil {
					t.Fatal(err)
				}
				selectors[o.Metadata.Name] = svc.Spec.Selector
			}
		}
	}
	return objs, selectors
}

// TestKubernetes checks deploy/kubernetes without a cluster: the gateway
// pods' configuration loads as serve loads it (the ConfigMap's file, the
// image's and the pod's environment), every file it names is mounted from
// a Secret key that exists, the container ports are the listeners', the
// probes ask /healthz and /readyz on the admin port, the grace period
// covers the drain and the shutdown timeout, and the Services and the
// PodDisruptionBudget select the pods.
func TestKubernetes(t *testing.T) {
	objs, selectors := loadKube(t)
	dep, ok := objs["Deployment/sweepgate"]
	if !ok {
		t.Fatal("no Deployment sweepgate")
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want the gateway alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	labels := dep.Spec.Template.Metadata.Labels
	if !isSubset(dep.Spec.Selector.MatchLabels, labels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", dep.Spec.Selector.MatchLabels, labels)
	}

	files := kubeMountedFiles(t, objs, pod)
	cfg := kubeConfig(t, objs, c, files)

	// Ports, probes and the grace period against the settings.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, listen := range map[string]string{"s3": cfg.Listen, "admin": cfg.Admin.Listen} {
		if _, port, err := net.SplitHostPort(listen); err != nil || port != strconv.Itoa(ports[name]) {
			t.Errorf("container port %s is %d, but the gateway listens on %q", name, ports[name], listen)
		}
	}
	for probe, want := range map[string]string{"liveness": "/healthz", "readiness": "/readyz"} {
		p := c.LivenessProbe
		if probe == "readiness" {
			p = c.ReadinessProbe
		}
		if p == nil || p.HTTPGet.Path != want || p.HTTPGet.Port != "admin" {
			t.Errorf("the %s probe should GET %s on the admin port: %+v", probe, want, p)
		}
	}
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace <= cfg.Shutdown.DrainDelay+cfg.Shutdown.Timeout {
		t.Errorf("terminationGracePeriodSeconds %v does not cover shutdown.drain_delay %v plus shutdown.timeout %v",
			grace, cfg.Shutdown.DrainDelay, cfg.Shutdown.Timeout)
	}

	// Services and the disruption budget select the pods.
	for _, name := range []string{"sweepgate", "sweepgate-admin"} {
		svc, ok := objs["Service/"+name]
		if !ok {
			t.Errorf("no Service %s", name)
			continue
		}
		if sel := selectors[name]; len(sel) == 0 || !isSubset(sel, labels) {
			t.Errorf("Service %s selects %v, not the gateway pods %v", name, sel, labels)
		}
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("Service %s targets port %q, which the container does not name", name, p.TargetPort)
			}
		}
	}
	if !slices.Contains(cfg.Admin.Hosts, "sweepgate-admin") {
		t.Errorf("admin.hosts %v lacks the admin Service's name, so requests addressed to it are refused", cfg.Admin.Hosts)
	}
	pdb, ok := objs["PodDisruptionBudget/sweepgate"]
	if !ok || !isSubset(pdb.Spec.Selector.MatchLabels, labels) || len(pdb.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("no PodDisruptionBudget sweepgate selecting the pods %v", labels)
	}
}

// kubeMountedFiles returns the files the gateway container sees: path ->
// the Secret key or ConfigMap entry behind it.
func kubeMountedFiles(t *testing.T, objs map[string]kubeObject, pod podSpec) map[string]string {
	t.Helper()
	c := pod.Containers[0]
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v kubeVolume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Errorf("mount %s names no volume", m.Name)
			continue
		}
		v := pod.Volumes[i]
		var kind, name string
		switch {
		case v.ConfigMap != nil:
			kind, name = "ConfigMap", v.ConfigMap.Name
		case v.Secret != nil:
			kind, name = "Secret", v.Secret.SecretName
		default:
			continue
		}
		src, ok := objs[kind+"/"+name]
		if !ok {
			t.Errorf("volume %s mounts %s %s, which no manifest defines", v.Name, kind, name)
			continue
		}
		entries := map[string]string{}
		maps.Copy(entries, src.Data)
		maps.Copy(entries, src.StringData)
		if m.SubPath != "" {
			files[m.MountPath] = entries[m.SubPath]
			continue
		}
		for key, value := range entries {
			files[m.MountPath+"/"+key] = value
		}
	}

	return files
}

// kubeConfig loads the gateway's configuration as serve loads it in the
// pod (the mounted file, the image's and the pod's environment), and
// checks that every file it names is mounted.
func kubeConfig(t *testing.T, objs map[string]kubeObject, c kubeContainer, files map[string]string) *config.Config {
	t.Helper()
	if len(c.Args) != 3 || c.Args[0] != "serve" || c.Args[1] != "--config" {
		t.Fatalf("the container runs %q, want serve --config FILE", c.Args)
	}
	text, ok := files[c.Args[2]]
	if !ok {
		t.Fatalf("the config %s is not mounted", c.Args[2])
	}
	// The mounted files, under a root of the test's, where the
	// configuration's paths are made to point.
	root := t.TempDir()
	for path, value := range files {
		if err := os.MkdirAll(filepath.Dir(root+path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+path, []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(root, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(strings.ReplaceAll(text, " /etc/", " "+root+"/etc/")), 0o600); err != nil {
		t.Fatal(err)
	}
	var environ []string
	for k, v := range dockerfileEnv(t) {
		environ = append(environ, k+"="+v)
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			s, ok := objs["Secret/"+ref.Name]
			if _, has := s.StringData[ref.Key]; !ok || !has {
				t.Errorf("env %s reads Secret %s key %s, which is not there", e.Name, ref.Name, ref.Key)
			}
			value = "from-the-secret"
		}
		environ = append(environ, e.Name+"="+value)
	}
	if unknown := config.UnknownEnv(environ); len(unknown) > 0 {
		t.Errorf("the pod sets %v, which are no settings", unknown)
	}
	cfg, err := config.Load([]string{"--config", cfgFile}, environ)
	if err != nil {
		t.Fatalf("the pods' configuration does not load: %v", err)
	}
	for key, path := range map[string]string{
		"etcd.ca_file": cfg.Etcd.CAFile, "etcd.cert_file": cfg.Etcd.CertFile, "etcd.key_file": cfg.Etcd.KeyFile,
		"etcd.password_file": cfg.Etcd.PasswordFile, "admin.token_file": cfg.Admin.TokenFile,
		"backend.secret_key_file": cfg.Backend.SecretKeyFile, "credentials_file": cfg.CredentialsFile,
	} {
		if _, ok := files[strings.TrimPrefix(path, root)]; path == "" || !ok {
			t.Errorf("%s is %q, which no volume mounts", key, path)
		}
	}
	if len(cfg.Etcd.Endpoints) < 3 || cfg.Etcd.Username == "" || cfg.Etcd.CAFile == "" {
		t.Errorf("the gateways should use an external etcd cluster with TLS and a user: %+v", cfg.Etcd)
	}

	return cfg
}

func isSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}
