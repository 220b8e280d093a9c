package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configures Start.
type Options struct {
	// Bin is the ollama binary (bin/ollama, see `make ollama`). Required.
	Bin string
	// Dir holds everything the server writes: its model store, its home
	// directory (Ollama keeps a key pair there), the Modelfile and its
	// log. Required; a test's t.TempDir().
	Dir string
	// Model is the GGUF file to serve as ModelName. Required.
	Model string
	// Name names the server in errors and its log file; default "ollama".
	Name string
}

// Server is a running `ollama serve` with the tiny model created and
// loaded. Stop it with Stop; it also stops when Start's context ends.
type Server struct {
	// Name is Options.Name.
	Name string
	// Addr is the host:port it listens on, on 127.0.0.1.
	Addr string
	// LogPath is the file of its output (the runner's too).
	LogPath string
	// Setup is how long Start took for each step.
	Setup Setup

	opts Options // for Restart
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu     sync.Mutex
	paused []int // runner pids stopped by Pause and not yet continued
}

// Setup times the steps of Start.
type Setup struct {
	// Listen is from exec to the first answer of the HTTP server.
	Listen time.Duration
	// Create is `ollama create` of the model from its Modelfile.
	Create time.Duration
	// Load is the first generation, which starts the runner.
	Load time.Duration
}

// BaseURL is the OpenAI-compatible API root, "http://127.0.0.1:port/v1".
func (s *Server) BaseURL() string { return "http://" + s.Addr + "/v1" }

// Start runs `ollama serve` on a free 127.0.0.1 port with its state under
// o.Dir, creates ModelName from o.Model with Modelfile, and loads it (one
// short generation) so the runner process is up and stays up: keep-alive
// is forever, so Runner finds the same process for the server's life.
//
// The server runs in a process group of its own; Stop, or the end of
// ctx, ends the whole group, runner included, even a stopped one.
//
// A start that lost its free port to another process (taken between the
// port's choice and the server's bind) is retried on a new port.
func Start(ctx context.Context, o Options) (*Server, error) {
	for i := 1; ; i++ {
		s, err := start(ctx, o)
		if err == nil || i == 3 || !strings.Contains(err.Error(), "address already in use") {
			return s, err
		}
	}
}

func start(ctx context.Context, o Options) (*Server, error) {
	if o.Bin == "" || o.Dir == "" || o.Model == "" {
		return nil, errors.New("ollama: Options.Bin, Dir and Model are required")
	}
	if o.Name == "" {
		o.Name = "ollama"
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Name: o.Name, Addr: "127.0.0.1:" + strconv.Itoa(port), opts: o, done: make(chan struct{})}
	home := filepath.Join(o.Dir, o.Name+"-home")
	models := filepath.Join(o.Dir, o.Name+"-models")
	for _, d := range []string{home, models} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	env := append(os.Environ(),
		"OLLAMA_HOST="+s.Addr,
		"OLLAMA_MODELS="+models,
		"HOME="+home,
		"OLLAMA_KEEP_ALIVE=-1",  // the runner lives as long as the server
		"OLLAMA_NUM_PARALLEL=1", // one sequence: one request at a time
		"OLLAMA_MAX_LOADED_MODELS=1",
		"OLLAMA_NO_CLOUD=1", // localhost only
		"OLLAMA_NOPRUNE=1",
	)
	s.LogPath = filepath.Join(o.Dir, o.Name+".log")
	logf, err := os.Create(s.LogPath)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(o.Bin, "serve")
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = serverProcAttr()
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("ollama: start %s: %w", o.Name, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-s.done:
		}
	}()

	fail := func(err error) (*Server, error) {
		s.Stop()
		return nil, fmt.Errorf("ollama: %s: %w\n%s", o.Name, err, s.Log())
	}
	t0 := time.Now()
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		return fail(err)
	}
	s.Setup.Listen = time.Since(t0)
	mf := filepath.Join(o.Dir, o.Name+".Modelfile")
	if err := os.WriteFile(mf, []byte(Modelfile(o.Model)), 0o644); err != nil {
		return fail(err)
	}
	t0 = time.Now()
	create := exec.CommandContext(ctx, o.Bin, "create", ModelName, "-f", mf)
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ollama create: %w\n%s", err, out))
	}
	s.Setup.Create = time.Since(t0)
	t0 = time.Now()
	if err := s.load(ctx); err != nil {
		return fail(err)
	}
	s.Setup.Load = time.Since(t0)
	return s, nil
}

