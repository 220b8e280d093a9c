package sse

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/prefill"
)

// Continuation says how an OpenAI-compatible upstream continues a partial
// answer (docs/design.md §2 rule 10): the route then has Continues set, and
// a resume attempt sends the delivered text as a trailing assistant
// message in the upstream's own way.
type Continuation uint8

const (
	// ContinueNone: the upstream cannot continue a partial answer
	// (OpenAI's own API has no prefill). The default.
	ContinueNone Continuation = iota
	// ContinueTrailingAssistant sends a trailing assistant message and
	// nothing else: llama.cpp's server and Ollama continue it (with a
	// template that leaves the last assistant message open).
	ContinueTrailingAssistant
	// ContinueFinalMessage adds "continue_final_message": true and
	// "add_generation_prompt": false to the body (vLLM, SGLang).
	ContinueFinalMessage
	// ContinuePrefix marks the trailing assistant message "prefix": true
	// (DeepSeek, whose answer is the continuation alone). On a route whose
	// provider is Mistral's it is ContinuePrefixEcho (ContinuationOf).
	ContinuePrefix
	// ContinuePrefixEcho is ContinuePrefix for an upstream whose answer
	// repeats the prefix before the continuation (Mistral: its own guide
	// reads the continuation as content[len(prefix):]). The repeat is
	// dropped from the answer's start, so the caller reads the delivered
	// text once; an answer that goes its own way before the whole prefix
	// is repeated keeps every byte (the part of the repeat held back
	// while it still matched reaches the caller with the chunk that broke
	// off, as one chunk), and one that ends while still repeating it
	// continues with nothing, as Mistral's content[len(prefix):] is empty.
	// A request that already ends in an assistant message (a prefill of
	// the caller's, which the first answer repeated too) is not continued
	// with it: the resume attempt fails with hedgeprobe.ErrCannotContinue.
	ContinuePrefixEcho
)

// ContinuationLimit is the output-token limit to ask a continuation for
// (max_tokens, max_completion_tokens) when the request asked for limit and
// prefixChunks content chunks came before it (hedgeprobe.Attempt's
// PrefixChunks): limit less those chunks, and at least 1. A continuation
// is a new request, and a server counts only what it generates against
// its limit, so asking for limit again would let the answer run past it
// by all that was delivered. The chunks stand for the tokens, which the
// caller does not know until the usage at the end: a text chunk carries
// at least one token as a rule, so the continuation is not asked for
// less than the limit leaves. With one token a chunk (as Ollama sends
// them, and most servers mostly) the whole answer stays within limit;
// where a chunk carries several, it can run past limit by the tokens
// beyond one a chunk. A limit of 0 or less (none set) is returned as it
// is. The routes of this module use it; a Route.Open of your own can too.
func ContinuationLimit(limit, prefixChunks int64) int64 {
	if limit <= 0 || prefixChunks <= 0 {
		return limit
	}
	return max(1, limit-prefixChunks)
}

// limitTokens sets the token limits body holds (max_tokens,
// max_completion_tokens, as Params may give them: any numeric type, or a
// json.Number) to ContinuationLimit's. A limit that is not a positive
// whole number as JSON writes it (a string, a fraction, an exponent, one
// past int64) is left as it is, for the upstream to judge.
func limitTokens(body map[string]any, prefixChunks int64) {
	for _, k := range [...]string{"max_tokens", "max_completion_tokens"} {
		v, ok := body[k]
		if !ok || v == nil {
			continue
		}
		n, ok := prefill.Number(v)
		if !ok {
			continue
		}
		if limit, err := n.Int64(); err == nil && limit > 0 {
			body[k] = ContinuationLimit(limit, prefixChunks)
		}
	}
}

// echoDropped returns the Source of a resume attempt on an upstream that
// repeats the prefix (ContinuePrefixEcho): the content of its first
// choice loses the repeat.
func echoDropped(s hedgeprobe.Source[ChatChunk], prefix string) hedgeprobe.Source[ChatChunk] {
	return &prefill.EchoDropped[ChatChunk]{Source: s, Echo: prefill.NewEcho(prefix),
		Text: func(c ChatChunk) string {
			if len(c.Choices) == 0 {
				return ""
			}
			return c.Choices[0].Delta.Content
		},
		WithText: func(c ChatChunk, text string) ChatChunk {
			c.Choices = slices.Clone(c.Choices) // the chunk's own stay as decoded
			c.Choices[0].Delta.Content = text
			return c
		}}
}

