//go:build bench

package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// gatewayProfileEnv, when set to a directory, makes the benchmarks that
// honour it serve the gateway's profiles (admin.pprof) and write a CPU
// profile of the gateway over their timed gateway phase there, named by
// the phase, for `go tool pprof bin/sweepgate FILE`.
const gatewayProfileEnv = "SWEEPGATE_BENCH_PROFILE"

// profileConfig adds admin.pprof to a harness configuration when
// gatewayProfileEnv is set.
func profileConfig(cfg map[string]any) map[string]any {
	if os.Getenv(gatewayProfileEnv) == "" {
		return cfg
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfg["admin"] = map[string]any{"pprof": true}
	return cfg
}

// profileGateway starts a CPU profile of g lasting d when
// gatewayProfileEnv is set, and returns a function that waits for it and
// writes it to the directory as NAME.cpu.pprof; without the setting both
// do nothing.
func profileGateway(b *testing.B, g *harness.Gateway, name string, d time.Duration) (wait func()) {
	dir := os.Getenv(gatewayProfileEnv)
	if dir == "" {
		return func() {}
	}
	done := make(chan error, 1)
	path := filepath.Join(dir, name+".cpu.pprof")
	go func() {
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", g.AdminEndpoint, int(d.Seconds()))
		req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, url, nil)
		if err != nil {
			done <- err
			return
		}
		req.Header.Set("Authorization", "Bearer "+g.AdminToken())
		resp, err := g.AdminClient().Do(req)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("profile: %s", resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			b.Fatalf("gateway profile %s: %v", name, err)
		}
		fmt.Fprintf(os.Stdout, "gateway CPU profile: %s\n", path)
	}
}
