package openaigo_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       hedgeprobe.Kind
	}{
		{"tapped keepalive (zero chunk)", ``, hedgeprobe.Keepalive},
		{"role only", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, hedgeprobe.Control},
		{"finish only", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, hedgeprobe.Control},
		{"usage only", `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10}}`, hedgeprobe.Control},
		{"null usage", `{"choices":[{"index":0,"delta":{}}],"usage":null}`, hedgeprobe.Keepalive},
		{"empty delta", `{"choices":[{"index":0,"delta":{}}]}`, hedgeprobe.Keepalive},
		{"content", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, hedgeprobe.Content},
		{"reasoning_content", `{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}`, hedgeprobe.Content},
		{"reasoning", `{"choices":[{"index":0,"delta":{"reasoning":"hm"}}]}`, hedgeprobe.Content},
		{"empty reasoning", `{"choices":[{"index":0,"delta":{"reasoning":""}}]}`, hedgeprobe.Keepalive},
		{"null reasoning_content", `{"choices":[{"index":0,"delta":{"reasoning_content":null}}]}`, hedgeprobe.Keepalive},
		{"refusal", `{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, hedgeprobe.Content},
		{"tool call name", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f"}}]}}]}`, hedgeprobe.Content},
		{"tool call arguments", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`, hedgeprobe.Content},
		{"annotations", `{"choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation"}]}}]}`, hedgeprobe.Content},
		{"empty annotations", `{"choices":[{"index":0,"delta":{"annotations":[]}}]}`, hedgeprobe.Keepalive},
		{"function call", `{"choices":[{"index":0,"delta":{"function_call":{"name":"f"}}}]}`, hedgeprobe.Content},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c openaigo.Chunk
			if tc.data != "" {
				if err := json.Unmarshal([]byte(tc.data), &c); err != nil {
					t.Fatal(err)
				}
			}
			if got := openaigo.Classify(c); got != tc.want {
				t.Fatalf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	var c openaigo.Chunk
	_ = json.Unmarshal([]byte(`{"choices":[],"usage":{"completion_tokens":9}}`), &c)
	if n, ok := openaigo.Tokens(c); !ok || n != 9 {
		t.Fatalf("Tokens = %d, %v", n, ok)
	}
	c = openaigo.Chunk{}
	_ = json.Unmarshal([]byte(`{"choices":[{"delta":{"content":"x"}}]}`), &c)
	if _, ok := openaigo.Tokens(c); ok {
		t.Fatal("tokens on a chunk without usage")
	}
}

// openai-go's stream is a hedgeprobe.Source as it is.
var _ hedgeprobe.Source[openaigo.Chunk] = (*ssestream.Stream[openaigo.Chunk])(nil)

func TestClassifyDoesNotAllocate(t *testing.T) {
	var c openaigo.Chunk
	if err := json.Unmarshal([]byte(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"function":{}}]}},{"index":1,"delta":{"reasoning":"hm"}}]}`), &c); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = openaigo.Classify(c) }); n != 0 {
		t.Fatalf("%v allocations per Classify", n)
	}
}
