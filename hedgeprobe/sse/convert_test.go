package sse

import (
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// TestChatFromAnthropicKeepsKinds: every Anthropic event converts to a chat
// chunk of the same kind, so a mixed Prober[ChatChunk] hedges and watches
// an Anthropic route exactly as it would natively.
func TestChatFromAnthropicKeepsKinds(t *testing.T) {
	for _, tc := range []struct {
		name, event, data string
		check             func(ChatChunk) bool
	}{
		{"comment", "", "", func(c ChatChunk) bool { return c.IsComment }},
		{"ping", "ping", `{"type":"ping"}`, func(c ChatChunk) bool { return c.IsComment }},
		{"message_start", "message_start", `{"type":"message_start","message":{"id":"m1","model":"claude"}}`, func(c ChatChunk) bool {
			return c.ID == "m1" && c.Choices[0].Delta.Role == "assistant"
		}},
		{"text", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, func(c ChatChunk) bool {
			return c.Choices[0].Delta.Content == "Hi"
		}},
		{"empty text", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, func(ChatChunk) bool { return true }},
		{"thinking", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`, func(c ChatChunk) bool {
			return c.Choices[0].Delta.ReasoningContent == "hm"
		}},
		{"citation", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"cited_text":"x"}}}`, func(c ChatChunk) bool {
			return string(c.Choices[0].Delta.Annotations) == `[{"cited_text":"x"}]` && c.Choices[0].Delta.Content == ""
		}},
		{"tool start", "content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}`, func(c ChatChunk) bool {
			tc := c.Choices[0].Delta.ToolCalls[0]
			return tc.Index == 1 && tc.ID == "t1" && tc.Function.Name == "f"
		}},
		{"tool args", "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}`, func(c ChatChunk) bool {
			return c.Choices[0].Delta.ToolCalls[0].Function.Arguments == `{"a`
		}},
		{"empty tool args", "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`, func(ChatChunk) bool { return true }},
		{"signature", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`, func(ChatChunk) bool { return true }},
		{"text block start", "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, func(ChatChunk) bool { return true }},
		{"block stop", "content_block_stop", `{"type":"content_block_stop","index":0}`, func(ChatChunk) bool { return true }},
		{"message_delta", "message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":15}}`, func(c ChatChunk) bool {
			n, ok := OpenAITokens(c)
			return c.Choices[0].FinishReason == "length" && ok && n == 15
		}},
		{"message_stop", "message_stop", `{"type":"message_stop"}`, func(ChatChunk) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, _, err := decodeAnthropic("anthropic", Event{Type: tc.event, Data: []byte(tc.data), Comment: tc.event == ""})
			if err != nil {
				t.Fatal(err)
			}
			c := ChatFromAnthropic(e)
			want := ClassifyAnthropic(e)
			// Anthropic's Control events with nothing to carry become empty
			// chunks: Keepalive on the chat side, which is still not progress.
			if got := ClassifyOpenAI(c); got != want && !(want == hedgeprobe.Control && got == hedgeprobe.Keepalive && len(c.Choices) == 0 && c.Usage == nil) {
				t.Fatalf("kind %s, want %s (%+v)", got, want, c)
			}
			if !tc.check(c) {
				t.Fatalf("chunk %+v", c)
			}
		})
	}
}

// TestChatFromAnthropicInputTokens: the usage chunk's prompt_tokens count
// the cache's reads and writes in, as OpenAI's do; on AnthropicChatRoute
// they are message_start's, also when message_delta reports a part of them
// (here input_tokens without the cache's counts). (The usage chunk said
// prompt_tokens 0, and OpenAIItems put gen_ai.usage.input_tokens=0 on the
// span.)
func TestChatFromAnthropicInputTokens(t *testing.T) {
	d := ChatFromAnthropic(AnthropicEvent{Type: "message_delta", Delta: &AnthropicDelta{StopReason: "end_turn"},
		Usage: &AnthropicUsage{InputTokens: 10, CacheReadInputTokens: 30, CacheCreationInputTokens: 2, OutputTokens: 3}})
	if n, ok := OpenAIItems.InputTokens(d); !ok || n != 42 || d.Usage.TotalTokens != 45 {
		t.Errorf("message_delta with input tokens: %d, %v; usage %+v", n, ok, d.Usage)
	}
	src := &chatFromAnthropic{Source: &eventList{events: []AnthropicEvent{
		{Type: "message_start", Message: &AnthropicMessage{ID: "m", Usage: AnthropicUsage{InputTokens: 10, CacheCreationInputTokens: 5, OutputTokens: 1}}},
		{Type: "message_delta", Delta: &AnthropicDelta{StopReason: "end_turn"}, Usage: &AnthropicUsage{InputTokens: 10, OutputTokens: 7}},
	}}}
	var got []int64
	for src.Next() {
		if n, ok := OpenAIItems.InputTokens(src.Current()); ok {
			got = append(got, n, src.Current().Usage.TotalTokens)
		}
	}
	if len(got) != 2 || got[0] != 15 || got[1] != 22 {
		t.Errorf("input tokens and total reported %v, want [15 22] once, on the usage chunk", got)
	}
}

// eventList is a Source of the events given.
type eventList struct {
	events []AnthropicEvent
	i      int
}

func (l *eventList) Next() bool              { l.i++; return l.i <= len(l.events) }
func (l *eventList) Current() AnthropicEvent { return l.events[l.i-1] }
func (l *eventList) Err() error              { return nil }
func (l *eventList) Close() error            { return nil }
