//go:build !linux

package harness

// portLock is a no-op where flock and /proc are not used: outside Linux the
// harness reserves ports for this process only.
type portLock struct{}

func lockPort(int) (*portLock, error) { return &portLock{}, nil }

func (*portLock) unlock() {}

// holdsPort cannot tell who holds a port without /proc; it trusts the start.
func holdsPort(pid, port int) error { return nil }
