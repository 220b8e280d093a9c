package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunServesAndShutsDown starts the command in-process on a free port,
// from a directory without any profiles file (they are built in), finds the
// address on its first stdout line, streams a request that would last 30 s,
// and checks that cancelling (what SIGINT/SIGTERM do) ends the stream and
// returns nil.
func TestRunServesAndShutsDown(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	outR, outW := io.Pipe()
	logs := &syncWriter{b: &strings.Builder{}}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-addr", "127.0.0.1:0", "-scale", "1", "-seed", "3"}, outW, logs)
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	const prefix = "fakellm listening on http://"
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("first line %q", line)
	}
	base := strings.TrimSpace(strings.TrimPrefix(line, prefix))

	req, _ := http.NewRequest(http.MethodPost, "http://"+base+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	req.Header.Set("X-Fakellm-Profile", "stall")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Read the role chunk, then stop the server in the middle of the stream.
	br := bufio.NewReader(resp.Body)
	if l, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(l, "data: ") {
		t.Fatalf("first event %q, %v", l, err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	_, _ = io.Copy(io.Discard, br)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %s", d)
	}
	http.DefaultClient.CloseIdleConnections()
	if !strings.Contains(logs.String(), "profile=stall") {
		t.Errorf("no request log line in:\n%s", logs.String())
	}
}

// -h succeeds and lists every built-in profile with its description, and
// how a request picks one.
func TestHelpListsProfiles(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), []string{"-h"}, io.Discard, &out); err != nil {
		t.Fatalf("-h: %v", err)
	}
	cfg, err := fakellm.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range cfg.Names() {
		line := "  " + name + " "
		if !strings.Contains(out.String(), line) || !strings.Contains(out.String(), cfg.Profiles[name].Description) {
			t.Errorf("-h does not list %s (%q)", name, cfg.Profiles[name].Description)
		}
	}
	for _, want := range []string{"X-Fakellm-Profile: NAME", "/p/NAME/v1", "-print-profiles"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h does not say %q:\n%s", want, out.String())
		}
	}
}

// -print-profiles prints the built-in file, which -profiles reads back.
func TestPrintProfiles(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), []string{"-print-profiles"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out.String() != string(fakellm.DefaultProfilesYAML()) {
		t.Error("-print-profiles is not the built-in profiles file")
	}
	if _, err := fakellm.Parse([]byte(out.String())); err != nil {
		t.Errorf("printed profiles do not parse: %v", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scale", "0"},
		{"-scale", "NaN"}, // refused, not served at scale 1
		{"-scale", "Inf"},
		{"-profiles", "nope.yaml"},
		{"-profiles", "../../testdata/fakellm/profiles.yaml", "-default", "nope"},
	} {
		// Bounded: a flag accepted by mistake would serve until the end.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := run(ctx, append(args, "-addr", "127.0.0.1:0"), io.Discard, io.Discard)
		cancel()
		if err == nil {
			t.Errorf("run %v: no error", args)
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
