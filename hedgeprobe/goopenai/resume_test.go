package goopenai_test

import (
	"encoding/json"
	"errors"
	"io"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// resumeCall runs one call over routes with go-openai's Recv loop and
// returns what the caller read.
func resumeCall(t *testing.T, cfg hedgeprobe.Config, routes ...hedgeprobe.Route[goopenai.Chunk]) adaptertest.Resumed {
	hs := adapter.NewProber(t, cfg).Stream(t.Context(), routes...)
	stream := goopenai.NewReceiver(hs)
	defer stream.Close()
	text := ""
	var err error
	for {
		var resp goopenai.Chunk
		resp, err = stream.Recv()
		if err != nil {
			break
		}
		if len(resp.Choices) > 0 {
			text += resp.Choices[0].Delta.Content
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return adaptertest.Resumed{Stats: hs.Stats(), Text: text, Err: err}
}

// TestResume: a stream that falls silent after commit is continued on the
// next route that can (a trailing assistant message, the one way go-openai
// can send), once, twice, past a route that refuses; the caller reads the
// script byte for byte.
func TestResume(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range adaptertest.ResumeCases {
		t.Run(tc.Name, func(t *testing.T) {
			var routes []hedgeprobe.Route[goopenai.Chunk]
			for _, r := range tc.Routes {
				o := goopenai.RouteOptions{}
				if r.Continues {
					o.Continue = sse.ContinueTrailingAssistant
				}
				routes = append(routes, goopenai.Route(r.Profile, newClient(t, up, r.Profile, false), req, o))
			}
			resumeCall(t, tc.Config, routes...).Check(t, tc)
		})
	}
}

// TestContinuationUnsupported: a switch go-openai cannot send fails every
// attempt with ErrContinuation, fatally, instead of resuming into an
// answer that starts afresh.
func TestContinuationUnsupported(t *testing.T) {
	up := adaptertest.Start(t)
	for _, how := range []sse.Continuation{sse.ContinueFinalMessage, sse.ContinuePrefix} {
		r := goopenai.Route("steady", newClient(t, up, "steady", false), req, goopenai.RouteOptions{Continue: how})
		res := resumeCall(t, adaptertest.ResumeConfig, r)
		if !errors.Is(res.Err, goopenai.ErrContinuation) || hedgeprobe.IsTransient(res.Err) || len(res.Stats.Attempts) != 1 {
			t.Fatalf("continuation %d: err %v, %d attempts", how, res.Err, len(res.Stats.Attempts))
		}
	}
}

// TestItemsText: content and refusal are answer text; reasoning is
// content but not text; a tool-call or function-call fragment cannot be
// continued.
func TestItemsText(t *testing.T) {
	adaptertest.CheckChatText(t, goopenai.Items.Text)
}

// TestResumeExtendsPrefill: a request that already ends in an assistant
// message (the caller's own prefill) is continued in that one message —
// prefill + delivered text; one that cannot be continued fails with
// hedgeprobe.ErrCannotContinue before any request. The caller's request is
// left as it was.
func TestResumeExtendsPrefill(t *testing.T) {
	up := adaptertest.CaptureBodies(t)
	cfg := openai.DefaultConfig("test")
	cfg.BaseURL = up.URL
	cfg.HTTPClient = adaptertest.HTTPClient(t, adaptertest.ClientOptions{})
	client := openai.NewClientWithConfig(cfg)
	user := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: "a story"}
	for _, tc := range []struct {
		name string
		last openai.ChatCompletionMessage
		want string // the last message's content sent; "": ErrCannotContinue
	}{
		{"text", openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "Once upon"}, "Once upon a time"},
		{"text parts", openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "Once "}, {Type: openai.ChatMessagePartTypeText, Text: "upon"},
		}}, "Once upon a time"},
		{"tool call", openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{
			{ID: "c1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "f", Arguments: "{}"}},
		}}, ""},
		{"refusal", openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Refusal: "no"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{user, tc.last}}
			before, _ := json.Marshal(req)
			r := goopenai.Route("r", client, req, goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant})
			src, err := r.Open(t.Context(), hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: " a time"})
			if tc.want == "" {
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
			if last := msgs[1].(map[string]any); last["role"] != "assistant" || last["content"] != tc.want || len(last) != 2 {
				t.Fatalf("last message %v, want the assistant's %q alone", last, tc.want)
			}
			if after, _ := json.Marshal(req); string(after) != string(before) {
				t.Fatalf("the caller's request changed:\n%s\n%s", before, after)
			}
		})
	}
}
