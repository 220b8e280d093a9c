package fakellm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// The tests of this file come from an outside review of fakellm.

// TestContinuationEchoOfWholeScript: an echoing continuation of a prefix
// that is the whole script repeats the prefix (it answered nothing: the
// echo rode on a chunk past the script's end, which is never sent).
func TestContinuationEchoOfWholeScript(t *testing.T) {
	ts := startServer(t, 0.001)
	full := script(40)
	resp := post(t, ts.URL+"/v1/chat/completions", "steady-prefix-echo", chatBody(t, full, nil, map[string]any{"prefix": true}))
	if got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText); got.err != nil || got.text.String() != full || got.content != 1 {
		t.Fatalf("stream: err %v, %d chunks, text %q; want the prefix once", got.err, got.content, got.text.String())
	}
	body := chatBody(t, full, map[string]any{"stream": false}, map[string]any{"prefix": true})
	resp = post(t, ts.URL+"/v1/chat/completions", "steady-prefix-echo", body)
	defer resp.Body.Close()
	var cc struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != full {
		t.Fatalf("whole: %v %+v", err, cc)
	}
}

// TestStatusProfileWhateverTheMessages: a profile with a status of its
// own answers it to one JSON object whatever its fields hold (a field of
// the wrong type was a 400).
func TestStatusProfileWhateverTheMessages(t *testing.T) {
	ts := startServer(t, 0.001)
	for _, body := range []string{
		`{"model":"m","messages":"hi"}`,
		`{"model":"m","messages":[{"role":7,"content":"hi"}]}`,
	} {
		for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
			resp := post(t, ts.URL+path, "ratelimit", body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s %s: status %d, Retry-After %q; want the profile's 429", path, body, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		}
	}
	// Without a status of its own, the wrong type is still a 400.
	resp := post(t, ts.URL+"/v1/chat/completions", "steady", `{"model":"m","messages":"hi"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "a field of the request has the wrong type") {
		t.Fatalf("steady: %d %s", resp.StatusCode, b)
	}
}

// TestRequestTooLarge: a body over 8 MiB is a 413 that says so (it was cut
// silently and answered 400 "not one JSON object: unexpected EOF"),
// request_too_large on the Anthropic endpoint, as Anthropic types it.
func TestRequestTooLarge(t *testing.T) {
	ts := startServer(t, 0.001)
	body, err := json.Marshal(map[string]any{"model": "m", "max_tokens": 5,
		"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a", maxBody)}}})
	if err != nil {
		t.Fatal(err)
	}
	// A small object followed by spaces past the limit is as large.
	padded := `{"model":"m","messages":[{"role":"user","content":"hi"}]}` + strings.Repeat(" ", maxBody)
	for path, typ := range map[string]string{"/v1/chat/completions": "invalid_request_error", "/v1/messages": "request_too_large"} {
		for _, body := range []string{string(body), padded} {
			resp := post(t, ts.URL+path, "steady", body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"type":"`+typ+`"`) ||
				!strings.Contains(string(b), "the body is larger than 8388608 bytes") {
				t.Errorf("%s: %d %s", path, resp.StatusCode, b)
			}
		}
	}
}

// syncBuffer is a buffer safe for the server's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
func (w *syncBuffer) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

