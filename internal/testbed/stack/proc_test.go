package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestUsageAndKill reads a live process's memory from /proc and kills it
// without a grace period.
func TestUsageAndKill(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	// A busy loop, so some CPU time is on the books.
	p, err := Start(t.Context(), t.TempDir(), "busy", sh, []string{"-c", "while :; do :; done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	deadline := time.Now().Add(10 * time.Second)
	var u Usage
	for time.Now().Before(deadline) {
		if u, err = p.Usage(); err != nil {
			t.Fatal(err)
		}
		if u.CPU > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if u.CPU <= 0 || u.RSS <= 0 || u.PeakRSS < u.RSS {
		t.Errorf("usage %+v: want CPU > 0 and 0 < RSS ≤ PeakRSS", u)
	}
	start := time.Now()
	p.Kill()
	if !p.Exited() {
		t.Fatal("still running after Kill")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Kill took %s: it should not wait for a graceful stop", el)
	}
	if _, err := p.Usage(); err == nil {
		t.Error("Usage of a reaped process succeeded")
	}
}

// TestStopEndsTheGroup: what a process started goes with it. Stop signalled
// the shell alone, and a test's `sh -c "…; sleep 30"` left its sleep
// running after the test had passed.
func TestStopEndsTheGroup(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for name, end := range map[string]func(*Process){"Stop": func(p *Process) { _ = p.Stop() }, "Kill": (*Process).Kill} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "sleep.pid")
			p, err := Start(t.Context(), dir, "shell", sh, []string{"-c", "sleep 300 & echo $! > " + pidFile + "; wait"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			var pid int
			for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the shell wrote no pid: %s", p.Log())
				}
				b, _ := os.ReadFile(pidFile)
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			end(p)
			// The sleep is a child of the shell: once the shell is gone, init
			// reaps it. Until then it is a zombie, which signal 0 still finds.
			for deadline := time.Now().Add(10 * time.Second); running(pid); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("the shell's sleep (pid %d) outlived %s", pid, name)
				}
			}
		})
	}
}

// running reports whether pid is a process that has not exited.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis: Z is a zombie.
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
