package fakellm

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// flushRecorder records what each Flush sends and when (virtual time).
type flushRecorder struct {
	h      http.Header
	start  time.Time
	buf    bytes.Buffer
	status int
	sends  []string // "offset what"
}

func (w *flushRecorder) Header() http.Header         { return w.h }
func (w *flushRecorder) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *flushRecorder) WriteHeader(code int)        { w.status = code }
func (w *flushRecorder) Flush() {
	what := strings.TrimSpace(w.buf.String())
	switch {
	case strings.HasPrefix(what, ":"):
		what = "comment"
	case strings.HasPrefix(what, "event: ping"):
		what = "ping"
	case strings.Contains(what, `"text_delta"`):
		what = "content"
	case strings.HasPrefix(what, "event: "):
		what = strings.TrimPrefix(strings.SplitN(what, "\n", 2)[0], "event: ")
	case strings.Contains(what, `"role":"assistant"`):
		what = "role"
	case strings.Contains(what, `"content":"`):
		what = "content"
	case strings.Contains(what, `"finish_reason":"stop"`):
		what = "finish"
	case strings.Contains(what, `"usage"`):
		what = "usage"
	case what == "data: [DONE]":
		what = "done"
	}
	w.sends = append(w.sends, fmt.Sprintf("%s %s", time.Since(w.start), what))
	w.buf.Reset()
}

// serve runs one request through s inside the caller's bubble.
func serve(t *testing.T, s *Server, path, profile, body string) *flushRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set(ProfileHeader, profile)
	w := &flushRecorder{h: http.Header{}, start: time.Now()}
	func() {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				panic(p)
			} else if p != nil {
				w.sends = append(w.sends, fmt.Sprintf("%s abort", time.Since(w.start)))
			}
		}()
		s.ServeHTTP(w, req)
	}()
	return w
}

const timingProfiles = `default: stall
profiles:
  stall:
    ttft: 300ms
    interval: 25ms
    chunks: 7
    silences:
      - {after_chunk: 5, duration: 3500ms, keepalive: {every: 1s}}
  slow-first:
    ttft: 2500ms
    ttft_keepalive: {every: 1s}
    interval: 10ms
    chunks: 2
    usage: false
  even:
    ttft: 100ms
    interval: 10ms
    chunks: 2
    silences:
      - {after_chunk: 1, duration: 3s, keepalive: {every: 1s}}
  one-period:
    ttft: 100ms
    interval: 10ms
    chunks: 2
    silences:
      - {after_chunk: 1, duration: 1s, keepalive: {every: 1s}}
  drop:
    ttft: 100ms
    interval: 10ms
    chunks: 5
    disconnect: {after_chunk: 2}
  late-error:
    ttft: 300ms
    interval: 25ms
    chunks: 40
    silences:
      - {after_chunk: 2, duration: 1s}
      - {after_chunk: 30, duration: 5s}
    error: {after_chunk: 3, type: my_type, code: my_code, message: my message}
  early-error:
    ttft: 100ms
    interval: 10ms
    chunks: 5
    error: {after_chunk: 0}
  drop-before-error:
    ttft: 100ms
    interval: 10ms
    chunks: 5
    disconnect: {after_chunk: 2}
    error: {after_chunk: 4}
`