// OpenAIItems tells a hedgeprobe.Prober about ChatChunk: the classifier,
// the token counts, the response's model, id and finish reasons, and the
// answer text that a resume continues.
var OpenAIItems = hedgeprobe.Items[ChatChunk]{
	Classify:      ClassifyOpenAI,
	OutputTokens:  OpenAITokens,
	ResponseModel: func(c ChatChunk) (string, bool) { return c.Model, c.Model != "" },
	ResponseID:    func(c ChatChunk) (string, bool) { return c.ID, c.ID != "" },
	InputTokens:   openAIInputTokens,
	FinishReasons: openAIFinishReasons,
	Text:          ChatText,
	Relabel:       ChatRelabel,
	Follows:       ChatFollows,
	Opening:       ChatOpening,
}

// AnthropicItems tells a hedgeprobe.Prober about AnthropicEvent, as
// OpenAIItems about ChatChunk.
var AnthropicItems = hedgeprobe.Items[AnthropicEvent]{
	Classify:     ClassifyAnthropic,
	OutputTokens: AnthropicTokens,
	ResponseModel: func(e AnthropicEvent) (string, bool) {
		if e.Message != nil && e.Message.Model != "" {
			return e.Message.Model, true
		}
		return "", false
	},
	ResponseID: func(e AnthropicEvent) (string, bool) {
		if e.Message != nil && e.Message.ID != "" {
			return e.Message.ID, true
		}
		return "", false
	},
	InputTokens:   anthropicInputTokens,
	FinishReasons: anthropicFinishReasons,
	Text:          AnthropicText,
	Relabel:       AnthropicRelabel,
	Follows:       AnthropicFollows,
	RelabelAfter:  AnthropicRelabelAfter,
	Opening:       AnthropicOpening,
}

// ChatRelabel is the hedgeprobe Items.Relabel of ChatChunk: a
// continuation's chunk takes the id and creation time of the answer it
// continues, as every chunk of one completion shares them (an accumulator
// such as openai-go's refuses a chunk of another id). Its model stays the
// one that wrote it. A comment, a block's end (BlockEnd: it carries no id
// on AnthropicChatRoute, the answer's own included) or another keepalive
// without an id, is left as it is: it is no part of the answer.
func ChatRelabel(answer, c ChatChunk) ChatChunk {
	if !c.IsComment && !c.BlockEnd && (c.ID != "" || ClassifyOpenAI(c) != hedgeprobe.Keepalive) {
		c.ID, c.Created = answer.ID, answer.Created
	}
	return c
}

// AnthropicRelabel is the hedgeprobe Items.Relabel of AnthropicEvent: a
// continuation numbers its content blocks from 0, and its block j is the
// answer's block answer.Index + j (the continued text block is rarely
// block 0 after thinking or citations).
func AnthropicRelabel(answer, e AnthropicEvent) AnthropicEvent {
	if anthropicBlockEvent(answer.Type) && anthropicBlockEvent(e.Type) {
		e.Index += answer.Index
	}
	return e
}

// AnthropicRelabelAfter is the hedgeprobe Items.RelabelAfter of
// AnthropicEvent: a continuation that begins with a block other than text
// (AnthropicFollows) follows the answer's block answer.Index, so its
// block j becomes block answer.Index + 1 + j. The answer's text block is then left without its
// content_block_stop, which the stalled upstream never sent.
func AnthropicRelabelAfter(answer, e AnthropicEvent) AnthropicEvent {
	if anthropicBlockEvent(answer.Type) && anthropicBlockEvent(e.Type) {
		e.Index += answer.Index + 1
	}
	return e
}

// anthropicBlockEvent reports an event type that carries a content
// block's index.
func anthropicBlockEvent(typ string) bool {
	return typ == "content_block_start" || typ == "content_block_delta" || typ == "content_block_stop"
}

