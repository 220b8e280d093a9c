// Package classify holds the classification rules of chat-completion
// chunks and Anthropic Messages events (docs/design.md §2: Content,
// Control, Keepalive), written once for hedgeprobe/sse and the SDK
// adapters (hedgeprobe/openaigo, hedgeprobe/goopenai,
// hedgeprobe/anthropicgo). Each caller describes its own item type in
// ChatParts or AnthropicParts; the rule reads only those, so every SDK's
// chunks classify alike.
package classify

import "github.com/streamwatch/streamwatch/hedgeprobe"

// ChatParts says what one choice of an OpenAI-compatible chat chunk
// carries, as ChatChoice reads it. Each caller fills it from its own chunk
// type (sse.ClassifyOpenAI from sse.ChatChunk, hedgeprobe/openaigo and
// hedgeprobe/goopenai from their SDKs'). Every field reports a non-empty
// part of the delta.
type ChatParts struct {
	// Content is a non-empty content.
	Content bool
	// Reasoning is a non-empty reasoning_content (DeepSeek, vLLM) or
	// reasoning (OpenRouter, Ollama).
	Reasoning bool
	// Refusal is a non-empty refusal.
	Refusal bool
	// ToolCallText is a tool-call fragment with a function name or
	// arguments.
	ToolCallText bool
	// ToolCalls is any tool-call fragment, also one with only an index
	// or id.
	ToolCalls bool
	// FunctionCall is a legacy function_call with a name or arguments.
	FunctionCall bool
	// Annotations is at least one annotation (a citation).
	Annotations bool
	// Role is a role.
	Role bool
	// FinishReason is a finish_reason on the choice.
	FinishReason bool
}

// ChatChoice is the classification rule of one choice of an
// OpenAI-compatible chunk: content, reasoning, refusal, a tool-call (or
// legacy function-call) name or arguments fragment, or annotations, is
// Content; a role, a finish reason or an index-only tool-call fragment
// without any of those is Control; nothing is Keepalive.
func ChatChoice(p ChatParts) hedgeprobe.Kind {
	switch {
	case p.Content || p.Reasoning || p.Refusal || p.ToolCallText || p.FunctionCall || p.Annotations:
		return hedgeprobe.Content
	case p.Role || p.FinishReason || p.ToolCalls:
		return hedgeprobe.Control
	}
	return hedgeprobe.Keepalive
}

// Chat is the classification rule of a whole OpenAI-compatible chunk,
// for a chunk type that holds choices of type C: Content when any choice
// is Content (ChatChoice of parts(choice)), else Control when any choice
// is Control or the chunk carries usage, else Keepalive.
//
// parts must not retain its argument; with a top-level function for parts,
// Chat does not allocate.
func Chat[C any](usage bool, choices []C, parts func(*C) ChatParts) hedgeprobe.Kind {
	kind := hedgeprobe.Keepalive
	if usage {
		kind = hedgeprobe.Control
	}
	for i := range choices {
		switch ChatChoice(parts(&choices[i])) {
		case hedgeprobe.Content:
			return hedgeprobe.Content
		case hedgeprobe.Control:
			kind = hedgeprobe.Control
		}
	}
	return kind
}

// ChatOpening is the hedgeprobe Items.Opening of a chat chunk, asked only
// of Control chunks: one that finishes a choice closes the answer; else
// one with a role opens it, usage or not (servers that report usage on
// every chunk send it on the role chunk too); else one with usage closes
// it, and any other (a server's metadata before the text) opens it.
// parts reports a choice's finish_reason and role as present or not.
func ChatOpening[C any](usage bool, choices []C, parts func(*C) (finished, role bool)) bool {
	opens := !usage
	for i := range choices {
		finished, role := parts(&choices[i])
		if finished {
			return false
		}
		opens = opens || role
	}
	return opens
}