// TestTimingExact checks each scripted send at its exact virtual offset. A
// silence after chunk n adds to the interval before chunk n+1.
func TestTimingExact(t *testing.T) {
	cfg, err := Parse([]byte(timingProfiles))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, profile, body string
		scale                     float64
		want                      []string
	}{
		{"openai stall with comment keepalives", "/v1/chat/completions", "stall",
			`{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}`, 1, []string{
				"0s role", "300ms content", "325ms content", "350ms content", "375ms content", "400ms content",
				"1.4s comment", "2.4s comment", "3.4s comment",
				"3.925s content", "3.95s content", "3.95s finish", "3.95s usage", "3.95s done"}},
		{"anthropic stall with pings", "/v1/messages", "stall", `{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true}`, 1, []string{
			"0s message_start", "0s content_block_start",
			"300ms content", "325ms content", "350ms content", "375ms content", "400ms content",
			"1.4s ping", "2.4s ping", "3.4s ping",
			"3.925s content", "3.95s content",
			"3.95s content_block_stop", "3.95s message_delta", "3.95s message_stop"}},
		{"scale 0.01", "/v1/chat/completions", "stall", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, 0.01, []string{
			"0s role", "3ms content", "3.25ms content", "3.5ms content", "3.75ms content", "4ms content",
			"14ms comment", "24ms comment", "34ms comment",
			"39.25ms content", "39.5ms content", "39.5ms finish", "39.5ms done"}},
		{"ttft keepalives, usage off", "/v1/chat/completions", "slow-first",
			`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`, 1, []string{
				"0s role", "1s comment", "2s comment", "2.5s content", "2.51s content", "2.51s finish", "2.51s done"}},
		// A silence of whole keepalive periods: the keepalive that would
		// fall on its end is not sent (it raced the end: 2 or 3).
		{"keepalives strictly inside a silence", "/v1/chat/completions", "even", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, 1, []string{
			"0s role", "100ms content", "1.1s comment", "2.1s comment", "3.11s content", "3.11s finish", "3.11s done"}},
		{"no keepalive in a silence of one period", "/v1/chat/completions", "one-period", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, 1, []string{
			"0s role", "100ms content", "1.11s content", "1.11s finish", "1.11s done"}},
		{"disconnect cuts the body", "/v1/chat/completions", "drop", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, 1, []string{
			"0s role", "100ms content", "110ms content", "110ms abort"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Repeated: a race in the schedule would show as a run that differs.
			for range 10 {
				synctest.Test(t, func(t *testing.T) {
					s, err := New(Options{Config: cfg, Scale: tc.scale})
					if err != nil {
						t.Fatal(err)
					}
					w := serve(t, s, tc.path, tc.profile, tc.body)
					if got := strings.Join(w.sends, "\n"); got != strings.Join(tc.want, "\n") {
						t.Fatalf("sends:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
					}
				})
			}
		})
	}
}

// TestNonStreamingEndsWithItsStream checks that a non-streaming request
// answers when the stream it stands for would have ended — at a scripted
// fault, not after the chunks and silences beyond it — and that a
// scripted error keeps its type, code and message.
func TestNonStreamingEndsWithItsStream(t *testing.T) {
	cfg, err := Parse([]byte(timingProfiles))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, profile string
		want                time.Duration
		status              int
		body                []string // substrings of the answer
	}{
		// Chunk 0 at 300 ms, chunk 1 25 ms later, the 1 s silence after
		// two chunks, chunk 2 25 ms later, then the error: the silence
		// after chunk 30 and the chunks after 3 are never reached.
		{"openai error", "/v1/chat/completions", "late-error", 1350 * time.Millisecond, 500,
			[]string{`"type":"my_type"`, `"code":"my_code"`, `"message":"my message"`}},
		{"anthropic error", "/v1/messages", "late-error", 1350 * time.Millisecond, 500,
			[]string{`"type":"my_type"`, `"message":"my message"`}},
		// An error before the first chunk comes before the TTFT; its
		// default type is an overload, which Anthropic answers with 529.
		{"anthropic error before the first chunk", "/v1/messages", "early-error", 0, 529,
			[]string{`"type":"overloaded_error"`, `"message":"fakellm: scripted error"`}},
		{"openai error before the first chunk", "/v1/chat/completions", "early-error", 0, 500,
			[]string{`"type":"server_error"`}},
		// The earlier fault ends it: the disconnect after chunk 2.
		{"disconnect before the error", "/v1/chat/completions", "drop-before-error", 110 * time.Millisecond, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Options{Config: cfg, Scale: 1})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				streamed := serve(t, s, tc.path, tc.profile, `{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true}`)
				if took := time.Since(start); took != tc.want {
					t.Errorf("the stream ended after %v, want %v: %q", took, tc.want, streamed.sends)
				}
				start = time.Now()
				w := serve(t, s, tc.path, tc.profile, `{"messages":[{"role":"user","content":"hi"}],"model":"m"}`)
				if took := time.Since(start); took != tc.want {
					t.Errorf("answered after %v, the stream ends at %v", took, tc.want)
				}
				if tc.status == 0 {
					if len(w.sends) == 0 || !strings.HasSuffix(w.sends[len(w.sends)-1], " abort") {
						t.Errorf("sends %q, want the connection cut", w.sends)
					}
					return
				}
				if w.status != tc.status {
					t.Errorf("status %d, want %d", w.status, tc.status)
				}
				for _, s := range tc.body {
					if !strings.Contains(w.buf.String(), s) {
						t.Errorf("answer %s lacks %s", w.buf.String(), s)
					}
				}
			})
		})
	}
}