// waitReady polls the server's root until it answers 200.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + s.Addr + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if s.exited() {
			return fmt.Errorf("exited before it listened: %v", s.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// load generates one token, which starts the runner with the model loaded.
func (s *Server) load(ctx context.Context) error {
	body, _ := json.Marshal(map[string]any{
		"model": ModelName, "prompt": "hello", "stream": false,
		"options": map[string]any{"num_predict": 1},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Addr+"/api/generate", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("load: %s: %s", resp.Status, b)
	}
	return nil
}

// Runner returns the pid of the server's `ollama runner` child, the
// process that loads the model and generates tokens.
func (s *Server) Runner() (int, error) {
	ppid := s.cmd.Process.Pid
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if parentOf(stat) != ppid {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		// A loaded model's runner has --model; the short-lived runners
		// the server starts to discover devices do not.
		if len(args) > 1 && args[1] == "runner" && strings.Contains(string(cmdline), "--model") {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("ollama: %s: %d runner processes with a model under pid %d, want 1", s.Name, len(found), ppid)
	}
	return found[0], nil
}

// parentOf reads the parent pid from /proc/<pid>/stat: the fourth field,
// after the command name in parentheses (which may hold spaces).
func parentOf(stat []byte) int {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return -1
	}
	p, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return p
}

// Pause stops the runner with SIGSTOP: generation halts, the HTTP
// connection stays open and silent (Ollama sends no keepalive). The
// returned function continues it with SIGCONT; it is idempotent, and Stop
// continues a paused runner too.
func (s *Server) Pause() (resume func(), err error) {
	pid, err := s.Runner()
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("ollama: SIGSTOP runner %d: %w", pid, err)
	}
	s.mu.Lock()
	s.paused = append(s.paused, pid)
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.cont(pid) }) }, nil
}

func (s *Server) cont(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.paused {
		if p == pid {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			s.paused = append(s.paused[:i], s.paused[i+1:]...)
			return
		}
	}
}

func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Stop ends the server and its runner: SIGCONT to a paused runner (a
// stopped process does not act on SIGTERM), SIGTERM to the process group,
// and SIGKILL to the group after 5 s. It is idempotent and safe to call
// from several goroutines.
func (s *Server) Stop() {
	s.mu.Lock()
	for _, pid := range s.paused {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	s.paused = nil
	s.mu.Unlock()
	pgid := s.cmd.Process.Pid
	if !s.exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
		}
	}
	// The runner may outlive the server by a moment; the group goes.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.done
}

// Responsive reports whether the server generates a token within
// timeout, through the same request slot every completion takes.
//
// Ollama 0.17 can wedge for good when a client leaves a stream while
// tokens are still being relayed to it (seen once; docs/ollama.md). Its
// source shows a way, read rather than reproduced: the chat handler's
// producer goroutine sends each token on an unbuffered channel without
// watching the request's context, and the response loop that reads the
// channel returns as soon as it sees the client gone. A producer caught
// mid-send then blocks inside the completion, holding the model's only
// request slot (OLLAMA_NUM_PARALLEL=1), and every later request waits.
// A caller that abandons streams on purpose checks with Responsive and
// replaces a wedged server with Restart.
func (s *Server) Responsive(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.load(ctx); err != nil {
		return fmt.Errorf("ollama: %s does not answer: %w", s.Name, err)
	}
	return nil
}

// Restart stops s and starts a server with the same options, on a new
// port. The log file starts anew: read s.Log first to keep it.
func (s *Server) Restart(ctx context.Context) (*Server, error) {
	s.Stop()
	return Start(ctx, s.opts)
}

// Log returns the server's output so far, for failure messages.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
