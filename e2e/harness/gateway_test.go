//go:build integration

package harness

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeGatewayEnv makes the test binary act as a stand-in for sweepgate, so
// the gateway half of the harness is tested without the real binary.
const fakeGatewayEnv = "HARNESS_FAKE_GATEWAY"

// runFakeGateway reads the configuration the harness wrote (`serve --config
// FILE`), answers /readyz on the admin listener and every S3 request with
// 200, and exits 0 on SIGTERM.
func runFakeGateway() int {
	if len(os.Args) != 4 || os.Args[1] != "serve" || os.Args[2] != "--config" {
		fmt.Fprintln(os.Stderr, "fake gateway: unexpected arguments", os.Args)
		return 2
	}
	b, err := os.ReadFile(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake gateway:", err)
		return 2
	}
	var cfg struct {
		Listen    string `json:"listen"`
		TLSListen string `json:"tls_listen"`
		Admin     struct {
			Listen string `json:"listen"`
		} `json:"admin"`
		Etcd struct {
			Embedded struct {
				ClientURL string `json:"client_url"`
				PeerURL   string `json:"peer_url"`
			} `json:"embedded"`
		} `json:"etcd"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fake gateway: config:", err)
		return 2
	}
	serve := func(addr string, h http.HandlerFunc) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		go func() { _ = http.Serve(l, h) }()
		return nil
	}
	if err := serve(cfg.Listen, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fake s3") }); err != nil {
		fmt.Fprintln(os.Stderr, "fake gateway:", err)
		return 1
	}
	if err := serve(cfg.Admin.Listen, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}); err != nil {
		fmt.Fprintln(os.Stderr, "fake gateway:", err)
		return 1
	}
	// The harness checks the gateway holds every port it was given.
	for _, addr := range []string{cfg.TLSListen, strings.TrimPrefix(cfg.Etcd.Embedded.ClientURL, "http://"), strings.TrimPrefix(cfg.Etcd.Embedded.PeerURL, "http://")} {
		if err := serve(addr, http.NotFound); err != nil {
			fmt.Fprintln(os.Stderr, "fake gateway:", err)
			return 1
		}
	}
	fmt.Println("fake gateway serving on", cfg.Listen)
	if v := os.Getenv("SWEEPGATE_TEST_CLOCK_OFFSET"); v != "" {
		fmt.Println("fake gateway clock offset", v)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	fmt.Println("fake gateway stopping")
	return 0
}

func TestStartGatewayWithFake(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SWEEPGATE_BIN", self)
	m := &MinIO{Endpoint: "http://127.0.0.1:1", AccessKey: "backendkey", SecretKey: "backendsecret", Region: "us-east-1"}
	g := StartGateway(t, m, Options{
		Env:          []string{fakeGatewayEnv + "=1"},
		Credentials:  []Credential{{AccessKey: "ak", SecretKey: "sk", Principal: "p"}},
		MaxClockSkew: 5 * time.Minute,
		Config:       map[string]any{"etcd": map[string]any{"prefix": "/custom/"}},
	})

	var cfg map[string]any
	b, err := os.ReadFile(g.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("config is not JSON (so not the YAML subset we write): %v", err)
	}
	etcd := cfg["etcd"].(map[string]any)
	backend := cfg["backend"].(map[string]any)
	if etcd["prefix"] != "/custom/" || etcd["embedded"] == nil || backend["secret_key"] != "backendsecret" ||
		cfg["max_clock_skew"] != "5m0s" || cfg["accept_backend_credentials"] != true || len(cfg["credentials"].([]any)) != 1 {
		t.Fatalf("config:\n%s", b)
	}

	get := func() error {
		resp, err := http.Get(g.Endpoint + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	pid := g.PID()
	g.Restart()
	if g.PID() == pid || !g.Running() {
		t.Fatal("Restart did not start a new process")
	}
	if err := get(); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	g.Kill()
	if g.Running() {
		t.Fatal("still running after Kill")
	}
	if err := get(); err == nil {
		t.Fatal("the S3 port still answers after Kill")
	}
	g.Restart()
	if err := get(); err != nil {
		t.Fatalf("after Kill and Restart: %v", err)
	}
	if log := g.Log(); strings.Count(log, "fake gateway serving") != 3 || !strings.Contains(log, "fake gateway stopping") {
		t.Fatalf("log:\n%s", log)
	}
	// RestartWith adds to the environment for that start and later ones,
	// until the next RestartWith.
	const offset = "fake gateway clock offset 2h"
	g.RestartWith("SWEEPGATE_TEST_CLOCK_OFFSET=2h")
	g.Restart()
	g.RestartWith()
	if err := get(); err != nil {
		t.Fatalf("after RestartWith: %v", err)
	}
	if log := g.Log(); strings.Count(log, "fake gateway serving") != 6 || strings.Count(log, offset) != 2 {
		t.Fatalf("log:\n%s", log)
	}
}
