package fakellm

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

func script(n int) string { return Script(n) }

// chatBody is an OpenAI streaming request whose last message is the
// assistant's partial answer, with extra top-level fields and message
// fields merged in.
func chatBody(t *testing.T, prefix string, top, msg map[string]any) string {
	t.Helper()
	last := map[string]any{"role": "assistant", "content": prefix}
	for k, v := range msg {
		last[k] = v
	}
	b := map[string]any{
		"model": "m", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}, last},
	}
	for k, v := range top {
		b[k] = v
	}
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// anthropicBody is an Anthropic streaming request ending in a prefill
// given as content blocks, as anthropic-sdk-go sends it.
func anthropicBody(t *testing.T, prefill string) string {
	t.Helper()
	out, err := json.Marshal(map[string]any{
		"model": "m", "stream": true, "max_tokens": 100,
		"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"}}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": prefill}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestContinuationStreamsTheRest: whatever prefix of the script the
// request carries (a chunk boundary, the middle of a word, a prefill
// trimmed of its trailing space, nothing, everything), the continuation is
// exactly the rest of the script, on both endpoints (the Anthropic one
// takes no prefix that ends in whitespace: TestContinuationRefusals).
func TestContinuationStreamsTheRest(t *testing.T) {
	ts := startServer(t, 0.001)
	full := script(40)
	for _, tc := range []struct {
		name, prefix string
		chunks       int // content chunks of the continuation
	}{
		{"at a chunk boundary", script(5), 35},
		{"mid-word", script(5) + "cons", 35},
		{"trailing space trimmed", strings.TrimRight(script(5), " "), 35},
		{"empty", "", 40},
		{"the whole script", full, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := full[len(tc.prefix):]
			resp := post(t, ts.URL+"/v1/chat/completions", "steady", chatBody(t, tc.prefix, nil, nil))
			got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText)
			if got.err != nil || got.text.String() != want || got.content != tc.chunks {
				t.Errorf("openai: err %v, %d chunks, text %q, want %d chunks of %q", got.err, got.content, got.text.String(), tc.chunks, want)
			}
			if strings.TrimRight(tc.prefix, " ") != tc.prefix {
				return
			}
			resp = post(t, ts.URL+"/v1/messages", "steady", anthropicBody(t, tc.prefix))
			got = drain(sse.NewAnthropicStream(resp, sse.StreamOptions{}), sse.ClassifyAnthropic, sse.AnthropicTokens, anthropicText)
			if got.err != nil || got.text.String() != want || got.content != tc.chunks || got.tokens != int64(2*tc.chunks) {
				t.Errorf("anthropic: err %v, %d chunks, %d tokens, text %q, want %d chunks of %q", got.err, got.content, got.tokens, got.text.String(), tc.chunks, want)
			}
		})
	}
	t.Run("trimmed space leads the next word", func(t *testing.T) {
		resp := post(t, ts.URL+"/v1/messages", "steady", anthropicBody(t, "lorem ipsum"))
		got := drain(sse.NewAnthropicStream(resp, sse.StreamOptions{}), sse.ClassifyAnthropic, sse.AnthropicTokens, anthropicText)
		if !strings.HasPrefix(got.text.String(), " dolor sit") || got.content != 38 {
			t.Fatalf("%d chunks, text %q", got.content, got.text.String())
		}
	})
}

// TestContinuationSwitch: a profile that needs the server's switch
// continues with it and answers afresh (the whole script) without it.
func TestContinuationSwitch(t *testing.T) {
	ts := startServer(t, 0.001)
	full, prefix := script(40), script(7)
	for _, tc := range []struct {
		name, profile string
		top, msg      map[string]any
		want          string
	}{
		{"final_message with the switch", "steady-final-message", map[string]any{"continue_final_message": true, "add_generation_prompt": false}, nil, full[len(prefix):]},
		{"final_message without", "steady-final-message", nil, nil, full},
		{"final_message with prefix instead", "steady-final-message", nil, map[string]any{"prefix": true}, full},
		{"prefix with the switch", "steady-prefix", nil, map[string]any{"prefix": true}, full[len(prefix):]},
		{"prefix without", "steady-prefix", map[string]any{"continue_final_message": true, "add_generation_prompt": false}, nil, full},
		{"trailing ignores the switches", "steady", map[string]any{"continue_final_message": true, "add_generation_prompt": false}, map[string]any{"prefix": true}, full[len(prefix):]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, ts.URL+"/v1/chat/completions", tc.profile, chatBody(t, prefix, tc.top, tc.msg))
			got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText)
			if got.err != nil || got.text.String() != tc.want {
				t.Fatalf("err %v, text %q, want %q", got.err, got.text.String(), tc.want)
			}
		})
	}
}

