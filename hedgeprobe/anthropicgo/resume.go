package anthropicgo

// Resuming an answer on another route (docs/design.md §2 rule 10): which
// events open and follow the answer, its text, a continuation's events
// relabelled as the answer's, the continuation's messages and the Source
// that mends its first events.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/prefill"
)

// Opening is the hedgeprobe Items.Opening of anthropic-sdk-go events:
// message_start and the start of block 0 open the answer.
func Opening(e Event) bool { return classify.AnthropicOpening(e.Type, e.Index) }

// Follows is the hedgeprobe Items.Follows of anthropic-sdk-go events: the
// start of a content block 0 that is not text (a tool call; thinking, on a
// compatible server that reasons again) begins what follows the answer
// rather than continuing its text (RelabelAfter).
func Follows(e Event) bool { return classify.AnthropicFollows(e.Type, e.ContentBlock.Type, e.Index) }

// Relabel is the hedgeprobe Items.Relabel of anthropic-sdk-go events: a
// continuation numbers its content blocks from 0, and its block j is the
// answer's block answer.Index + j, so Message.Accumulate puts the
// continued text on the block it continues (after a thinking block, say,
// not on the thinking). The SDK reads an event's raw JSON, so a moved
// event is decoded anew from its JSON with the index changed; an event
// whose JSON cannot be read so is left as it is.
func Relabel(answer, e Event) Event {
	if !blockEvent(answer.Type) {
		return e
	}
	return moveBlock(e, answer.Index)
}

// RelabelAfter is the hedgeprobe Items.RelabelAfter of anthropic-sdk-go
// events: a continuation that begins with a block other than text
// (Follows) follows the answer's block answer.Index, so its block j becomes block
// answer.Index + 1 + j, and Message.Accumulate adds it after the answer's
// text block. That block is then left without its content_block_stop,
// which the stalled upstream never sent.
func RelabelAfter(answer, e Event) Event {
	if !blockEvent(answer.Type) {
		return e
	}
	return moveBlock(e, answer.Index+1)
}

// moveBlock returns block event e moved by n blocks; any other event, or
// one whose JSON cannot be read, as it is.
func moveBlock(e Event, n int64) Event {
	if n == 0 || !blockEvent(e.Type) {
		return e
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(e.RawJSON()), &fields); err != nil {
		return e
	}
	fields["index"] = json.RawMessage(strconv.FormatInt(n+e.Index, 10))
	b, err := json.Marshal(fields)
	if err != nil {
		return e
	}
	var moved Event
	if err := moved.UnmarshalJSON(b); err != nil {
		return e
	}
	return moved
}

// blockEvent reports an event type that carries a content block's index.
func blockEvent(typ string) bool {
	return typ == "content_block_start" || typ == "content_block_delta" || typ == "content_block_stop"
}

// Text is the hedgeprobe Items.Text of anthropic-sdk-go events: text
// deltas (and a text block's start) are answer text; whatever a delta or
// block of another type carries (thinking, citations) is not; a tool_use
// block or its input cannot be continued.
func Text(e Event) (text string, resumable bool) {
	return classify.AnthropicText(e.Type, e.ContentBlock.Type, e.ContentBlock.Text, e.Delta.Type, e.Delta.Text)
}

// continuation returns msgs ending in an assistant message whose text
// ends in sent. When msgs already end in an assistant message (the
// caller's own prefill), sent extends it, since the model continued that
// message: a second assistant message would be merged into it by
// Anthropic's API but not by every compatible server. Its last text block
// takes sent, unless it carries cache_control (the cached prefix would
// change: sent goes in a text block of its own after it), or the last
// block is not text. A message or block the caller wrote as an override
// or with extra fields sends those, not the fields changed here: sent
// then goes as a second assistant message, as before. msgs and its
// messages are not modified.
func continuation(msgs []anthropic.MessageParam, sent string) []anthropic.MessageParam {
	n := len(msgs)
	if n == 0 || msgs[n-1].OfAssistant == nil || !sendsFields(msgs[n-1]) || !sendsFields(*msgs[n-1].OfAssistant) {
		return append(slices.Clip(msgs), anthropic.NewAssistantMessage(anthropic.NewTextBlock(sent)))
	}
	out := slices.Clone(msgs)
	last := *out[n-1].OfAssistant
	last.Content = slices.Clone(last.Content)
	if k := len(last.Content); k > 0 && extendable(last.Content[k-1]) {
		text := *last.Content[k-1].OfText
		text.Text += sent
		last.Content[k-1].OfText = &text
	} else {
		last.Content = append(last.Content, anthropic.NewTextBlock(sent))
	}
	out[n-1].OfAssistant = &last
	return out
}

