package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var labelPair = regexp.MustCompile(`([a-z0-9.]+)="([^"]*)"`)

// dockerStages returns the Dockerfile's first (build) and last (runtime)
// stages, each instruction one line with its continuations joined, without
// comments.
func dockerStages(t *testing.T) (build, runtime []string) {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(data), " ")
	var stages [][]string
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 && line != "" && !strings.HasPrefix(line, "#") {
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build and a runtime stage", len(stages))
	}
	return stages[0], stages[len(stages)-1]
}

// TestImageLabels checks the image's OCI labels: what it is, the version
// and commit from the build arguments `make image` passes (and the binary
// is stamped with), and the licence of LICENSE.
func TestImageLabels(t *testing.T) {
	build, runtime := dockerStages(t)
	labels := map[string]string{}
	args := map[string]bool{}
	for _, line := range runtime {
		if rest, ok := strings.CutPrefix(line, "LABEL "); ok {
			for _, m := range labelPair.FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = m[2]
			}
		}
		if rest, ok := strings.CutPrefix(line, "ARG "); ok {
			name, _, _ := strings.Cut(rest, "=")
			args[name] = true
		}
	}
	want := map[string]string{
		"org.opencontainers.image.version":  "${VERSION}",
		"org.opencontainers.image.revision": "${REVISION}",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	for _, k := range []string{"org.opencontainers.image.title", "org.opencontainers.image.description"} {
		if labels[k] == "" {
			t.Errorf("no label %s", k)
		}
	}
	for k, v := range labels {
		if strings.Contains(v, "://") {
			t.Errorf("label %s holds an address: %q", k, v)
		}
	}
	if !args["VERSION"] || !args["REVISION"] {
		t.Errorf("the runtime stage declares ARGs %v, want VERSION and REVISION (a stage sees only the ARGs it declares)", args)
	}
	if !strings.Contains(strings.Join(build, "\n"), `-X main.version=${VERSION} -X main.revision=${REVISION}`) {
		t.Error("the build stage does not stamp the binary with VERSION and REVISION")
	}

	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if head := string(license[:min(len(license), 200)]); !strings.Contains(head, "Apache License") || !strings.Contains(head, "Version 2.0") {
		t.Errorf("LICENSE does not begin as the Apache License 2.0, which the licenses label says:\n%s", head)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"--build-arg VERSION=$(VERSION)", "--build-arg REVISION=$(REVISION)"} {
		if !strings.Contains(string(makefile), arg) {
			t.Errorf("make image does not pass %s", arg)
		}
	}
}
