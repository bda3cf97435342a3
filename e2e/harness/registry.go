package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RegistryStorage is where a CNCF distribution registry keeps its data: a
// bucket (and optional root directory in it) on an S3 endpoint, which is
// MinIO itself or a sweepgate in front of it.
type RegistryStorage struct {
	// Endpoint is the S3 endpoint, http://127.0.0.1:PORT.
	Endpoint  string
	AccessKey string
	SecretKey string
	Bucket    string
	// RootDirectory is the key prefix of the registry's tree in Bucket;
	// empty means the bucket's root.
	RootDirectory string
	// DescriptorCache turns on the registry's in-memory blob descriptor
	// cache (storage.cache.blobdescriptor: inmemory), as distribution's
	// example configuration does: the registry then answers for blobs it
	// has seen from memory, also once they are gone from the storage.
	DescriptorCache bool
}

// BlobsPrefix is the key prefix under which the registry stores its blobs:
// [ROOT/]docker/registry/v2/blobs/sha256/XX/HEX/data.
func (s RegistryStorage) BlobsPrefix() string {
	root := strings.Trim(s.RootDirectory, "/")
	if root != "" {
		root += "/"
	}
	return root + "docker/registry/v2/blobs/"
}

// Registry is a running distribution registry (bin/registry serve).
type Registry struct {
	// Host is host:port, the registry part of image references.
	Host string
	// URL is http://Host.
	URL        string
	Storage    RegistryStorage
	ConfigFile string
	// LogFile holds the registry's output; it is printed when the test
	// fails.
	LogFile string

	t    testing.TB
	proc *process
}

// registryStopGrace is how long the registry may take to stop on SIGTERM.
const registryStopGrace = 15 * time.Second

// RegistryBinary returns the path of the distribution registry binary:
// SWEEPGATE_REGISTRY_BIN, or bin/registry at the module root. A missing
// binary fails the test with the command that builds it.
func RegistryBinary(t testing.TB) string {
	return toolBinary(t, "SWEEPGATE_REGISTRY_BIN", "registry", "about six minutes")
}

// CraneBinary returns the path of the crane binary: SWEEPGATE_CRANE_BIN, or
// bin/crane at the module root.
func CraneBinary(t testing.TB) string {
	return toolBinary(t, "SWEEPGATE_CRANE_BIN", "crane", "about half a minute")
}

func toolBinary(t testing.TB, envVar, name, buildTime string) string {
	t.Helper()
	path := os.Getenv(envVar)
	if path == "" {
		root, err := ModuleRoot()
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		path = filepath.Join(root, "bin", name)
	}
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("harness: no %s binary at %s (%v): run `make bin/%s` at the repository root "+
			"(it builds the pinned version into bin/, %s), or set %s", name, path, err, name, buildTime, envVar)
	}
	return path
}

// StartRegistry starts a distribution registry with its storage in s on a
// reserved loopback port and waits until /v2/ answers. Deletes are enabled,
// redirects to the storage are off, and there is no blob descriptor cache
// unless s asks for one (DescriptorCache). t.Cleanup stops it.
func StartRegistry(t testing.TB, s RegistryStorage) *Registry {
	t.Helper()
	bin := RegistryBinary(t)
	dir := t.TempDir()
	r := &Registry{
		Storage:    s,
		ConfigFile: filepath.Join(dir, "registry.json"),
		LogFile:    filepath.Join(dir, "registry.log"),
		t:          t,
	}
	dumpLogOnFailure(t, "registry", r.LogFile)
	var proc *process
	serverLaunch{
		what:  "the registry",
		ports: 1,
		logs:  []string{r.LogFile},
		start: func(ports []int) ([]portHolder, error) {
			r.Host = fmt.Sprintf("127.0.0.1:%d", ports[0])
			r.URL = "http://" + r.Host
			if err := writeRegistryConfig(r.ConfigFile, s, r.Host); err != nil {
				t.Fatalf("harness: %v", err)
			}
			var err error
			proc, err = startProcess("registry", r.LogFile, bin, []string{"serve", r.ConfigFile}, registryEnv())
			if err != nil {
				t.Fatalf("harness: %v", err)
			}
			if err := waitHTTP(t.Context(), proc, r.URL+"/v2/", nil, 30*time.Second, isStatus(http.StatusOK)); err != nil {
				proc.kill()
				return nil, err
			}
			return []portHolder{{proc, ports[0]}}, nil
		},
		kill: func() { proc.kill() },
	}.launch(t)
	r.proc = proc
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("harness: %v", err)
		}
	})
	return r
}

// Stop stops the registry (an offline garbage-collect needs it stopped);
// stopping it again does nothing.
func (r *Registry) Stop() {
	r.t.Helper()
	if err := r.stop(); err != nil {
		r.t.Fatalf("harness: %v", err)
	}
}

func (r *Registry) stop() error {
	if err := r.proc.stop(registryStopGrace); err != nil {
		return fmt.Errorf("stop registry: %w", err)
	}
	return nil
}

// Ref returns the reference of repo in this registry with suffix, which is
// ":TAG" or "@sha256:HEX".
func (r *Registry) Ref(repo, suffix string) string { return r.Host + "/" + repo + suffix }

