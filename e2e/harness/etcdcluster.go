package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// An EtcdCluster is a static etcd cluster whose members are separate
// processes (cmd/etcdmember) on loopback ports, so that a test can SIGKILL
// one member, as a crash would, and restart it from its data directory.
// Sweepgate gateways reach it through Options.EtcdEndpoints.
type EtcdCluster struct {
	t       testing.TB
	bin     string
	initial string // --initial-cluster
	members []*etcdMember
	sec     *etcdSecurity // nil: clients in the clear, no authentication
}

// etcdMember is one member: its fixed identity and the process currently
// running it, if any.
type etcdMember struct {
	name      string
	dataDir   string
	clientURL string
	peerURL   string
	logFile   string

	mu   sync.Mutex
	proc *process
}

// etcdMemberReadyTimeout bounds the wait for a member's ready line. A new
// member is ready only once a quorum has formed, so it covers the slowest
// member's start too.
const etcdMemberReadyTimeout = 60 * time.Second

// etcdMemberStopGrace is how long a member may take to stop after SIGTERM.
// A leader first hands its lead to a peer, which takes a moment when the
// peer is alive and fails at once when none is.
const etcdMemberStopGrace = 20 * time.Second

// etcdClusterOpTimeout bounds the harness's own etcd requests.
const etcdClusterOpTimeout = 5 * time.Second

var etcdMemberBuild struct {
	once sync.Once
	path string
	err  error
}

// buildEtcdMember returns the path of the etcdmember binary, built from
// ./cmd/etcdmember once per test process into a temporary directory that
// Main removes (as BuildSweepgate does for sweepgate).
func buildEtcdMember(t testing.TB) string {
	t.Helper()
	etcdMemberBuild.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			etcdMemberBuild.err = err
			return
		}
		dir, err := os.MkdirTemp("", "sweepgate-e2e-etcdmember-")
		if err != nil {
			etcdMemberBuild.err = fmt.Errorf("temp dir for the build: %w", err)
			return
		}
		addSharedCleanup(func() { os.RemoveAll(dir) })
		goBin, err := exec.LookPath("go")
		if err != nil {
			etcdMemberBuild.err = fmt.Errorf("go tool not on PATH: %w", err)
			return
		}
		path := filepath.Join(dir, "etcdmember")
		cmd := exec.Command(goBin, "build", "-o", path, "./cmd/etcdmember")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			etcdMemberBuild.err = fmt.Errorf("go build ./cmd/etcdmember: %w\n%s", err, out)
			return
		}
		etcdMemberBuild.path = path
	})
	if etcdMemberBuild.err != nil {
		t.Fatalf("harness: build etcdmember: %v", etcdMemberBuild.err)
	}
	return etcdMemberBuild.path
}

// StartEtcdCluster starts an etcd cluster of n members, each an etcdmember
// process on reserved loopback ports with its data in a temporary directory,
// and waits until every member is ready and a write and a linearizable read
// through the cluster succeed. t.Cleanup stops the members one at a time
// (so that a stopping leader can hand over to a live peer), failing the
// test if one does not stop cleanly; their logs are printed when the test
// fails.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	return startEtcdCluster(t, n, nil)
}

