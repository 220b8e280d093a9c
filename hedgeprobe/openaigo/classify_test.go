package openaigo_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
)

func TestClassify(t *testing.T) {
	adapter.CheckClassify(t, adaptertest.ChatClassifyCases)
	// Usage, reasoning and annotations, which openai-go reads as raw JSON.
	adapter.CheckClassify(t, []adaptertest.ClassifyCase{
		{Name: "null usage", JSON: `{"choices":[{"index":0,"delta":{}}],"usage":null}`, Want: hedgeprobe.Keepalive},
		{Name: "reasoning", JSON: `{"choices":[{"index":0,"delta":{"reasoning":"hm"}}]}`, Want: hedgeprobe.Content},
		{Name: "empty reasoning", JSON: `{"choices":[{"index":0,"delta":{"reasoning":""}}]}`, Want: hedgeprobe.Keepalive},
		{Name: "null reasoning_content", JSON: `{"choices":[{"index":0,"delta":{"reasoning_content":null}}]}`, Want: hedgeprobe.Keepalive},
		{Name: "annotations", JSON: `{"choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation"}]}}]}`, Want: hedgeprobe.Content},
		{Name: "empty annotations", JSON: `{"choices":[{"index":0,"delta":{"annotations":[]}}]}`, Want: hedgeprobe.Keepalive},
	})
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

// Once the attempt's context is done, MapError gives the context's error
// whatever the SDK reported (adaptertest.CheckMapErrorAfterCancel).
func TestMapErrorAfterCancel(t *testing.T) {
	adaptertest.CheckMapErrorAfterCancel(t, openaigo.MapError, &openai.Error{StatusCode: 429})
}
