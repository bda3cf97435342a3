package harness

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// StartWithFaultProxy is Start with a FaultProxy between the gateway and
// MinIO: the gateway's backend endpoint is the proxy, so a test can lose the
// backend's answers to chosen requests. opts.Config may not set the backend
// endpoint. In direct mode the test is skipped: there is no gateway to put a
// proxy behind.
func StartWithFaultProxy(t testing.TB, opts Options) (*Env, *FaultProxy) {
	t.Helper()
	if DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	m := StartMinIO(t)
	p := StartFaultProxy(t, m.Endpoint)
	cfg := map[string]any{"backend": map[string]any{"endpoint": p.URL}}
	mergeConfig(cfg, opts.Config)
	opts.Config = cfg
	// The gateway is stopped before the proxy is closed (cleanups run last
	// first), so it never sees its backend vanish while shutting down.
	g := StartGateway(t, m, opts)
	e := &Env{MinIO: m, Gateway: g, Endpoint: g.Endpoint, TLSEndpoint: g.TLSEndpoint, TLSConfig: g.TLSConfig(),
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Region: m.Region}
	if opts.RejectBackendCredentials && len(opts.Credentials) > 0 {
		e.AccessKey, e.SecretKey = opts.Credentials[0].AccessKey, opts.Credentials[0].SecretKey
	}
	return e, p
}

// RestartWithEnv is Restart with env in place of Options.Env, for this start
// and later ones; for example to start again without a test fault hook
// (SWEEPGATE_TEST_FAULT) that killed the process.
func (g *Gateway) RestartWithEnv(env ...string) {
	g.t.Helper()
	g.mu.Lock()
	g.env = childEnv([]string{"SWEEPGATE_", "AWS_"}, env...)
	g.mu.Unlock()
	g.Restart()
}

// WaitExit waits until the gateway process has ended (a crash, a test fault
// hook), and returns an error if it is still running after timeout or ctx
// ends first.
func (g *Gateway) WaitExit(ctx context.Context, timeout time.Duration) error {
	p := g.current()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("sweepgate (pid %d) still running after %v", p.pid(), timeout)
	}
}

// Terminate sends SIGTERM to the gateway and returns at once, so that a test
// can watch the shutdown from outside; WaitExit and Exited tell how it ends.
func (g *Gateway) Terminate() error {
	p := g.current()
	if p == nil {
		return errors.New("sweepgate is not running")
	}
	return p.cmd.Process.Signal(syscall.SIGTERM)
}

// Exited reports whether the gateway process has ended and, if so, its
// wait error (nil for exit status 0).
func (g *Gateway) Exited() (bool, error) {
	p := g.current()
	if p == nil {
		return true, nil
	}
	return p.exited()
}
