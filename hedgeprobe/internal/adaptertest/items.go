package adaptertest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// The item cases every adapter's Items functions read alike (Text,
// Relabel, Opening, the response's description), each item given as JSON and decoded as the SDK
// decodes it.

// ChatTextCase is an item as JSON (an OpenAI-compatible chunk, or an
// Anthropic event in AnthropicTextCases) and what Items.Text must say of
// it.
type ChatTextCase struct {
	Name, JSON string
	Text       string
	Resumable  bool
}

// ChatTextCases are the chunks every OpenAI adapter's Items.Text reads
// alike.
var ChatTextCases = []ChatTextCase{
	{"content", `{"choices":[{"index":0,"delta":{"content":"Hi "}}]}`, "Hi ", true},
	{"refusal", `{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, "no", true},
	{"role only", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, "", true},
	{"reasoning", `{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}`, "", true},
	{"usage only", `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10}}`, "", true},
	{"tool call", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`, "", false},
	{"function call", `{"choices":[{"index":0,"delta":{"function_call":{"name":"f"}}}]}`, "", false},
	// Some servers send the last text with the finish reason: the answer
	// ends there, and a continuation would follow its end.
	{"last text with its finish reason", `{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}`, "!", false},
	// With n > 1 the answer is several texts: no continuation carries
	// them all on, and one choice's text is not the others'.
	{"another choice's text", `{"choices":[{"index":1,"delta":{"content":"Hi"}}]}`, "", false},
	{"two choices in one chunk", `{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`, "", false},
}

// CheckChatText runs a subtest per ChatTextCases entry: it decodes the
// JSON into the adapter's chunk type, as the SDK does, and checks text.
func CheckChatText[T any](t *testing.T, text func(T) (string, bool)) {
	t.Helper()
	checkText(t, ChatTextCases, text)
}

// CheckAnthropicText is CheckChatText for AnthropicTextCases.
func CheckAnthropicText[T any](t *testing.T, text func(T) (string, bool)) {
	t.Helper()
	checkText(t, AnthropicTextCases, text)
}

func checkText[T any](t *testing.T, cases []ChatTextCase, text func(T) (string, bool)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if s, ok := text(decoded[T](t, tc.JSON)); s != tc.Text || ok != tc.Resumable {
				t.Fatalf("Text = %q, %v; want %q, %v", s, ok, tc.Text, tc.Resumable)
			}
		})
	}
}

