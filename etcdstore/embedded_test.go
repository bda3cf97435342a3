//go:build integration

package etcdstore

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/logbuf"
)

func startEmbedded(t *testing.T, dir string, log *slog.Logger) *Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e, err := StartEmbedded(ctx, EmbeddedConfig{
		DataDir:   dir,
		ClientURL: "http://127.0.0.1:0",
		PeerURL:   "http://127.0.0.1:0",
		Logger:    log,
	})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	return e
}

func TestEmbeddedKeepsDataAcrossRestart(t *testing.T) {
	t.Parallel()
	// A directory etcd creates itself gets owner-only permissions; one that
	// exists with wider ones earns a warning.
	dir := filepath.Join(t.TempDir(), "etcd")
	var logs logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))

	e := startEmbedded(t, dir, log)
	eps := e.Endpoints()
	if len(eps) != 1 || strings.HasSuffix(eps[0], ":0") || !strings.HasPrefix(eps[0], "http://127.0.0.1:") {
		t.Fatalf("Endpoints() = %v, want one bound http://127.0.0.1:PORT", eps)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cli, err := Connect(ctx, eps, 5*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if err := Health(ctx, cli); err != nil {
		t.Fatalf("Health on a running server: %v", err)
	}
	keys := Keys{Prefix: "/test"}
	key := keys.Session("bucket", "upload-1")
	if _, err := cli.Put(ctx, key, "v1"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	cli.Close()
	e.Close()
	e.Close() // a second Close is harmless

	// Nothing etcd says on a normal start and stop is worth an operator's
	// attention at info level.
	if s := logs.String(); s != "" {
		t.Errorf("etcd logged at info level or above on a clean start and stop:\n%s", s)
	}

	e2 := startEmbedded(t, dir, nil)
	defer e2.Close()
	cli2, err := Connect(ctx, e2.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatalf("Connect after restart: %v", err)
	}
	defer cli2.Close()
	resp, err := cli2.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("Get %s after restart = %v, want v1", key, resp.Kvs)
	}
}

func TestHealthFailsWhenServerStops(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cli, err := Connect(ctx, e.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cli.Close()
	e.Close()

	hctx, hcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer hcancel()
	if err := Health(hctx, cli); err == nil {
		t.Fatal("Health succeeded against a stopped server")
	}
}

func TestConnectFailsWithoutServer(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback: nothing listens there, so the dial is refused.
	start := time.Now()
	cli, err := Connect(t.Context(), []string{"http://127.0.0.1:1"}, 300*time.Millisecond)
	if err == nil {
		cli.Close()
		t.Fatal("Connect succeeded with no server")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Connect took %s, want it bounded by its dial timeout", d)
	}
	if _, err := Connect(t.Context(), nil, time.Second); err == nil {
		t.Error("Connect with no endpoints succeeded")
	}
}

func TestManyEmbeddedInParallel(t *testing.T) {
	t.Parallel()
	const n = 3
	var wg sync.WaitGroup
	servers := make([]*Embedded, n)
	for i := range n {
		wg.Go(func() { servers[i] = startEmbedded(t, t.TempDir(), nil) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, e := range servers {
		defer e.Close()
		ep := e.Endpoints()[0]
		if seen[ep] {
			t.Errorf("two servers share endpoint %s", ep)
		}
		seen[ep] = true
	}
}

func TestStartEmbeddedRefusesBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  EmbeddedConfig
		want string
	}{
		{"no data dir", EmbeddedConfig{}, "data directory"},
		{"host name", EmbeddedConfig{DataDir: dir, ClientURL: "http://example.com:2379"}, "IP address"},
		{"no port", EmbeddedConfig{DataDir: dir, ClientURL: "http://127.0.0.1"}, "host:port"},
		{"bad scheme", EmbeddedConfig{DataDir: dir, PeerURL: "unix://x"}, "scheme"},
		{"https", EmbeddedConfig{DataDir: dir, PeerURL: "https://127.0.0.1:0"}, "https"},
		{"path", EmbeddedConfig{DataDir: dir, ClientURL: "http://127.0.0.1:0/x"}, "path"},
		{"compaction mode", EmbeddedConfig{DataDir: dir, AutoCompactionMode: "weekly"}, "periodic or revision"},
		{"periodic retention", EmbeddedConfig{DataDir: dir, AutoCompactionRetention: "soon"}, "duration"},
		{"revision retention", EmbeddedConfig{DataDir: dir, AutoCompactionMode: "revision", AutoCompactionRetention: "1h"}, "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := StartEmbedded(t.Context(), tt.cfg)
			if err == nil {
				e.Close()
				t.Fatal("StartEmbedded succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestCheckAutoCompaction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode, retention string
		ok              bool
	}{
		{"periodic", "1h", true},
		{"periodic", "30m", true},
		{"periodic", "5", true}, // etcd reads hours
		{"periodic", "0", true},
		{"periodic", "-1h", false},
		{"periodic", "", false},
		{"revision", "1000", true},
		{"revision", "1h", false},
		{"revision", "-5", false},
		{"", "1h", false},
	}
	for _, tt := range tests {
		err := CheckAutoCompaction(tt.mode, tt.retention)
		if (err == nil) != tt.ok {
			t.Errorf("CheckAutoCompaction(%q, %q) = %v, want ok=%v", tt.mode, tt.retention, err, tt.ok)
		}
	}
}
