package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Ports for the servers the harness starts.
//
// MinIO, the registry, etcd members (whose peers must know each other's
// URLs before any starts) and gateways (whose restarts keep their
// addresses) are given their ports rather than binding port 0, so the
// harness must make sure that nobody else takes a port between choosing it
// and the server binding it, and that the server a test talks to is the one
// it started. Three things do that, all here:
//
//   - Reservation: ports are chosen outside the kernel's ephemeral range
//     (net.ipv4.ip_local_port_range), which is where every listener on port
//     0 and every outgoing connection gets its port, so nothing that lets
//     the kernel choose can take one of them. Each is held by an exclusive
//     file lock (flock) in a directory shared by every process on the
//     machine (portLockDir) from the moment it is chosen until the test's
//     cleanup has stopped the server, so two test processes never hold the
//     same port; the kernel drops the lock of a process that dies. A
//     reserved port is also checked free by binding it once.
//   - Detection: a start whose process says its port is taken, or whose
//     ports another process holds, is killed and tried again on new ports.
//   - Identity: before a test uses a server, every port it was given must
//     be held by a listening socket of the very process the harness started
//     (its pid behind the port, read from /proc). A server that answers on
//     the port but is somebody else's fails this check however well it
//     answers.
//
// SWEEPGATE_HARNESS_PORTS=LOW-HIGH narrows the range ports are reserved
// from; the contention test sets it to a few ports to make test processes
// compete for them.

// portRangeEnv names the variable that narrows the reservation range.
const portRangeEnv = "SWEEPGATE_HARNESS_PORTS"

// portLockDir is where the port locks live; every test process on the
// machine uses the same directory.
func portLockDir() string { return filepath.Join(os.TempDir(), "sweepgate-harness-ports") }

// portReserveTimeout bounds how long a reservation waits for enough ports
// of a narrow range to come free.
const portReserveTimeout = 2 * time.Minute

// serverStartAttempts bounds how often one server is started on new ports
// after a port turned out to be taken.
const serverStartAttempts = 5

// portsReservation is a set of reserved ports and the locks that hold them.
type portsReservation struct {
	ports []int
	locks []*portLock
}

// release unlocks every port of the reservation.
func (r *portsReservation) release() {
	for _, l := range r.locks {
		l.unlock()
	}
	r.locks, r.ports = nil, nil
}

// ReservePorts reserves n loopback ports for servers a test starts itself
// (a script such as `make run` that is given its ports): no other test
// process of this harness gets them until the test's cleanup. The test
// should still check that the server it started holds them
// (CheckHoldsPorts).
func ReservePorts(t testing.TB, n int) []int {
	t.Helper()
	r, err := reservePorts(n)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(r.release)
	return r.ports
}

// reservePorts reserves n distinct ports (see the comment at the top of
// this file). When the range has too few free ports it lets go of what it
// holds and tries again until portReserveTimeout, so that processes
// competing for a narrow range do not deadlock each holding a part.
func reservePorts(n int) (*portsReservation, error) {
	lo, hi, err := portRange()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(portLockDir(), 0o777); err != nil {
		return nil, fmt.Errorf("port lock directory: %w", err)
	}
	size := hi - lo + 1
	if n > size {
		return nil, fmt.Errorf("%d ports wanted from the range %d-%d", n, lo, hi)
	}
	deadline := time.Now().Add(portReserveTimeout)
	for {
		r := &portsReservation{}
		start := rand.IntN(size)
		for i := 0; i < size && len(r.ports) < n; i++ {
			port := lo + (start+i)%size
			l, err := lockPort(port)
			if err != nil {
				r.release()
				return nil, err
			}
			if l == nil {
				continue // another test process holds it
			}
			if !portFree(port) {
				l.unlock()
				continue
			}
			r.ports = append(r.ports, port)
			r.locks = append(r.locks, l)
		}
		if len(r.ports) == n {
			return r, nil
		}
		r.release()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no %d free ports in %d-%d within %v", n, lo, hi, portReserveTimeout)
		}
		time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
	}
}