// TestContinuationEcho: steady-prefix-echo's continuation repeats the
// prefix in its first chunk, then the rest of the script, as Mistral
// answers; without the switch it answers afresh; its Anthropic endpoint
// repeats nothing.
func TestContinuationEcho(t *testing.T) {
	ts := startServer(t, 0.001)
	full, prefix := script(40), script(7)
	resp := post(t, ts.URL+"/v1/chat/completions", "steady-prefix-echo", chatBody(t, prefix, nil, map[string]any{"prefix": true}))
	var first string
	got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, func(c sse.ChatChunk) string {
		s := chatText(c)
		if first == "" {
			first = s
		}
		return s
	})
	if got.err != nil || got.text.String() != full || got.content != 33 || first != prefix+word(7) {
		t.Fatalf("err %v, %d chunks, first %q, text %q; want the prefix repeated, then 33 chunks", got.err, got.content, first, got.text.String())
	}
	resp = post(t, ts.URL+"/v1/chat/completions", "steady-prefix-echo", chatBody(t, prefix, nil, nil))
	if got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText); got.content != 40 || got.text.String() != full {
		t.Fatalf("without the switch: %d chunks, text %q", got.content, got.text.String())
	}
	prefill := strings.TrimRight(prefix, " ")
	resp = post(t, ts.URL+"/v1/messages", "steady-prefix-echo", anthropicBody(t, prefill))
	if got := drain(sse.NewAnthropicStream(resp, sse.StreamOptions{}), sse.ClassifyAnthropic, sse.AnthropicTokens, anthropicText); got.text.String() != full[len(prefill):] {
		t.Fatalf("Anthropic endpoint: text %q", got.text.String())
	}
}

// TestContinuationRefusals: a profile refusing prefill answers a
// continuation 400 and a fresh request normally; a prefix that is not the
// script's, vLLM's two switches at once, or an Anthropic prefill that ends
// in whitespace, is a 400 that says why.
func TestContinuationRefusals(t *testing.T) {
	ts := startServer(t, 0.001)
	for _, tc := range []struct {
		name, path, profile, body, want string
	}{
		{"no-prefill openai", "/v1/chat/completions", "no-prefill", chatBody(t, script(3), nil, nil), "does not support assistant message prefill"},
		{"no-prefill anthropic", "/v1/messages", "no-prefill", anthropicBody(t, "lorem"), "does not support assistant message prefill"},
		// A model that refuses prefill refuses it before reading the text.
		{"no-prefill, a text not of the script", "/v1/chat/completions", "no-prefill", chatBody(t, "not the script", nil, nil), "does not support assistant message prefill"},
		{"not a prefix", "/v1/chat/completions", "steady", chatBody(t, "lorem ipsum dolorous", nil, nil), "not a prefix of the script: they differ at byte 17"},
		{"both vLLM switches", "/v1/chat/completions", "steady-final-message", chatBody(t, "lorem", map[string]any{"continue_final_message": true}, nil), "cannot both be true"},
		{"content of another shape", "/v1/messages", "steady", `{"stream":true,"messages":[{"role":"assistant","content":{"x":1}}]}`, "neither a string nor an array"},
		// Anthropic refuses a prefill that ends in whitespace; so does
		// fakellm, on the text of the script as on any other.
		{"prefill ending in a space", "/v1/messages", "steady", anthropicBody(t, script(3)), "cannot end with trailing whitespace"},
		{"prefill ending in a newline", "/v1/messages", "steady", anthropicBody(t, "lorem\n"), "cannot end with trailing whitespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, ts.URL+tc.path, tc.profile, tc.body)
			var ue *sse.UpstreamError
			var err error
			if tc.path == "/v1/messages" {
				err = drain(sse.NewAnthropicStream(resp, sse.StreamOptions{}), sse.ClassifyAnthropic, sse.AnthropicTokens, anthropicText).err
			} else {
				err = drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText).err
			}
			if !errors.As(err, &ue) || ue.StatusCode != 400 || ue.Transient() || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a 400 saying %q", err, tc.want)
			}
		})
	}
	resp := post(t, ts.URL+"/v1/messages", "no-prefill", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if got := drain(sse.NewAnthropicStream(resp, sse.StreamOptions{}), sse.ClassifyAnthropic, sse.AnthropicTokens, anthropicText); got.err != nil || got.content != 40 {
		t.Fatalf("fresh request on no-prefill: err %v, %d chunks", got.err, got.content)
	}
}

