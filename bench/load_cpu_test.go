//go:build bench

package bench

// BenchmarkLoad's CPU figures: how busy the machine and each process were
// while the load ran.

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// cpuMeter measures the CPU time the machine spends outside a set of
// processes (and their waited-for children).
type cpuMeter struct {
	pids         []int
	start        time.Time
	busy0, ours0 float64
	unknown      bool
}

// clockTick is USER_HZ, the unit of /proc/stat and /proc/PID/stat: 100 on
// every Linux this runs on.
const clockTick = 100

func startCPUMeter(pids []int) *cpuMeter {
	m := &cpuMeter{pids: pids, start: time.Now()}
	var err error
	if m.busy0, err = machineBusy(); err == nil {
		m.ours0, err = processCPU(pids)
	}
	m.unknown = err != nil || len(pids) == 0
	return m
}

// otherShare returns the share of the machine's CPU time since the start
// that went to other processes, or -1 when /proc could not say.
func (m *cpuMeter) otherShare() float64 {
	busy, err := machineBusy()
	if err != nil || m.unknown {
		return -1
	}
	ours, err := processCPU(m.pids)
	if err != nil {
		return -1
	}
	total := time.Since(m.start).Seconds() * float64(runtime.NumCPU())
	return math.Round(max(0, (busy-m.busy0)-(ours-m.ours0))/total*1000) / 1000
}

// machineBusy returns the CPU seconds all CPUs spent in user and system
// mode (/proc/stat; interrupts and steal left out).
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var sum float64
	for _, v := range f[1:4] { // user, nice, system
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum / clockTick, nil
}

// processCPU returns the CPU seconds of the processes, their own and their
// waited-for children's (/proc/PID/stat utime, stime, cutime, cstime).
func processCPU(pids []int) (float64, error) {
	var sum float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 15 {
			return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
		}
		for _, v := range f[11:15] { // fields 14 to 17 of the whole line
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			sum += n
		}
	}
	return sum / clockTick, nil
}

// pidOf returns the pid of the process whose command line contains s, or 0.
func pidOf(s string) int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(b, []byte(s)) {
			return pid
		}
	}
	return 0
}

// syncDisks flushes written-back data, so that the first side's writes do
// not slow the second (best effort: sync(1) may be missing).
func syncDisks() {
	if path, err := exec.LookPath("sync"); err == nil {
		_ = exec.Command(path).Run()
	}
}
