package anthropicgo

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// TestContinuation: the delivered text becomes a new assistant message
// after a user turn; it extends the caller's own prefill's last text
// block, or follows a last block that is not text, or one marked for
// caching, as a text block of its own; and where the caller's message or
// block is sent from an override or extra fields (which a change to its
// fields would not reach), it goes as a second assistant message. The
// caller's messages are left as they were.
func TestContinuation(t *testing.T) {
	user := anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))
	assistant := func(b ...anthropic.ContentBlockParamUnion) anthropic.MessageParam {
		return anthropic.NewAssistantMessage(b...)
	}
	overridden := param.Override[anthropic.AssistantMessageParam](json.RawMessage(`{"role":"assistant","content":"Once upon"}`))
	extra := anthropic.AssistantMessageParam{Content: []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("Once upon")}}
	extra.SetExtraFields(map[string]any{"content": "Once upon"})
	rawBlock := param.Override[anthropic.TextBlockParam](json.RawMessage(`{"type":"text","text":"Once upon"}`))
	cached := anthropic.TextBlockParam{Text: "Once upon", CacheControl: anthropic.NewCacheControlEphemeralParam()}
	const second = `{"content":[{"text":" a time","type":"text"}],"role":"assistant"}`
	for _, tc := range []struct {
		name string
		last []anthropic.MessageParam // after the user's message
		want string                   // the messages after the user's, as JSON
	}{
		{"after the user", nil, `[` + second + `]`},
		{"the caller's prefill", []anthropic.MessageParam{assistant(anthropic.NewTextBlock("Once"), anthropic.NewTextBlock(" upon"))},
			`[{"content":[{"text":"Once","type":"text"},{"text":" upon a time","type":"text"}],"role":"assistant"}]`},
		{"after a tool use", []anthropic.MessageParam{assistant(anthropic.NewToolUseBlock("t1", map[string]any{}, "f"))},
			`[{"content":[{"id":"t1","input":{},"name":"f","type":"tool_use"},{"text":" a time","type":"text"}],"role":"assistant"}]`},
		{"after a cached block", []anthropic.MessageParam{assistant(anthropic.ContentBlockParamUnion{OfText: &cached})},
			`[{"content":[{"text":"Once upon","cache_control":{"type":"ephemeral"},"type":"text"},{"text":" a time","type":"text"}],"role":"assistant"}]`},
		{"after an overridden block", []anthropic.MessageParam{assistant(anthropic.ContentBlockParamUnion{OfText: &rawBlock})},
			`[{"content":[{"type":"text","text":"Once upon"},{"text":" a time","type":"text"}],"role":"assistant"}]`},
		{"an overridden message", []anthropic.MessageParam{{OfAssistant: &overridden}},
			`[{"role":"assistant","content":"Once upon"},` + second + `]`},
		{"a message with extra fields", []anthropic.MessageParam{{OfAssistant: &extra}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := append([]anthropic.MessageParam{user}, tc.last...)
			before, _ := json.Marshal(msgs)
			out := continuation(msgs, " a time")
			got, _ := json.Marshal(out[1:])
			if tc.want == "" { // the caller's message as it marshals, then the text
				caller, _ := json.Marshal(tc.last)
				tc.want = string(caller[:len(caller)-1]) + "," + second + "]"
			}
			if string(got) != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
			if after, _ := json.Marshal(msgs); string(after) != string(before) {
				t.Errorf("the caller's messages changed:\n%s\n%s", before, after)
			}
		})
	}
}
