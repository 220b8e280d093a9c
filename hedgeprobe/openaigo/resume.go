package openaigo

// Resuming an answer on another route (docs/design.md §2 rule 10): the
// answer text a continuation carries on, the continuation's request, and
// its chunks relabelled as the answer's.

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/prefill"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Relabel is the hedgeprobe Items.Relabel of openai-go chunks: a
// continuation's chunk takes the id and creation time of the answer it
// continues, as every chunk of one completion shares them (openai-go's
// ChatCompletionAccumulator refuses a chunk of another id). Its model
// stays the one that wrote it. A tapped keepalive (no id, no content) is
// left as it is: it is no part of the answer. A chunk as the SDK decoded
// it is decoded anew from its JSON with the two changed (rewritten), so
// that its RawJSON — what a gateway relays to its own client — carries
// the answer's id too (about 20 µs a chunk, on continuations only); one
// whose fields were changed since (a Source of the caller's that redacts
// them, say) has only its fields relabelled, as its JSON would undo the
// change.
func Relabel(answer, c Chunk) Chunk {
	if c.ID == "" && Classify(c) == hedgeprobe.Keepalive {
		return c
	}
	if r, ok := rewritten(c, map[string]any{"id": answer.ID, "created": answer.Created}); ok {
		return r
	}
	c.ID, c.Created = answer.ID, answer.Created
	return c
}

// rewritten returns c decoded anew from its raw JSON with the values at
// the paths of set (gjson paths) replaced, and true; c and false when c
// has no such JSON (a chunk built in code), when its fields no longer are
// what its JSON says (changed since it was decoded: the JSON would undo
// the change), or when a path is not in the JSON. The rest of the JSON
// keeps its bytes and order; where a key comes twice, the first is the
// one changed, as it is the one the SDK reads.
func rewritten(c Chunk, set map[string]any) (Chunk, bool) {
	raw := []byte(c.RawJSON())
	var decoded Chunk
	if len(raw) == 0 || decoded.UnmarshalJSON(raw) != nil || !reflect.DeepEqual(decoded, c) {
		return c, false
	}
	for path, v := range set {
		if !gjson.GetBytes(raw, path).Exists() && !gjson.GetBytes(raw, parentPath(path)).IsObject() {
			return c, false
		}
		b, err := encode(v)
		if err != nil {
			return c, false
		}
		if raw, err = sjson.SetRawBytes(raw, path, b); err != nil {
			return c, false
		}
	}
	var r Chunk
	if r.UnmarshalJSON(raw) != nil {
		return c, false
	}
	return r, true
}

// parentPath is the gjson path of the object that holds path's last key
// ("" for a top-level key: the whole JSON).
func parentPath(path string) string {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "@this"
	}
	return path[:i]
}

