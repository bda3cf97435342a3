//go:build e2e && unix

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// makeRunStartTimeout bounds how long scripts/run.sh may take to print its
// endpoint: it starts MinIO and then sweepgate with a fresh embedded etcd.
const makeRunStartTimeout = 2 * time.Minute

// makeRunStopTimeout bounds how long run.sh may take to stop both servers
// after SIGINT (it allows each 20 seconds before killing it).
const makeRunStopTimeout = time.Minute

// TestMakeRun runs scripts/run.sh, which is what `make run` runs, with free
// ports and a temporary data directory, and checks what it promises: the
// endpoint and credentials it prints work with aws-sdk-go-v2 and with the aws
// CLI example it prints, the admin token file it names is there (mode 0600)
// and the admin command it prints finds it, and Ctrl-C (SIGINT to the script) stops MinIO and
// sweepgate.
//
// It uses the binaries `make run` uses, bin/sweepgate and bin/minio, which
// `make test` builds first (SWEEPGATE_BIN and SWEEPGATE_MINIO_BIN override
// them, as for the harness).
func TestMakeRun(t *testing.T) {
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): make run is about the gateway")
	}
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	sweepgateBin := os.Getenv("SWEEPGATE_BIN")
	if sweepgateBin == "" {
		sweepgateBin = filepath.Join(root, "bin", "sweepgate")
	}
	if st, err := os.Stat(sweepgateBin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("no sweepgate binary at %s (%v): run `make build` (make test and make run build it first), or set SWEEPGATE_BIN", sweepgateBin, err)
	}
	minioBin := harness.MinIOBinary(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("scripts/run.sh needs curl: install it (Debian: apt-get install curl): %v", err)
	}

	ports := harness.ReservePorts(t, 6)
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	admin := fmt.Sprintf("127.0.0.1:%d", ports[1])
	dataDir := t.TempDir()
	env := withoutPrefixes(os.Environ(), "SWEEPGATE_", "MINIO_", "AWS_")
	env = append(env,
		"SWEEPGATE_RUN_DATA="+dataDir,
		"SWEEPGATE_RUN_BIN="+sweepgateBin,
		"SWEEPGATE_RUN_MINIO_BIN="+minioBin,
		"SWEEPGATE_RUN_MINIO_PORT="+strconv.Itoa(ports[2]),
		"SWEEPGATE_RUN_CONSOLE_PORT="+strconv.Itoa(ports[3]),
		"SWEEPGATE_LISTEN="+listen,
		"SWEEPGATE_ADMIN_LISTEN="+admin,
		fmt.Sprintf("SWEEPGATE_ETCD_EMBEDDED_CLIENT_URL=http://127.0.0.1:%d", ports[4]),
		fmt.Sprintf("SWEEPGATE_ETCD_EMBEDDED_PEER_URL=http://127.0.0.1:%d", ports[5]),
	)

	run := startRunScript(t, filepath.Join(root, "scripts", "run.sh"), root, env)
	banner := run.waitBanner(t, makeRunStartTimeout)

	wantEndpoint := "http://" + listen
	if banner.endpoint != wantEndpoint {
		t.Fatalf("run.sh printed endpoint %q, want %q (it should honour SWEEPGATE_LISTEN)", banner.endpoint, wantEndpoint)
	}
	// The servers the test talks to are the ones run.sh started.
	harness.CheckHoldsPorts(t, banner.sweepgatePID, ports[0], ports[1], ports[4], ports[5])
	harness.CheckHoldsPorts(t, banner.minioPID, ports[2])

	t.Run("sdk put and get", func(t *testing.T) { makeRunPutGet(t, banner) })

	t.Run("printed aws example", func(t *testing.T) { makeRunAWSExample(t, run, banner) })

	t.Run("printed admin token", func(t *testing.T) { makeRunAdminToken(t, run, dataDir) })

	// Ctrl-C: SIGINT to the script alone, so that stopping the servers is
	// the script's doing (a terminal would also signal the servers).
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT run.sh: %v", err)
	}
	select {
	case <-run.done:
	case <-time.After(makeRunStopTimeout):
		t.Fatalf("run.sh did not exit within %v of SIGINT; output:\n%s", makeRunStopTimeout, run.output())
	}
	if err := run.waitErr; err != nil {
		t.Errorf("run.sh exited with %v after SIGINT, want status 0; output:\n%s", err, run.output())
	}
	for name, pid := range map[string]int{"sweepgate": banner.sweepgatePID, "minio": banner.minioPID} {
		if alive(pid) {
			t.Errorf("%s (pid %d) still runs after run.sh exited", name, pid)
		}
	}
	for _, addr := range []string{listen, admin, fmt.Sprintf("127.0.0.1:%d", ports[2])} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after run.sh exited", addr)
		}
	}
	if t.Failed() {
		t.Logf("run.sh output:\n%s", run.output())
	}
}

