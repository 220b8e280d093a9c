package stack

import (
	"os/exec"
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