// extendable reports whether b is a text block sent from its fields and
// not marked for caching, whose text sent can extend.
func extendable(b anthropic.ContentBlockParamUnion) bool {
	t := b.OfText
	return t != nil && sendsFields(b) && sendsFields(*t) && param.IsOmitted(t.CacheControl)
}

// sendsFields reports whether a param struct is sent as its fields say:
// one set by param.Override or SetJSON is sent as that value, and extra
// fields are sent beside (or over) the fields.
func sendsFields(p interface {
	Overrides() (any, bool)
	ExtraFields() map[string]any
}) bool {
	_, overridden := p.Overrides()
	return !overridden && len(p.ExtraFields()) == 0
}

// continued is the Source of a resume attempt. Its text deltas (and the
// text a later text block's start carries) lose the whitespace the prefill
// cut, where the continuation repeats it. Its first block, which carries
// on the answer's text block, is a block the caller has open already: a
// start of it that carries text (some Anthropic-compatible servers send
// the first text so; Anthropic sends "") is that text as a delta, or the
// caller would read the block started twice. The SDK's AsAny and
// Message.Accumulate read an event's raw JSON, not its fields, so a mended delta is a new event decoded from mended
// JSON.
type continued struct {
	hedgeprobe.Source[Event]
	u   *prefill.Uncut
	cur Event
	err error
}

func (c *continued) Next() bool {
	if c.err != nil || !c.Source.Next() {
		return false
	}
	c.cur = c.Source.Current()
	var text string
	switch e := &c.cur; {
	case e.Type == "content_block_start" && e.Index == 0 && e.ContentBlock.Type == "text" && e.ContentBlock.Text != "":
		if text = c.u.Text(e.ContentBlock.Text); text == "" {
			// Only the cut whitespace: the start, empty, is the opening
			// the caller does not read.
			return c.decode(json.Marshal(emptyTextStart))
		}
	case e.Type == "content_block_start" && e.ContentBlock.Type == "text" && e.ContentBlock.Text != "" && c.u.Pending():
		// A later text block (after a block that follows the answer,
		// thinking say) is the caller's new block: still a start, its
		// text without the repeated whitespace.
		if text = c.u.Text(e.ContentBlock.Text); text == e.ContentBlock.Text {
			return true
		}
		return c.decode(json.Marshal(textStart{Type: "content_block_start", Index: e.Index, ContentBlock: textDeltaBody{Type: "text", Text: text}}))
	case e.Type == "content_block_delta" && e.Delta.Type == "text_delta" && c.u.Pending():
		if text = c.u.Text(e.Delta.Text); text == e.Delta.Text {
			return true
		}
	default:
		return true
	}
	return c.decode(json.Marshal(textDelta{Type: "content_block_delta", Index: c.cur.Index, Delta: textDeltaBody{Type: "text_delta", Text: text}}))
}

// emptyTextStart is the start of a continuation's first text block with
// no text.
var emptyTextStart = map[string]any{"type": "content_block_start", "index": 0,
	"content_block": map[string]any{"type": "text", "text": ""}}

// decode makes b, the JSON of a mended event, the current event.
func (c *continued) decode(b []byte, err error) bool {
	if err == nil {
		var e Event
		if err = e.UnmarshalJSON(b); err == nil {
			c.cur = e
			return true
		}
	}
	c.err = fmt.Errorf("anthropicgo: mend a continued text delta: %w", err)
	return false
}

func (c *continued) Current() Event { return c.cur }

func (c *continued) Err() error {
	if c.err != nil {
		return c.err
	}
	return c.Source.Err()
}

// textDelta is the wire form of a content_block_delta event with a
// text_delta.
type textDelta struct {
	Type  string        `json:"type"`
	Index int64         `json:"index"`
	Delta textDeltaBody `json:"delta"`
}

// textStart is the wire form of a content_block_start event of a text
// block.
type textStart struct {
	Type         string        `json:"type"`
	Index        int64         `json:"index"`
	ContentBlock textDeltaBody `json:"content_block"`
}

type textDeltaBody struct {
	Type string `json:"type"`
	Text string `json:"text"`
}
