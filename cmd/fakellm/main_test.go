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
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunServesAndShutsDown starts the command in-process on a free port,
// finds the address on its first stdout line, streams a request that would
// last 30 s, and checks that cancelling (what SIGINT/SIGTERM do) ends the
// stream and returns nil.
func TestRunServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	outR, outW := io.Pipe()
	logs := &syncWriter{b: &strings.Builder{}}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-addr", "127.0.0.1:0", "-profiles", "../../testdata/fakellm/profiles.yaml", "-scale", "1", "-seed", "3"}, outW, logs)
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

	req, _ := http.NewRequest(http.MethodPost, "http://"+base+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
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

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scale", "0"},
		{"-profiles", "nope.yaml"},
		{"-profiles", "../../testdata/fakellm/profiles.yaml", "-default", "nope"},
	} {
		if err := run(t.Context(), args, io.Discard, io.Discard); err == nil {
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
