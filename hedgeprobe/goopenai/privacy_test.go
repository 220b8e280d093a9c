package goopenai_test

import (
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
)

// Privacy (outside review): a 422 whose body quotes the request (FastAPI's
// {"detail": …}, no error object) put the prompt in both span statuses
// through MapError (go-openai's RequestError body → sse.NewResponseError);
// they now carry UpstreamError.StatusText.
func TestPromptEchoedInErrorBodyNotInSpans(t *testing.T) {
	r := openai.ChatCompletionRequest{Model: "m",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "SECRET-PROMPT my diagnosis is"}}}
	spans, s := adaptertest.Traced(t, goopenai.Items, hedgeprobe.Config{MaxAttempts: 1},
		goopenai.Route("r", clientOf(t, adaptertest.EchoingValidation(t), false), r, goopenai.RouteOptions{}))
	if s.Err() == nil {
		t.Fatal("want the 422's error")
	}
	adaptertest.NoText(t, spans, "SECRET-PROMPT")
}
