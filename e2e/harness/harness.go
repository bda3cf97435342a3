// Package harness starts the real processes that sweepgate's end-to-end tests
// and benchmarks run against: a MinIO server on loopback ports reserved for
// it (see ports.go: no two test processes get the same port, and a test
// talks only to the process it started) with its data in a temporary
// directory, and the sweepgate binary (built once per test
// process) with embedded etcd in front of it; for the registry tests, a CNCF
// distribution registry on S3 storage, crane, and distribution's
// garbage-collect as an oracle. It hands tests configured S3 clients and
// cleans everything up through t.Cleanup.
//
// Missing prerequisites (the MinIO binary, a command-line client) are test
// failures that say how to install them, never skips: a suite that silently
// skips its end-to-end tests has not tested anything.
//
// Environment variables read here:
//
//	SWEEPGATE_MINIO_BIN     path of the MinIO binary (default: bin/minio at the module root)
//	SWEEPGATE_REGISTRY_BIN  path of the CNCF distribution registry (default: bin/registry)
//	SWEEPGATE_CRANE_BIN     path of crane (default: bin/crane)
//	SWEEPGATE_BIN           path of a prebuilt sweepgate binary (default: built from ./cmd/sweepgate)
//	SWEEPGATE_E2E_RACE=1    build sweepgate with the race detector
//	SWEEPGATE_E2E_LOG_LEVEL the gateway's log level (default info)
//	SWEEPGATE_HARNESS_PORTS LOW-HIGH: reserve the servers' ports from this range
//	                        (default: below the kernel's ephemeral range)
//	SWEEPGATE_E2E_TARGET=minio
//	                        point the clients of Start at MinIO itself instead of a
//	                        gateway, to check the tests against a reference S3
//	                        server; tests that need the gateway are skipped
//	SWEEPGATE_E2E_SHARDS=N  run every gateway over N etcd shards instead of one
//	                        etcd, the test's buckets spread over them (etcd.go)
package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Main runs the tests of an end-to-end package and then removes what the
// harness shared between tests (the built sweepgate binary). Use it from
// TestMain:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if line, ok := shardSummary(); line != "" {
		fmt.Println(line)
		if !ok {
			fmt.Println("harness: shard mode: a shard got none of the tests' buckets")
			code = 1
		}
	}
	cleanupShared()
	os.Exit(code)
}

var (
	sharedMu       sync.Mutex
	sharedCleanups []func()
)

func addSharedCleanup(f func()) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sharedCleanups = append(sharedCleanups, f)
}

func cleanupShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for i := len(sharedCleanups) - 1; i >= 0; i-- {
		sharedCleanups[i]()
	}
	sharedCleanups = nil
}

// ModuleRoot returns the directory holding sweepgate's go.mod, found by
// walking up from the working directory (go test runs in the package's
// directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("harness: working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: no go.mod found above the working directory")
		}
		dir = parent
	}
}

// DirectMode reports whether SWEEPGATE_E2E_TARGET=minio asks for the clients
// of Start to talk to MinIO directly.
func DirectMode() bool { return os.Getenv("SWEEPGATE_E2E_TARGET") == "minio" }
