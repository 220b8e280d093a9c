package stack

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A child does not outlive the process that started it: when that process
// dies without stopping it (SIGKILL here; the demo's closed terminal or
// broken stdout pipe), the kernel sends the child SIGTERM. The test runs
// itself as that parent.
func TestChildDiesWithParent(t *testing.T) {
	if dir := os.Getenv("STACK_TEST_PARENT_DIR"); dir != "" {
		// The directory is the outer test's: killed, this process never
		// runs its own cleanup, so a t.TempDir here would stay behind.
		p, err := Start(context.Background(), dir, "sleeper", "/bin/sh", []string{"-c", "exec sleep 60"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("child", p.PID())
		select {} // until killed
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	parent.Env = append(os.Environ(), "STACK_TEST_PARENT_DIR="+t.TempDir())
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "child "); ok {
			pid, _ = strconv.Atoi(v)
			break
		}
	}
	if pid == 0 {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatal("the parent announced no child")
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still runs 10s after its parent was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs: a zombie, dead but not yet reaped by
// whoever adopted it, does not.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}
