//go:build integration

package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestHealthcheck probes a running serve as a container's HEALTHCHECK does:
// found through the same environment as serve, healthy and ready while it
// runs, unready while its backend fails, and unhealthy once it is gone.
func TestHealthcheck(t *testing.T) {
	b := newBackend(t)
	s := startServe(t, baseArgs(t, b)...)
	env := []string{"SWEEPGATE_ADMIN_LISTEN=" + s.addrs.Admin}

	code, out, errOut := runCLI(t, env, "healthcheck")
	if code != exitOK || !strings.Contains(out, "/healthz: ok") {
		t.Errorf("healthcheck of a running gateway: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, nil, "healthcheck", "--ready", "--admin", s.addrs.Admin)
	if code != exitOK || !strings.Contains(out, "/readyz: ok") {
		t.Errorf("healthcheck --ready of a ready gateway: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	b.status.Store(http.StatusServiceUnavailable)
	code, _, errOut = runCLI(t, env, "healthcheck", "--ready")
	if code != exitError || !strings.Contains(errOut, "503") {
		t.Errorf("healthcheck --ready while the backend fails: exit %d, stderr %q; want %d naming the 503", code, errOut, exitError)
	}
	if code, _, errOut = runCLI(t, env, "healthcheck"); code != exitOK {
		t.Errorf("healthcheck (liveness) while the backend fails: exit %d, stderr %q; want %d", code, errOut, exitOK)
	}

	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}
	code, _, errOut = runCLI(t, env, "healthcheck")
	if code != exitError || errOut == "" {
		t.Errorf("healthcheck of a stopped gateway: exit %d, stderr %q; want %d with the reason", code, errOut, exitError)
	}
}

func TestHealthcheckUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"healthcheck", "stray"},
		{"healthcheck", "--timeout=0s"},
		{"healthcheck", "--nope"},
	} {
		if code, _, errOut := runCLI(t, nil, args...); code != exitUsage || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d with the reason", args, code, errOut, exitUsage)
		}
	}
	code, out, _ := runCLI(t, nil, "healthcheck", "--help")
	if code != exitOK || !strings.Contains(out, "Usage: sweepgate healthcheck") {
		t.Errorf("healthcheck --help: exit %d, %q", code, out)
	}
}
