package anthropicgo_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
)

// Privacy (outside review): a 422 whose body quotes the request (FastAPI's
// {"detail": …}, no error object) put the prompt in both span statuses
// through mapError (streamend.Undecoded → sse.NewResponseError); they now
// carry UpstreamError.StatusText.
func TestPromptEchoedInErrorBodyNotInSpans(t *testing.T) {
	params := anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("SECRET-PROMPT my diagnosis is"))}}
	spans, s := adaptertest.Traced(t, anthropicgo.Items, hedgeprobe.Config{MaxAttempts: 1},
		anthropicgo.Route("r", clientOf(t, adaptertest.EchoingValidation(t), false), params, anthropicgo.RouteOptions{}))
	if s.Err() == nil {
		t.Fatal("want the 422's error")
	}
	adaptertest.NoText(t, spans, "SECRET-PROMPT")
}

// Privacy (outside review): an "event: error" whose data is a text delta
// is not quoted by anthropicgo (the SDK's error has no message).
func TestErrorEventDataNotInSpans(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"x\",\"model\":\"m\",\"role\":\"assistant\",\"type\":\"message\",\"content\":[]}}\n\n"+
			"event: error\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"SECRET-ANSWER the rest\"}}\n\n")
	}))
	t.Cleanup(ts.Close)
	spans, s := adaptertest.Traced(t, anthropicgo.Items, hedgeprobe.Config{MaxAttempts: 1},
		anthropicgo.Route("r", clientOf(t, ts.URL, false), params, anthropicgo.RouteOptions{}))
	if s.Err() == nil {
		t.Fatal("want the error event's error")
	}
	adaptertest.NoText(t, spans, "SECRET-ANSWER")
}
