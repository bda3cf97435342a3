//go:build integration

package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
)

// buildBinary builds sweepgate with a version stamped by -ldflags, as a
// release build would be.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "sweepgate")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinary runs the real binary: version stamping, and a serve that stops
// with exit status 0 on SIGTERM after finishing a request in flight.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)

	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "sweepgate v9.8.7-test\n") {
		t.Errorf("version: %v\n%s", err, out)
	}
	if err := exec.Command(bin, "serve", "--bogus").Run(); exitCode(err) != cli.ExitUsage {
		t.Errorf("serve --bogus: %v, want exit status %d", err, cli.ExitUsage)
	}

	b := newBackend(t)
	args := []string{"serve"}
	for _, a := range baseArgs(t, b) {
		if !strings.HasPrefix(a, "--backend-secret-key=") {
			args = append(args, a)
		}
	}
	cmd := exec.Command(bin, args...)
	// The secret comes from the environment, as the docs recommend.
	cmd.Env = append(os.Environ(), "SWEEPGATE_BACKEND_SECRET_KEY=from-env-secret")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	// The startup line names the bound addresses.
	lines := make(chan map[string]any, 100)
	var logText strings.Builder
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logText.WriteString(sc.Text() + "\n")
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				lines <- rec
			}
		}
	}()
	var admin string
	deadline := time.After(60 * time.Second)
	for admin == "" {
		select {
		case rec, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited before its startup line: %v", cmd.Wait())
			}
			if rec["msg"] == "sweepgate serving" {
				admin, _ = rec["admin_listen"].(string)
				if rec["version"] != "v9.8.7-test" || rec["etcd"] != "embedded" {
					t.Errorf("startup line %v", rec)
				}
			}
		case <-deadline:
			t.Fatal("no startup line within 60s")
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	if code, _ := get(t, hc, "http://"+admin+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d", code)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Read the log until the process exits and closes stderr; only then
	// may Wait be called.
	timeout := time.After(45 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-lines:
		case <-timeout:
			t.Fatal("serve did not exit within 45s of SIGTERM")
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit status 0\n%s", err, logText.String())
	}
	if !strings.Contains(logText.String(), `"msg":"sweepgate stopped"`) {
		t.Errorf("no shutdown line in:\n%s", logText.String())
	}
	if strings.Contains(logText.String(), "from-env-secret") {
		t.Error("the log contains the backend secret")
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}
