//go:build integration

package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
)

// TestHealthcheck probes a running serve as a container's HEALTHCHECK does:
// found through the same environment as serve, healthy and ready while it
// runs, unready while its backend fails, and unhealthy once it is gone.
func TestHealthcheck(t *testing.T) {
	b := newBackend(t)
	s := startServe(t, baseArgs(t, b)...)
	env := []string{"SWEEPGATE_ADMIN_LISTEN=" + s.addrs.Admin}

	code, out, errOut := runCLI(t, env, "healthcheck")
	if code != cli.ExitOK || !strings.Contains(out, "/healthz: ok") {
		t.Errorf("healthcheck of a running gateway: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, nil, "healthcheck", "--ready", "--admin", s.addrs.Admin)
	if code != cli.ExitOK || !strings.Contains(out, "/readyz: ok") {
		t.Errorf("healthcheck --ready of a ready gateway: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	b.status.Store(http.StatusServiceUnavailable)
	code, _, errOut = runCLI(t, env, "healthcheck", "--ready")
	if code != cli.ExitError || !strings.Contains(errOut, "503") {
		t.Errorf("healthcheck --ready while the backend fails: exit %d, stderr %q; want %d naming the 503", code, errOut, cli.ExitError)
	}
	if code, _, errOut = runCLI(t, env, "healthcheck"); code != cli.ExitOK {
		t.Errorf("healthcheck (liveness) while the backend fails: exit %d, stderr %q; want %d", code, errOut, cli.ExitOK)
	}

	if code := s.stop(t); code != cli.ExitOK {
		t.Fatalf("serve exited with %d", code)
	}
	code, _, errOut = runCLI(t, env, "healthcheck")
	if code != cli.ExitError || errOut == "" {
		t.Errorf("healthcheck of a stopped gateway: exit %d, stderr %q; want %d with the reason", code, errOut, cli.ExitError)
	}
}
