//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate"
	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestMakeBuildStampsVersion checks that bin/sweepgate, which `make test`
// builds first with `make build`, reports the version of the VERSION file,
// which the Makefile stamps and the binary embeds, in `sweepgate version`.
func TestMakeBuildStampsVersion(t *testing.T) {
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "sweepgate")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no %s (%v): run `make build` (make test builds it first)", bin, err)
	}
	want := sweepgate.Version()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if first != "sweepgate "+want {
		t.Errorf("%s version printed %q, want %q: rebuild it with `make build` if it is older than the checkout", bin, first, "sweepgate "+want)
	}
}
