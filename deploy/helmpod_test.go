//go:build integration

package deploy

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// chartMount is one of the gateway's mounts and what backs it.
type chartMount struct {
	path, subPath string
	// secret: every source of the volume is a Secret; items: the file
	// names it is limited to (nil: all the Secret's keys).
	secret bool
	items  []string
}

type chartMountSet []chartMount

// chartMounts returns the gateway container's mounts.
func chartMounts(t *testing.T, pod chartPod, c chartContainer) chartMountSet {
	t.Helper()
	var out chartMountSet
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Template.Spec.Volumes, func(v map[string]any) bool { return v["name"] == m.Name })
		if i < 0 {
			t.Errorf("mount %s names no volume", m.Name)
			continue
		}
		v := pod.Spec.Template.Spec.Volumes[i]
		cm := chartMount{path: m.MountPath, subPath: m.SubPath}
		var sources []any
		if s, ok := v["secret"].(map[string]any); ok {
			sources = []any{map[string]any{"secret": s}}
		}
		if p, ok := v["projected"].(map[string]any); ok {
			sources, _ = p["sources"].([]any)
		}
		cm.secret = len(sources) > 0
		for _, src := range sources {
			s, ok := src.(map[string]any)["secret"].(map[string]any)
			if !ok {
				cm.secret = false
				continue
			}
			items, listed := s["items"].([]any)
			if !listed {
				cm.items = nil
				break
			}
			for _, it := range items {
				p, _ := it.(map[string]any)["path"].(string)
				cm.items = append(cm.items, p)
			}
		}
		out = append(out, cm)
	}
	return out
}

// fromSecret reports whether file, a path in the pod, is a file of a
// mounted Secret (never under a subPath, which Kubernetes does not update).
func (ms chartMountSet) fromSecret(file string) bool {
	dir, name := path.Split(file)
	for _, m := range ms {
		if m.secret && m.subPath == "" && strings.TrimSuffix(dir, "/") == m.path {
			return m.items == nil || slices.Contains(m.items, name)
		}
	}
	return false
}

// checkChartInit checks that the configuration check runs before the
// gateway, with its image, environment and mounts: what it approves is
// what serve will read.
func checkChartInit(t *testing.T, pod chartPod, c chartContainer) {
	t.Helper()
	want := []string{"config", "check", "--config", chartConfigPath}
	inits := pod.Spec.Template.Spec.InitContainers
	i := slices.IndexFunc(inits, func(ic chartContainer) bool { return slices.Equal(ic.Args, want) })
	if i < 0 {
		t.Errorf("no initContainer runs sweepgate %s", strings.Join(want, " "))
		return
	}
	ic := inits[i]
	if ic.Image != c.Image {
		t.Errorf("the configuration check runs %s, the gateway %s", ic.Image, c.Image)
	}
	if !sameYAML(t, ic.Env, c.Env) || !sameYAML(t, ic.VolumeMounts, c.VolumeMounts) {
		t.Error("the configuration check does not see the gateway's environment and mounts")
	}
}

// checkChartProbes checks the probes: liveness /healthz, readiness /readyz
// (never the etcd check /etcdz: an etcd outage must not empty the
// Service), all on the admin listener over HTTPS.
func checkChartProbes(t *testing.T, c chartContainer) {
	t.Helper()
	for name, want := range map[string]string{"liveness": "/healthz", "readiness": "/readyz", "startup": ""} {
		p := map[string]*chartProbe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe}[name]
		if p == nil {
			if want != "" {
				t.Errorf("no %s probe", name)
			}
			continue
		}
		got := p.HTTPGet
		if (want != "" && got.Path != want) || got.Path == "/etcdz" || got.Port != "admin" || got.Scheme != "HTTPS" {
			t.Errorf("the %s probe asks %s %s on port %s; want %s over HTTPS on admin, never /etcdz", name, got.Scheme, got.Path, got.Port, want)
		}
	}
}

// checkChartSecurity checks that every container of the pod runs as a
// non-root user on a read-only root file system, without privilege
// escalation or capabilities, under the runtime's default seccomp profile.
func checkChartSecurity(t *testing.T, pod chartPod) {
	t.Helper()
	ps := pod.Spec.Template.Spec.SecurityContext
	all := append(slices.Clone(pod.Spec.Template.Spec.InitContainers), pod.Spec.Template.Spec.Containers...)
	for _, c := range all {
		sc := c.SecurityContext
		nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && ps.RunAsNonRoot != nil && *ps.RunAsNonRoot)
		seccomp := sc.SeccompProfile.Type
		if seccomp == "" {
			seccomp = ps.SeccompProfile.Type
		}
		if !nonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			!slices.Contains(sc.Capabilities.Drop, "ALL") || seccomp != "RuntimeDefault" {
			t.Errorf("container %s: runAsNonRoot %v, readOnlyRootFilesystem %v, allowPrivilegeEscalation %v, drop %v, seccomp %q",
				c.Name, nonRoot, show(sc.ReadOnlyRootFilesystem), show(sc.AllowPrivilegeEscalation), sc.Capabilities.Drop, seccomp)
		}
	}
}