func startEtcdCluster(t testing.TB, n int, sec *etcdSecurity) *EtcdCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("harness: an etcd cluster needs at least one member, not %d", n)
	}
	c := &EtcdCluster{t: t, bin: buildEtcdMember(t), sec: sec}
	scheme := "http"
	if sec != nil {
		scheme = "https"
	}
	dir := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		m := &etcdMember{name: name, logFile: filepath.Join(dir, name+".log")}
		c.members = append(c.members, m)
		dumpLogOnFailure(t, "etcdmember "+name, m.logFile)
	}

	logs := make([]string, 0, n)
	for _, m := range c.members {
		logs = append(logs, m.logFile)
	}
	attempt := 0
	serverLaunch{
		what:  fmt.Sprintf("etcd cluster of %d", n),
		ports: 2 * n,
		logs:  logs,
		start: func(ports []int) ([]portHolder, error) {
			// Fresh data directories per attempt: a member that started
			// with other peer URLs has them in its WAL.
			attempt++
			peers := make([]string, 0, n)
			for i, m := range c.members {
				m.dataDir = filepath.Join(dir, fmt.Sprintf("data-%d", attempt), m.name)
				m.clientURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i])
				m.peerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
				peers = append(peers, m.name+"="+m.peerURL)
			}
			c.initial = strings.Join(peers, ",")
			if err := c.startAll(); err != nil {
				c.killAll()
				return nil, err
			}
			return c.holders(), nil
		},
		kill: c.killAll,
	}.launch(t)
	t.Cleanup(func() {
		for _, m := range c.members {
			if err := c.stopMember(m); err != nil {
				t.Errorf("harness: %v", err)
			}
		}
	})
	if err := c.awaitWritable(t.Context(), 30*time.Second); err != nil {
		t.Fatalf("harness: etcd cluster %s: %v", strings.Join(c.Endpoints(), ","), err)
	}
	key := strings.Join(c.Endpoints(), ",")
	clusters.Store(key, c)
	t.Cleanup(func() { clusters.Delete(key) })
	return c
}

// startAll starts every member with initial-cluster-state new and waits
// for all of them to be ready; they must all run before any is ready,
// since a new member waits for a quorum.
func (c *EtcdCluster) startAll() error {
	offsets := make([]int64, len(c.members))
	for i, m := range c.members {
		offsets[i] = fileSize(m.logFile)
		if err := c.startMember(m, "new"); err != nil {
			return err
		}
	}
	for i, m := range c.members {
		if err := c.awaitReady(m, offsets[i]); err != nil {
			return err
		}
	}
	return nil
}

// startMember runs m's process.
func (c *EtcdCluster) startMember(m *etcdMember, state string) error {
	args := []string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-url", m.clientURL,
		"--listen-peer-url", m.peerURL,
		"--initial-cluster", c.initial,
		"--initial-cluster-state", state,
		// The members die by SIGKILL, never with the machine, so the
		// kernel keeps whatever they wrote; fsync would only make a
		// loaded two-core machine miss heartbeats.
		"--unsafe-no-fsync",
	}
	if c.sec != nil {
		args = append(args, "--cert-file", c.sec.serverCert, "--key-file", c.sec.serverKey, "--trusted-ca-file", c.sec.caFile)
	}
	proc, err := startProcess("etcdmember "+m.name, m.logFile, c.bin, args, childEnv([]string{"ETCD_"}))
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = proc
	m.mu.Unlock()
	return nil
}

