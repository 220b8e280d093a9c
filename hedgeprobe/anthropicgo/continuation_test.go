package anthropicgo

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestContinuation: the delivered text becomes a new assistant message
// after a user turn, extends the caller's own prefill's last text block,
// or follows a last block that is not text as a text block of its own —
// one assistant message in every case — and the caller's messages are
// left as they were.
func TestContinuation(t *testing.T) {
	user := anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))
	for _, tc := range []struct {
		name string
		msgs []anthropic.MessageParam
		want string // the last message, as JSON
	}{
		{"after the user", []anthropic.MessageParam{user},
			`{"content":[{"text":" a time","type":"text"}],"role":"assistant"}`},
		{"the caller's prefill", []anthropic.MessageParam{user, anthropic.NewAssistantMessage(anthropic.NewTextBlock("Once"), anthropic.NewTextBlock(" upon"))},
			`{"content":[{"text":"Once","type":"text"},{"text":" upon a time","type":"text"}],"role":"assistant"}`},
		{"after a tool use", []anthropic.MessageParam{user, anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("t1", map[string]any{}, "f"))},
			`{"content":[{"id":"t1","input":{},"name":"f","type":"tool_use"},{"text":" a time","type":"text"}],"role":"assistant"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.msgs)
			out := continuation(tc.msgs, " a time")
			if len(out) != 2 {
				t.Fatalf("%d messages, want 2: the user's and one assistant message", len(out))
			}
			last, _ := json.Marshal(out[len(out)-1])
			if string(last) != tc.want {
				t.Errorf("\n got %s\nwant %s", last, tc.want)
			}
			if after, _ := json.Marshal(tc.msgs); string(after) != string(before) {
				t.Errorf("the caller's messages changed:\n%s\n%s", before, after)
			}
		})
	}
}