// makeRunPutGet puts an object through the endpoint run.sh printed, with the
// credentials it printed, and reads it back.
func makeRunPutGet(t *testing.T, banner runBanner) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	client := harness.NewS3Client(banner.endpoint, "us-east-1", banner.accessKey, banner.secretKey, tr, true)
	ctx := t.Context()
	bucket := harness.BucketName(t)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket %s through %s: %v", bucket, banner.endpoint, err)
	}
	body := harness.NewData(1, 1<<20+17).Bytes()
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("make-run/object"), Body: bytes.NewReader(body),
	}); err != nil {
		t.Fatalf("PutObject through %s: %v", banner.endpoint, err)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("make-run/object")})
	if err != nil {
		t.Fatalf("GetObject through %s: %v", banner.endpoint, err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatalf("read GetObject body: %v", err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("GetObject returned %d bytes (sha256 %s), want %d bytes (sha256 %s)",
			len(got), harness.SHA256Hex(got), len(body), harness.SHA256Hex(body))
	}
}

// makeRunAWSExample runs the aws CLI example run.sh printed, on its own, and
// reads back what it stored.
func makeRunAWSExample(t *testing.T, run *runScript, banner runBanner) {
	requireCLI(t, "aws", "awscli")
	if len(banner.awsExample) == 0 {
		t.Fatalf("run.sh printed no aws CLI example; output:\n%s", run.output())
	}
	dir := t.TempDir()
	cliEnv := withoutPrefixes(os.Environ(), "AWS_")
	// Keep the user's aws configuration out of it: the example must work
	// on its own.
	cliEnv = append(cliEnv, "HOME="+dir, "AWS_CONFIG_FILE="+filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "credentials"), "AWS_PAGER=")
	for _, line := range banner.awsExample {
		cmd := exec.CommandContext(t.Context(), "sh", "-c", line)
		cmd.Dir = dir
		cmd.Env = cliEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("printed example %q failed: %v\n%s", line, err, out)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	client := harness.NewS3Client(banner.endpoint, "us-east-1", banner.accessKey, banner.secretKey, tr, true)
	out, err := client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("demo"), Key: aws.String("hello.txt")})
	if err != nil {
		t.Fatalf("the printed example should have stored demo/hello.txt: %v", err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(got) != "hello\n" {
		t.Fatalf("demo/hello.txt holds %q, want %q", got, "hello\n")
	}
}

// makeRunAdminToken checks what run.sh printed of the admin token: where the
// generated file under dataDir is, and a command that finds it through the
// configuration and works.
func makeRunAdminToken(t *testing.T, run *runScript, dataDir string) {
	tokenFile := filepath.Join(dataDir, "etcd", "admin-token")
	var where, command string
	for line := range strings.SplitSeq(run.output(), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "admin token:"); ok {
			where = strings.TrimSpace(v)
		}
		if strings.Contains(line, " reclaim status --config ") && command == "" {
			command = line
		}
	}
	if !strings.Contains(where, tokenFile) {
		t.Errorf("run.sh says the admin token is %q, want it to name %s", where, tokenFile)
	}
	if st, err := os.Stat(tokenFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the token file: %v, %v; want mode 0600", st, err)
	}
	if command == "" {
		t.Fatal("run.sh prints no `reclaim status --config` command")
	}
	// The printed command, from another directory, with none of the
	// environment make run had.
	cmd := exec.CommandContext(t.Context(), "sh", "-c", command)
	cmd.Dir = t.TempDir()
	cmd.Env = withoutPrefixes(os.Environ(), "SWEEPGATE_")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Reclaimer") {
		t.Errorf("the printed command %q: %v\n%s", command, err, out)
	}
}