// TestLogLinePerRequest: every request is logged, a wrong path (a base URL
// with /v1 twice) and a wrong method too, with their status.
func TestLogLinePerRequest(t *testing.T) {
	cfg, err := DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s := mustServer(t, Options{Config: cfg, Scale: 0.001, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	for _, c := range []struct{ method, path, status string }{
		{http.MethodPost, "/v1/v1/chat/completions", "status=404"},
		{http.MethodGet, "/v1/chat/completions", "status=405"},
		{http.MethodPost, "/v1/chat/completions", "status=429"},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set(ProfileHeader, "ratelimit")
		before := strings.Count(logs.String(), "msg=request")
		s.ServeHTTP(httptest.NewRecorder(), req)
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if strings.Count(logs.String(), "msg=request") != before+1 || !strings.Contains(lines[len(lines)-1], c.status) {
			t.Errorf("%s %s: log %q", c.method, c.path, logs.String())
		}
	}
}

// TestLogStatusNothingSent: a request answered with no status line — a
// non-streaming answer cut by its disconnect, one whose client went away
// during its wait, a status profile's refusal not yet due — logs status 0,
// where it logged the 200 it never sent (an independent review's finding).
func TestLogStatusNothingSent(t *testing.T) {
	cfg, err := DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s := mustServer(t, Options{Config: cfg, Scale: 0.001, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range []struct {
		profile string
		ctx     context.Context
		want    string
	}{
		{"disconnect", t.Context(), "outcome=disconnect"},
		{"steady", gone, "outcome=canceled"},
		{"server-error", gone, "outcome=canceled"},
	} {
		req := httptest.NewRequestWithContext(c.ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set(ProfileHeader, c.profile)
		func() {
			defer func() {
				if p := recover(); p != nil && p != http.ErrAbortHandler {
					panic(p)
				}
			}()
			s.ServeHTTP(httptest.NewRecorder(), req)
		}()
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, "status=0 ") || !strings.Contains(last, c.want) {
			t.Errorf("%s: log line %q, want status=0 and %s", c.profile, last, c.want)
		}
	}
}

// TestChunksShareCreated: every chunk of a stream has the same created
// time, as OpenAI's do (each chunk read the clock).
func TestChunksShareCreated(t *testing.T) {
	cfg, err := DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		s := mustServer(t, Options{Config: cfg, Scale: 1})
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set(ProfileHeader, "stall") // 55 s of silence: seconds pass between its chunks
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		created := map[int64]int{}
		for line := range strings.Lines(w.Body.String()) {
			d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
			if !ok || d == "[DONE]" {
				continue
			}
			var c struct{ Created int64 }
			if err := json.Unmarshal([]byte(d), &c); err != nil {
				t.Fatal(err)
			}
			created[c.Created]++
		}
		if len(created) != 1 {
			t.Fatalf("created %v; want one time for the whole stream", created)
		}
	})
}

// steady-prefix-echo plays Mistral's API: a request with stream_options
// gets a 422 "extra_forbidden" before anything streams, and one without
// it has its usage on the finish_reason chunk — a continuation included
// (80 tokens: 40 chunks of 2, the repeat of the prefix not counted).
func TestMistralLikeUsage(t *testing.T) {
	ts := startServer(t, 0.001)
	resp := post(t, ts.URL+"/v1/chat/completions", "steady-prefix-echo",
		chatBody(t, script(3), map[string]any{"stream_options": map[string]any{"include_usage": true}}, map[string]any{"prefix": true}))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "extra_forbidden") {
		t.Fatalf("stream_options: %d %s, want 422 extra_forbidden", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		prefix string
		tokens int64
	}{{"", 80}, {script(7), 66}} {
		resp := post(t, ts.URL+"/v1/chat/completions", "steady-prefix-echo", chatBody(t, tc.prefix, nil, map[string]any{"prefix": true}))
		onFinish := false // the usage rode on the finish_reason chunk
		tokens := func(c sse.ChatChunk) (int64, bool) {
			n, ok := sse.OpenAITokens(c)
			onFinish = onFinish || ok && len(c.Choices) > 0 && c.Choices[0].FinishReason != ""
			return n, ok
		}
		got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, tokens, chatText)
		if got.err != nil || got.tokens != tc.tokens || !onFinish {
			t.Errorf("prefix %q: err %v, %d tokens (on the finish chunk: %v); want %d on the finish chunk", tc.prefix, got.err, got.tokens, onFinish, tc.tokens)
		}
	}
}

// TestAnthropicErrorStatuses: each of Anthropic's error types goes with
// its status both ways, as its API pairs them (billing_error, a fatal 402,
// was a transient 500, and timeout_error a 500 for a 504).
func TestAnthropicErrorStatuses(t *testing.T) {
	for typ, status := range map[string]int{
		"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
		"permission_error": 403, "not_found_error": 404, "request_too_large": 413,
		"rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
	} {
		d := anthropicDialect{}
		if got := d.errorStatus(typ); got != status {
			t.Errorf("errorStatus(%q) = %d, want %d", typ, got, status)
		}
		if got := d.statusType(status); got != typ {
			t.Errorf("statusType(%d) = %q, want %q", status, got, typ)
		}
	}
}
