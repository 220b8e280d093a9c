package goopenai_test

import (
	"encoding/json"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
)

func TestClassify(t *testing.T) {
	adapter.CheckClassify(t, adaptertest.ChatClassifyCases)
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

// Once the attempt's context is done, MapError gives the context's error
// whatever the SDK reported (adaptertest.CheckMapErrorAfterCancel).
func TestMapErrorAfterCancel(t *testing.T) {
	adaptertest.CheckMapErrorAfterCancel(t, goopenai.MapError, &openai.APIError{HTTPStatusCode: 429})
}
