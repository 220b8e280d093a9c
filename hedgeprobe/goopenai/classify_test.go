package goopenai_test

import (
	"encoding/json"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
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
		{"empty delta", `{"choices":[{"index":0,"delta":{}}]}`, hedgeprobe.Keepalive},
		{"content", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, hedgeprobe.Content},
		{"reasoning_content", `{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}`, hedgeprobe.Content},
		{"refusal", `{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, hedgeprobe.Content},
		{"tool call name", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f"}}]}}]}`, hedgeprobe.Content},
		{"tool call arguments", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`, hedgeprobe.Content},
		{"tool call id only", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{}}]}}]}`, hedgeprobe.Control},
		{"function call", `{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{}"}}}]}`, hedgeprobe.Content},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c goopenai.Chunk
			if tc.data != "" {
				if err := json.Unmarshal([]byte(tc.data), &c); err != nil {
					t.Fatal(err)
				}
			}
			if got := goopenai.Classify(c); got != tc.want {
				t.Fatalf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	var c goopenai.Chunk
	_ = json.Unmarshal([]byte(`{"choices":[],"usage":{"completion_tokens":9}}`), &c)
	if n, ok := goopenai.Tokens(c); !ok || n != 9 {
		t.Fatalf("Tokens = %d, %v", n, ok)
	}
	if _, ok := goopenai.Tokens(goopenai.Chunk{}); ok {
		t.Fatal("tokens on a chunk without usage")
	}
}

// Source is a hedgeprobe.Source.
var _ hedgeprobe.Source[goopenai.Chunk] = (*goopenai.Source)(nil)

func TestClassifyDoesNotAllocate(t *testing.T) {
	var c goopenai.Chunk
	if err := json.Unmarshal([]byte(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"function":{}}]}},{"index":1,"delta":{"function_call":{"name":"f"}}}]}`), &c); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = goopenai.Classify(c) }); n != 0 {
		t.Fatalf("%v allocations per Classify", n)
	}
}
