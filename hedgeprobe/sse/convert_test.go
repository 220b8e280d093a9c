package sse

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

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
		{"null citation", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":null}}`, func(c ChatChunk) bool {
			return len(c.Choices) == 0 || len(c.Choices[0].Delta.Annotations) == 0
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
		{"block stop", "content_block_stop", `{"type":"content_block_stop","index":0}`, func(c ChatChunk) bool { return c.BlockEnd && len(c.Choices) == 0 }},
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
			// chunks: Keepalive on the chat side, which is still not progress
			// — but for a block's end, which closes an answer's text for
			// resume (BlockEnd).
			if got := ClassifyOpenAI(c); got != want && !(want == hedgeprobe.Control && got == hedgeprobe.Keepalive && len(c.Choices) == 0 && c.Usage == nil && tc.event != "content_block_stop") {
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

// TestAnthropicChatRouteIDsAndToolCalls: AnthropicChatRoute's chunks
// carry message_start's id and model on every chunk that carries
// something, as an OpenAI stream's do (an accumulator that checks ids,
// such as openai-go's, refuses a chunk of another id), and number tool
// calls 0, 1, … among tool calls, not by content block: after a text
// block, a first tool call at index 1 would leave an accumulator an
// empty call at 0.
func TestAnthropicChatRouteIDsAndToolCalls(t *testing.T) {
	src := &chatFromAnthropic{Source: &eventList{events: []AnthropicEvent{
		{Type: "message_start", Message: &AnthropicMessage{ID: "msg_1", Model: "claude-x", Usage: AnthropicUsage{InputTokens: 3}}},
		{Type: "content_block_start", Index: 0, ContentBlock: &AnthropicContentBlock{Type: "text"}},
		{Type: "content_block_delta", Index: 0, Delta: &AnthropicDelta{Type: "text_delta", Text: "Let me look."}},
		{Type: "content_block_stop", Index: 0},
		{Type: "content_block_start", Index: 1, ContentBlock: &AnthropicContentBlock{Type: "tool_use", ID: "toolu_a", Name: "f"}},
		{Type: "content_block_delta", Index: 1, Delta: &AnthropicDelta{Type: "input_json_delta", PartialJSON: `{"a":1}`}},
		{Type: "content_block_stop", Index: 1},
		{Type: "content_block_start", Index: 2, ContentBlock: &AnthropicContentBlock{Type: "tool_use", ID: "toolu_b", Name: "g"}},
		{Type: "content_block_delta", Index: 2, Delta: &AnthropicDelta{Type: "input_json_delta", PartialJSON: `{}`}},
		{Type: "message_delta", Delta: &AnthropicDelta{StopReason: "tool_use"}, Usage: &AnthropicUsage{OutputTokens: 9}},
		{Type: "message_stop"},
	}}}
	var calls []string
	for i := 0; src.Next(); i++ {
		c := src.Current()
		carries := len(c.Choices) > 0 || c.Usage != nil
		if carries && (c.ID != "msg_1" || c.Model != "claude-x") {
			t.Errorf("chunk %d: id %q model %q, want message_start's", i, c.ID, c.Model)
		}
		if !carries && c.ID != "" {
			t.Errorf("chunk %d (empty) has id %q: it must stay a keepalive", i, c.ID)
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				calls = append(calls, fmt.Sprintf("%d:%s%s", tc.Index, tc.Function.Name, tc.Function.Arguments))
			}
		}
	}
	if got := fmt.Sprint(calls); got != `[0:f 0:{"a":1} 1:g 1:{}]` {
		t.Errorf("tool call fragments %s, want indexes 0 and 1", got)
	}
}

// TestAnthropicChatRouteBlockEndCloses: on AnthropicChatRoute as on
// AnthropicRoute, a stream silent after its text block's end is not
// resumed — a continuation could follow the answer's end — and the
// watchdog ends the call; one silent inside the block is resumed with the
// delivered text. (The block's end came out as a Keepalive chunk, and the
// call was resumed.)
func TestAnthropicChatRouteBlockEndCloses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		blockEnd bool
		resumed  bool
	}{{"inside the block", false, true}, {"after the block's end", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				events := []AnthropicEvent{
					{Type: "message_start", Message: &AnthropicMessage{ID: "m", Model: "claude"}},
					{Type: "content_block_start", ContentBlock: &AnthropicContentBlock{Type: "text"}},
					{Type: "content_block_delta", Delta: &AnthropicDelta{Type: "text_delta", Text: "Hello."}},
				}
				if tc.blockEnd {
					events = append(events, AnthropicEvent{Type: "content_block_stop"})
				}
				var prefixes []string
				route := func(name string, events []AnthropicEvent) hedgeprobe.Route[ChatChunk] {
					return hedgeprobe.Route[ChatChunk]{Name: name, Continues: true,
						Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[ChatChunk], error) {
							if a.Trigger == hedgeprobe.TriggerResume {
								prefixes = append(prefixes, a.Prefix)
								// The continuation ends.
								return &chatFromAnthropic{Source: &eventList{events: events}}, nil
							}
							return &chatFromAnthropic{Source: &silentAfter{eventList: eventList{events: events}, ctx: ctx}}, nil
						}}
				}
				more := []AnthropicEvent{
					{Type: "message_start", Message: &AnthropicMessage{ID: "m2", Model: "claude"}},
					{Type: "content_block_start", ContentBlock: &AnthropicContentBlock{Type: "text"}},
					{Type: "content_block_delta", Delta: &AnthropicDelta{Type: "text_delta", Text: " More."}},
					{Type: "content_block_stop"},
					{Type: "message_delta", Delta: &AnthropicDelta{StopReason: "end_turn"}},
					{Type: "message_stop"},
				}
				p, err := hedgeprobe.New(hedgeprobe.Config{HedgeAfter: time.Hour, ResumeAfter: time.Second, StallTimeout: 3 * time.Second}, OpenAIItems)
				if err != nil {
					t.Fatal(err)
				}
				s := p.Stream(t.Context(), route("a", events), route("b", more))
				text := ""
				for s.Next() {
					for _, c := range s.Current().Choices {
						text += c.Delta.Content
					}
				}
				_ = s.Close()
				if tc.resumed {
					if len(prefixes) != 1 || prefixes[0] != "Hello." || text != "Hello. More." || s.Err() != nil {
						t.Fatalf("resumed with %q, read %q, err %v; want one continuation of \"Hello.\"", prefixes, text, s.Err())
					}
					return
				}
				if len(prefixes) != 0 || !errors.Is(s.Err(), hedgeprobe.ErrStallTimeout) {
					t.Fatalf("resumed with %q, err %v; want no resume and the stall timeout", prefixes, s.Err())
				}
			})
		})
	}
}

// silentAfter is an eventList that falls silent after its events until
// its context ends.
type silentAfter struct {
	eventList
	ctx context.Context
}

func (l *silentAfter) Next() bool {
	if l.eventList.Next() {
		return true
	}
	<-l.ctx.Done()
	return false
}

func (l *silentAfter) Err() error { return l.ctx.Err() }

// TestBlockEndIsNoPartOfTheAnswer: a converted block end closes an answer
// (ChatOpening false, as AnthropicOpening has content_block_stop) and a
// continuation's keeps no id, as the answer's own do (ChatRelabel leaves
// it as it is).
func TestBlockEndIsNoPartOfTheAnswer(t *testing.T) {
	end := ChatFromAnthropic(AnthropicEvent{Type: "content_block_stop"})
	if ChatOpening(end) {
		t.Error("a block's end opens an answer")
	}
	answer := ChatChunk{ID: "m", Created: 7}
	if got := ChatRelabel(answer, end); got.ID != "" || got.Created != 0 || !got.BlockEnd {
		t.Errorf("relabelled block end %+v, want it as it was", got)
	}
}