// chartService is what the tests read of a Service.
type chartService struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// checkChartServices checks that the S3 Service and the admin Service
// select the pods and target the ports of their listener, and that the S3
// Service does not expose the admin listener.
func checkChartServices(t *testing.T, objs map[string]manifest, c chartContainer, labels map[string]string) {
	t.Helper()
	for name, target := range map[string]string{releaseName: "s3", releaseName + "-admin": "admin"} {
		m, ok := objs["Service/"+name]
		if !ok {
			t.Errorf("no Service %s", name)
			continue
		}
		var svc chartService
		m.as(t, &svc)
		if len(svc.Spec.Selector) == 0 || !isSubset(svc.Spec.Selector, labels) {
			t.Errorf("Service %s selects %v, not the gateway pods %v", name, svc.Spec.Selector, labels)
		}
		var targets []string
		for _, p := range svc.Spec.Ports {
			targets = append(targets, p.TargetPort)
		}
		if !slices.Equal(targets, []string{target}) {
			t.Errorf("Service %s targets %v, want %s alone", name, targets, target)
		}
	}
}

// checkChartDisruption checks that a PodDisruptionBudget covers the pods.
func checkChartDisruption(t *testing.T, objs map[string]manifest, labels map[string]string) {
	t.Helper()
	m, ok := objs["PodDisruptionBudget/"+releaseName]
	if !ok {
		t.Error("no PodDisruptionBudget")
		return
	}
	var pdb struct {
		Spec struct {
			MaxUnavailable any `yaml:"maxUnavailable"`
			MinAvailable   any `yaml:"minAvailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	m.as(t, &pdb)
	if sel := pdb.Spec.Selector.MatchLabels; len(sel) == 0 || !isSubset(sel, labels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the pods %v", sel, labels)
	}
	if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
		t.Error("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}
}

// checkChartNetworkPolicy checks that a NetworkPolicy selects the pods,
// that every ingress rule names its ports, and that the admin port is
// open only to the peers a rule lists, never to everyone.
func checkChartNetworkPolicy(t *testing.T, objs map[string]manifest, c chartContainer, labels map[string]string) {
	t.Helper()
	m, ok := objs["NetworkPolicy/"+releaseName]
	if !ok {
		t.Error("no NetworkPolicy")
		return
	}
	var np struct {
		Spec struct {
			PodSelector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"podSelector"`
			PolicyTypes []string `yaml:"policyTypes"`
			Ingress     []struct {
				Ports []struct {
					Port any `yaml:"port"`
				} `yaml:"ports"`
				From []map[string]any `yaml:"from"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
	m.as(t, &np)
	if sel := np.Spec.PodSelector.MatchLabels; len(sel) == 0 || !isSubset(sel, labels) || !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
		t.Errorf("the NetworkPolicy selects %v for %v, want the pods %v for Ingress", sel, np.Spec.PolicyTypes, labels)
	}
	adminPort := ""
	for _, p := range c.Ports {
		if p.Name == "admin" {
			adminPort = strconv.Itoa(p.ContainerPort)
		}
	}
	adminRules := 0
	for i, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Errorf("ingress rule %d opens every port", i)
		}
		for _, p := range rule.Ports {
			if port := strings.TrimSpace(toString(p.Port)); port != "admin" && port != adminPort {
				continue
			}
			adminRules++
			if len(rule.From) == 0 {
				t.Errorf("ingress rule %d opens the admin port to everyone", i)
			}
			for _, peer := range rule.From {
				if len(peer) == 0 {
					t.Errorf("ingress rule %d has an empty peer for the admin port", i)
				}
			}
		}
	}
	if adminRules == 0 {
		t.Error("no ingress rule lets Prometheus reach the admin port")
	}
}

// show writes an optional boolean: true, false or unset.
func show(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	}
	return ""
}

// checkChartMonitoring checks that the ServiceMonitor and the
// PrometheusRule are rendered when asked for (and then scrape the admin
// Service over HTTPS and hold the alerting rules), and not otherwise: a
// cluster without prometheus-operator has no such kinds.
func checkChartMonitoring(t *testing.T, objs map[string]manifest, wanted bool) {
	t.Helper()
	sm, hasSM := objs["ServiceMonitor/"+releaseName]
	pr, hasPR := objs["PrometheusRule/"+releaseName]
	if !wanted {
		if hasSM || hasPR {
			t.Error("a ServiceMonitor or PrometheusRule is rendered by default; they are optional")
		}
		return
	}
	if !hasSM || !hasPR {
		t.Fatalf("ServiceMonitor rendered: %v, PrometheusRule rendered: %v; want both", hasSM, hasPR)
	}
	var mon struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Endpoints []struct {
				Port   string `yaml:"port"`
				Path   string `yaml:"path"`
				Scheme string `yaml:"scheme"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	sm.as(t, &mon)
	admin := objs["Service/"+releaseName+"-admin"]
	if sel := mon.Spec.Selector.MatchLabels; len(sel) == 0 || !isSubset(sel, admin.Metadata.Labels) || isSubset(sel, objs["Service/"+releaseName].Metadata.Labels) {
		t.Errorf("the ServiceMonitor selects %v: want the admin Service alone", sel)
	}
	if e := mon.Spec.Endpoints; len(e) != 1 || e[0].Port != "admin" || e[0].Path != "/metrics" || e[0].Scheme != "https" {
		t.Errorf("the ServiceMonitor scrapes %+v, want /metrics on admin over https", e)
	}
	checkPrometheusRule(t, pr)
}
