package anthropicgo_test

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       hedgeprobe.Kind
	}{
		{"tapped ping (zero event)", ``, hedgeprobe.Keepalive},
		{"ping", `{"type":"ping"}`, hedgeprobe.Keepalive},
		{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`, hedgeprobe.Control},
		{"text block start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, hedgeprobe.Control},
		{"tool_use block start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"get_weather","input":{}}}`, hedgeprobe.Content},
		{"text delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, hedgeprobe.Content},
		{"empty text delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, hedgeprobe.Keepalive},
		{"thinking delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`, hedgeprobe.Content},
		{"citations delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x","document_index":0,"start_char_index":0,"end_char_index":1}}}`, hedgeprobe.Content},
		{"input_json delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}`, hedgeprobe.Content},
		{"empty input_json delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`, hedgeprobe.Keepalive},
		{"signature delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`, hedgeprobe.Control},
		{"block stop", `{"type":"content_block_stop","index":0}`, hedgeprobe.Control},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`, hedgeprobe.Control},
		{"message_stop", `{"type":"message_stop"}`, hedgeprobe.Control},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e anthropicgo.Event
			if tc.data != "" {
				if err := json.Unmarshal([]byte(tc.data), &e); err != nil {
					t.Fatal(err)
				}
			}
			if got := anthropicgo.Classify(e); got != tc.want {
				t.Fatalf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
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
