package sse

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/prefill"
)

// TestOpenAIContinuationBody: each Continuation mode's body — the
// request's messages, then a trailing assistant message with the prefix,
// and the mode's switch; nothing else changes, and the route's own body is
// left as it was for the next attempt.
func TestOpenAIContinuationBody(t *testing.T) {
	body := map[string]any{"model": "m", "stream": true, "temperature": 0.5}
	msgs := []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}
	const prefix = "Hello, \"world\"\n "
	for _, tc := range []struct {
		how  Continuation
		want string
	}{
		{ContinueTrailingAssistant, `{"messages":[{"content":"be brief","role":"system"},{"content":"hi","role":"user"},{"content":"Hello, \"world\"\n ","role":"assistant"}],"model":"m","stream":true,"temperature":0.5}`},
		{ContinueFinalMessage, `{"add_generation_prompt":false,"continue_final_message":true,"messages":[{"content":"be brief","role":"system"},{"content":"hi","role":"user"},{"content":"Hello, \"world\"\n ","role":"assistant"}],"model":"m","stream":true,"temperature":0.5}`},
		{ContinuePrefix, `{"messages":[{"content":"be brief","role":"system"},{"content":"hi","role":"user"},{"content":"Hello, \"world\"\n ","prefix":true,"role":"assistant"}],"model":"m","stream":true,"temperature":0.5}`},
		{ContinuePrefixEcho, `{"messages":[{"content":"be brief","role":"system"},{"content":"hi","role":"user"},{"content":"Hello, \"world\"\n ","prefix":true,"role":"assistant"}],"model":"m","stream":true,"temperature":0.5}`},
	} {
		b, err := openAIContinuation(body, msgs, tc.how, prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonical(t, b); got != tc.want {
			t.Errorf("mode %d:\n got %s\nwant %s", tc.how, got, tc.want)
		}
	}
	if len(body) != 3 || body["messages"] != nil {
		t.Fatalf("the route's body changed: %v", body)
	}
	// vLLM's echo would repeat the delivered text: never sent on.
	echoing := map[string]any{"model": "m", "echo": true}
	b, err := openAIContinuation(echoing, msgs, ContinueFinalMessage, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := canonical(t, b); strings.Contains(got, "echo") || echoing["echo"] != true {
		t.Fatalf("continuation %s, route body %v", got, echoing)
	}
}

// TestContinuationLimit: a continuation after n content chunks asks for
// the request's token limits less n, at least 1, whatever numeric type
// Params gave them in; a limit that is no whole number, and none, stay as
// they are; the route's body does not change.
func TestContinuationLimit(t *testing.T) {
	for _, c := range [][3]int64{{100, 0, 100}, {100, 30, 70}, {100, 99, 1}, {100, 100, 1}, {100, 250, 1}, {0, 30, 0}, {-1, 30, -1}} {
		if got := ContinuationLimit(c[0], c[1]); got != c[2] {
			t.Errorf("ContinuationLimit(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	for _, tc := range []struct {
		name   string
		limits map[string]any
		want   string
	}{
		{"int", map[string]any{"max_tokens": 100}, `"max_tokens":70`},
		{"int64 and float64", map[string]any{"max_tokens": int64(100), "max_completion_tokens": 200.0}, `"max_completion_tokens":170,"max_tokens":70`},
		{"json.Number", map[string]any{"max_completion_tokens": json.Number("100")}, `"max_completion_tokens":70`},
		{"spent", map[string]any{"max_tokens": 20}, `"max_tokens":1`},
		{"not whole", map[string]any{"max_tokens": 100.5}, `"max_tokens":100.5`},
		{"past float64's precision", map[string]any{"max_tokens": int64(1<<53 + 1)}, `"max_tokens":9007199254740963`},
		{"negative", map[string]any{"max_tokens": -1e300}, `"max_tokens":-1e+300`},
		{"a string", map[string]any{"max_tokens": "100"}, `"max_tokens":"100"`},
		{"null", map[string]any{"max_tokens": nil}, `"max_tokens":null`},
		{"none", map[string]any{}, `"messages"`},
	} {
		body := maps.Clone(tc.limits)
		body["model"] = "m"
		b, err := openAIContinuation(body, msgs, ContinueTrailingAssistant, "Hello", 30)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonical(t, b); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if !maps.Equal(body, mapsWith(tc.limits, "model", "m")) {
			t.Errorf("%s: the route's body changed: %v", tc.name, body)
		}
	}
	// An upstream that repeats the prefix may count the repeat against
	// the limit: its limit stays the request's.
	b, err := openAIContinuation(map[string]any{"model": "m", "max_tokens": 100}, msgs, ContinuePrefixEcho, "Hello", 30)
	if err != nil {
		t.Fatal(err)
	}
	if got := canonical(t, b); !strings.Contains(got, `"max_tokens":100`) {
		t.Errorf("ContinuePrefixEcho: %s, want max_tokens 100", got)
	}
}

// mapsWith is m with k set to v, m left as it is.
func mapsWith(m map[string]any, k string, v any) map[string]any {
	c := maps.Clone(m)
	c[k] = v
	return c
}

// TestOpenAIContinuationExtendsPrefill: a request that already ends in an
// assistant message (the caller's own prefill) is continued in that one
// message — prefill + delivered text — not followed by a second assistant
// message. ContinueFinalMessage extends it only when the request asks the
// upstream to continue it; otherwise the upstream answered after it, and
// the resume cannot be built.
func TestOpenAIContinuationExtendsPrefill(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "a story"}, {Role: "assistant", Content: "Once upon"}}
	const prefix = " a time"
	plain := map[string]any{"model": "m"}
	asked := map[string]any{"model": "m", "continue_final_message": true}
	for _, tc := range []struct {
		name string
		how  Continuation
		body map[string]any
		want string // "" for errAnsweredAfter
	}{
		{"trailing assistant", ContinueTrailingAssistant, plain, `{"messages":[{"content":"a story","role":"user"},{"content":"Once upon a time","role":"assistant"}],"model":"m"}`},
		{"prefix", ContinuePrefix, plain, `{"messages":[{"content":"a story","role":"user"},{"content":"Once upon a time","prefix":true,"role":"assistant"}],"model":"m"}`},
		{"final message asked", ContinueFinalMessage, asked, `{"add_generation_prompt":false,"continue_final_message":true,"messages":[{"content":"a story","role":"user"},{"content":"Once upon a time","role":"assistant"}],"model":"m"}`},
		{"final message not asked", ContinueFinalMessage, plain, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := openAIContinuation(tc.body, msgs, tc.how, prefix, 0)
			if tc.want == "" {
				if !errors.Is(err, errAnsweredAfter) {
					t.Fatalf("body %s, err %v; want errAnsweredAfter", b, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := canonical(t, b); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if msgs[1].Content != "Once upon" {
		t.Fatalf("the caller's prefill changed: %q", msgs[1].Content)
	}
	// An upstream that repeats the prefix repeated the caller's prefill in
	// the delivered text too: no continuation is built.
	if b, err := openAIContinuation(plain, msgs, ContinuePrefixEcho, prefix, 0); !errors.Is(err, prefill.ErrEchoAfterPrefill) {
		t.Fatalf("echo after a prefill: body %s, err %v; want ErrEchoAfterPrefill", b, err)
	}
}

// TestContinuePrefixEcho: a resume attempt on an upstream that repeats the
// prefix (Mistral) reads the continuation without the repeat, however the
// repeat is split across chunks; an answer that does not repeat it keeps
// every byte; a primary is read as it is.
func TestContinuePrefixEcho(t *testing.T) {
	const prefix = "Once upon a time"
	chunk := func(s string) string {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}}}})
		return "data: " + string(b) + "\n\n"
	}
	read := func(t *testing.T, reply string, a hedgeprobe.Attempt) []string {
		ts, ch := capture(t, reply)
		r := OpenAIRoute("mistral", OpenAIRequest{BaseURL: ts.URL + "/v1", Model: "m", Continue: ContinuePrefixEcho,
			Messages: []Message{{Role: "user", Content: "a story"}}})
		src, err := r.Open(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		var got []string
		for src.Next() {
			if c := src.Current(); len(c.Choices) > 0 {
				got = append(got, c.Choices[0].Delta.Content)
			}
		}
		if err := src.Err(); err != nil {
			t.Fatal(err)
		}
		if a.Trigger == hedgeprobe.TriggerResume {
			msgs := (<-ch).body["messages"].([]any)
			if last := msgs[len(msgs)-1].(map[string]any); last["prefix"] != true || last["content"] != prefix {
				t.Fatalf("last message %v", last)
			}
		}
		return got
	}
	resume := hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: prefix}
	for _, tc := range []struct {
		name    string
		answer  []string
		attempt hedgeprobe.Attempt
		want    []string
	}{
		{"repeated whole", []string{prefix, " there was"}, resume, []string{"", " there was"}},
		{"repeated in pieces", []string{"Once", " upon a", " time there", " was"}, resume, []string{"", "", " there", " was"}},
		{"not repeated", []string{" there was"}, resume, []string{" there was"}},
		// Its own way after a part that matched: every byte kept.
		{"repeated in part", []string{"Once upon", " there was"}, resume, []string{"", "Once upon there was"}},
		{"differs within a chunk", []string{"Once upon a tim", "id mouse"}, resume, []string{"", "Once upon a timid mouse"}},
		{"ends within the repeat", []string{"Once upon"}, resume, []string{""}},
		{"a primary", []string{prefix}, hedgeprobe.Attempt{Trigger: hedgeprobe.TriggerPrimary}, []string{prefix}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reply strings.Builder
			for _, s := range tc.answer {
				reply.WriteString(chunk(s))
			}
			reply.WriteString("data: [DONE]\n\n")
			if got := read(t, reply.String(), tc.attempt); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("contents %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRouteContinuationCannotBeBuilt: a resume the route cannot build
// fails its Open with hedgeprobe.ErrCannotContinue before any request,
// and the route's primary is unaffected.
func TestRouteContinuationCannotBeBuilt(t *testing.T) {
	ts, ch := capture(t, "data: [DONE]\n\n")
	r := OpenAIRoute("vllm", OpenAIRequest{BaseURL: ts.URL + "/v1", Model: "m", Continue: ContinueFinalMessage,
		Messages: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "Earlier answer."}}})
	if _, err := r.Open(t.Context(), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "x"}); !errors.Is(err, hedgeprobe.ErrCannotContinue) || !errors.Is(err, errAnsweredAfter) {
		t.Fatalf("Open = %v, want ErrCannotContinue wrapping errAnsweredAfter", err)
	}
	select {
	case got := <-ch:
		t.Fatalf("a request was sent: %v", got.body)
	default:
	}
	src, err := r.Open(t.Context(), hedgeprobe.Attempt{Index: 0, Trigger: hedgeprobe.TriggerPrimary})
	if err != nil {
		t.Fatal(err)
	}
	for src.Next() {
	}
	_ = src.Close()
	if msgs, _ := (<-ch).body["messages"].([]any); len(msgs) != 2 {
		t.Fatalf("primary messages %v", msgs)
	}
}

// canonical re-marshals JSON with sorted keys.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestThinkingDoesNotContinue: an Anthropic request that turns extended
// thinking on, in any form, makes a route that cannot resume whatever its
// Prefill: Anthropic takes no prefill with it.
func TestThinkingDoesNotContinue(t *testing.T) {
	for _, c := range []struct {
		thinking any // absent when nil
		want     bool
	}{
		{nil, true},
		{map[string]any{"type": "disabled"}, true},
		{map[string]any{"type": "enabled", "budget_tokens": 1024}, false},
		{map[string]any{"type": "adaptive"}, false},
		{json.RawMessage(`{"type":"enabled","budget_tokens":2048}`), false},
		{json.RawMessage(`null`), true},
		{map[string]any{}, true}, // no type: off
		{"on", false},            // unreadable: on
	} {
		req := AnthropicRequest{BaseURL: "http://127.0.0.1:1", Model: "m", Prefill: true,
			Messages: []Message{{Role: "user", Content: "hi"}}}
		if c.thinking != nil {
			req.Params = map[string]any{"thinking": c.thinking}
		}
		if r := AnthropicRoute("r", req); r.Continues != c.want {
			t.Errorf("thinking %v: Continues %v, want %v", c.thinking, r.Continues, c.want)
		}
	}
}

// TestManyChoicesDoNotContinue: Params asking for more than one choice,
// in any numeric type, make a route that cannot resume whatever its
// Continue: a continuation would carry choice 0's text into every choice.
func TestManyChoicesDoNotContinue(t *testing.T) {
	for _, c := range []struct {
		n    any // absent when nil
		want bool
	}{
		{nil, true}, {1, true}, {1.0, true}, {int64(1), true}, {json.Number("1"), true}, {0, true},
		{2, false}, {2.0, false}, {uint8(3), false}, {json.Number("4"), false}, {"2", false},
	} {
		req := OpenAIRequest{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Continue: ContinuePrefix,
			Messages: []Message{{Role: "user", Content: "hi"}}}
		if c.n != nil {
			req.Params = map[string]any{"n": c.n}
		}
		if r := OpenAIRoute("r", req); r.Continues != c.want {
			t.Errorf("n %#v: Continues %v, want %v", c.n, r.Continues, c.want)
		}
	}
}

// TestRouteContinuationRequests: a resume attempt sends the continuation
// body; a primary on the same route sends the request as it is; a route
// that cannot continue says so (Continues) and never sends one.
func TestRouteContinuationRequests(t *testing.T) {
	ts, ch := capture(t, "data: [DONE]\n\n")
	req := OpenAIRequest{BaseURL: ts.URL + "/v1", Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}
	if r := OpenAIRoute("openai", req); r.Continues {
		t.Fatal("ContinueNone route Continues")
	}
	req.Continue = ContinuePrefix
	r := OpenAIRoute("deepseek", req)
	if !r.Continues {
		t.Fatal("ContinuePrefix route does not Continue")
	}
	for _, a := range []hedgeprobe.Attempt{
		{Index: 0, Trigger: hedgeprobe.TriggerPrimary},
		{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "lorem "},
		{Index: 2, Trigger: hedgeprobe.TriggerTTFT},
	} {
		src, err := r.Open(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		for src.Next() {
		}
		_ = src.Close()
		msgs, _ := (<-ch).body["messages"].([]any)
		resume := a.Trigger == hedgeprobe.TriggerResume
		if resume != (len(msgs) == 2) {
			t.Fatalf("attempt %d (%s): messages %v", a.Index, a.Trigger, msgs)
		}
		if resume {
			if last, _ := msgs[1].(map[string]any); last["role"] != "assistant" || last["content"] != "lorem " || last["prefix"] != true {
				t.Fatalf("trailing message %v", last)
			}
		}
	}
}

// TestAnthropicPrefill: the prefill is sent without its trailing
// whitespace, and the continuation that repeats it loses it again, so the
// caller reads delivered text + continuation with the whitespace once. A
// prefix of nothing but whitespace sends no prefill at all.
func TestAnthropicPrefill(t *testing.T) {
	const reply = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\\n\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" \\nNext\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" \\n\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name, prefix string
		sent         any // the trailing assistant content sent; nil: none
		want         string
	}{
		{"trailing whitespace repeated", "Done.\n \n", "Done.", "Done.\n \nNext \n"},
		{"no trailing whitespace", "Done.", "Done.", "Done.\n \nNext \n"},
		{"whitespace only", "\n", nil, "\n \nNext \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, ch := capture(t, reply)
			r := AnthropicRoute("claude", AnthropicRequest{BaseURL: ts.URL, Model: "c", Messages: []Message{{Role: "user", Content: "hi"}}, Prefill: true})
			if !r.Continues {
				t.Fatal("Prefill route does not Continue")
			}
			src, err := r.Open(t.Context(), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: tc.prefix})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString(tc.prefix)
			for src.Next() {
				s, _ := AnthropicText(src.Current())
				b.WriteString(s)
			}
			if src.Err() != nil {
				t.Fatal(src.Err())
			}
			msgs, _ := (<-ch).body["messages"].([]any)
			var sent any
			if len(msgs) == 2 {
				sent = msgs[1].(map[string]any)["content"]
			}
			if sent != tc.sent {
				t.Fatalf("prefill sent %q, want %q (messages %v)", sent, tc.sent, msgs)
			}
			if b.String() != tc.want {
				t.Fatalf("caller reads %q, want %q", b.String(), tc.want)
			}
		})
	}
}