// encode is json.Marshal without HTML escaping and the encoder's newline:
// text that goes back into a chunk keeps its bytes ("<", "&").
func encode(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// withContent returns c with its first choice's content set to text, in
// its fields and in its raw JSON (rewritten); c must have a choice.
func withContent(c Chunk, text string) Chunk {
	if r, ok := rewritten(c, map[string]any{"choices.0.delta.content": text}); ok {
		return r
	}
	c.Choices = slices.Clone(c.Choices) // the chunk's own stay as decoded
	c.Choices[0].Delta.Content = text
	return c
}

// Text is the hedgeprobe Items.Text of openai-go chunks, with the rule of
// sse.ChatText (classify.ChatText): the content and refusal of choice 0,
// resumable unless the chunk carries a tool call, another choice or the
// finish reason.
func Text(c Chunk) (text string, resumable bool) {
	return classify.ChatText(c.Choices, func(ch *openai.ChatCompletionChunkChoice) classify.ChatTextParts {
		d := &ch.Delta
		//lint:ignore SA1019 the legacy function call is still streamed by some servers
		fc := d.FunctionCall
		return classify.ChatTextParts{Index: ch.Index, Call: len(d.ToolCalls) > 0 || fc.Name != "" || fc.Arguments != "",
			Content: d.Content, Refusal: d.Refusal, FinishReason: ch.FinishReason}
	})
}

// continuation returns the params and request options of a resume attempt:
// the messages ending in an assistant message that carries prefix, and the
// upstream's switch to continue it. When the messages already end in an
// assistant message (the caller's own prefill), prefix extends it, as one
// message: the upstream continued it, so the delivered text follows it.
// params and opts are not modified.
func continuation(params openai.ChatCompletionNewParams, opts []option.RequestOption, how sse.Continuation, prefix string) (openai.ChatCompletionNewParams, []option.RequestOption, error) {
	msgs := slices.Clone(params.Messages)
	last := len(msgs)
	if last > 0 && msgs[last-1].OfAssistant != nil {
		last--
		switch {
		case how == sse.ContinueFinalMessage && params.ExtraFields()["continue_final_message"] != true:
			return params, opts, errAnsweredAfter
		case how == sse.ContinuePrefixEcho:
			return params, opts, prefill.ErrEchoAfterPrefill
		}
		m, err := extended(*msgs[last].OfAssistant, prefix)
		if err != nil {
			return params, opts, err
		}
		msgs[last] = openai.ChatCompletionMessageParamUnion{OfAssistant: &m}
	} else {
		msgs = append(msgs, openai.AssistantMessage(prefix))
	}
	params.Messages = msgs
	opts = slices.Clip(opts)
	// vLLM's "echo" repeats the last message first: the delivered text,
	// which the caller has. Deleted after the caller's options, it wins
	// over an extra field and a WithJSONSet alike.
	opts = append(opts, option.WithJSONDel("echo"))
	switch how {
	case sse.ContinueFinalMessage:
		opts = append(opts, option.WithJSONSet("continue_final_message", true), option.WithJSONSet("add_generation_prompt", false))
	case sse.ContinuePrefix, sse.ContinuePrefixEcho:
		opts = append(opts, option.WithJSONSet("messages."+strconv.Itoa(last)+".prefix", true))
	}
	return params, opts, nil
}

// continuationLimit is a token limit of the params for a continuation
// after prefixChunks content chunks (sse.ContinuationLimit); unset stays
// unset.
func continuationLimit(limit param.Opt[int64], prefixChunks int64) param.Opt[int64] {
	if !limit.Valid() {
		return limit
	}
	return openai.Int(sse.ContinuationLimit(limit.Value, prefixChunks))
}

// extended returns the caller's trailing assistant message m with prefix
// after its text, as a single string content (a chat template may join
// text parts with a separator, which would split the continued text). A
// message with a refusal, tool calls, a function call or audio is not
// text the upstream continues.
func extended(m openai.ChatCompletionAssistantMessageParam, prefix string) (openai.ChatCompletionAssistantMessageParam, error) {
	//lint:ignore SA1019 the legacy function call is still sent by some callers
	fc := m.FunctionCall
	if m.Refusal.Valid() || len(m.ToolCalls) > 0 || fc.Name != "" || fc.Arguments != "" || m.Audio.ID != "" {
		return m, errNotText
	}
	var text strings.Builder
	if m.Content.OfString.Valid() {
		text.WriteString(m.Content.OfString.Value)
	}
	for _, p := range m.Content.OfArrayOfContentParts {
		if p.OfText == nil {
			return m, errNotText
		}
		text.WriteString(p.OfText.Text)
	}
	text.WriteString(prefix)
	m.Content = openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String(text.String())}
	return m, nil
}

var (
	// errAnsweredAfter: with sse.ContinueFinalMessage, a request that
	// ends in an assistant message without "continue_final_message" in
	// its extra fields was answered after that message, in a new one; a
	// continuation would need two assistant messages in a row, which many
	// chat templates refuse.
	errAnsweredAfter = errors.New(`the request ends in an assistant message that the upstream answered after rather than continued (no "continue_final_message": true in the params' extra fields)`)
	// errNotText: the caller's trailing assistant message holds more than
	// text.
	errNotText = errors.New("the request ends in an assistant message with a refusal, tool calls or audio, which cannot be continued")
)

// echoDropped returns the Source of a resume attempt on an upstream that
// repeats the prefix (sse.ContinuePrefixEcho): the content of its first
// choice loses the repeat.
func echoDropped(s hedgeprobe.Source[Chunk], prefix string) hedgeprobe.Source[Chunk] {
	return &prefill.EchoDropped[Chunk]{Source: s, Echo: prefill.NewEcho(prefix),
		Text: func(c Chunk) string {
			if len(c.Choices) == 0 {
				return ""
			}
			return c.Choices[0].Delta.Content
		},
		WithText: withContent}
}
