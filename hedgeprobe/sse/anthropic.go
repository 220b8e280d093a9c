package sse

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
)

// AnthropicEvent is one item of an Anthropic Messages stream: message_start,
// content_block_start, content_block_delta, content_block_stop,
// message_delta, message_stop, ping — or a keepalive comment (IsComment).
// Fields not listed here are dropped.
type AnthropicEvent struct {
	// Type is the event's "type": "message_start", "ping"…; empty for a
	// comment.
	Type string `json:"type"`
	// Message is set on message_start.
	Message *AnthropicMessage `json:"message,omitempty"`
	// Index is the content block of content_block_* events.
	Index int `json:"index"`
	// ContentBlock is set on content_block_start.
	ContentBlock *AnthropicContentBlock `json:"content_block,omitempty"`
	// Delta is set on content_block_delta (Type "text_delta"…) and on
	// message_delta (StopReason).
	Delta *AnthropicDelta `json:"delta,omitempty"`
	// Usage is set on message_delta: the cumulative output tokens.
	Usage *AnthropicUsage `json:"usage,omitempty"`

	// Received is when the event's bytes arrived (monotonic).
	Received time.Time `json:"-"`
	// IsComment reports an SSE comment, carried as an item so that its
	// arrival is timed.
	IsComment bool `json:"-"`
}

// AnthropicMessage is the message object of message_start.
type AnthropicMessage struct {
	ID    string         `json:"id"`
	Type  string         `json:"type"`
	Role  string         `json:"role"`
	Model string         `json:"model"`
	Usage AnthropicUsage `json:"usage"`
}

// AnthropicContentBlock is the block opened by content_block_start.
type AnthropicContentBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Thinking string          `json:"thinking,omitempty"`
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// AnthropicDelta is the delta of content_block_delta or message_delta.
type AnthropicDelta struct {
	// Type is "text_delta", "thinking_delta", "input_json_delta",
	// "citations_delta" or "signature_delta"; empty on message_delta.
	Type         string          `json:"type,omitempty"`
	Text         string          `json:"text,omitempty"`
	Thinking     string          `json:"thinking,omitempty"`
	PartialJSON  string          `json:"partial_json,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Citation     json.RawMessage `json:"citation,omitempty"`
	StopReason   string          `json:"stop_reason,omitempty"`
	StopSequence string          `json:"stop_sequence,omitempty"`
}

// AnthropicUsage is the token usage of a message.
type AnthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
}

// ClassifyAnthropic is the hedgeprobe.Classifier of Anthropic events,
// with the rule the SDK adapters share: content_block_delta with a
// non-empty text_delta, thinking_delta or input_json_delta, or a
// citations_delta with a citation, is Content, and so is a
// content_block_start that opens a tool_use block with its name (the
// counterpart of an OpenAI tool-call name fragment) or carries text; ping,
// a comment and an empty delta are Keepalive; every other event is
// Control.
func ClassifyAnthropic(e AnthropicEvent) hedgeprobe.Kind {
	if e.IsComment {
		return hedgeprobe.Keepalive
	}
	p := classify.AnthropicParts{Type: e.Type, NoDelta: e.Delta == nil}
	if d := e.Delta; d != nil {
		p.DeltaType, p.DeltaText, p.DeltaThinking, p.DeltaPartialJSON = d.Type, d.Text, d.Thinking, d.PartialJSON
		p.DeltaCitation = hasCitation(d.Citation)
	}
	if b := e.ContentBlock; b != nil {
		p.BlockType, p.BlockText, p.BlockThinking, p.BlockName = b.Type, b.Text, b.Thinking, b.Name
	}
	return classify.Anthropic(p)
}

// AnthropicTokens is the hedgeprobe.TokenCount of Anthropic events:
// usage.output_tokens of message_delta (cumulative, so the last one wins).
func AnthropicTokens(e AnthropicEvent) (int64, bool) {
	if e.Type != "message_delta" || e.Usage == nil {
		return 0, false
	}
	return e.Usage.OutputTokens, true
}

// anthropicInputTokens reads the input tokens of message_start. Those of
// message_delta's cumulative usage are not read: the API may send them in
// part (input_tokens without the cache's counts, or null), and the part
// would replace the whole. AnthropicUsage cannot tell a count left out
// from 0, and no prompt has no token: 0 is read as not reported.
func anthropicInputTokens(e AnthropicEvent) (int64, bool) {
	if e.Type != "message_start" || e.Message == nil {
		return 0, false
	}
	n := e.Message.Usage.inputTokens()
	return n, n > 0
}

// inputTokens is input_tokens plus the cache's reads and writes, which
// Anthropic counts apart and the GenAI conventions (and OpenAI's
// prompt_tokens) count in.
func (u *AnthropicUsage) inputTokens() int64 {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
}

// anthropicFinishReasons reports the stop_reason of message_delta, for
// the one choice.
func anthropicFinishReasons(e AnthropicEvent, finished func(int, string)) {
	if e.Type == "message_delta" && e.Delta != nil {
		finished(0, e.Delta.StopReason)
	}
}

// decodeAnthropic turns one SSE event into an AnthropicEvent: message_stop
// is delivered and ends the stream, "error" is an *UpstreamError.
func decodeAnthropic(provider string, ev Event) (e AnthropicEvent, emit, end bool, err error) {
	if ev.Comment {
		return AnthropicEvent{IsComment: true, Received: ev.Received}, true, false, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if ev.Type == "error" {
		return e, false, false, eventError(provider, data)
	}
	if len(data) == 0 {
		return AnthropicEvent{Type: "ping", Received: ev.Received}, ev.Type == "ping", false, nil
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return e, false, false, &ProtocolError{Provider: provider, Err: err}
	}
	if e.Type == "error" {
		return AnthropicEvent{}, false, false, payloadError(provider, data)
	}
	if e.Type == "" {
		e.Type = ev.Type
	}
	e.Received = ev.Received
	return e, true, e.Type == "message_stop", nil
}

// hasCitation reports whether a delta's citation is there: present and
// not null.
func hasCitation(c json.RawMessage) bool {
	c = bytes.TrimSpace(c)
	return len(c) > 0 && !bytes.Equal(c, []byte("null"))
}
