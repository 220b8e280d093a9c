package sse

import (
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

func TestClassifyOpenAI(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string // "" with comment true is a comment
		want hedgeprobe.Kind
	}{
		{"comment", "", hedgeprobe.Keepalive},
		{"role only", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, hedgeprobe.Control},
		{"role with null content", `{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}`, hedgeprobe.Control},
		{"finish only", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, hedgeprobe.Control},
		{"usage only", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}`, hedgeprobe.Control},
		{"empty delta", `{"choices":[{"index":0,"delta":{}}]}`, hedgeprobe.Keepalive},
		{"empty content", `{"choices":[{"index":0,"delta":{"content":""}}]}`, hedgeprobe.Keepalive},
		{"no choices", `{"id":"x","choices":[]}`, hedgeprobe.Keepalive},
		{"empty object", `{}`, hedgeprobe.Keepalive},
		{"content", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, hedgeprobe.Content},
		{"whitespace content", `{"choices":[{"index":0,"delta":{"content":" "}}]}`, hedgeprobe.Content},
		{"role and content", `{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}`, hedgeprobe.Content},
		{"reasoning_content", `{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}`, hedgeprobe.Content},
		{"reasoning", `{"choices":[{"index":0,"delta":{"reasoning":"think"}}]}`, hedgeprobe.Content},
		{"refusal", `{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, hedgeprobe.Content},
		{"tool call name", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":""}}]}}]}`, hedgeprobe.Content},
		{"tool call arguments", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}`, hedgeprobe.Content},
		{"tool call id only", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{}}]}}]}`, hedgeprobe.Control},
		{"legacy function call", `{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{}"}}}]}`, hedgeprobe.Content},
		{"annotations", `{"choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation"}]}}]}`, hedgeprobe.Content},
		{"empty annotations", `{"choices":[{"index":0,"delta":{"annotations":[]}}]}`, hedgeprobe.Keepalive},
		{"content in second choice", `{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{"content":"x"}}]}`, hedgeprobe.Content},
		{"finish with usage", `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"completion_tokens":1}}`, hedgeprobe.Control},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := Event{Type: "message", Data: []byte(tc.data), Comment: tc.data == ""}
			c, emit, end, err := decodeOpenAI("openai", ev)
			if err != nil || !emit || end {
				t.Fatalf("decode: emit %v end %v err %v", emit, end, err)
			}
			if got := ClassifyOpenAI(c); got != tc.want {
				t.Fatalf("ClassifyOpenAI = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOpenAITokens(t *testing.T) {
	c, _, _, _ := decodeOpenAI("openai", Event{Data: []byte(`{"choices":[],"usage":{"completion_tokens":42}}`)})
	if n, ok := OpenAITokens(c); !ok || n != 42 {
		t.Fatalf("tokens %d %v", n, ok)
	}
	c, _, _, _ = decodeOpenAI("openai", Event{Data: []byte(`{"choices":[{"delta":{"content":"x"}}]}`)})
	if _, ok := OpenAITokens(c); ok {
		t.Fatal("tokens on a content chunk")
	}
}

func TestClassifyAnthropic(t *testing.T) {
	for _, tc := range []struct {
		name, event, data string
		want              hedgeprobe.Kind
	}{
		{"comment", "", "", hedgeprobe.Keepalive},
		{"ping", "ping", `{"type": "ping"}`, hedgeprobe.Keepalive},
		{"message_start", "message_start", `{"type":"message_start","message":{"id":"m","role":"assistant","model":"c","usage":{"input_tokens":5,"output_tokens":1}}}`, hedgeprobe.Control},
		{"text block start", "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, hedgeprobe.Control},
		{"tool_use block start", "content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"get_weather","input":{}}}`, hedgeprobe.Content},
		{"text delta", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, hedgeprobe.Content},
		{"empty text delta", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, hedgeprobe.Keepalive},
		{"thinking delta", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`, hedgeprobe.Content},
		{"citations delta", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x"}}}`, hedgeprobe.Content},
		// Outside review: a stream of these held off the stall watchdog.
		{"citations delta, citation null", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":null}}`, hedgeprobe.Keepalive},
		{"citations delta, no citation", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}`, hedgeprobe.Keepalive},
		{"input_json delta", "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"loc"}}`, hedgeprobe.Content},
		{"empty input_json delta", "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`, hedgeprobe.Keepalive},
		{"signature delta", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}`, hedgeprobe.Control},
		{"delta absent", "content_block_delta", `{"type":"content_block_delta","index":0}`, hedgeprobe.Keepalive},
		{"block stop", "content_block_stop", `{"type":"content_block_stop","index":0}`, hedgeprobe.Control},
		{"message_delta", "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`, hedgeprobe.Control},
		{"message_stop", "message_stop", `{"type":"message_stop"}`, hedgeprobe.Control},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := Event{Type: tc.event, Data: []byte(tc.data), Comment: tc.event == ""}
			e, emit, _, err := decodeAnthropic("anthropic", ev)
			if err != nil || !emit {
				t.Fatalf("decode: emit %v err %v", emit, err)
			}
			if got := ClassifyAnthropic(e); got != tc.want {
				t.Fatalf("ClassifyAnthropic = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAnthropicTokens(t *testing.T) {
	e, _, _, _ := decodeAnthropic("anthropic", Event{Type: "message_delta", Data: []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`)})
	if n, ok := AnthropicTokens(e); !ok || n != 15 {
		t.Fatalf("tokens %d %v", n, ok)
	}
	e, _, _, _ = decodeAnthropic("anthropic", Event{Type: "message_start", Data: []byte(`{"type":"message_start","message":{"usage":{"output_tokens":1}}}`)})
	if _, ok := AnthropicTokens(e); ok {
		t.Fatal("tokens on message_start")
	}
}

// TestClassifyDoesNotAllocate walks every branch of both rules on chunks
// that reach their last choice or field.
func TestClassifyDoesNotAllocate(t *testing.T) {
	c, _, _, _ := decodeOpenAI("openai", Event{Data: []byte(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"function":{}}]}},{"index":1,"delta":{"annotations":[{"type":"url_citation"}]}}],"usage":{"completion_tokens":1}}`)})
	e, _, _, _ := decodeAnthropic("anthropic", Event{Data: []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`)})
	if ClassifyOpenAI(c) != hedgeprobe.Content || ClassifyAnthropic(e) != hedgeprobe.Content {
		t.Fatal("test chunks are not content")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ClassifyOpenAI(c), ClassifyAnthropic(e) }); n != 0 {
		t.Fatalf("%v allocations per classification", n)
	}
}

// FuzzDecode feeds arbitrary events to both decoders and everything that
// reads what they return: no panic, errors of the documented types only,
// and answer text (what a resume would continue) always classified as
// content — else a resume could continue text the stall watchdog never
// saw arrive.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
		`{"choices":[{"index":0,"delta":{"refusal":"no"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`,
		`{"error":{"type":"server_error","code":503,"message":"overloaded"}}`,
		`{"error":"text"}`, `[DONE]`, ``, `{}`, `nope`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
		`{"type":"message_stop"}`, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`,
	} {
		f.Add("", []byte(s), false)
	}
	f.Add("ping", []byte(""), false)
	f.Add("error", []byte(`{"error":{"message":"x"}}`), false)
	f.Add("", []byte("keepalive"), true)
	f.Fuzz(func(t *testing.T, typ string, data []byte, comment bool) {
		ev := Event{Type: typ, Data: data, Comment: comment}
		checkErr := func(err error, emit, end bool) {
			t.Helper()
			if err == nil {
				return
			}
			if emit || end {
				t.Fatalf("error %v with emit %v end %v", err, emit, end)
			}
			switch e := err.(type) {
			case *ProtocolError:
			case *UpstreamError:
				if !e.MidStream || e.StatusCode != 0 || len(e.Body) > 4<<10 {
					t.Fatalf("payload error %+v", e)
				}
			default:
				t.Fatalf("error of type %T: %v", err, err)
			}
			_ = err.Error()
		}

		// checkKind: a comment is a keepalive, and answer text is content.
		checkKind := func(k hedgeprobe.Kind, text string) {
			t.Helper()
			if comment && k != hedgeprobe.Keepalive {
				t.Fatalf("comment classified %v", k)
			}
			if text != "" && k != hedgeprobe.Content {
				t.Fatalf("text %q in an item classified %v", text, k)
			}
		}

		c, emit, end, err := decodeOpenAI("openai", ev)
		checkErr(err, emit, end)
		if end && emit {
			t.Fatal("[DONE] emitted")
		}
		if emit {
			text, _ := ChatText(c)
			checkKind(ClassifyOpenAI(c), text)
			OpenAITokens(c)
			ChatRelabel(c, c)
		}

		e, emit, end, err := decodeAnthropic("anthropic", ev)
		checkErr(err, emit, end)
		if end && e.Type != "message_stop" {
			t.Fatalf("%q ends the stream", e.Type)
		}
		if emit {
			text, _ := AnthropicText(e)
			checkKind(ClassifyAnthropic(e), text)
			AnthropicTokens(e)
			AnthropicRelabel(e, e)
			if text != "" {
				if ct, _ := ChatText(ChatFromAnthropic(e)); ct != text {
					t.Fatalf("converted text %q, want %q", ct, text)
				}
			}
		}
	})
}