// ChatFollows is the hedgeprobe Items.Follows of a chat chunk, for a
// chunk type that holds choices of type C: a chunk with a tool-call (or
// legacy function-call) fragment of any kind begins a call that follows
// the answer's text. A continuation whose first content is the call's
// name then reaches the caller as it would anyway, from that chunk on;
// what Follows adds is a fragment that comes before it with no content,
// such as the call's id alone (some compatible servers send it first),
// which would otherwise be taken for part of the continuation's opening
// and lost. calls reports a choice's tool-call fragments or function call
// as present or not.
func ChatFollows[C any](choices []C, calls func(*C) bool) bool {
	for i := range choices {
		if calls(&choices[i]) {
			return true
		}
	}
	return false
}

// ChatTextParts is what ChatText reads of a chat chunk's first choice.
type ChatTextParts struct {
	// Index is the choice's index.
	Index int64
	// Call reports a tool-call (or legacy function-call) fragment.
	Call bool
	// Content and Refusal are the choice's text deltas.
	Content, Refusal string
	// FinishReason is the choice's finish reason, "" while it goes on.
	FinishReason string
}

// ChatText is the hedgeprobe Items.Text of a chat chunk, for a chunk type
// that holds choices of type C, one rule for every OpenAI-compatible
// adapter: the content (and refusal) delta of choice 0 is answer text;
// reasoning is not (it is content, but a continuation carries on the
// answer); a tool-call or function-call fragment cannot be continued, nor
// a chunk that carries the finish reason with its text (some servers send
// the last text so), nor the text of any other choice (n > 1: no
// continuation carries several answers on). A chunk without choices
// (usage) has no text and leaves the answer resumable. parts reads a
// choice.
func ChatText[C any](choices []C, parts func(*C) ChatTextParts) (text string, resumable bool) {
	switch len(choices) {
	case 0:
		return "", true
	case 1:
	default:
		return "", false
	}
	p := parts(&choices[0])
	if p.Index != 0 || p.Call {
		return "", false
	}
	// A last chunk that carries its finish reason ends the answer.
	return p.Content + p.Refusal, p.FinishReason == ""
}

// AnthropicOpening is the hedgeprobe Items.Opening of an Anthropic event
// of type eventType, of content block index (on content_block_*):
// message_start and the start of block 0 open an answer, which the caller
// of a continuation already has (the continued text block is the
// answer's); content_block_stop, message_delta and message_stop close it.
// The start of a later block opens nothing the answer has: a
// continuation that ended an empty block 0 and starts another gives the
// caller that start.
func AnthropicOpening(eventType string, index int64) bool {
	return eventType == "message_start" || eventType == "content_block_start" && index == 0
}

// AnthropicFollows is the hedgeprobe Items.Follows of an Anthropic event
// of type eventType, whose content block (on content_block_start) is of
// type blockType and index: the start of a block 0 that is not text
// (tool_use, thinking, redacted_thinking…) begins what follows the
// answer's text rather than continuing it. A start without a block type
// is taken for text. A later block follows the continuation's block 0,
// which continued the answer's text, and is numbered after it by Relabel.
func AnthropicFollows(eventType, blockType string, index int64) bool {
	return eventType == "content_block_start" && index == 0 && blockType != "" && blockType != "text"
}

// AnthropicParts is what Anthropic reads of an Anthropic Messages stream
// event. Each caller fills it from its own event type
// (sse.ClassifyAnthropic from sse.AnthropicEvent, hedgeprobe/anthropicgo
// from the SDK's).
type AnthropicParts struct {
	// Type is the event's type ("content_block_delta", "ping"…); empty
	// for a comment or a tapped keepalive.
	Type string
	// NoDelta reports a content_block_delta without a delta object. An
	// SDK that always decodes a (possibly zero) delta leaves it false.
	NoDelta bool
	// DeltaType, DeltaText, DeltaThinking and DeltaPartialJSON are the
	// delta's type, text, thinking and partial_json.
	DeltaType, DeltaText, DeltaThinking, DeltaPartialJSON string
	// DeltaCitation reports that the delta carries a citation: present
	// and not null.
	DeltaCitation bool
	// BlockType, BlockText, BlockThinking and BlockName are the type,
	// text, thinking and name of the content_block of content_block_start.
	BlockType, BlockText, BlockThinking, BlockName string
}

