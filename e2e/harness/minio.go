package harness

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// MinIO is a running MinIO server, the backend that sweepgate fronts.
type MinIO struct {
	// Endpoint is the S3 endpoint, http://127.0.0.1:PORT (https:// with
	// StartMinIOTLS).
	Endpoint string
	// AccessKey and SecretKey are the root credentials.
	AccessKey string
	SecretKey string
	// Region is the region MinIO signs and answers for.
	Region string
	// DataDir holds the objects.
	DataDir string
	// LogFile holds MinIO's output.
	LogFile string
	// Cert is the certificate of a MinIO started with StartMinIOTLS
	// (nil otherwise); Cert.Pool trusts it.
	Cert *TLSCert

	proc *process
}

// MinIOBinary returns the path of the MinIO binary: SWEEPGATE_MINIO_BIN, or
// bin/minio at the module root. A missing binary fails the test with the
// command that builds it.
func MinIOBinary(t testing.TB) string {
	t.Helper()
	path := os.Getenv("SWEEPGATE_MINIO_BIN")
	if path == "" {
		root, err := ModuleRoot()
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		path = filepath.Join(root, "bin", "minio")
	}
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("harness: no MinIO binary at %s (%v): run `make bin/minio` at the repository root "+
			"(it builds the pinned MinIO into bin/, about four minutes), or set SWEEPGATE_MINIO_BIN", path, err)
	}
	return path
}

// StartMinIO starts a MinIO server on reserved loopback ports with its data in a
// temporary directory and waits until it is live. env is added to its
// environment. t.Cleanup stops it.
func StartMinIO(t testing.TB, env ...string) *MinIO {
	t.Helper()
	return startMinIO(t, false, env...)
}

// StartMinIOTLS starts a MinIO server as StartMinIO does, serving HTTPS
// with a certificate of its own (Cert; Endpoint is https://).
func StartMinIOTLS(t testing.TB, env ...string) *MinIO {
	t.Helper()
	return startMinIO(t, true, env...)
}

func startMinIO(t testing.TB, https bool, env ...string) *MinIO {
	t.Helper()
	bin := MinIOBinary(t)
	dir := t.TempDir()
	m := &MinIO{
		AccessKey: "e2e" + randomHex(t, 6),
		SecretKey: randomHex(t, 20),
		Region:    "us-east-1",
		DataDir:   filepath.Join(dir, "data"),
		LogFile:   filepath.Join(dir, "minio.log"),
	}
	for _, d := range []string{m.DataDir, filepath.Join(dir, "certs"), filepath.Join(dir, "config")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	dumpLogOnFailure(t, "minio", m.LogFile)
	scheme, client := "http", (*http.Client)(nil)
	if https {
		// MinIO serves HTTPS when its certs directory holds public.crt and
		// private.key.
		m.Cert = NewTLSCert(t, t.TempDir())
		for src, dst := range map[string]string{m.Cert.CertFile: "public.crt", m.Cert.KeyFile: "private.key"} {
			if err := os.Rename(src, filepath.Join(dir, "certs", dst)); err != nil {
				t.Fatalf("harness: %v", err)
			}
		}
		m.Cert.CertFile, m.Cert.KeyFile = filepath.Join(dir, "certs", "public.crt"), filepath.Join(dir, "certs", "private.key")
		scheme = "https"
		client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: m.Cert.Pool, MinVersion: tls.VersionTLS12},
		}}
	}

	var proc *process
	serverLaunch{
		what:  "MinIO",
		ports: 2,
		logs:  []string{m.LogFile},
		start: func(ports []int) ([]portHolder, error) {
			m.Endpoint = fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0])
			args := []string{"server", m.DataDir,
				"--address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
				"--console-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
				"--certs-dir", filepath.Join(dir, "certs"),
				"--quiet",
			}
			procEnv := childEnv([]string{"MINIO_", "SWEEPGATE_"}, append([]string{
				"MINIO_ROOT_USER=" + m.AccessKey,
				"MINIO_ROOT_PASSWORD=" + m.SecretKey,
				"MINIO_BROWSER=off",
				"MINIO_UPDATE=off",
				"HOME=" + filepath.Join(dir, "config"),
			}, env...)...)
			var err error
			proc, err = startProcess("minio", m.LogFile, bin, args, procEnv)
			if err != nil {
				t.Fatalf("harness: %v", err)
			}
			// Live comes a moment before the S3 API is initialized; until it
			// is, requests get 503 XMinioServerNotInitialized, and after it an
			// anonymous request gets 403.
			err = waitHTTP(t.Context(), proc, m.Endpoint+"/minio/health/live", client, 60*time.Second, isStatus(http.StatusOK))
			if err == nil {
				err = waitHTTP(t.Context(), proc, m.Endpoint+"/", client, 60*time.Second, isStatus(http.StatusForbidden))
			}
			if err != nil {
				proc.kill()
				return nil, err
			}
			// With the browser off, MinIO does not listen on the console
			// address; the S3 port is the one the tests use.
			return []portHolder{{proc, ports[0]}}, nil
		},
		kill: func() { proc.kill() },
	}.launch(t)
	m.proc = proc
	t.Cleanup(func() {
		if err := proc.stop(15 * time.Second); err != nil {
			t.Errorf("harness: stop MinIO: %v", err)
		}
	})
	return m
}

// errExited says a child ended while it was being waited for.
var errExited = errors.New("process exited")

// isStatus returns a predicate for waitHTTP.
func isStatus(code int) func(int) bool { return func(c int) bool { return c == code } }

// waitHTTP polls url until its status satisfies ok, the process exits, or
// the timeout passes.
func waitHTTP(ctx context.Context, proc *process, url string, client *http.Client, timeout time.Duration, ok func(int) bool) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		if done, err := proc.exited(); done {
			return fmt.Errorf("%w (%v) before %s was ready; last: %s", errExited, err, url, last)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if ok(resp.StatusCode) {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready within %v; last: %s", url, timeout, last)
		case <-proc.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("harness: random: %v", err)
	}
	return hex.EncodeToString(b)
}