// awaitReady waits for m's ready line to appear in its log after offset
// (the log is appended to across restarts).
func (c *EtcdCluster) awaitReady(m *etcdMember, offset int64) error {
	want := []byte(fmt.Sprintf("etcdmember %s ready ", m.name))
	proc := m.current()
	deadline := time.Now().Add(etcdMemberReadyTimeout)
	for {
		if bytes.Contains(readFrom(m.logFile, offset), want) {
			return nil
		}
		if done, err := proc.exited(); done {
			return fmt.Errorf("etcdmember %s %w (%v) before it was ready", m.name, errExited, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdmember %s not ready within %v", m.name, etcdMemberReadyTimeout)
		}
		select {
		case <-c.t.Context().Done():
			return fmt.Errorf("etcdmember %s: test ended while waiting for it: %w", m.name, c.t.Context().Err())
		case <-proc.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitWritable waits until a Put and a linearizable Get through the
// cluster succeed: a quorum is up and has a leader.
func (c *EtcdCluster) awaitWritable(ctx context.Context, timeout time.Duration) error {
	cli, err := c.newClient(c.Endpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := "/harness/ready"
	for {
		err := func() error {
			octx, ocancel := context.WithTimeout(ctx, etcdClusterOpTimeout)
			defer ocancel()
			put, err := cli.Put(octx, key, time.Now().UTC().Format(time.RFC3339Nano))
			if err != nil {
				return err
			}
			get, err := cli.Get(octx, key)
			if err != nil {
				return err
			}
			if len(get.Kvs) != 1 || get.Kvs[0].ModRevision < put.Header.Revision {
				return fmt.Errorf("read back %d keys, not the write at revision %d", len(get.Kvs), put.Header.Revision)
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not writable within %v: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *etcdMember) current() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// running reports whether m's process is alive.
func (m *etcdMember) running() bool {
	p := m.current()
	if p == nil {
		return false
	}
	done, _ := p.exited()
	return !done
}

// stopMember stops m with SIGTERM if it runs.
func (c *EtcdCluster) stopMember(m *etcdMember) error {
	p := m.current()
	if p == nil {
		return nil
	}
	if done, _ := p.exited(); done {
		return nil
	}
	if err := p.stop(etcdMemberStopGrace); err != nil {
		return fmt.Errorf("stop etcdmember %s (pid %d): %w", m.name, p.pid(), err)
	}
	return nil
}

// killMember ends m with SIGKILL if it runs.
func (c *EtcdCluster) killMember(m *etcdMember) {
	if p := m.current(); p != nil {
		p.kill()
	}
}

// killAll kills every member that runs.
func (c *EtcdCluster) killAll() {
	for _, m := range c.members {
		c.killMember(m)
	}
}

// holders returns each running member's client and peer ports, which its
// own process must hold.
func (c *EtcdCluster) holders() []portHolder {
	var hs []portHolder
	for _, m := range c.members {
		hs = append(hs, m.holders()...)
	}
	return hs
}

// holders returns m's client and peer ports with its current process.
func (m *etcdMember) holders() []portHolder {
	p := m.current()
	if p == nil {
		return nil
	}
	return []portHolder{{p, urlPort(m.clientURL)}, {p, urlPort(m.peerURL)}}
}

// urlPort returns the port of scheme://host:port.
func urlPort(u string) int {
	_, port, _ := strings.Cut(u[strings.Index(u, "://")+3:], ":")
	n, _ := strconv.Atoi(port)
	return n
}

// member returns member i, failing the test for an index out of range.
func (c *EtcdCluster) member(i int) *etcdMember {
	c.t.Helper()
	if i < 0 || i >= len(c.members) {
		c.t.Fatalf("harness: etcd cluster has %d members; no member %d", len(c.members), i)
	}
	return c.members[i]
}

// Len returns the number of members, running or not.
func (c *EtcdCluster) Len() int { return len(c.members) }

// Endpoints returns every member's client URL, in member order, whether
// the member runs or not: what a client of the whole cluster is given.
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, 0, len(c.members))
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// Endpoint returns member i's client URL.
func (c *EtcdCluster) Endpoint(i int) string { return c.member(i).clientURL }

// Name returns member i's name in the cluster.
func (c *EtcdCluster) Name(i int) string { return c.member(i).name }

// Running reports whether member i's process is alive.
func (c *EtcdCluster) Running(i int) bool { return c.member(i).running() }

// Kill ends member i with SIGKILL, as a crash would, and waits until it is
// gone. Its data directory stays for Restart.
func (c *EtcdCluster) Kill(i int) {
	c.t.Helper()
	c.killMember(c.member(i))
}

// Restart starts member i again from its data directory (stopping it
// first with SIGTERM if it still runs), with initial-cluster-state
// existing, and waits until it is ready: it has rejoined the cluster. It
// may still be catching up on what it missed; a linearizable read through
// it waits for that.
func (c *EtcdCluster) Restart(i int) {
	c.t.Helper()
	m := c.member(i)
	if err := c.stopMember(m); err != nil {
		c.t.Fatalf("harness: %v", err)
	}
	offset := fileSize(m.logFile)
	if err := c.startMember(m, "existing"); err != nil {
		c.t.Fatalf("harness: restart etcdmember %s: %v", m.name, err)
	}
	if err := c.awaitReady(m, offset); err != nil {
		c.t.Fatalf("harness: restart etcdmember %s: %v", m.name, err)
	}
	if err := checkHolders(m.holders()); err != nil {
		c.t.Fatalf("harness: restarted etcdmember %s does not hold its ports: %v", m.name, err)
	}
}

// Client returns a client of the whole cluster (every member's endpoint),
// which fails over between members as they die and come back. t.Cleanup
// closes it.
func (c *EtcdCluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return c.clientFor(t, c.Endpoints())
}

// MemberClient returns a client of member i alone, to see what that member
// holds (a serializable read answers from its own copy). t.Cleanup closes
// it.
func (c *EtcdCluster) MemberClient(t testing.TB, i int) *clientv3.Client {
	t.Helper()
	return c.clientFor(t, []string{c.member(i).clientURL})
}

func (c *EtcdCluster) clientFor(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := c.newClient(endpoints)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newClient opens a client without waiting for the cluster: clientv3
// connects lazily, and the callers wait in their own way.
func (c *EtcdCluster) newClient(endpoints []string) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: etcdClusterOpTimeout,
		Logger:      zap.NewNop(),
		// A dead member's half-open connection is noticed by keepalive
		// rather than by a request timing out.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	}
	if c.sec != nil {
		cfg.TLS = c.sec.clientTLS
		if c.sec.rootPassword != "" {
			cfg.Username, cfg.Password = "root", c.sec.rootPassword
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// Leader returns the index of the member that leads the cluster's raft
// group now, asking the running members; it fails the test when no
// running member knows a leader within a few seconds.
func (c *EtcdCluster) Leader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		i, err := c.leader(t.Context())
		if err == nil {
			return i
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("harness: etcd cluster has no leader: %v", last)
	return -1
}

func (c *EtcdCluster) leader(ctx context.Context) (int, error) {
	var errs []error
	for _, m := range c.members {
		if !m.running() {
			continue
		}
		i, err := c.leaderSeenBy(ctx, m)
		if err == nil {
			return i, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return -1, errors.New("no member runs")
	}
	return -1, errors.Join(errs...)
}

// leaderSeenBy asks m which member leads and maps the answer's member id
// to an index through the member list.
func (c *EtcdCluster) leaderSeenBy(ctx context.Context, m *etcdMember) (int, error) {
	cli, err := c.newClient([]string{m.clientURL})
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, etcdClusterOpTimeout)
	defer cancel()
	st, err := cli.Status(ctx, m.clientURL)
	if err != nil {
		return -1, fmt.Errorf("status of %s: %w", m.name, err)
	}
	if st.Leader == 0 {
		return -1, fmt.Errorf("%s knows no leader", m.name)
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		return -1, fmt.Errorf("member list from %s: %w", m.name, err)
	}
	for _, mem := range list.Members {
		if mem.ID != st.Leader {
			continue
		}
		for i, ours := range c.members {
			if mem.Name == ours.name {
				return i, nil
			}
		}
		return -1, fmt.Errorf("%s names leader %q, not one of ours", m.name, mem.Name)
	}
	return -1, fmt.Errorf("%s names leader %x, not in its member list", m.name, st.Leader)
}

// fileSize returns the size of path, 0 when it does not exist yet.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// readFrom returns the contents of path from offset on (nil when it cannot
// be read: the caller polls again).
func readFrom(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

// Freeze stops member i with SIGSTOP, as a hung member or a partition
// looks from outside: its connections stay open and nothing answers. Thaw
// or Kill ends it.
func (c *EtcdCluster) Freeze(i int) {
	c.t.Helper()
	c.signalMember(i, syscall.SIGSTOP)
}

// Thaw resumes member i after Freeze.
func (c *EtcdCluster) Thaw(i int) {
	c.t.Helper()
	c.signalMember(i, syscall.SIGCONT)
}

func (c *EtcdCluster) signalMember(i int, sig syscall.Signal) {
	c.t.Helper()
	p := c.member(i).current()
	if p == nil {
		c.t.Fatalf("harness: etcd member %d is not running", i)
	}
	if err := syscall.Kill(p.pid(), sig); err != nil {
		c.t.Fatalf("harness: signal %v to etcd member %d: %v", sig, i, err)
	}
}
