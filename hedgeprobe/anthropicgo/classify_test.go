package anthropicgo_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

func TestClassify(t *testing.T) {
	adapter.CheckClassify(t, []adaptertest.ClassifyCase{
		{Name: "tapped ping (zero event)", JSON: ``, Want: hedgeprobe.Keepalive},
		{Name: "ping", JSON: `{"type":"ping"}`, Want: hedgeprobe.Keepalive},
		{Name: "message_start", JSON: `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`, Want: hedgeprobe.Control},
		{Name: "text block start", JSON: `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, Want: hedgeprobe.Control},
		{Name: "tool_use block start", JSON: `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"get_weather","input":{}}}`, Want: hedgeprobe.Content},
		{Name: "text delta", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, Want: hedgeprobe.Content},
		{Name: "empty text delta", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, Want: hedgeprobe.Keepalive},
		{Name: "thinking delta", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`, Want: hedgeprobe.Content},
		{Name: "citations delta", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x","document_index":0,"start_char_index":0,"end_char_index":1}}}`, Want: hedgeprobe.Content},
		// Outside review: a stream of these held off the stall watchdog.
		{Name: "citations delta, citation null", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":null}}`, Want: hedgeprobe.Keepalive},
		{Name: "citations delta, no citation", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}`, Want: hedgeprobe.Keepalive},
		{Name: "input_json delta", JSON: `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}`, Want: hedgeprobe.Content},
		{Name: "empty input_json delta", JSON: `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`, Want: hedgeprobe.Keepalive},
		{Name: "delta without a delta object", JSON: `{"type":"content_block_delta","index":0}`, Want: hedgeprobe.Keepalive},
		{Name: "signature delta", JSON: `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`, Want: hedgeprobe.Control},
		{Name: "block stop", JSON: `{"type":"content_block_stop","index":0}`, Want: hedgeprobe.Control},
		{Name: "message_delta", JSON: `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`, Want: hedgeprobe.Control},
		{Name: "message_stop", JSON: `{"type":"message_stop"}`, Want: hedgeprobe.Control},
	})
}

func TestTokens(t *testing.T) {
	var e anthropicgo.Event
	_ = json.Unmarshal([]byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`), &e)
	if n, ok := anthropicgo.Tokens(e); !ok || n != 15 {
		t.Fatalf("Tokens = %d, %v", n, ok)
	}
	e = anthropicgo.Event{}
	_ = json.Unmarshal([]byte(`{"type":"message_start","message":{"usage":{"output_tokens":1}}}`), &e)
	if _, ok := anthropicgo.Tokens(e); ok {
		t.Fatal("tokens on message_start")
	}
}

// TestInputTokensAsSSE: Items reads message_start's input tokens as
// sse.AnthropicItems does — the cache's reads and writes counted in, and 0
// taken for not reported (no prompt has no token; a compatible server
// that counts them later sends 0 first) — so the SDK's route and the raw
// one record the same on the same upstream.
func TestInputTokensAsSSE(t *testing.T) {
	for _, js := range []string{
		`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":0,"output_tokens":0}}}`,
		`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":7,"cache_read_input_tokens":20,"cache_creation_input_tokens":3,"output_tokens":1}}}`,
		`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[]}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":9,"output_tokens":15}}`,
	} {
		var e anthropicgo.Event
		var se sse.AnthropicEvent
		if err := errors.Join(json.Unmarshal([]byte(js), &e), json.Unmarshal([]byte(js), &se)); err != nil {
			t.Fatal(err)
		}
		n, ok := anthropicgo.Items.InputTokens(e)
		sn, sok := sse.AnthropicItems.InputTokens(se)
		if n != sn || ok != sok {
			t.Errorf("%s: anthropicgo %d, %v; sse %d, %v", js, n, ok, sn, sok)
		}
	}
}

// anthropic-sdk-go's stream is a hedgeprobe.Source as it is.
var _ hedgeprobe.Source[anthropicgo.Event] = (*ssestream.Stream[anthropicgo.Event])(nil)

func TestClassifyDoesNotAllocate(t *testing.T) {
	var e anthropicgo.Event
	if err := json.Unmarshal([]byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`), &e); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = anthropicgo.Classify(e) }); n != 0 {
		t.Fatalf("%v allocations per Classify", n)
	}
}

// Once the attempt's context is done, MapError gives the context's error
// whatever the SDK reported (adaptertest.CheckMapErrorAfterCancel).
func TestMapErrorAfterCancel(t *testing.T) {
	adaptertest.CheckMapErrorAfterCancel(t, anthropicgo.MapError, &anthropic.Error{StatusCode: 429})
}
