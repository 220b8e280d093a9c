package stack

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Kill ends the process with SIGKILL, as a crash would: no shutdown, no
// last flush. It waits for the process to be gone. Its group goes with it,
// as with Stop.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// Usage is what a running process has used, read from /proc.
type Usage struct {
	// CPU is user plus system time over all its threads since it started.
	CPU time.Duration
	// RSS is its resident memory now; PeakRSS the most it has held.
	RSS, PeakRSS int64
}

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100
// on every Linux ABI Go supports).
const clockTick = 10 * time.Millisecond

// Usage reads the process's CPU time and memory (Linux only).
func (p *Process) Usage() (Usage, error) {
	pid := strconv.Itoa(p.PID())
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return Usage{}, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis: utime and stime are fields 14
	// and 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("/proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("/proc/%s/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	u := Usage{CPU: time.Duration(utime+stime) * clockTick}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return Usage{}, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			u.RSS = kb << 10
		case "VmHWM":
			u.PeakRSS = kb << 10
		}
	}
	return u, nil
}
