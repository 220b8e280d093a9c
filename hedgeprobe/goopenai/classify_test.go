package goopenai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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
// whatever the SDK reported (a cancelled request fails as a closed body,
// a reset, or the context's own error); openaigo typed an error other than
// the context's as a broken connection, where the other adapters did not.
func TestMapErrorAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range []error{errors.New("read: use of closed network connection"), context.Canceled, io.ErrUnexpectedEOF, &openai.APIError{HTTPStatusCode: 429}} {
		if got := goopenai.MapError(ctx, "p", err); got != context.Canceled {
			t.Errorf("MapError(canceled, %v) = %v, want context.Canceled", err, got)
		}
	}
	if got := goopenai.MapError(context.Background(), "p", io.ErrUnexpectedEOF); errors.Is(got, context.Canceled) || !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Errorf("MapError(live, EOF) = %v, want it typed, unwrapping to the EOF", got)
	}
}