// registryEnv is the registry's environment: none of the caller's REGISTRY_
// variables (they override its configuration file), AWS_ (its S3 driver
// reads them) or OTEL_ ones, and tracing export off.
func registryEnv() []string {
	return childEnv([]string{"REGISTRY_", "AWS_", "OTEL_"},
		"OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
}

// writeRegistryConfig writes the registry's configuration (as JSON, which is
// YAML) for storage s, listening on addr.
func writeRegistryConfig(path string, s RegistryStorage, addr string) error {
	s3 := map[string]any{
		"regionendpoint": s.Endpoint,
		"region":         "us-east-1",
		"bucket":         s.Bucket,
		"accesskey":      s.AccessKey,
		"secretkey":      s.SecretKey,
		"secure":         false,
		"forcepathstyle": true,
		"v4auth":         true,
	}
	if s.RootDirectory != "" {
		s3["rootdirectory"] = s.RootDirectory
	}
	storage := map[string]any{
		"s3":          s3,
		"delete":      map[string]any{"enabled": true},
		"redirect":    map[string]any{"disable": true},
		"maintenance": map[string]any{"uploadpurging": map[string]any{"enabled": false}},
	}
	if s.DescriptorCache {
		storage["cache"] = map[string]any{"blobdescriptor": "inmemory"}
	}
	cfg := map[string]any{
		"version": "0.1",
		"log":     map[string]any{"level": "info", "formatter": "text"},
		"storage": storage,
		"http":    map[string]any{"addr": addr, "secret": "sweepgate-e2e-registry"},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// GCResult is what `registry garbage-collect` reported.
type GCResult struct {
	// Eligible holds the digests (sha256:HEX) of the blobs it found
	// eligible for deletion (and deleted, without --dry-run).
	Eligible map[string]bool
	// Marked is how many blobs it marked as reachable.
	Marked int
	// Duration is how long the command ran.
	Duration time.Duration
	// Output is its standard output.
	Output string
}

// GarbageCollectDryRun runs `registry garbage-collect --dry-run` on the
// registry's storage and returns the blobs it finds eligible for deletion.
func (r *Registry) GarbageCollectDryRun() map[string]bool {
	r.t.Helper()
	return GarbageCollect(r.t, r.Storage, true).Eligible
}

// GarbageCollect runs `registry garbage-collect` on storage s (a dry run
// deletes nothing; otherwise the registry must be stopped, as distribution
// requires). Its output must end with distribution's summary, and the
// eligible blobs it lists must number what the summary says: an output
// format this parser does not know fails the test rather than reading as
// "nothing eligible".
func GarbageCollect(t testing.TB, s RegistryStorage, dryRun bool) GCResult {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "gc.json")
	if err := writeRegistryConfig(config, s, "127.0.0.1:0"); err != nil {
		t.Fatalf("harness: %v", err)
	}
	args := []string{"garbage-collect"}
	if dryRun {
		args = append(args, "--dry-run")
	}
	args = append(args, config)
	cmd := exec.CommandContext(t.Context(), RegistryBinary(t), args...)
	cmd.Env = registryEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("harness: registry %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, tail(out.String()), tail(errOut.String()))
	}
	res, err := parseGCOutput(out.String())
	if err != nil {
		t.Fatalf("harness: registry %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, tail(out.String()), tail(errOut.String()))
	}
	res.Duration = elapsed
	return res
}

// The lines of distribution's registry/storage/garbagecollect.go
// (MarkAndSweep, v3.1.2) this parser reads:
//
//	%d blobs marked, %d blobs and %d manifests eligible for deletion
//	blob eligible for deletion: %s
var (
	gcSummaryLine  = regexp.MustCompile(`^(\d+) blobs marked, (\d+) blobs and (\d+) manifests eligible for deletion$`)
	gcEligibleLine = regexp.MustCompile(`^blob eligible for deletion: (sha256:[0-9a-f]{64})$`)
)

// parseGCOutput reads garbage-collect's standard output: the summary line,
// then one line per eligible blob. The number of eligible lines must equal
// the summary's count.
func parseGCOutput(out string) (GCResult, error) {
	res := GCResult{Eligible: map[string]bool{}, Output: out}
	summaries, want := 0, 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := gcSummaryLine.FindStringSubmatch(line); m != nil {
			summaries++
			res.Marked, _ = strconv.Atoi(m[1])
			want, _ = strconv.Atoi(m[2])
			continue
		}
		if m := gcEligibleLine.FindStringSubmatch(line); m != nil {
			if summaries == 0 {
				return res, fmt.Errorf("garbage-collect listed an eligible blob before its summary line: %q", line)
			}
			res.Eligible[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("read garbage-collect output: %w", err)
	}
	switch {
	case summaries != 1:
		return res, fmt.Errorf("garbage-collect output has %d summary lines (%q), want 1: its format changed", summaries, gcSummaryLine)
	case len(res.Eligible) != want:
		return res, fmt.Errorf("garbage-collect's summary says %d blobs are eligible, its output lists %d: its format changed", want, len(res.Eligible))
	}
	return res, nil
}

// tail returns the end of a long command output.
func tail(s string) string {
	const max = 16 << 10
	if len(s) <= max {
		return s
	}
	return "(...)\n" + s[len(s)-max:]
}