// TestNonStreamingLongWait: a non-streaming answer waits the sum of its
// stream's draws, saturating: 1,000,000 h three times (each a valid
// Duration) overflowed to a negative wait and answered at once.
func TestNonStreamingLongWait(t *testing.T) {
	cfg, err := Parse([]byte("default: slow\nprofiles:\n  slow: {ttft: 1000000h, interval: 1000000h, chunks: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{Config: cfg, Scale: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := contextWithCancel(t)
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"model":"m"}`))
		w := &flushRecorder{h: http.Header{}, start: time.Now()}
		done := make(chan struct{})
		go func() { s.ServeHTTP(w, req); close(done) }()
		// Not the full 3,000,000 h: the bubble's clock starts in 2000 and
		// ends in 2262, where the runtime clamps every timer.
		time.Sleep(2_000_000 * time.Hour)
		synctest.Wait()
		select {
		case <-done:
			t.Fatalf("answered after less than 2,000,000 h: status %d, %q", w.status, w.buf.String())
		default:
		}
		cancel()
		<-done
	})
}

// TestStatusAfter: a status profile with status_after answers its status
// exactly that long (scaled) after the request, and a request that goes
// away meanwhile gets no answer.
func TestStatusAfter(t *testing.T) {
	cfg, err := Parse([]byte("default: busy\nprofiles:\n  busy: {status: 503, retry_after: 1s, status_after: 200ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	const body = `{"messages":[{"role":"user","content":"hi"}],"stream":true}`
	for _, scale := range []float64{1, 0.5} {
		t.Run(fmt.Sprint("scale ", scale), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Options{Config: cfg, Scale: scale})
				if err != nil {
					t.Fatal(err)
				}
				w := serve(t, s, "/v1/chat/completions", "busy", body)
				want := time.Duration(float64(200*time.Millisecond) * scale)
				if elapsed := time.Since(w.start); elapsed != want || w.status != http.StatusServiceUnavailable {
					t.Fatalf("answered %d after %s, want 503 after %s", w.status, elapsed, want)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		s, _ := New(Options{Config: cfg})
		ctx, cancel := contextWithCancel(t)
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		w := &flushRecorder{h: http.Header{}, start: time.Now()}
		done := make(chan struct{})
		go func() { s.ServeHTTP(w, req); close(done) }()
		time.Sleep(100 * time.Millisecond)
		cancel()
		<-done
		if w.status != 0 || w.buf.Len() != 0 || time.Since(w.start) != 100*time.Millisecond {
			t.Fatalf("a request gone after 100ms got %d %q after %s", w.status, w.buf.String(), time.Since(w.start))
		}
	})
}

// TestCancelStopsHandler checks that a handler waiting in a silence
// returns as soon as its request's context ends.
func TestCancelStopsHandler(t *testing.T) {
	cfg, err := Parse([]byte(timingProfiles))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		s, _ := New(Options{Config: cfg})
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
		ctx, cancel := contextWithCancel(t)
		req = req.WithContext(ctx)
		w := &flushRecorder{h: http.Header{}, start: time.Now()}
		done := make(chan struct{})
		go func() { s.ServeHTTP(w, req); close(done) }()
		time.Sleep(time.Second) // inside the 3.5 s silence
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("handler still running after cancel")
		}
		if elapsed := time.Since(w.start); elapsed != time.Second {
			t.Fatalf("handler ran %s", elapsed)
		}
	})
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

// TestSeedRepeats: the same seed gives the same schedule; the seed header
// pins one request whatever the server's request count.
func TestSeedRepeats(t *testing.T) {
	cfg, err := Parse([]byte(`default: r
profiles:
  r:
    ttft: {median: 1s, sigma: 0.8}
    interval: {median: 50ms, sigma: 0.5}
    chunks: 5
`))
	if err != nil {
		t.Fatal(err)
	}
	schedule := func(seed uint64, header string, warmup int) string {
		var out string
		synctest.Test(t, func(t *testing.T) {
			s, _ := New(Options{Config: cfg, Seed: seed})
			for range warmup {
				serve(t, s, "/v1/chat/completions", "r", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`)
			}
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
			if header != "" {
				req.Header.Set(SeedHeader, header)
			}
			w := &flushRecorder{h: http.Header{}, start: time.Now()}
			s.ServeHTTP(w, req)
			out = strings.Join(w.sends, ",")
		})
		return out
	}
	a, b, c := schedule(1, "", 0), schedule(1, "", 0), schedule(2, "", 0)
	if a != b || a == c {
		t.Fatalf("seed 1: %s / %s; seed 2: %s", a, b, c)
	}
	if x, y := schedule(1, "42", 0), schedule(9, "42", 3); x != y || x == a {
		t.Fatalf("seed header: %s / %s", x, y)
	}
}
