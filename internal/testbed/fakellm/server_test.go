package fakellm

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// startServer serves the testdata profiles at scale, over real loopback.
func startServer(t *testing.T, scale float64) *httptest.Server {
	t.Helper()
	cfg, err := LoadFile(profilesFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Config: cfg, Scale: scale, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

// mustServer is New(o), its error failing the test.
func mustServer(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func post(t *testing.T, url, profile, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if profile != "" {
		req.Header.Set(ProfileHeader, profile)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// tally counts what a stream delivered, by kind.
type tally struct {
	content, control, keepalive int
	tokens                      int64
	text                        strings.Builder
	err                         error
}

func drain[T any](s hedgeprobe.Source[T], classify hedgeprobe.Classifier[T], tokens hedgeprobe.TokenCount[T], text func(T) string) tally {
	var c tally
	for s.Next() {
		v := s.Current()
		switch classify(v) {
		case hedgeprobe.Content:
			c.content++
			c.text.WriteString(text(v))
		case hedgeprobe.Control:
			c.control++
		default:
			c.keepalive++
		}
		if n, ok := tokens(v); ok {
			c.tokens = n
		}
	}
	c.err = s.Err()
	_ = s.Close()
	return c
}

func chatText(c sse.ChatChunk) string {
	if len(c.Choices) == 0 {
		return ""
	}
	return c.Choices[0].Delta.Content
}

func anthropicText(e sse.AnthropicEvent) string {
	if e.Delta == nil {
		return ""
	}
	return e.Delta.Text
}

func TestProfilesOverHTTP(t *testing.T) {
	ts := startServer(t, 0.001)
	type want struct {
		content   int
		keepalive bool // at least one keepalive
		tokens    int64
		err       func(error) bool
	}
	isUpstream := func(status int, midStream bool) func(error) bool {
		return func(err error) bool {
			var ue *sse.UpstreamError
			return errors.As(err, &ue) && ue.StatusCode == status && ue.MidStream == midStream
		}
	}
	isConn := func(err error) bool {
		var ce *sse.ConnectionError
		return errors.As(err, &ce) && ce.Connected && ce.Transient()
	}
	isNil := func(err error) bool { return err == nil }
	for _, tc := range []struct {
		profile string
		want    want
	}{
		{"steady", want{content: 40, tokens: 80, err: isNil}},
		{"stall", want{content: 40, keepalive: true, tokens: 80, err: isNil}},
		{"stall-ping", want{content: 40, keepalive: true, tokens: 40, err: isNil}},
		{"stall-silent", want{content: 40, tokens: 40, err: isNil}},
		{"slow-first", want{content: 40, keepalive: true, tokens: 80, err: isNil}},
		{"error-mid", want{content: 3, err: isUpstream(0, true)}},
		{"disconnect", want{content: 3, err: isConn}},
		{"disconnect-clean", want{content: 3, err: isConn}},
		{"ratelimit", want{err: isUpstream(429, false)}},
		{"server-error", want{err: isUpstream(503, false)}},
		{"internal-error", want{err: isUpstream(500, false)}},
		{"bad-request", want{err: isUpstream(400, false)}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			t.Run("openai", func(t *testing.T) {
				resp := post(t, ts.URL+"/v1/chat/completions", tc.profile, `{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}`)
				got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText)
				check(t, got, tc.want.content, tc.want.keepalive, tc.want.tokens, tc.want.err)
				if tc.want.content == 40 && !strings.HasPrefix(got.text.String(), "lorem ipsum dolor") {
					t.Errorf("text = %q", got.text.String())
				}
			})
			t.Run("anthropic", func(t *testing.T) {
				resp := post(t, ts.URL+"/v1/messages", tc.profile, `{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true,"max_tokens":10}`)
				got := drain(sse.NewAnthropicStream(resp, sse.StreamOptions{}), sse.ClassifyAnthropic, sse.AnthropicTokens, anthropicText)
				check(t, got, tc.want.content, tc.want.keepalive, tc.want.tokens, tc.want.err)
			})
		})
	}
}

func check(t *testing.T, got tally, content int, keepalive bool, tokens int64, errOK func(error) bool) {
	t.Helper()
	if got.content != content {
		t.Errorf("content chunks = %d, want %d", got.content, content)
	}
	if keepalive && got.keepalive == 0 {
		t.Errorf("no keepalive seen")
	}
	if !keepalive && got.keepalive != 0 {
		t.Errorf("%d keepalives, want none", got.keepalive)
	}
	if got.tokens != tokens {
		t.Errorf("output tokens = %d, want %d", got.tokens, tokens)
	}
	if !errOK(got.err) {
		t.Errorf("err = %v (%T)", got.err, got.err)
	}
}

func TestRetryAfterScaled(t *testing.T) {
	ts := startServer(t, 0.01)
	resp := post(t, ts.URL+"/v1/chat/completions", "ratelimit", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`)
	_ = resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Retry-After-Ms") != "20" {
		t.Fatalf("status %d, Retry-After %q, retry-after-ms %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"))
	}
	resp = post(t, ts.URL+"/v1/chat/completions", "ratelimit", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`)
	got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText)
	var ue *sse.UpstreamError
	if !errors.As(got.err, &ue) || ue.RetryAfter() != 20e6 || !ue.Transient() || ue.Type != "rate_limit_exceeded" {
		t.Fatalf("err = %#v", got.err)
	}
}

func TestNonStreaming(t *testing.T) {
	ts := startServer(t, 0.001)
	resp := post(t, ts.URL+"/v1/chat/completions", "steady", `{"messages":[{"role":"user","content":"hi"}],"model":"m"}`)
	defer resp.Body.Close()
	var cc struct {
		Object  string
		Choices []struct {
			Message struct{ Role, Content string }
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil {
		t.Fatal(err)
	}
	if cc.Object != "chat.completion" || len(cc.Choices) != 1 || len(strings.Fields(cc.Choices[0].Message.Content)) != 40 || cc.Usage.CompletionTokens != 80 {
		t.Fatalf("completion = %+v", cc)
	}
	resp2 := post(t, ts.URL+"/v1/messages", "steady", `{"messages":[{"role":"user","content":"hi"}],"model":"m","max_tokens":5}`)
	defer resp2.Body.Close()
	var msg struct {
		Type    string
		Content []struct{ Type, Text string }
		Usage   struct {
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.NewDecoder(resp2.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || len(msg.Content) != 1 || msg.Usage.OutputTokens != 80 {
		t.Fatalf("message = %+v", msg)
	}
}

func TestBadRequests(t *testing.T) {
	ts := startServer(t, 0.001)
	for _, tc := range []struct {
		name, path, profile, body string
		status                    int
		want                      string
	}{
		{"unknown profile", "/v1/chat/completions", "nope", `{}`, 400, `unknown profile \"nope\" (have bad-request, disconnect`},
		{"not json", "/v1/messages", "", `{`, 400, "body is not one JSON object: unexpected EOF"},
		{"empty", "/v1/chat/completions", "", ``, 400, "body is not one JSON object: EOF"},
		{"null", "/v1/chat/completions", "", `null`, 400, "body is not one JSON object: it is null"},
		{"array", "/v1/chat/completions", "", ` [1]`, 400, "body is not one JSON object: it is [1]"},
		{"trailing garbage", "/v1/chat/completions", "", `{"stream":false} x`, 400, "body is not one JSON object: more follows the object"},
		{"two objects", "/v1/messages", "", `{"stream":false}{"x":1}`, 400, "body is not one JSON object: more follows the object"},
		{"trailing space is fine", "/v1/chat/completions", "ratelimit", "{}\n ", 429, ""},
		// What the real APIs refuse before generating, and a field of the
		// wrong type named as such.
		{"no messages", "/v1/chat/completions", "steady", `{"model":"m","stream":true}`, 400, `\"messages\" is missing or empty`},
		{"empty messages", "/v1/messages", "steady", `{"stream":true,"messages":[]}`, 400, `\"messages\" is missing or empty`},
		{"null message", "/v1/chat/completions", "steady", `{"messages":[{"role":"user","content":"hi"},null]}`, 400, "messages[1] has no role"},
		{"message without a role", "/p/stall/v1/messages", "", `{"messages":[{"content":"hi"}]}`, 400, "messages[0] has no role"},
		{"messages of the wrong type", "/v1/chat/completions", "steady", `{"messages":"hi"}`, 400, "a field of the request has the wrong type"},
		{"unknown path", "/v2/x", "", `{}`, 404, "fakellm serves"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, ts.URL+tc.path, tc.profile, tc.body)
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			// Every error body is JSON, and says so (404 said text/plain).
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) || !json.Valid(b) ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, content type %q, body %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
		})
	}
	// The path prefix picks the profile too.
	resp := post(t, ts.URL+"/p/ratelimit/v1/chat/completions", "steady", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`)
	_ = resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("/p/ratelimit: status %d", resp.StatusCode)
	}
	resp, err := http.Get(ts.URL + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost ||
		resp.Header.Get("Content-Type") != "application/json" || !json.Valid(b) {
		t.Fatalf("GET status %d, headers %v, body %s", resp.StatusCode, resp.Header, b)
	}
}