// ChatOpening is the hedgeprobe Items.Opening of ChatChunk: a Control
// chunk that finishes no choice opens the answer when it carries a role or
// no usage (the role chunk). A block's end (BlockEnd) closes one, as
// AnthropicOpening has content_block_stop.
func ChatOpening(c ChatChunk) bool {
	if c.BlockEnd {
		return false
	}
	return classify.ChatOpening(c.Usage != nil, c.Choices, func(ch *ChatChoice) (bool, bool) {
		return ch.FinishReason != "", ch.Delta.Role != ""
	})
}

// ChatFollows is the hedgeprobe Items.Follows of ChatChunk: a chunk with a
// tool-call or function-call fragment begins a call that follows the
// answer's text, so that a fragment before the continuation's first
// content (the call's id alone) reaches the caller.
func ChatFollows(c ChatChunk) bool {
	return classify.ChatFollows(c.Choices, func(ch *ChatChoice) bool {
		return len(ch.Delta.ToolCalls) > 0 || ch.Delta.FunctionCall != nil
	})
}

// AnthropicOpening is the hedgeprobe Items.Opening of AnthropicEvent:
// message_start and the start of block 0 open the answer.
func AnthropicOpening(e AnthropicEvent) bool {
	return classify.AnthropicOpening(e.Type, int64(e.Index))
}

// AnthropicFollows is the hedgeprobe Items.Follows of AnthropicEvent: the
// start of a content block 0 that is not text (a tool call; thinking, on a
// compatible server that reasons again) begins what follows the answer
// rather than continuing its text (AnthropicRelabelAfter).
func AnthropicFollows(e AnthropicEvent) bool {
	blockType := ""
	if e.ContentBlock != nil {
		blockType = e.ContentBlock.Type
	}
	return classify.AnthropicFollows(e.Type, blockType, int64(e.Index))
}

// ChatText is the hedgeprobe Items.Text of ChatChunk: the content (and
// refusal) delta of choice 0 is answer text; reasoning is not (it is
// content, but a continuation carries on the answer); a tool-call or
// function-call fragment cannot be continued, nor a chunk that carries the
// finish reason with its text (some servers send the last text so), nor
// the text of any other choice (n > 1: no continuation carries several
// answers on).
func ChatText(c ChatChunk) (text string, resumable bool) {
	return classify.ChatText(c.Choices, func(ch *ChatChoice) classify.ChatTextParts {
		d := &ch.Delta
		return classify.ChatTextParts{Index: int64(ch.Index), Call: len(d.ToolCalls) > 0 || d.FunctionCall != nil,
			Content: d.Content, Refusal: d.Refusal, FinishReason: ch.FinishReason}
	})
}

// AnthropicText is the hedgeprobe Items.Text of AnthropicEvent: text
// deltas (and a text block's start) are answer text; whatever a delta or
// block of another type carries (thinking, citations) is not; a tool_use
// block or its input cannot be continued.
func AnthropicText(e AnthropicEvent) (text string, resumable bool) {
	var blockType, blockText, deltaType, deltaText string
	if b := e.ContentBlock; b != nil {
		blockType, blockText = b.Type, b.Text
	}
	if d := e.Delta; d != nil {
		deltaType, deltaText = d.Type, d.Text
	}
	return classify.AnthropicText(e.Type, blockType, blockText, deltaType, deltaText)
}

// anthropicContinued is the Source of a resume attempt on Anthropic: the
// text deltas (and the text a later text block's start carries) lose the
// whitespace the prefill cut, when the continuation repeats it (see
// hedgeprobe/internal/prefill). Its first block carries on the answer's
// text block, which the caller has open already: a start of it that
// carries text (some Anthropic-compatible servers send the first text so;
// Anthropic sends "") is that text as a delta, or the caller would read
// the block started twice.
type anthropicContinued struct {
	hedgeprobe.Source[AnthropicEvent]
	u   *prefill.Uncut
	cur AnthropicEvent
}

