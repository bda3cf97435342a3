package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logTail is how much of a child's log is printed when a test fails.
const logTail = 64 << 10

// process is a child process whose output goes to a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}

	mu      sync.Mutex
	waitErr error
}

// startProcess runs bin with args, appending its stdout and stderr to
// logPath. env replaces the environment entirely.
func startProcess(name, logPath, bin string, args, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop asks the process to end with SIGTERM and kills it if it has not
// ended within grace. It returns an error when the process had to be killed
// or exited unsuccessfully after the signal.
func (p *process) stop(grace time.Duration) error {
	if done, _ := p.exited(); done {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		_, err := p.exited()
		var exit *exec.ExitError
		if errors.As(err, &exit) && !exit.Exited() {
			// Ended by the signal itself rather than by exiting: that is a
			// clean stop for a process that does not handle SIGTERM.
			return nil
		}
		return err
	case <-time.After(grace):
		p.kill()
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", p.name, grace)
	}
}

// kill ends the process with SIGKILL and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// readTail returns the last max bytes of a log file.
func readTail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot stat %s: %v)", path, err)
	}
	prefix := ""
	if st.Size() > max {
		if _, err := f.Seek(st.Size()-max, io.SeekStart); err != nil {
			return fmt.Sprintf("(cannot seek %s: %v)", path, err)
		}
		prefix = fmt.Sprintf("(... first %d bytes left out ...)\n", st.Size()-max)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return prefix + string(b)
}

// dumpLogOnFailure prints the tail of a child's log when the test has failed.
// Register it before the cleanup that stops the child, so that it runs after
// it and shows the shutdown too.
func dumpLogOnFailure(t testing.TB, name, path string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log %s:\n%s", name, path, readTail(path, logTail))
		}
	})
}

// childEnv returns the test process's environment without the variables
// whose prefix is in drop, followed by extra.
func childEnv(drop []string, extra ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range drop {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