// portFree reports whether a listener can bind 127.0.0.1:port now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// portRange returns the range ports are reserved from: SWEEPGATE_HARNESS_PORTS
// if set, else up to 16384 ports just below the kernel's ephemeral range, or
// just above it when there is no room below.
func portRange() (lo, hi int, err error) {
	if v := os.Getenv(portRangeEnv); v != "" {
		a, b, ok := strings.Cut(v, "-")
		lo, err1 := strconv.Atoi(strings.TrimSpace(a))
		hi, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
			return 0, 0, fmt.Errorf("%s=%q: want LOW-HIGH", portRangeEnv, v)
		}
		return lo, hi, nil
	}
	elo, ehi := ephemeralRange()
	const want, floor = 16384, 10000
	if elo-floor >= 1024 {
		return max(floor, elo-want), elo - 1, nil
	}
	if 65535-ehi >= 1024 {
		return ehi + 1, min(65535, ehi+want), nil
	}
	return 1024, 65535, nil
}

// ephemeralRange returns the kernel's range for ports it chooses itself
// (Linux's default when it cannot be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	a, err1 := strconv.Atoi(f[0])
	z, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || a > z {
		return lo, hi
	}
	return a, z
}

// errPortTaken says a server could not have the ports it was given.
var errPortTaken = errors.New("port taken")

// portHolder names a port and the process that must hold its listening
// socket once a server has started.
type portHolder struct {
	proc *process
	port int
}

// checkHolders returns an error wrapping errPortTaken unless every port is
// held by a listening socket of its process.
func checkHolders(holders []portHolder) error {
	for _, h := range holders {
		if err := holdsPort(h.proc.pid(), h.port); err != nil {
			return fmt.Errorf("%s (pid %d): %w", h.proc.name, h.proc.pid(), err)
		}
	}
	return nil
}

// CheckHoldsPorts fails the test unless process pid holds a listening socket
// on each of ports: the server the test is about to use is the one it
// started, not another test's on the same port.
func CheckHoldsPorts(t testing.TB, pid int, ports ...int) {
	t.Helper()
	for _, p := range ports {
		if err := holdsPort(pid, p); err != nil {
			t.Fatalf("harness: pid %d: %v", pid, err)
		}
	}
}

// portTakenMessages are what the servers the harness starts print when a
// port they were given is bound already.
var portTakenMessages = []string{"address already in use", "port is already in use"}

// logSaysPortTaken reports whether a log, from offset on, says a port was
// taken.
func logSaysPortTaken(path string, offset int64) bool {
	log := strings.ToLower(string(readFrom(path, offset)))
	for _, m := range portTakenMessages {
		if strings.Contains(log, m) {
			return true
		}
	}
	return false
}

// testHookReserved, when set by a test, is called with the ports launch has
// just reserved, before the server starts: the harness's own tests take one
// of them from under it there, as another process could.
var testHookReserved func(ports []int)

// serverLaunch describes how to start one server on reserved ports.
type serverLaunch struct {
	// what names the server in messages.
	what string
	// ports is how many ports it needs.
	ports int
	// logs are the files its processes write to, where a taken port shows.
	logs []string
	// start starts the server on ports and waits until it answers. It
	// returns which process must hold which port; on error it leaves
	// nothing running.
	start func(ports []int) ([]portHolder, error)
	// kill ends what a successful start left running when its ports turn
	// out to be held by someone else.
	kill func()
}

// launch starts a server on reserved ports, the one way every server of the
// harness is started: a start that fails on a taken port, or whose ports
// are held by a process it did not start, is tried again on new ports; any
// other failure ends the test. The ports stay reserved until the test's
// cleanup (register the server's stop after launch returns, so it runs
// first).
func (l serverLaunch) launch(t testing.TB) []int {
	t.Helper()
	var lastErr error
	for attempt := 1; attempt <= serverStartAttempts; attempt++ {
		r, err := reservePorts(l.ports)
		if err != nil {
			t.Fatalf("harness: %s: %v", l.what, err)
		}
		if testHookReserved != nil {
			testHookReserved(r.ports)
		}
		offsets := make([]int64, len(l.logs))
		for i, path := range l.logs {
			offsets[i] = fileSize(path)
		}
		holders, err := l.start(r.ports)
		if err == nil {
			if err = checkHolders(holders); err != nil {
				l.kill()
			}
		} else {
			for i, path := range l.logs {
				if logSaysPortTaken(path, offsets[i]) {
					err = fmt.Errorf("%w: %w", errPortTaken, err)
					break
				}
			}
		}
		if err == nil {
			t.Cleanup(r.release)
			return r.ports
		}
		t.Logf("harness: %s attempt %d on ports %v: %v", l.what, attempt, r.ports, err)
		r.release()
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("harness: %s did not start: %v", l.what, lastErr)
	return nil
}