// TestContinuationStallsAgain: on stall-twice, a continuation from chunk 5
// does not replay the silence it rescues but plays the one after chunk 10
// (its keepalives show); a continuation from chunk 11 has no silence left.
func TestContinuationStallsAgain(t *testing.T) {
	ts := startServer(t, 0.001)
	for _, tc := range []struct {
		from      int
		keepalive bool
	}{{5, true}, {11, false}} {
		resp := post(t, ts.URL+"/v1/chat/completions", "stall-twice", chatBody(t, script(tc.from), nil, nil))
		got := drain(sse.NewOpenAIStream(resp, sse.StreamOptions{}), sse.ClassifyOpenAI, sse.OpenAITokens, chatText)
		if got.err != nil || got.text.String() != script(40)[len(script(tc.from)):] || (got.keepalive > 0) != tc.keepalive {
			t.Errorf("from %d: err %v, %d keepalives, text %q", tc.from, got.err, got.keepalive, got.text.String())
		}
	}
}

// TestContinuationTimingExact: a continuation waits the TTFT, then keeps
// the script's intervals and the silences after its start; the silence
// at its start is not replayed.
func TestContinuationTimingExact(t *testing.T) {
	cfg, err := Parse([]byte(`default: twice
profiles:
  twice:
    ttft: 100ms
    interval: 10ms
    chunks: 8
    silences:
      - {after_chunk: 2, duration: 1s}
      - {after_chunk: 5, duration: 2s}
      - {after_chunk: 8, duration: 4s}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, prefix string
		want         []string
	}{
		{"fresh", "", []string{"0s role", "100ms content", "110ms content",
			"1.12s content", "1.13s content", "1.14s content",
			"3.15s content", "3.16s content", "3.17s content", "7.17s finish", "7.17s done"}},
		{"from chunk 2", script(2), []string{"0s role", "100ms content", "110ms content", "120ms content",
			"2.13s content", "2.14s content", "2.15s content", "6.15s finish", "6.15s done"}},
		{"from the middle of chunk 5", script(5) + "co", []string{"0s role", "100ms content", "110ms content", "120ms content",
			"4.12s finish", "4.12s done"}},
		// An Anthropic-style prefill, trimmed of the last chunk's trailing
		// space: the prefix ends after all the content, so the silence
		// there is the rescued one (it was replayed, 4s, before the finish).
		{"whole answer but its trailing space", strings.TrimRight(script(8), " "), []string{"0s role", "100ms content", "100ms finish", "100ms done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Options{Config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				w := serve(t, s, "/v1/chat/completions", "twice", chatBody(t, tc.prefix, nil, nil))
				if got := strings.Join(w.sends, "\n"); got != strings.Join(tc.want, "\n") {
					t.Fatalf("sends:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
				}
			})
		})
	}
}

// TestContinuationNonStreaming: a whole (non-streaming) continuation
// answers the rest of the script too.
func TestContinuationNonStreaming(t *testing.T) {
	ts := startServer(t, 0.001)
	body := strings.Replace(chatBody(t, script(30), nil, nil), `"stream":true`, `"stream":false`, 1)
	resp := post(t, ts.URL+"/v1/chat/completions", "steady", body)
	defer resp.Body.Close()
	var cc struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil {
		t.Fatal(err)
	}
	if len(cc.Choices) != 1 || cc.Choices[0].Message.Content != script(40)[len(script(30)):] || cc.Usage.CompletionTokens != 20 {
		t.Fatalf("completion %+v", cc)
	}
}

// TestContinuationNonStreamingPastFault: a whole (non-streaming)
// continuation past the scripted error or disconnect answers the rest, as
// a streaming one does; one before it still meets the fault.
func TestContinuationNonStreamingPastFault(t *testing.T) {
	ts := startServer(t, 0.001)
	for _, tc := range []struct {
		profile string
		from    int
		ok      bool
	}{
		{"error-mid", 10, true}, {"disconnect", 10, true}, {"disconnect-clean", 10, true},
		{"error-mid", 1, false}, {"disconnect", 1, false},
	} {
		body := strings.Replace(chatBody(t, script(tc.from), nil, nil), `"stream":true`, `"stream":false`, 1)
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(ProfileHeader, tc.profile)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if tc.ok {
				t.Errorf("%s from %d: %v", tc.profile, tc.from, err)
			}
			continue
		}
		var cc struct {
			Choices []struct{ Message struct{ Content string } }
		}
		err = json.NewDecoder(resp.Body).Decode(&cc)
		resp.Body.Close()
		got := resp.StatusCode == http.StatusOK && err == nil && len(cc.Choices) == 1 &&
			cc.Choices[0].Message.Content == script(40)[len(script(tc.from)):]
		if got != tc.ok {
			t.Errorf("%s from %d: status %d, err %v, %+v; want the rest of the script: %v", tc.profile, tc.from, resp.StatusCode, err, cc, tc.ok)
		}
	}
}
