package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// portLock is an exclusive flock on one port's lock file.
type portLock struct{ f *os.File }

// lockPort takes the lock of port without waiting: nil (and no error) when
// another process holds it.
func lockPort(port int) (*portLock, error) {
	path := filepath.Join(portLockDir(), strconv.Itoa(port))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("port lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("port lock %s: %w", path, err)
	}
	return &portLock{f: f}, nil
}

// unlock lets other processes have the port. The lock file stays: removing
// it could let two processes lock two different files of the same name.
func (l *portLock) unlock() {
	if l.f != nil {
		l.f.Close() // closing the only descriptor releases the flock
		l.f = nil
	}
}

// holdsPort returns nil if process pid has a listening TCP socket on port,
// and an error wrapping errPortTaken naming what holds it otherwise.
func holdsPort(pid, port int) error {
	inodes, err := listeningInodes(port)
	if err != nil {
		return err
	}
	if len(inodes) == 0 {
		return fmt.Errorf("%w: nothing listens on port %d", errPortTaken, port)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return fmt.Errorf("%w: the process's descriptors: %v", errPortTaken, err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue // closed since the listing
		}
		ino, ok := strings.CutPrefix(target, "socket:[")
		if !ok {
			continue
		}
		if inodes[strings.TrimSuffix(ino, "]")] {
			return nil
		}
	}
	return fmt.Errorf("%w: port %d is held by another process's listener", errPortTaken, port)
}

// listeningInodes returns the socket inodes of the TCP listeners on port,
// IPv4 and IPv6, from /proc/net.
func listeningInodes(port int) (map[string]bool, error) {
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // no IPv6
			}
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			const listen = "0A"
			if len(fields) < 10 || fields[3] != listen || !strings.HasSuffix(fields[1], want) {
				continue
			}
			inodes[fields[9]] = true
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
	}
	return inodes, nil
}
