//go:build integration

package cli

import (
	"strings"
	"testing"
)

func TestHealthcheckUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"healthcheck", "stray"},
		{"healthcheck", "--timeout=0s"},
		{"healthcheck", "--nope"},
	} {
		if code, _, errOut := runCLI(t, nil, args...); code != ExitUsage || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d with the reason", args, code, errOut, ExitUsage)
		}
	}
	code, out, _ := runCLI(t, nil, "healthcheck", "--help")
	if code != ExitOK || !strings.Contains(out, "Usage: sweepgate healthcheck") {
		t.Errorf("healthcheck --help: exit %d, %q", code, out)
	}
}