// runScript is a running scripts/run.sh.
type runScript struct {
	cmd  *exec.Cmd
	done chan struct{}
	// waitErr is set before done is closed.
	waitErr error

	mu    sync.Mutex
	out   bytes.Buffer
	lines chan string
}

// startRunScript starts the script in its own process group (so that
// cleanup can kill the servers too if the script misbehaves) and collects
// its stdout and stderr.
func startRunScript(t *testing.T, script, dir string, env []string) *runScript {
	t.Helper()
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start run.sh: %v", err)
	}
	pw.Close()
	r := &runScript{cmd: cmd, done: make(chan struct{}), lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.out.WriteString(line + "\n")
			r.mu.Unlock()
			select {
			case r.lines <- line:
			default: // nobody is reading any more
			}
		}
		pr.Close()
		close(r.lines)
	}()
	go func() {
		r.waitErr = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			// The test failed before stopping it: take down the whole group,
			// servers included.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	})
	return r
}

func (r *runScript) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// runBanner is what run.sh prints once both servers are ready.
type runBanner struct {
	endpoint, accessKey, secretKey string
	sweepgatePID, minioPID         int
	// awsExample are the printed shell lines of the aws CLI example.
	awsExample []string
}

// waitBanner reads the script's output until it has printed the endpoint,
// the credentials, the pids and the "Press Ctrl-C" line that ends the banner.
func (r *runScript) waitBanner(t *testing.T, timeout time.Duration) runBanner {
	t.Helper()
	var b runBanner
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				<-r.done
				t.Fatalf("run.sh ended (%v) before printing its endpoint; output:\n%s", r.waitErr, r.output())
			}
			trimmed := strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(trimmed, "endpoint:"); ok {
				b.endpoint = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(trimmed, "access key:"); ok {
				b.accessKey = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(trimmed, "secret key:"); ok {
				b.secretKey = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(trimmed, "pids:"); ok {
				// "pids:        sweepgate 123, minio 456"
				f := strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
				for i := 0; i+1 < len(f); i += 2 {
					n, _ := strconv.Atoi(f[i+1])
					switch f[i] {
					case "sweepgate":
						b.sweepgatePID = n
					case "minio":
						b.minioPID = n
					}
				}
			}
			if strings.HasPrefix(trimmed, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(trimmed, "echo hello >") {
				b.awsExample = append(b.awsExample, trimmed)
			}
			if strings.HasPrefix(trimmed, "Press Ctrl-C") {
				if b.endpoint == "" || b.accessKey == "" || b.secretKey == "" || b.sweepgatePID == 0 || b.minioPID == 0 {
					t.Fatalf("run.sh banner lacks the endpoint, credentials or pids: %+v; output:\n%s", b, r.output())
				}
				return b
			}
		case <-deadline:
			t.Fatalf("run.sh printed no endpoint within %v; output:\n%s", timeout, r.output())
		}
	}
}

// withoutPrefixes returns env without the variables whose names start with
// one of prefixes.
func withoutPrefixes(env []string, prefixes ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// alive reports whether the process pid still runs, waiting up to five
// seconds for it to end. A zombie has ended: only its parent has not reaped
// it yet.
func alive(pid int) bool {
	for range 50 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return false
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// "pid (comm) S ...": the state follows the last ')'.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				return false
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