// AnthropicTextCases are the events every Anthropic adapter's Items.Text
// reads alike: the text of a text delta and of a text block's start is
// answer text, what a delta or block of any other type carries is not; a
// tool call's block or its input cannot be continued.
var AnthropicTextCases = []ChatTextCase{
	{"text delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi "}}`, "Hi ", true},
	{"text block start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"A"}}`, "A", true},
	{"thinking delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`, "", true},
	{"thinking delta with a text field", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm","text":"x"}}`, "", true},
	{"thinking block start with a text field", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","text":"x"}}`, "", true},
	{"citations delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"c"}}}`, "", true},
	{"tool_use start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`, "", false},
	{"mcp_tool_use start", `{"type":"content_block_start","index":1,"content_block":{"type":"mcp_tool_use","id":"t","name":"lookup","server_name":"s","input":{}}}`, "", false},
	{"input_json delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}`, "", false},
	{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`, "", true},
}

// CheckChatRelabel checks an OpenAI adapter's Items.Relabel on chunks
// decoded from JSON: every chunk of a continuation but a keepalive without
// an id (a tapped keepalive) takes the answer's id and creation time and
// keeps its own model; fields reads a chunk's id, created and model.
func CheckChatRelabel[T any](t *testing.T, relabel func(answer, v T) T, fields func(T) (id string, created int64, model string)) {
	t.Helper()
	answer := `{"id":"chatcmpl-A","object":"chat.completion.chunk","created":100,"model":"a","choices":[{"index":0,"delta":{"content":"x"}}]}`
	for _, tc := range []struct {
		name, json string
		relabelled bool
	}{
		{"content of another id", `{"id":"chatcmpl-B","object":"chat.completion.chunk","created":200,"model":"b","choices":[{"index":0,"delta":{"content":"y"}}]}`, true},
		{"content without an id", `{"model":"b","choices":[{"index":0,"delta":{"content":"y"}}]}`, true},
		{"finish reason", `{"id":"chatcmpl-B","created":200,"model":"b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, true},
		{"usage without an id", `{"model":"b","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, true},
		{"keepalive without an id", `{}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := decoded[T](t, tc.json)
			_, _, model := fields(v)
			id, created, gotModel := fields(relabel(decoded[T](t, answer), v))
			switch {
			case gotModel != model:
				t.Fatalf("model %q, want the continuation's %q", gotModel, model)
			case tc.relabelled && (id != "chatcmpl-A" || created != 100):
				t.Fatalf("id %q created %d, want the answer's chatcmpl-A, 100", id, created)
			case !tc.relabelled && (id != "" || created != 0):
				t.Fatalf("id %q created %d, want the keepalive left as it is", id, created)
			}
		})
	}
}

// OpeningCase is an item as JSON and whether Items.Opening must say it
// opens an answer.
type OpeningCase struct {
	Name, JSON string
	Opens      bool
}

// ChatOpeningCases are the Control chunks every OpenAI adapter's
// Items.Opening reads alike.
var ChatOpeningCases = []OpeningCase{
	{"role", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, true},
	{"finish reason", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, false},
	{"usage", `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10}}`, false},
	{"finish reason with usage", `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10}}`, false},
	{"one of two choices finished", `{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{},"finish_reason":"stop"}]}`, false},
	// vLLM's continuous usage stats put usage on every chunk.
	{"role with usage", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`, true},
	// Ollama sends its role on every chunk, the last one too.
	{"role with a finish reason", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`, false},
}

// AnthropicOpeningCases are the Control events every Anthropic adapter's
// Items.Opening reads alike: the start of block 0 opens (the caller has
// it from the answer), a later block's does not.
var AnthropicOpeningCases = []OpeningCase{
	{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"c","usage":{"input_tokens":1,"output_tokens":1}}}`, true},
	{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, true},
	{"thinking block start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`, true},
	{"block 1 start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`, false},
	{"content_block_stop", `{"type":"content_block_stop","index":0}`, false},
	{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`, false},
	{"message_stop", `{"type":"message_stop"}`, false},
}

// AnthropicFollowsCases are the events every Anthropic adapter's
// Items.Follows reads alike: the start of a block 0 that is not text
// begins what follows the answer; a later block follows the
// continuation's text block 0 (OpeningCase.Opens is Follows' answer).
var AnthropicFollowsCases = []OpeningCase{
	{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"c","usage":{"input_tokens":1,"output_tokens":1}}}`, false},
	{"text block start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, false},
	{"thinking block start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`, true},
	{"redacted thinking block start", `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"xyz"}}`, true},
	{"tool_use block start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`, true},
	{"tool_use block 1 start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`, false},
	{"text delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`, false},
	{"citations delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"c","document_index":0,"start_char_index":0,"end_char_index":1}}}`, false},
	{"content_block_stop", `{"type":"content_block_stop","index":0}`, false},
}

// ChatFollowsCases are the chunks every OpenAI-compatible adapter's
// Items.Follows reads alike: a chunk with a tool-call fragment of any kind,
// or a legacy function call, begins a call that follows the answer's text
// (OpeningCase.Opens is Follows' answer).
var ChatFollowsCases = []OpeningCase{
	{"role chunk", `{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, false},
	{"content", `{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`, false},
	{"reasoning", `{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"x"},"finish_reason":null}]}`, false},
	{"tool call id alone", `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function"}]},"finish_reason":null}]}`, true},
	{"role with a tool call id", `{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function"}]},"finish_reason":null}]}`, true},
	{"tool call name", `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]},"finish_reason":null}]}`, true},
	{"legacy function call", `{"id":"c","choices":[{"index":0,"delta":{"function_call":{"name":"f"}},"finish_reason":null}]}`, true},
	{"finish reason", `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, false},
	{"usage", `{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, false},
}

// CheckOpening runs a subtest per case: it decodes the JSON into the
// adapter's item type, as the SDK does, and checks opening.
func CheckOpening[T any](t *testing.T, cases []OpeningCase, opening func(T) bool) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if got := opening(decoded[T](t, tc.JSON)); got != tc.Opens {
				t.Fatalf("Opening = %v, want %v", got, tc.Opens)
			}
		})
	}
}

// decoded is the item of type T that JSON decodes to, as the SDK decodes
// it.
func decoded[T any](t *testing.T, js string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// ResponseCase is an item as JSON and what an adapter's Items says of the
// response it describes: ResponseID (ID, "" when not ok), InputTokens
// (In, when InOK) and FinishReasons (Finish: "choice=reason" for each
// reason reported, empty ones left out).
type ResponseCase struct {
	Name, JSON string
	ID         string
	In         int64
	InOK       bool
	Finish     []string
}

// ChatResponseCases are the chunks every OpenAI adapter's Items describe
// alike.
var ChatResponseCases = []ResponseCase{
	{Name: "role chunk", JSON: `{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, ID: "chatcmpl-1"},
	{Name: "content without an id", JSON: `{"choices":[{"index":0,"delta":{"content":"x"}}]}`},
	{Name: "finish", JSON: `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, ID: "c", Finish: []string{"0=length"}},
	{Name: "last text with its finish", JSON: `{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}`, Finish: []string{"0=stop"}},
	{Name: "two choices finish", JSON: `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"content_filter"}]}`, Finish: []string{"0=stop", "1=content_filter"}},
	{Name: "null finish", JSON: `{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`},
	// prompt_tokens counts the cached tokens in, as the conventions ask.
	{Name: "usage", JSON: `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":8}}}`, In: 12, InOK: true},
	{Name: "null usage", JSON: `{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}`},
}

// AnthropicResponseCases are the events every Anthropic adapter's Items
// describe alike.
var AnthropicResponseCases = []ResponseCase{
	// Anthropic counts the cache's reads and writes apart from
	// input_tokens; the conventions count them in.
	{Name: "message_start", JSON: `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":10,"cache_read_input_tokens":30,"cache_creation_input_tokens":5,"output_tokens":1}}}`, ID: "msg_1", In: 45, InOK: true},
	{Name: "message_start without usage", JSON: `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude","content":[]}}`, ID: "msg_2"},
	{Name: "content_block_delta", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`},
	{Name: "message_delta", JSON: `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`, Finish: []string{"0=end_turn"}},
	// message_delta's cumulative usage may hold the input count in part
	// (the cache's counts left out or null): message_start's is kept.
	{Name: "message_delta with input tokens", JSON: `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"input_tokens":10,"cache_read_input_tokens":30,"cache_creation_input_tokens":2,"output_tokens":7}}`, Finish: []string{"0=max_tokens"}},
	{Name: "message_delta with null cache counts", JSON: `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":7,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":30}}`, Finish: []string{"0=end_turn"}},
	{Name: "message_delta without a stop reason", JSON: `{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":3}}`},
	{Name: "message_stop", JSON: `{"type":"message_stop"}`},
}

// CheckResponse runs a subtest per case: it decodes the JSON into the
// adapter's item type, as the SDK does, and checks what items says of it.
func CheckResponse[T any](t *testing.T, cases []ResponseCase, items hedgeprobe.Items[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			v := decoded[T](t, tc.JSON)
			if id, ok := items.ResponseID(v); id != tc.ID || ok != (tc.ID != "") {
				t.Errorf("ResponseID = %q, %v; want %q", id, ok, tc.ID)
			}
			if n, ok := items.InputTokens(v); ok != tc.InOK || ok && n != tc.In {
				t.Errorf("InputTokens = %d, %v; want %d, %v", n, ok, tc.In, tc.InOK)
			}
			var got []string
			items.FinishReasons(v, func(choice int, reason string) {
				if reason != "" {
					got = append(got, fmt.Sprintf("%d=%s", choice, reason))
				}
			})
			if !slices.Equal(got, tc.Finish) {
				t.Errorf("FinishReasons reported %q; want %q", got, tc.Finish)
			}
		})
	}
}
