package goopenai_test

import (
	"errors"
	"io"
	"slices"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// TestResume: a stream that falls silent after commit is continued on the
// next route that can (a trailing assistant message, the one way go-openai
// can send), once, twice, past a route that refuses; the caller reads the
// script byte for byte.
func TestResume(t *testing.T) {
	adapter.CheckResumeCases(t, func(t *testing.T, up *adaptertest.Upstream, r adaptertest.RouteSpec) hedgeprobe.Route[goopenai.Chunk] {
		return goopenai.Route(r.Profile, newClient(t, up, r.Profile, false), req, goopenai.RouteOptions{Continue: r.Continuation()})
	}, recvText)
}

// TestResumeAfterCallerPrefill: a request that ends in the caller's own
// assistant message is resumed with that message extended by the
// delivered text.
func TestResumeAfterCallerPrefill(t *testing.T) {
	r := req
	r.Messages = append(slices.Clip(r.Messages), openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: adaptertest.CallerPrefill})
	adapter.CheckResumeAfterCallerPrefill(t, func(t *testing.T, up *adaptertest.Upstream, profile string) hedgeprobe.Route[goopenai.Chunk] {
		return goopenai.Route(profile, newClient(t, up, profile, false), r, goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant})
	}, recvText)
}

// TestContinuationUnsupported: a switch go-openai cannot send fails every
// attempt with ErrContinuation, fatally, instead of resuming into an
// answer that starts afresh.
func TestContinuationUnsupported(t *testing.T) {
	up := adaptertest.Start(t)
	for _, how := range []sse.Continuation{sse.ContinueFinalMessage, sse.ContinuePrefix} {
		r := goopenai.Route("steady", newClient(t, up, "steady", false), req, goopenai.RouteOptions{Continue: how})
		res := adapter.ResumeCall(t, adaptertest.ResumeConfig, recvText, r)
		if !errors.Is(res.Err, goopenai.ErrContinuation) || hedgeprobe.IsTransient(res.Err) || len(res.Stats.Attempts) != 1 {
			t.Fatalf("continuation %d: err %v, %d attempts", how, res.Err, len(res.Stats.Attempts))
		}
	}
}

// TestManyChoicesDoNotContinue: a request for more than one choice makes
// a route that cannot resume, whatever its Continue: a continuation would
// carry choice 0's text into every choice.
func TestManyChoicesDoNotContinue(t *testing.T) {
	for _, c := range []struct {
		n    int
		want bool
	}{{0, true}, {1, true}, {2, false}, {8, false}} {
		rq := req
		rq.N = c.n
		r := goopenai.Route("r", openai.NewClientWithConfig(openai.DefaultConfig("")), rq,
			goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant})
		if r.Continues != c.want {
			t.Errorf("n %d: Continues %v, want %v", c.n, r.Continues, c.want)
		}
	}
}

// TestItemsText: content and refusal are answer text; reasoning is
// content but not text; a tool-call or function-call fragment cannot be
// continued.
func TestItemsText(t *testing.T) {
	adaptertest.CheckChatText(t, goopenai.Items.Text)
}

// TestItemsOpening: a role chunk opens an answer; a finish reason or
// usage does not.
func TestItemsOpening(t *testing.T) {
	adaptertest.CheckOpening(t, adaptertest.ChatOpeningCases, goopenai.Items.Opening)
	adaptertest.CheckOpening(t, adaptertest.ChatFollowsCases, goopenai.Items.Follows)
}

// TestItemsResponse: the response's id, input tokens and finish reasons,
// for the attempt span.
func TestItemsResponse(t *testing.T) {
	adaptertest.CheckResponse(t, adaptertest.ChatResponseCases, goopenai.Items)
}

// TestResumeExtendsPrefill: a request that already ends in an assistant
// message (the caller's own prefill) is continued in that one message —
// prefill + delivered text; one that cannot be continued fails with
// hedgeprobe.ErrCannotContinue before any request. The caller's request is
// left as it was.
func TestResumeExtendsPrefill(t *testing.T) {
	up, client := capturing(t)
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
			var want map[string]any
			if tc.want != "" {
				want = map[string]any{"role": "assistant", "content": tc.want}
			}
			adaptertest.CheckResumeBody(t, up, &req, func() hedgeprobe.Route[goopenai.Chunk] {
				return goopenai.Route("r", client, req, goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant})
			}, want)
		})
	}
}

// TestRelabel: a continuation's chunks take the answer's id and created,
// keep their model; a tapped keepalive stays empty.
func TestRelabel(t *testing.T) {
	adaptertest.CheckChatRelabel(t, goopenai.Relabel, func(c goopenai.Chunk) (string, int64, string) { return c.ID, c.Created, c.Model })
}