// TestRelabel: a continuation's OpenAI chunk takes the answer's id and
// creation time and keeps its model; a comment is left alone. An
// Anthropic block event moves by the answer's block; an event without a
// block, or an answer item without one, moves nothing.
func TestRelabel(t *testing.T) {
	answer := ChatChunk{ID: "chatcmpl-1", Created: 100, Model: "a"}
	got := ChatRelabel(answer, ChatChunk{ID: "chatcmpl-2", Created: 200, Model: "b", Choices: []ChatChoice{{Delta: ChatDelta{Content: "x"}}}})
	if got.ID != "chatcmpl-1" || got.Created != 100 || got.Model != "b" || got.Choices[0].Delta.Content != "x" {
		t.Fatalf("ChatRelabel: %+v", got)
	}
	if got := ChatRelabel(answer, ChatChunk{IsComment: true}); got.ID != "" || got.Created != 0 {
		t.Fatalf("ChatRelabel of a comment: %+v", got)
	}
	block1 := AnthropicEvent{Type: "content_block_delta", Index: 1}
	for _, tc := range []struct {
		answer, e AnthropicEvent
		want      int
	}{
		{block1, AnthropicEvent{Type: "content_block_delta", Index: 0}, 1},
		{block1, AnthropicEvent{Type: "content_block_start", Index: 1}, 2},
		{block1, AnthropicEvent{Type: "content_block_stop", Index: 0}, 1},
		{block1, AnthropicEvent{Type: "message_delta"}, 0},
		{AnthropicEvent{Type: "message_start"}, AnthropicEvent{Type: "content_block_delta", Index: 1}, 1},
	} {
		if got := AnthropicRelabel(tc.answer, tc.e); got.Index != tc.want || got.Type != tc.e.Type {
			t.Errorf("AnthropicRelabel(%s %d, %s %d) = index %d, want %d", tc.answer.Type, tc.answer.Index, tc.e.Type, tc.e.Index, got.Index, tc.want)
		}
	}
}
