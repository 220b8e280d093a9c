package sse

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
)

// ChatChunk is one item of an OpenAI-compatible chat-completions stream: a
// "chat.completion.chunk" object, or a keepalive comment (IsComment).
// Fields not listed here are dropped.
type ChatChunk struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []ChatChoice `json:"choices"`
	// Usage is set on the usage chunk that stream_options.include_usage
	// adds at the end (empty Choices); nil elsewhere.
	Usage *ChatUsage `json:"usage,omitempty"`

	// Received is when the chunk's bytes arrived (monotonic).
	Received time.Time `json:"-"`
	// IsComment reports an SSE comment (": keepalive"), carried as an item
	// so that its arrival is timed; every other field is zero.
	IsComment bool `json:"-"`
	// BlockEnd marks the chunk ChatFromAnthropic makes of a
	// content_block_stop: the end of one part of an answer, which an
	// OpenAI stream has no chunk for. ClassifyOpenAI calls it Control, as
	// ClassifyAnthropic does the event, so that a stream silent after its
	// text block's end is not resumed (a continuation could follow the
	// answer's end) on AnthropicChatRoute as on AnthropicRoute. Every
	// other field but Object and Received is zero.
	BlockEnd bool `json:"-"`
}

// ChatChoice is one choice of a chunk.
type ChatChoice struct {
	Index int       `json:"index"`
	Delta ChatDelta `json:"delta"`
	// FinishReason is "stop", "length", "tool_calls", "content_filter"… on
	// the choice's last chunk, empty before.
	FinishReason string `json:"finish_reason,omitempty"`
}

// ChatDelta is the increment a chunk carries for one choice.
type ChatDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
	// ReasoningContent is DeepSeek's and vLLM's reasoning field; Reasoning
	// is OpenRouter's and Ollama's.
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	Reasoning        string         `json:"reasoning,omitempty"`
	Refusal          string         `json:"refusal,omitempty"`
	ToolCalls        []ChatToolCall `json:"tool_calls,omitempty"`
	// FunctionCall is the legacy single function call.
	FunctionCall *ChatFunction `json:"function_call,omitempty"`
	// Annotations are citations (OpenAI's url_citation, Anthropic's
	// citations through ChatFromAnthropic), as raw JSON.
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// ChatToolCall is a fragment of a tool call; Index ties fragments together.
type ChatToolCall struct {
	Index    int          `json:"index"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function ChatFunction `json:"function"`
}

// ChatFunction is a fragment of a function name and its JSON arguments.
type ChatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ChatUsage is the token usage of the whole completion.
type ChatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// ClassifyOpenAI is the hedgeprobe.Classifier of OpenAI-compatible chunks,
// with the rule the SDK adapters share: a non-empty content,
// reasoning_content, reasoning or refusal delta, a tool-call (or
// function-call) name or arguments fragment, or annotations (citations),
// is Content; a role, a finish reason or usage without content is Control;
// a comment or a chunk with nothing in it is Keepalive (but for a
// converted Anthropic block end, BlockEnd: Control).
func ClassifyOpenAI(c ChatChunk) hedgeprobe.Kind {
	switch {
	case c.IsComment:
		return hedgeprobe.Keepalive
	case c.BlockEnd:
		return hedgeprobe.Control
	}
	return classify.Chat(c.Usage != nil, c.Choices, chatChoiceParts)
}

// chatChoiceParts describes a choice of a ChatChunk for classify.Chat.
func chatChoiceParts(ch *ChatChoice) classify.ChatParts {
	d := &ch.Delta
	return classify.ChatParts{
		Content:      d.Content != "",
		Reasoning:    d.ReasoningContent != "" || d.Reasoning != "",
		Refusal:      d.Refusal != "",
		ToolCallText: toolCallText(d.ToolCalls),
		ToolCalls:    len(d.ToolCalls) > 0,
		FunctionCall: d.FunctionCall != nil && (d.FunctionCall.Name != "" || d.FunctionCall.Arguments != ""),
		Annotations:  classify.NonEmptyJSONArray(d.Annotations),
		Role:         d.Role != "",
		FinishReason: ch.FinishReason != "",
	}
}

// toolCallText reports a tool-call fragment with a name or arguments.
func toolCallText(tcs []ChatToolCall) bool {
	for i := range tcs {
		if f := &tcs[i].Function; f.Name != "" || f.Arguments != "" {
			return true
		}
	}
	return false
}

// OpenAITokens is the hedgeprobe.TokenCount of OpenAI-compatible chunks:
// usage.completion_tokens of the usage chunk.
func OpenAITokens(c ChatChunk) (int64, bool) {
	if c.Usage == nil {
		return 0, false
	}
	return c.Usage.CompletionTokens, true
}

// openAIInputTokens reads usage.prompt_tokens of the usage chunk (the
// cached tokens are part of it).
func openAIInputTokens(c ChatChunk) (int64, bool) {
	if c.Usage == nil {
		return 0, false
	}
	return c.Usage.PromptTokens, true
}

// openAIFinishReasons reports the finish_reason of each choice of c (an
// empty one, of a choice that has not ended, is ignored).
func openAIFinishReasons(c ChatChunk, finished func(int, string)) {
	for i := range c.Choices {
		finished(c.Choices[i].Index, c.Choices[i].FinishReason)
	}
}

var doneData = []byte("[DONE]")

// decodeOpenAI turns one SSE event into a chunk: [DONE] ends the stream, an
// {"error": …} payload or an event typed "error" is an *UpstreamError.
func decodeOpenAI(provider string, ev Event) (c ChatChunk, emit, end bool, err error) {
	if ev.Comment {
		return ChatChunk{IsComment: true, Received: ev.Received}, true, false, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneData) {
		return c, false, true, nil
	}
	if ev.Type == "error" {
		// An error whatever its data's shape: a server that names the
		// event says what it is.
		return c, false, false, eventError(provider, data)
	}
	if len(data) == 0 {
		return ChatChunk{Received: ev.Received}, true, false, nil
	}
	var w struct {
		ChatChunk
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return c, false, false, &ProtocolError{Provider: provider, Err: err}
	}
	if len(w.Error) > 0 && string(w.Error) != "null" {
		return c, false, false, payloadError(provider, data)
	}
	w.ChatChunk.Received = ev.Received
	return w.ChatChunk, true, false, nil
}