// TestResumeToolCall: a continuation that goes on from the delivered text
// with a tool call reaches go-openai's Recv loop whole — also when the
// call's id comes alone, before its name, in the continuation's opening
// chunks.
func TestResumeToolCall(t *testing.T) {
	adapter.CheckResumeToolCall(t, func(t *testing.T, name, url string) hedgeprobe.Route[goopenai.Chunk] {
		return goopenai.Route(name, clientOf(t, url, false), req, goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant})
	}, func(t testing.TB, hs *hedgeprobe.Stream[goopenai.Chunk]) (string, []string, string, error) {
		stream := goopenai.NewReceiver(hs)
		content, finish := "", ""
		var calls []openai.ToolCall
		for {
			resp, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				var out []string
				for _, c := range calls {
					out = append(out, c.ID+" "+c.Function.Name+c.Function.Arguments)
				}
				return content, out, finish, err
			}
			for _, ch := range resp.Choices {
				content += ch.Delta.Content
				if ch.FinishReason != "" {
					finish = string(ch.FinishReason)
				}
				// go-openai has no accumulator: the usual loop merges the
				// fragments by index.
				for _, f := range ch.Delta.ToolCalls {
					i := 0
					if f.Index != nil {
						i = *f.Index
					}
					for len(calls) <= i {
						calls = append(calls, openai.ToolCall{})
					}
					if f.ID != "" {
						calls[i].ID = f.ID
					}
					calls[i].Function.Name += f.Function.Name
					calls[i].Function.Arguments += f.Function.Arguments
				}
			}
		}
	})
}

// Mistral's API refuses stream_options (422, extra_forbidden): a route of
// provider mistral_ai sends none; any other asks for usage unless the
// request sets StreamOptions itself.
func TestStreamOptions(t *testing.T) {
	up, client := capturing(t)
	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "a story"}}}
	// The request every route of a call shares, usage asked for by the
	// caller: a Mistral route sends none all the same.
	asked := req
	asked.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	for _, tc := range []struct {
		name     string
		req      openai.ChatCompletionRequest
		provider string
		sent     bool
	}{
		{"OpenAI", req, "", true},
		{"OpenAI, asked", asked, "", true},
		{"Mistral", req, sse.ProviderMistralAI, false},
		{"Mistral, asked", asked, sse.ProviderMistralAI, false},
	} {
		src, err := goopenai.Route("r", client, tc.req, goopenai.RouteOptions{Provider: tc.provider}).Open(t.Context(), hedgeprobe.Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.Drain(t, src)
		if so, sent := up.Next(t)["stream_options"]; sent != tc.sent {
			t.Errorf("%s: stream_options %v (sent: %v), want sent: %v", tc.name, so, sent, tc.sent)
		}
	}
}

// capturing returns an upstream that records each request body and
// answers a one-chunk stream, and a go-openai client of it.
func capturing(t *testing.T) (*adaptertest.Bodies, *openai.Client) {
	up := adaptertest.CaptureBodies(t)
	cfg := openai.DefaultConfig("test")
	cfg.BaseURL = up.URL
	cfg.HTTPClient = adaptertest.HTTPClient(t, adaptertest.ClientOptions{})
	return up, openai.NewClientWithConfig(cfg)
}

// TestContinuationAsksForTheRest: a resume attempt after 30 content
// chunks asks for the request's token limit less 30
// (sse.ContinuationLimit); a primary asks for it as it is.
func TestContinuationAsksForTheRest(t *testing.T) {
	up, client := capturing(t)
	resume := hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once", PrefixChunks: 30}
	for _, tc := range []struct {
		name  string
		a     hedgeprobe.Attempt
		field string
		limit func(*openai.ChatCompletionRequest)
		want  float64
	}{
		{"primary, max_tokens", hedgeprobe.Attempt{}, "max_tokens", setMaxTokens, 100},
		{"resume, max_tokens", resume, "max_tokens", setMaxTokens, 70},
		{"resume, max_completion_tokens", resume, "max_completion_tokens", func(r *openai.ChatCompletionRequest) { r.MaxCompletionTokens = 200 }, 170},
	} {
		req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "a story"}}}
		tc.limit(&req)
		src, err := goopenai.Route("r", client, req, goopenai.RouteOptions{Continue: sse.ContinueTrailingAssistant}).Open(t.Context(), tc.a)
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.Drain(t, src)
		if got := up.Next(t)[tc.field]; got != tc.want {
			t.Errorf("%s: %s %v, want %v", tc.name, tc.field, got, tc.want)
		}
	}
}

// setMaxTokens sets the request's max_tokens to 100: the field callers
// still set, deprecated in go-openai.
func setMaxTokens(r *openai.ChatCompletionRequest) {
	//lint:ignore SA1019 the deprecated field is the one under test
	r.MaxTokens = 100
}