func (c *anthropicContinued) Next() bool {
	if !c.Source.Next() {
		return false
	}
	c.cur = c.Source.Current()
	if b := c.cur.ContentBlock; b != nil && c.cur.Type == "content_block_start" && c.cur.Index == 0 && b.Type == "text" && b.Text != "" {
		text := c.u.Text(b.Text)
		if text == "" {
			// Only the cut whitespace: the start, empty, is the opening
			// the caller does not read.
			nb := *b
			nb.Text = ""
			c.cur.ContentBlock = &nb
			return true
		}
		c.cur = AnthropicEvent{Type: "content_block_delta", Index: 0, Received: c.cur.Received,
			Delta: &AnthropicDelta{Type: "text_delta", Text: text}}
		return true
	}
	if b := c.cur.ContentBlock; b != nil && c.cur.Type == "content_block_start" && b.Type == "text" && b.Text != "" && c.u.Pending() {
		// A later text block (after a block that follows the answer,
		// thinking say) is the caller's new block: still a start, its
		// text without the repeated whitespace.
		nb := *b
		nb.Text = c.u.Text(b.Text)
		c.cur.ContentBlock = &nb
		return true
	}
	if d := c.cur.Delta; d != nil && d.Type == "text_delta" && c.u.Pending() {
		nd := *d
		nd.Text = c.u.Text(d.Text)
		c.cur.Delta = &nd
	}
	return true
}

func (c *anthropicContinued) Current() AnthropicEvent { return c.cur }

// anthropicContinuation returns msgs ending in an assistant message that
// carries sent. When msgs already end in one (the caller's own prefill),
// sent extends it: the model continued that message, so the delivered text
// follows it in the same one. (Anthropic's API merges consecutive
// assistant turns, but a compatible server need not: one that continues
// only the last message would take sent alone for the whole answer.)
func anthropicContinuation(msgs []Message, sent string) []Message {
	out := append(make([]Message, 0, len(msgs)+1), msgs...)
	if n := len(out); n > 0 && out[n-1].Role == "assistant" {
		out[n-1].Content += sent
		return out
	}
	return append(out, Message{Role: "assistant", Content: sent})
}

// openAIContinuation returns the body of a resume attempt: the request's
// messages ending in an assistant message that carries prefix, in the way
// the upstream continues it, and its token limits less the prefix's
// chunks (ContinuationLimit; not on an upstream that repeats the prefix). When the request already ends in an
// assistant message (the caller's own prefill), prefix extends it: the
// upstream continued it, so the delivered text follows it in the same
// message.
func openAIContinuation(body map[string]any, msgs []Message, how Continuation, prefix string, prefixChunks int64) ([]byte, error) {
	type prefixMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
		Prefix  bool   `json:"prefix,omitempty"`
	}
	out := make([]prefixMessage, 0, len(msgs)+1)
	for _, m := range msgs {
		out = append(out, prefixMessage{Role: m.Role, Content: m.Content})
	}
	marked := how == ContinuePrefix || how == ContinuePrefixEcho
	if n := len(out); n > 0 && out[n-1].Role == "assistant" {
		switch {
		case how == ContinueFinalMessage && body["continue_final_message"] != true:
			return nil, errAnsweredAfter
		case how == ContinuePrefixEcho:
			return nil, prefill.ErrEchoAfterPrefill
		}
		out[n-1].Content += prefix
		out[n-1].Prefix = marked
	} else {
		out = append(out, prefixMessage{Role: "assistant", Content: prefix, Prefix: marked})
	}
	b := maps.Clone(body)
	b["messages"] = out
	if how != ContinuePrefixEcho {
		// An answer that repeats the prefix may count the repeat against
		// its limit too: less the delivered chunks, the limit could end
		// the continuation inside its repeat, with nothing new.
		limitTokens(b, prefixChunks)
	}
	// vLLM's "echo" repeats the last message first: the delivered text,
	// which the caller has.
	delete(b, "echo")
	if how == ContinueFinalMessage {
		b["continue_final_message"] = true
		b["add_generation_prompt"] = false
	}
	return json.Marshal(b)
}

// errAnsweredAfter is why a request that ends in an assistant message
// cannot be continued with ContinueFinalMessage unless the request itself
// asks for "continue_final_message": the upstream answered after that
// message, in a new one, and a continuation would need two assistant
// messages in a row, which many chat templates refuse.
var errAnsweredAfter = errors.New(`the request ends in an assistant message that the upstream answered after rather than continued (Params has no "continue_final_message": true)`)
