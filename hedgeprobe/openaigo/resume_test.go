package openaigo_test

import (
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// resumeCall runs one call over routes with openai-go's usual loop and
// returns what the caller read.
func resumeCall(t *testing.T, cfg hedgeprobe.Config, routes ...hedgeprobe.Route[openaigo.Chunk]) adaptertest.Resumed {
	stream := adapter.NewProber(t, cfg).Stream(t.Context(), routes...)
	defer stream.Close()
	text := ""
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) > 0 {
			text += chunk.Choices[0].Delta.Content
		}
	}
	return adaptertest.Resumed{Stats: stream.Stats(), Text: text, Err: stream.Err()}
}

// TestResume: a stream that falls silent after commit is continued on the
// next route that can (a trailing assistant message), once, twice, past a
// route that refuses; the caller reads the script byte for byte.
func TestResume(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range adaptertest.ResumeCases {
		t.Run(tc.Name, func(t *testing.T) {
			var routes []hedgeprobe.Route[openaigo.Chunk]
			for _, r := range tc.Routes {
				o := openaigo.RouteOptions{}
				if r.Continues {
					o.Continue = sse.ContinueTrailingAssistant
				}
				routes = append(routes, openaigo.Route(r.Profile, newClient(t, up, r.Profile, false), params, o))
			}
			resumeCall(t, tc.Config, routes...).Check(t, tc)
		})
	}
}

// TestResumeSwitches: the servers' switches reach the wire — fakellm's
// steady-final-message and steady-prefix profiles continue only with
// theirs, and answer afresh (the whole script again) without it.
func TestResumeSwitches(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range []struct {
		profile string
		how     sse.Continuation
	}{
		{"steady-final-message", sse.ContinueFinalMessage},
		{"steady-prefix", sse.ContinuePrefix},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			res := resumeCall(t, adaptertest.ResumeConfig,
				openaigo.Route("stall", newClient(t, up, "stall", false), params, openaigo.RouteOptions{}),
				openaigo.Route(tc.profile, newClient(t, up, tc.profile, false), params, openaigo.RouteOptions{Continue: tc.how}))
			res.Check(t, adaptertest.ResumeCase{Attempts: []adaptertest.WantAttempt{
				{Trigger: hedgeprobe.TriggerPrimary, Route: "stall", Outcome: hedgeprobe.AttemptCanceled},
				{Trigger: hedgeprobe.TriggerResume, Route: tc.profile, Outcome: hedgeprobe.AttemptWinner},
			}})
		})
	}
}

// TestItemsText: content and refusal are answer text; reasoning is
// content but not text; a tool-call or function-call fragment cannot be
// continued.
func TestItemsText(t *testing.T) {
	adaptertest.CheckChatText(t, openaigo.Items.Text)
}

// TestResumeExtendsPrefill: a request that already ends in an assistant
// message (the caller's own prefill) is continued in that one message —
// prefill + delivered text — in every mode that can; one that cannot be
// built fails with hedgeprobe.ErrCannotContinue before any request. The
// caller's params are left as they were.
func TestResumeExtendsPrefill(t *testing.T) {
	up := adaptertest.CaptureBodies(t)
	client := openai.NewClient(option.WithBaseURL(up.URL), option.WithAPIKey("test"), option.WithMaxRetries(0),
		option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{})))
	prefilled := func(last openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a story"), last}}
	}
	asked := prefilled(openai.AssistantMessage("Once upon"))
	asked.SetExtraFields(map[string]any{"continue_final_message": true})
	parts := openai.ChatCompletionAssistantMessageParam{Content: openai.ChatCompletionAssistantMessageParamContentUnion{
		OfArrayOfContentParts: []openai.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{
			{OfText: &openai.ChatCompletionContentPartTextParam{Text: "Once "}},
			{OfText: &openai.ChatCompletionContentPartTextParam{Text: "upon"}},
		}}}
	toolCall := openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
		{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "c1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "f", Arguments: "{}"}}},
	}}
	for _, tc := range []struct {
		name   string
		params openai.ChatCompletionNewParams
		how    sse.Continuation
		want   map[string]any // the last message sent; nil: ErrCannotContinue
	}{
		{"trailing assistant", prefilled(openai.AssistantMessage("Once upon")), sse.ContinueTrailingAssistant,
			map[string]any{"role": "assistant", "content": "Once upon a time"}},
		{"prefix", prefilled(openai.AssistantMessage("Once upon")), sse.ContinuePrefix,
			map[string]any{"role": "assistant", "content": "Once upon a time", "prefix": true}},
		{"final message asked", asked, sse.ContinueFinalMessage,
			map[string]any{"role": "assistant", "content": "Once upon a time"}},
		{"text parts", prefilled(openai.ChatCompletionMessageParamUnion{OfAssistant: &parts}), sse.ContinueTrailingAssistant,
			map[string]any{"role": "assistant", "content": "Once upon a time"}},
		{"final message not asked", prefilled(openai.AssistantMessage("Once upon")), sse.ContinueFinalMessage, nil},
		{"tool call", prefilled(openai.ChatCompletionMessageParamUnion{OfAssistant: &toolCall}), sse.ContinueTrailingAssistant, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.params)
			r := openaigo.Route("r", client, tc.params, openaigo.RouteOptions{Continue: tc.how})
			src, err := r.Open(t.Context(), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: " a time"})
			if tc.want == nil {
				if !errors.Is(err, hedgeprobe.ErrCannotContinue) {
					t.Fatalf("Open = %v, want ErrCannotContinue", err)
				}
				up.None(t)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Drain(t, src)
			msgs, _ := up.Next(t)["messages"].([]any)
			if len(msgs) != 2 {
				t.Fatalf("sent %d messages, want the caller's 2: %v", len(msgs), msgs)
			}
			if last := msgs[1].(map[string]any); !maps.Equal(last, tc.want) {
				t.Fatalf("last message %v, want %v", last, tc.want)
			}
			if after, _ := json.Marshal(tc.params); string(after) != string(before) {
				t.Fatalf("the caller's params changed:\n%s\n%s", before, after)
			}
		})
	}
}
