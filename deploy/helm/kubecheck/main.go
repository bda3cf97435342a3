// Command kubecheck validates Kubernetes manifests without a cluster and
// without downloaded schemas: it decodes every object of its input with
// the Kubernetes API's own Go types and prometheus-operator's, strictly,
// so that an unknown field, a repeated field or a value of the wrong type
// is an error, as is a kind it has no type for.
//
//	helm template ... | kubecheck
//	kubecheck FILE...
//
// It prints one line per object, "apiVersion kind namespace/name", and
// exits 1 at the first object that does not decode, naming it.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubecheck:", err)
		os.Exit(1)
	}
}

// newScheme registers the only kinds kubecheck accepts: those of the core,
// apps, autoscaling, networking, policy and RBAC groups, and
// prometheus-operator's monitoring.coreos.com/v1.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme,
		networkingv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme,
		monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	// Strict: unknown and repeated fields fail the decoding, as they fail
	// kubectl's and the API server's field validation.
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	inputs := map[string]io.Reader{"stdin": stdin}
	names := []string{"stdin"}
	if len(args) > 0 {
		inputs, names = map[string]io.Reader{}, args
		for _, name := range args {
			data, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			inputs[name] = bytes.NewReader(data)
		}
	}
	objects := 0
	for _, name := range names {
		n, err := checkStream(dec, name, inputs[name], stdout)
		if err != nil {
			return err
		}
		objects += n
	}
	if objects == 0 {
		return errors.New("no objects in the input")
	}
	return nil
}

// checkStream decodes every YAML document of r; empty documents (a
// template that rendered nothing) are skipped.
func checkStream(dec runtime.Decoder, name string, r io.Reader, stdout io.Writer) (int, error) {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	objects := 0
	for i := 1; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return objects, nil
		}
		if err != nil {
			return objects, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if isEmpty(doc) {
			continue
		}
		line, err := checkObject(dec, doc)
		if err != nil {
			return objects, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		fmt.Fprintln(stdout, line)
		objects++
	}
}

// isEmpty reports whether a YAML document holds only comments and space.
func isEmpty(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// checkObject decodes one object strictly into its registered type.
func checkObject(dec runtime.Decoder, doc []byte) (string, error) {
	obj, gvk, err := dec.Decode(doc, nil, nil)
	if err != nil {
		return "", err
	}
	if _, isList := obj.(*corev1.List); isList || meta.IsListType(obj) {
		return "", fmt.Errorf("%s: a list; give each object as its own document", gvk.Kind)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	if m.GetName() == "" {
		return "", fmt.Errorf("%s without metadata.name", gvk.Kind)
	}
	id := m.GetName()
	if ns := m.GetNamespace(); ns != "" {
		id = ns + "/" + id
	}
	return fmt.Sprintf("%s %s %s", gvk.GroupVersion(), gvk.Kind, id), nil
}
