//go:build integration

package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The chart, its production example, and the tools that render and check
// it (make test builds both into bin/).
const (
	chartDir        = "helm/sweepgate"
	chartAlerts     = chartDir + "/files/alerts.yml"
	productionFile  = chartDir + "/values-production.yaml"
	helmBin         = "../bin/helm"
	kubecheckBin    = "../bin/kubecheck"
	releaseName     = "sweepgate"
	releaseNS       = "storage"
	chartConfigPath = "/etc/sweepgate/config.yaml"
)

// tool returns the path of a tool make builds, failing t when it is
// missing: the chart's tests never skip.
func tool(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("%s is missing: build it with `make %s` (make test does): %v", abs, strings.TrimPrefix(path, "../"), err)
	}
	return abs
}

// runHelm runs bin/helm with its configuration, cache and data under a
// directory of the test's, and returns its standard output.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(tool(t, helmBin), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(err.Error() + ": " + stderr.String() + stdout.String())
	}
	return stdout.String(), nil
}

// render returns `helm template` of the chart with the values files given
// (none: the chart's defaults).
func render(t *testing.T, valuesFiles ...string) string {
	t.Helper()
	args := []string{"template", releaseName, chartDir, "--namespace", releaseNS}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", valuesFiles, err)
	}
	return out
}

// kubecheck runs bin/kubecheck on manifests and returns its listing of
// the objects, or its error.
func kubecheck(t *testing.T, manifests string) (string, error) {
	t.Helper()
	cmd := exec.Command(tool(t, kubecheckBin))
	cmd.Stdin = strings.NewReader(manifests)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", errors.New(err.Error() + ": " + stderr.String())
	}
	return stdout.String(), nil
}

// renders are the value sets the chart is checked with.
var renders = map[string][]string{
	"defaults":   nil,
	"production": {productionFile},
}

// TestHelmLint runs `helm lint --strict` with the defaults and the
// production values: a warning fails it too.
func TestHelmLint(t *testing.T) {
	for name, files := range renders {
		args := []string{"lint", "--strict", chartDir}
		for _, f := range files {
			args = append(args, "--values", f)
		}
		if out, err := runHelm(t, args...); err != nil {
			t.Errorf("%s: helm lint --strict: %v\n%s", name, err, out)
		}
	}
}

// TestHelmKubecheck validates every rendered object against the Kubernetes
// API's and prometheus-operator's types, strictly, and checks that the
// validator refuses what it must: an unknown field, a mistyped value, a
// kind it has no type for.
func TestHelmKubecheck(t *testing.T) {
	for name, files := range renders {
		listing, err := kubecheck(t, render(t, files...))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s:\n%s", name, listing)
	}
	for what, doc := range map[string]string{
		"an unknown field":    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {portz: []}\n",
		"a mistyped value":    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: \"9000\"}]}\n",
		"a repeated field":    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {type: ClusterIP, type: NodePort}\n",
		"an unknown kind":     "apiVersion: example.com/v1\nkind: Gateway\nmetadata: {name: a}\n",
		"a misspelled rule":   "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: a}\nspec: {groups: [{name: g, rules: [{alert: A, expr: up, fore: 5m}]}]}\n",
		"a bad quantity":      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {template: {spec: {containers: [{name: c, resources: {limits: {memory: 1Gx}}}]}}}\n",
		"an unnamed object":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
		"nothing to check at": "# only a comment\n",
	} {
		if _, err := kubecheck(t, doc); err == nil {
			t.Errorf("kubecheck accepted %s:\n%s", what, doc)
		}
	}
}

// TestHelmChartVersion keeps the chart's appVersion (and its version: the
// chart is released with the gateway) equal to the VERSION file.
func TestHelmChartVersion(t *testing.T) {
	data, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(data))
	var chart struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	decodeYAML(t, chartDir+"/Chart.yaml", &chart)
	if chart.AppVersion != want || chart.Version != want {
		t.Errorf("Chart.yaml has version %q, appVersion %q; VERSION is %q: set both to it", chart.Version, chart.AppVersion, want)
	}
}

// TestHelmAlertsCopy keeps the chart's copy of the alerting rules (Helm
// reads only files inside the chart) equal to deploy/prometheus/alerts.yml.
func TestHelmAlertsCopy(t *testing.T) {
	want, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartAlerts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s: cp %s %s", chartAlerts, alertsFile, "deploy/"+alertsFile, "deploy/"+chartAlerts)
	}
}

// manifest is one rendered object: its kind and name, and the whole
// document for the kind's own reading.
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	node yaml.Node
}

// parseManifests reads the rendered documents by kind/name.
func parseManifests(t *testing.T, text string) map[string]manifest {
	t.Helper()
	out := map[string]manifest{}
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("rendered manifests: %v", err)
		}
		var m manifest
		if err := node.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m.Kind == "" {
			continue
		}
		id := m.Kind + "/" + m.Metadata.Name
		if _, dup := out[id]; dup {
			t.Fatalf("%s rendered twice", id)
		}
		m.node = node
		out[id] = m
	}
}

// as decodes the object into v, strictly.
func (m manifest) as(t *testing.T, v any) {
	t.Helper()
	var buf bytes.Buffer
	if err := yaml.NewEncoder(&buf).Encode(&m.node); err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(&buf)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s/%s: %v", m.Kind, m.Metadata.Name, err)
	}
}

// checkPrometheusRule checks that the rendered PrometheusRule's groups are
// those of alerts.yml (which TestAlertRules checks, and promtool where it
// is installed), and that its expressions name only exported metrics.
func checkPrometheusRule(t *testing.T, m manifest) {
	t.Helper()
	var pr struct {
		Spec ruleFile `yaml:"spec"`
	}
	m.as(t, &pr)
	var want ruleFile
	decodeStrict(t, alertsFile, &want)
	if !reflect.DeepEqual(pr.Spec, want) {
		t.Errorf("the PrometheusRule's groups differ from %s", alertsFile)
	}
	exported := exportedNames(t)
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			checkExpr(t, "PrometheusRule "+g.Name+"/"+r.Alert, r.Expr, exported)
		}
	}
}

// sameYAML reports whether a and b encode to the same YAML.
func sameYAML(t *testing.T, a, b any) bool {
	t.Helper()
	ya, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ya, yb)
}

// TestHelmRefuses checks that the chart refuses to render what would
// deploy an insecure or broken gateway: a secret in extraConfig (it would
// land in the ConfigMap), no external etcd, a listener without its
// certificate's Secret.
func TestHelmRefuses(t *testing.T) {
	for what, set := range map[string]string{
		"client keys in extraConfig":        "extraConfig.credentials[0].access_key=a",
		"the admin token in extraConfig":    "extraConfig.admin.token=0123456789abcdef0123",
		"the backend secret in extraConfig": "extraConfig.backend.secret_key=s",
		"no etcd endpoints":                 "etcd.endpoints=null",
		"no S3 certificate":                 "s3.tls.secretName=",
		"no admin certificate":              "admin.tls.secretName=",
		"an etcd user without password":     "etcd.auth.username=sweepgate",
	} {
		if _, err := runHelm(t, "template", releaseName, chartDir, "--namespace", releaseNS, "--set", set); err == nil {
			t.Errorf("the chart renders with %s (--set %s)", what, set)
		}
	}
}
