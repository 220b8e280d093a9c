package sse

import (
	"context"
	"slices"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
)

// AnthropicChatRoute is AnthropicRoute with its events converted to
// ChatChunk (ChatFromAnthropic), so that an Anthropic upstream can hedge an
// OpenAI-compatible one in a single hedgeprobe.Prober[ChatChunk]
// (heterogeneous hedging). Events that carry nothing for a chat chunk
// (the start of a text block without text, message_stop) come out as
// empty chunks, which ClassifyOpenAI calls Keepalive; content_block_stop
// comes out as an empty chunk marked BlockEnd, which it calls Control. As
// in an OpenAI stream, every other chunk carries the response's id and
// model (message_start's), so an accumulator that checks ids takes them
// all, and a tool call's Index counts the answer's tool calls (0, 1, …),
// not its content blocks.
func AnthropicChatRoute(name string, req AnthropicRequest) hedgeprobe.Route[ChatChunk] {
	r := AnthropicRoute(name, req)
	return hedgeprobe.Route[ChatChunk]{
		Name:          r.Name,
		Provider:      r.Provider,
		Model:         r.Model,
		ServerAddress: r.ServerAddress,
		ServerPort:    r.ServerPort,
		Continues:     r.Continues,
		Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[ChatChunk], error) {
			src, err := r.Open(ctx, a)
			if err != nil {
				return nil, err
			}
			return &chatFromAnthropic{Source: src}, nil
		},
	}
}

type chatFromAnthropic struct {
	hedgeprobe.Source[AnthropicEvent]
	// input is message_start's input tokens, cache included: the usage
	// chunk made of message_delta carries them.
	input int64
	// id and model are message_start's, for every chunk.
	id, model string
	// tools are the content blocks of the tool calls so far, in order: a
	// tool call's index is its block's position here.
	tools []int
}

func (c *chatFromAnthropic) Current() ChatChunk {
	e := c.Source.Current()
	if n, ok := anthropicInputTokens(e); ok {
		c.input = n
	}
	cc := ChatFromAnthropic(e)
	if e.Type == "message_start" {
		c.id, c.model = cc.ID, cc.Model
	}
	if cc.ID == "" && (len(cc.Choices) > 0 || cc.Usage != nil) {
		cc.ID, cc.Model = c.id, c.model
	}
	if len(cc.Choices) > 0 && len(cc.Choices[0].Delta.ToolCalls) > 0 {
		tc := &cc.Choices[0].Delta.ToolCalls[0] // ChatFromAnthropic's own
		i := slices.Index(c.tools, tc.Index)
		if i < 0 {
			i = len(c.tools)
			c.tools = append(c.tools, tc.Index)
		}
		tc.Index = i
	}
	if u := cc.Usage; u != nil && c.input > 0 {
		// message_start's count, whole: message_delta's may leave the
		// input or the cache's counts out (anthropicInputTokens).
		u.PromptTokens = c.input
		u.TotalTokens = c.input + u.CompletionTokens
	}
	return cc
}

// ChatFromAnthropic converts one Anthropic event to the chat chunk that
// carries the same thing, keeping its kind where a chat chunk has one (an
// event that carries nothing a chat chunk can — the start of a text block
// without text, message_stop — is an empty chunk, which ClassifyOpenAI
// calls Keepalive; content_block_stop is an empty chunk marked BlockEnd,
// which it calls Control, as the event is): message_start is a role chunk,
// text and thinking deltas are content and reasoning_content, a tool_use
// block start and its input_json deltas are tool-call fragments (Index is
// the content block's), a citation is an annotation, message_delta is a finish reason (end_turn → stop,
// max_tokens → length, tool_use → tool_calls) with usage (prompt_tokens
// counting the cache's reads and writes in, as OpenAI's does; on
// AnthropicChatRoute, which sees both events, message_start's count, since
// message_delta may leave parts of it out), ping and comments are
// keepalive comments.
func ChatFromAnthropic(e AnthropicEvent) ChatChunk {
	c := ChatChunk{Object: "chat.completion.chunk", Received: e.Received}
	choice := func(d ChatDelta, finish string) {
		c.Choices = []ChatChoice{{Index: 0, Delta: d, FinishReason: finish}}
	}
	switch e.Type {
	case "", "ping":
		c.IsComment = true
	case "message_start":
		if e.Message != nil {
			c.ID, c.Model = e.Message.ID, e.Message.Model
		}
		choice(ChatDelta{Role: "assistant"}, "")
	case "content_block_start":
		if b := e.ContentBlock; b != nil {
			switch {
			case b.Name != "" && classify.AnthropicToolUse(b.Type):
				choice(ChatDelta{ToolCalls: []ChatToolCall{{Index: e.Index, ID: b.ID, Type: "function", Function: ChatFunction{Name: b.Name}}}}, "")
			case b.Text != "" || b.Thinking != "":
				choice(ChatDelta{Content: b.Text, ReasoningContent: b.Thinking}, "")
			}
		}
	case "content_block_delta":
		if d := e.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				choice(ChatDelta{Content: d.Text}, "")
			case "thinking_delta":
				choice(ChatDelta{ReasoningContent: d.Thinking}, "")
			case "input_json_delta":
				if d.PartialJSON == "" {
					break
				}
				choice(ChatDelta{ToolCalls: []ChatToolCall{{Index: e.Index, Function: ChatFunction{Arguments: d.PartialJSON}}}}, "")
			case "citations_delta":
				// A citation is content without text: it rides in
				// annotations, as OpenAI's url_citation does. None (absent,
				// null) is no content.
				if !hasCitation(d.Citation) {
					break
				}
				ann := make([]byte, 0, len(d.Citation)+2)
				ann = append(append(append(ann, '['), d.Citation...), ']')
				choice(ChatDelta{Annotations: ann}, "")
			}
		}
	case "content_block_stop":
		c.BlockEnd = true
	case "message_delta":
		finish := ""
		if e.Delta != nil {
			switch e.Delta.StopReason {
			case "end_turn", "stop_sequence", "pause_turn":
				finish = "stop"
			case "max_tokens":
				finish = "length"
			case "tool_use":
				finish = "tool_calls"
			case "refusal":
				finish = "content_filter"
			case "":
			default:
				finish = e.Delta.StopReason
			}
		}
		if finish != "" {
			choice(ChatDelta{}, finish)
		}
		if e.Usage != nil {
			in := e.Usage.inputTokens()
			c.Usage = &ChatUsage{PromptTokens: in, CompletionTokens: e.Usage.OutputTokens, TotalTokens: in + e.Usage.OutputTokens}
		}
	}
	return c
}
