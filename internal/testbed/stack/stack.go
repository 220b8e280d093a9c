package stack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lostPortAttempts bounds the starts of a server that keeps losing its
// free port to another process between FreePort and its own bind: a race
// no choice of port can close, on a machine where other tests bind too.
const lostPortAttempts = 3

// retryLostPort runs start until it succeeds, fails for another reason,
// or lost its port lostPortAttempts times. start returns the process it
// started (also on failure, stopped) so its log can be read.
func retryLostPort[S any](start func() (S, *Process, error)) (S, error) {
	for i := 1; ; i++ {
		s, p, err := start()
		if err == nil || i == lostPortAttempts || p == nil || !strings.Contains(p.Log(), "address already in use") {
			return s, err
		}
	}
}

// Addr formats 127.0.0.1:port.
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// Process is a child process whose output goes to a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start runs bin with args and extra environment, logging to dir/name.log.
// The process is killed when ctx ends.
func Start(ctx context.Context, dir, name, bin string, args []string, env []string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so a Ctrl-C on the demo reaches us first and
	// we stop children in order; and, where the OS can, a SIGTERM when we
	// die without stopping it (SIGKILL, a broken stdout pipe).
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.done:
		}
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process's group, waits up to 10 s for the
// process, then kills the group. It is idempotent. The group, not the
// process alone: what it started (a shell's commands, a server's workers)
// would otherwise outlive it.
func (p *Process) Stop() error {
	if p.Exited() {
		return nil
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// signal sends sig to the process's group (childAttr gives it its own),
// or to the process alone when the group is gone.
func (p *Process) signal(sig syscall.Signal) {
	if syscall.Kill(-p.cmd.Process.Pid, sig) != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Log returns the process's output so far, for failure messages.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// WaitHTTP polls url until it answers 200, the process exits, or timeout.
func (p *Process) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before %s answered: %v\n%s", p.Name, url, p.err, p.Log())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not ready after %s\n%s", p.Name, url, timeout, p.Log())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
