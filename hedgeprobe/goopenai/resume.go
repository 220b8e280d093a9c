package goopenai

// Resuming an answer on another route (docs/design.md §2 rule 10): which
// chunks open and follow the answer, its text, a continuation's chunks
// relabelled as the answer's, and the continuation's messages.

import (
	"errors"
	"slices"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
)

// Follows is the hedgeprobe Items.Follows of go-openai chunks: a chunk
// with a tool-call or function-call fragment begins a call that follows
// the answer's text, so that a fragment before the continuation's first
// content (the call's id alone) reaches the caller.
func Follows(c Chunk) bool {
	return classify.ChatFollows(c.Choices, func(ch *openai.ChatCompletionStreamChoice) bool {
		return len(ch.Delta.ToolCalls) > 0 || ch.Delta.FunctionCall != nil
	})
}

// Opening is the hedgeprobe Items.Opening of go-openai chunks: a Control
// chunk that finishes no choice opens the answer when it carries a role or
// no usage (the role chunk).
func Opening(c Chunk) bool {
	return classify.ChatOpening(c.Usage != nil, c.Choices, func(ch *openai.ChatCompletionStreamChoice) (bool, bool) {
		return ch.FinishReason != "", ch.Delta.Role != ""
	})
}

// Relabel is the hedgeprobe Items.Relabel of go-openai chunks: a
// continuation's chunk takes the id and creation time of the answer it
// continues, as every chunk of one completion shares them (openai-go's
// ChatCompletionAccumulator refuses a chunk of another id). Its model
// stays the one that wrote it. A tapped keepalive (no id, no content) is
// left as it is: it is no part of the answer.
func Relabel(answer, c Chunk) Chunk {
	if c.ID != "" || Classify(c) != hedgeprobe.Keepalive {
		c.ID, c.Created = answer.ID, answer.Created
	}
	return c
}

// Text is the hedgeprobe Items.Text of go-openai chunks, with the rule of
// sse.ChatText (classify.ChatText): the content and refusal of choice 0
// (reasoning_content is no answer text), resumable unless the chunk
// carries a tool call, another choice or the finish reason.
func Text(c Chunk) (text string, resumable bool) {
	return classify.ChatText(c.Choices, func(ch *openai.ChatCompletionStreamChoice) classify.ChatTextParts {
		d := &ch.Delta
		return classify.ChatTextParts{Index: int64(ch.Index), Call: len(d.ToolCalls) > 0 || d.FunctionCall != nil,
			Content: d.Content, Refusal: d.Refusal, FinishReason: string(ch.FinishReason)}
	})
}

// continuation returns the messages of a resume attempt: msgs with a
// trailing assistant message carrying prefix or, when msgs already end in
// one (the caller's own prefill), that message with prefix after its text:
// the upstream continued it, so the delivered text follows it in the same
// message. msgs is not modified.
func continuation(msgs []openai.ChatCompletionMessage, prefix string) ([]openai.ChatCompletionMessage, error) {
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != openai.ChatMessageRoleAssistant {
		return append(slices.Clip(msgs), openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: prefix}), nil
	}
	m := msgs[n-1]
	if m.Refusal != "" || len(m.ToolCalls) > 0 || m.FunctionCall != nil {
		return nil, errNotText
	}
	// Text parts become one string: a chat template may join parts with
	// a separator, which would split the continued text.
	text := m.Content
	for _, p := range m.MultiContent {
		if p.Type != openai.ChatMessagePartTypeText {
			return nil, errNotText
		}
		text += p.Text
	}
	m.Content, m.MultiContent = text+prefix, nil
	return append(slices.Clone(msgs[:n-1]), m), nil
}

// errNotText: the caller's trailing assistant message holds more than
// text.
var errNotText = errors.New("the request ends in an assistant message with a refusal, tool calls or a non-text part, which cannot be continued")