// Anthropic is the classification rule of Anthropic events:
// content_block_delta with a non-empty text_delta, thinking_delta or
// input_json_delta, or a citations_delta with a citation, is Content, and
// so is a content_block_start that opens a tool_use block with its name
// (the counterpart of an OpenAI tool-call name fragment) or carries text;
// ping, an event without a type and an empty or absent delta are
// Keepalive; every other event is Control.
func Anthropic(p AnthropicParts) hedgeprobe.Kind {
	switch p.Type {
	case "", "ping":
		return hedgeprobe.Keepalive
	case "content_block_delta":
		// A delta without a type carries nothing: an item with no
		// content is a keepalive, whichever SDK decoded it.
		if p.NoDelta || p.DeltaType == "" {
			return hedgeprobe.Keepalive
		}
		switch p.DeltaType {
		case "text_delta":
			return contentIf(p.DeltaText != "")
		case "thinking_delta":
			return contentIf(p.DeltaThinking != "")
		case "input_json_delta":
			return contentIf(p.DeltaPartialJSON != "")
		case "citations_delta":
			// One without a citation carries nothing: a stream of them
			// would hold off the stall watchdog for good.
			return contentIf(p.DeltaCitation)
		}
	case "content_block_start":
		if p.BlockText != "" || p.BlockThinking != "" || (p.BlockName != "" && AnthropicToolUse(p.BlockType)) {
			return hedgeprobe.Content
		}
	}
	return hedgeprobe.Control
}

// AnthropicText is the hedgeprobe Items.Text rule of an Anthropic event of
// type eventType, whose content block (on content_block_start) has type
// blockType and text blockText and whose delta (on content_block_delta)
// has type deltaType and text deltaText (each "" when absent): text
// deltas (and a text block's start) are answer text; whatever a delta or
// block of another type carries (thinking, citations) is not; a tool_use
// block or its input cannot be continued.
func AnthropicText(eventType, blockType, blockText, deltaType, deltaText string) (text string, resumable bool) {
	switch eventType {
	case "content_block_start":
		switch {
		case AnthropicToolUse(blockType):
			return "", false
		case blockType == "text":
			return blockText, true
		}
	case "content_block_delta":
		switch deltaType {
		case "text_delta":
			return deltaText, true
		case "input_json_delta":
			return "", false
		}
	}
	return "", true
}

// AnthropicToolUse reports whether an Anthropic content block of type typ
// is a tool call: the client's own tools, the server's (web search, code
// execution) and an MCP server's. Its input is no answer text, and a
// stream stopped in it cannot be continued.
func AnthropicToolUse(typ string) bool {
	switch typ {
	case "tool_use", "server_tool_use", "mcp_tool_use":
		return true
	}
	return false
}

// NonEmptyJSONArray reports whether raw is a JSON array with at least one
// element. It is the test for annotations (citations) of every chunk type, so
// null, [], [ ] and non-array values never count as content.
// It takes the SDKs' raw strings as well as bytes, without a copy.
func NonEmptyJSONArray[S ~string | ~[]byte](raw S) bool {
	i, j := 0, len(raw)
	for i < j && isJSONSpace(raw[i]) {
		i++
	}
	for j > i && isJSONSpace(raw[j-1]) {
		j--
	}
	if j-i < 2 || raw[i] != '[' || raw[j-1] != ']' {
		return false
	}
	for k := i + 1; k < j-1; k++ {
		if !isJSONSpace(raw[k]) {
			return true
		}
	}
	return false
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func contentIf(ok bool) hedgeprobe.Kind {
	if ok {
		return hedgeprobe.Content
	}
	return hedgeprobe.Keepalive
}
