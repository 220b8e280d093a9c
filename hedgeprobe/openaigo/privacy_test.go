package openaigo_test

import (
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
)

// Privacy (outside review): a 422 whose body quotes the request (FastAPI's
// {"detail": …}, no error object) put the prompt in both span statuses
// through mapError (streamend.Undecoded → sse.NewResponseError); they now
// carry UpstreamError.StatusText.
func TestPromptEchoedInErrorBodyNotInSpans(t *testing.T) {
	params := openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("SECRET-PROMPT my diagnosis is")}}
	spans, s := adaptertest.Traced(t, openaigo.Items, hedgeprobe.Config{MaxAttempts: 1},
		openaigo.Route("r", clientOf(t, adaptertest.EchoingValidation(t), false), params, openaigo.RouteOptions{}))
	if s.Err() == nil {
		t.Fatal("want the 422's error")
	}
	adaptertest.NoText(t, spans, "SECRET-PROMPT")
}
