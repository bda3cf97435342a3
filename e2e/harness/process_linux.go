package harness

import "syscall"

// sysProcAttr makes children die with the test process, so a test binary
// killed by its timeout does not leave servers running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
