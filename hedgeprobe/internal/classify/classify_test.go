package classify

import (
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

func TestNonEmptyJSONArray(t *testing.T) {
	for raw, want := range map[string]bool{
		``: false, `null`: false, `[]`: false, `[ ]`: false, " [\n] ": false, `{}`: false, `"x"`: false, `[`: false,
		`[{"type":"url_citation"}]`: true, ` [1] `: true,
	} {
		if got := NonEmptyJSONArray(raw); got != want {
			t.Errorf("NonEmptyJSONArray(%q) = %v, want %v", raw, got, want)
		}
		if got := NonEmptyJSONArray([]byte(raw)); got != want {
			t.Errorf("NonEmptyJSONArray([]byte(%q)) = %v, want %v", raw, got, want)
		}
	}
}

// TestChatChoice pins the rule's precedence: any content part wins over
// control parts, and control parts win over nothing.
func TestChatChoice(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    ChatParts
		want hedgeprobe.Kind
	}{
		{"nothing", ChatParts{}, hedgeprobe.Keepalive},
		{"role", ChatParts{Role: true}, hedgeprobe.Control},
		{"finish reason", ChatParts{FinishReason: true}, hedgeprobe.Control},
		{"index-only tool call", ChatParts{ToolCalls: true}, hedgeprobe.Control},
		{"content with role", ChatParts{Content: true, Role: true}, hedgeprobe.Content},
		{"reasoning", ChatParts{Reasoning: true}, hedgeprobe.Content},
		{"refusal", ChatParts{Refusal: true}, hedgeprobe.Content},
		{"tool call text", ChatParts{ToolCallText: true, ToolCalls: true}, hedgeprobe.Content},
		{"function call", ChatParts{FunctionCall: true}, hedgeprobe.Content},
		{"annotations with finish", ChatParts{Annotations: true, FinishReason: true}, hedgeprobe.Content},
	} {
		if got := ChatChoice(tc.p); got != tc.want {
			t.Errorf("%s: ChatChoice = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestChat(t *testing.T) {
	parts := func(p *ChatParts) ChatParts { return *p }
	for _, tc := range []struct {
		name    string
		usage   bool
		choices []ChatParts
		want    hedgeprobe.Kind
	}{
		{"no choices", false, nil, hedgeprobe.Keepalive},
		{"usage only", true, nil, hedgeprobe.Control},
		{"empty choice with usage", true, []ChatParts{{}}, hedgeprobe.Control},
		{"control then content", false, []ChatParts{{Role: true}, {Content: true}}, hedgeprobe.Content},
		{"empty then control", false, []ChatParts{{}, {FinishReason: true}}, hedgeprobe.Control},
	} {
		if got := Chat(tc.usage, tc.choices, parts); got != tc.want {
			t.Errorf("%s: Chat = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestAnthropic(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    AnthropicParts
		want hedgeprobe.Kind
	}{
		{"no type", AnthropicParts{}, hedgeprobe.Keepalive},
		{"ping", AnthropicParts{Type: "ping"}, hedgeprobe.Keepalive},
		{"delta absent", AnthropicParts{Type: "content_block_delta", NoDelta: true, DeltaType: "text_delta", DeltaText: "x"}, hedgeprobe.Keepalive},
		{"delta without type", AnthropicParts{Type: "content_block_delta"}, hedgeprobe.Keepalive},
		{"text", AnthropicParts{Type: "content_block_delta", DeltaType: "text_delta", DeltaText: "x"}, hedgeprobe.Content},
		{"empty text", AnthropicParts{Type: "content_block_delta", DeltaType: "text_delta"}, hedgeprobe.Keepalive},
		{"thinking", AnthropicParts{Type: "content_block_delta", DeltaType: "thinking_delta", DeltaThinking: "x"}, hedgeprobe.Content},
		{"partial json", AnthropicParts{Type: "content_block_delta", DeltaType: "input_json_delta", DeltaPartialJSON: "{"}, hedgeprobe.Content},
		{"citations", AnthropicParts{Type: "content_block_delta", DeltaType: "citations_delta", DeltaCitation: true}, hedgeprobe.Content},
		// Outside review: one without a citation carries nothing, and a
		// stream of them held off the stall watchdog.
		{"citations without one", AnthropicParts{Type: "content_block_delta", DeltaType: "citations_delta"}, hedgeprobe.Keepalive},
		{"signature", AnthropicParts{Type: "content_block_delta", DeltaType: "signature_delta"}, hedgeprobe.Control},
		{"named tool_use start", AnthropicParts{Type: "content_block_start", BlockType: "tool_use", BlockName: "f"}, hedgeprobe.Content},
		{"named server_tool_use start", AnthropicParts{Type: "content_block_start", BlockType: "server_tool_use", BlockName: "web_search"}, hedgeprobe.Content},
		{"named mcp_tool_use start", AnthropicParts{Type: "content_block_start", BlockType: "mcp_tool_use", BlockName: "lookup"}, hedgeprobe.Content},
		{"name on a text block", AnthropicParts{Type: "content_block_start", BlockType: "text", BlockName: "f"}, hedgeprobe.Control},
		{"text block start with text", AnthropicParts{Type: "content_block_start", BlockType: "text", BlockText: "x"}, hedgeprobe.Content},
		{"empty text block start", AnthropicParts{Type: "content_block_start", BlockType: "text"}, hedgeprobe.Control},
		{"message_stop", AnthropicParts{Type: "message_stop"}, hedgeprobe.Control},
	} {
		if got := Anthropic(tc.p); got != tc.want {
			t.Errorf("%s: Anthropic = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// The resume text rule both Anthropic adapters share.
func TestAnthropicText(t *testing.T) {
	for _, tc := range []struct {
		name                                    string
		typ, blockType, blockText, dType, dText string
		text                                    string
		resumable                               bool
	}{
		{"text delta", "content_block_delta", "", "", "text_delta", "hi", "hi", true},
		{"thinking delta", "content_block_delta", "", "", "thinking_delta", "hm", "", true},
		{"tool input", "content_block_delta", "", "", "input_json_delta", `{"a"`, "", false},
		{"text block start", "content_block_start", "text", "Hi", "", "", "Hi", true},
		{"thinking block start", "content_block_start", "thinking", "", "", "", "", true},
		{"tool block start", "content_block_start", "tool_use", "", "", "", "", false},
		{"server tool block start", "content_block_start", "server_tool_use", "", "", "", "", false},
		{"start without a block", "content_block_start", "", "", "", "", "", true},
		{"delta without a delta", "content_block_delta", "", "", "", "", "", true},
		{"message start", "message_start", "text", "x", "text_delta", "y", "", true},
	} {
		text, ok := AnthropicText(tc.typ, tc.blockType, tc.blockText, tc.dType, tc.dText)
		if text != tc.text || ok != tc.resumable {
			t.Errorf("%s: (%q, %v), want (%q, %v)", tc.name, text, ok, tc.text, tc.resumable)
		}
	}
}
