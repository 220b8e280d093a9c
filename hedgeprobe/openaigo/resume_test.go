package openaigo_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// TestResume: a stream that falls silent after commit is continued on the
// next route that can (a trailing assistant message), once, twice, past a
// route that refuses; the caller reads the script byte for byte.
func TestResume(t *testing.T) {
	adapter.CheckResumeCases(t, func(t *testing.T, up *adaptertest.Upstream, r adaptertest.RouteSpec) hedgeprobe.Route[openaigo.Chunk] {
		return route(t, up, r.Profile, r.Continuation())
	}, readText)
}

// TestResumeSwitches: the servers' switches reach the wire — fakellm's
// steady-final-message and steady-prefix profiles continue only with
// theirs, and answer afresh (the whole script again) without it.
func TestResumeSwitches(t *testing.T) {
	adapter.CheckResumeSwitches(t, route, readText)
}

// TestResumeAfterCallerPrefill: params that end in the caller's own
// assistant message are resumed with that message extended by the
// delivered text.
func TestResumeAfterCallerPrefill(t *testing.T) {
	p := params
	p.Messages = append(slices.Clip(p.Messages), openai.AssistantMessage(adaptertest.CallerPrefill))
	adapter.CheckResumeAfterCallerPrefill(t, func(t *testing.T, up *adaptertest.Upstream, profile string) hedgeprobe.Route[openaigo.Chunk] {
		return openaigo.Route(profile, newClient(t, up, profile, false), p, openaigo.RouteOptions{Continue: sse.ContinueTrailingAssistant})
	}, readText)
}

// route is the openai-go route of one fakellm profile that continues in
// the way how.
// TestResumeMistralByProvider: a route whose provider is Mistral's,
// continuing with ContinuePrefix, drops the repeat of the prefix its
// answer starts with (sse.ContinuationOf): the caller reads the script
// once.
func TestResumeMistralByProvider(t *testing.T) {
	up := adaptertest.Start(t)
	mistral := openaigo.Route("steady-prefix-echo", newClient(t, up, "steady-prefix-echo", false), params,
		openaigo.RouteOptions{Provider: sse.ProviderMistralAI, Continue: sse.ContinuePrefix})
	res := adapter.ResumeCall(t, adaptertest.ResumeConfig, readText, route(t, up, "stall", sse.ContinueNone), mistral)
	res.Check(t, adaptertest.ResumeCase{Attempts: []adaptertest.WantAttempt{
		{Trigger: hedgeprobe.TriggerPrimary, Route: "stall", Outcome: hedgeprobe.AttemptCanceled},
		{Trigger: hedgeprobe.TriggerResume, Route: "steady-prefix-echo", Outcome: hedgeprobe.AttemptWinner},
	}})
}

func route(t *testing.T, up *adaptertest.Upstream, profile string, how sse.Continuation) hedgeprobe.Route[openaigo.Chunk] {
	return openaigo.Route(profile, newClient(t, up, profile, false), params, openaigo.RouteOptions{Continue: how})
}

// TestManyChoicesDoNotContinue: params asking for more than one choice,
// in N or in an extra field the SDK sends beside it, make a route that
// cannot resume, whatever its Continue: a continuation would carry choice
// 0's text into every choice.
func TestManyChoicesDoNotContinue(t *testing.T) {
	for _, c := range []struct {
		n     int64 // 0: unset
		extra any   // an extra field "n"; absent when nil
		want  bool
	}{{0, nil, true}, {1, nil, true}, {2, nil, false}, {8, nil, false}, {0, 1, true}, {0, 2, false}, {1, 2.0, false}, {0, "two", false}} {
		p := params
		if c.n != 0 {
			p.N = openai.Int(c.n)
		}
		if c.extra != nil {
			p.SetExtraFields(map[string]any{"n": c.extra})
		}
		r := openaigo.Route("r", openai.NewClient(option.WithBaseURL("http://127.0.0.1:1")), p,
			openaigo.RouteOptions{Continue: sse.ContinuePrefix})
		if r.Continues != c.want {
			t.Errorf("n %d, extra n %v: Continues %v, want %v", c.n, c.extra, r.Continues, c.want)
		}
	}
}

// TestItemsText: content and refusal are answer text; reasoning is
// content but not text; a tool-call or function-call fragment cannot be
// continued.
func TestItemsText(t *testing.T) {
	adaptertest.CheckChatText(t, openaigo.Items.Text)
}

// TestItemsOpening: a role chunk opens an answer; a finish reason or
// usage does not.
func TestItemsOpening(t *testing.T) {
	adaptertest.CheckOpening(t, adaptertest.ChatOpeningCases, openaigo.Items.Opening)
	adaptertest.CheckOpening(t, adaptertest.ChatFollowsCases, openaigo.Items.Follows)
}

// TestItemsResponse: the response's id, input tokens and finish reasons,
// for the attempt span.
func TestItemsResponse(t *testing.T) {
	adaptertest.CheckResponse(t, adaptertest.ChatResponseCases, openaigo.Items)
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
			adaptertest.CheckResumeBody(t, up, &tc.params, func() hedgeprobe.Route[openaigo.Chunk] {
				return openaigo.Route("r", client, tc.params, openaigo.RouteOptions{Continue: tc.how})
			}, tc.want)
		})
	}
}

// TestRelabel: a continuation's chunks take the answer's id and created,
// keep their model; a tapped keepalive stays empty.
func TestRelabel(t *testing.T) {
	adaptertest.CheckChatRelabel(t, openaigo.Relabel, func(c openaigo.Chunk) (string, int64, string) { return c.ID, c.Created, c.Model })
}

// TestRelabelRawJSON: a relabelled chunk's RawJSON, which a gateway
// relays, carries the answer's id and keeps the text's bytes (no HTML
// escaping); a chunk built in code, with no JSON, is relabelled in its
// fields.
func TestRelabelRawJSON(t *testing.T) {
	var answer, c openaigo.Chunk
	if err := answer.UnmarshalJSON([]byte(`{"id":"chatcmpl-A","created":100,"choices":[{"index":0,"delta":{"content":"x"}}]}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.UnmarshalJSON([]byte(`{"id":"chatcmpl-B","created":200,"model":"b","choices":[{"index":0,"delta":{"content":"<b> & é"}}]}`)); err != nil {
		t.Fatal(err)
	}
	got := openaigo.Relabel(answer, c)
	for _, want := range []string{`"id":"chatcmpl-A"`, `"created":100`, `"content":"<b> & é"`, `"model":"b"`} {
		if !strings.Contains(got.RawJSON(), want) {
			t.Errorf("RawJSON %s lacks %s", got.RawJSON(), want)
		}
	}
	if got.Choices[0].Delta.Content != "<b> & é" || c.ID != "chatcmpl-B" {
		t.Errorf("content %q, the original's id %q: want the text kept and the original untouched", got.Choices[0].Delta.Content, c.ID)
	}

	built := openaigo.Chunk{ID: "chatcmpl-B", Created: 200, Choices: []openai.ChatCompletionChunkChoice{{Delta: openai.ChatCompletionChunkChoiceDelta{Content: "y"}}}}
	if got := openaigo.Relabel(answer, built); got.ID != "chatcmpl-A" || got.Created != 100 {
		t.Errorf("a chunk built in code: id %q created %d, want chatcmpl-A 100", got.ID, got.Created)
	}

	// The rest of the JSON keeps its bytes: its order, its spacing.
	var spaced openaigo.Chunk
	if err := spaced.UnmarshalJSON([]byte(`{"model": "b", "id": "chatcmpl-B", "choices": [{"index": 0, "delta": {"content": "z"}}], "created": 200}`)); err != nil {
		t.Fatal(err)
	}
	if got := openaigo.Relabel(answer, spaced).RawJSON(); got != `{"model": "b", "id": "chatcmpl-A", "choices": [{"index": 0, "delta": {"content": "z"}}], "created": 100}` {
		t.Errorf("RawJSON %s: want only the id and created changed", got)
	}

	// A chunk whose fields were changed after decoding (a caller's Source
	// that redacts them) keeps the change: its JSON would undo it.
	redacted := c
	redacted.Choices = slices.Clone(c.Choices)
	redacted.Choices[0].Delta.Content = "[redacted]"
	if got := openaigo.Relabel(answer, redacted); got.Choices[0].Delta.Content != "[redacted]" || got.ID != "chatcmpl-A" {
		t.Errorf("a redacted chunk relabelled: content %q id %q, want [redacted] chatcmpl-A", got.Choices[0].Delta.Content, got.ID)
	}

	// A key that comes twice: the one the SDK read is the one kept.
	var twice openaigo.Chunk
	if err := twice.UnmarshalJSON([]byte(`{"id":"chatcmpl-B","choices":[{"index":0,"delta":{"content":"first"}}],"choices":null}`)); err != nil {
		t.Fatal(err)
	}
	before := twice.Choices
	got = openaigo.Relabel(answer, twice)
	if len(got.Choices) != len(before) || len(before) > 0 && got.Choices[0].Delta.Content != before[0].Delta.Content {
		t.Errorf("a key twice: choices %+v after relabelling, %+v before", got.Choices, before)
	}
}

// TestResumeDropsEcho: vLLM's "echo" would repeat the delivered text
// before the continuation; a resume attempt does not send it on, a primary
// sends the caller's params as they are.
func TestResumeDropsEcho(t *testing.T) {
	up := adaptertest.CaptureBodies(t)
	client := openai.NewClient(option.WithBaseURL(up.URL), option.WithAPIKey("test"), option.WithMaxRetries(0),
		option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{})))
	p := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a story")}}
	p.SetExtraFields(map[string]any{"echo": true})
	byField := openaigo.Route("vllm", client, p, openaigo.RouteOptions{Continue: sse.ContinueFinalMessage})
	p.SetExtraFields(nil)
	byOption := openaigo.Route("vllm", client, p, openaigo.RouteOptions{Continue: sse.ContinueFinalMessage,
		RequestOptions: []option.RequestOption{option.WithJSONSet("echo", true)}})
	for name, r := range map[string]hedgeprobe.Route[openaigo.Chunk]{"extra field": byField, "request option": byOption} {
		for _, a := range []hedgeprobe.Attempt{
			{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once upon"},
			{Index: 0, Trigger: hedgeprobe.TriggerPrimary},
		} {
			src, err := r.Open(t.Context(), a)
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Drain(t, src)
			body := up.Next(t)
			if _, echoed := body["echo"]; echoed != (a.Trigger == hedgeprobe.TriggerPrimary) {
				t.Errorf("%s, %s: echo sent %v: %v", name, a.Trigger, echoed, body)
			}
		}
	}
}

// TestResumeToolCall: a continuation that goes on from the delivered text
// with a tool call reaches openai-go's ChatCompletionAccumulator whole —
// also when the call's id comes alone, before its name, in the
// continuation's opening chunks.
func TestResumeToolCall(t *testing.T) {
	adapter.CheckResumeToolCall(t, func(t *testing.T, name, url string) hedgeprobe.Route[openaigo.Chunk] {
		return openaigo.Route(name, clientOf(t, url, false), params, openaigo.RouteOptions{Continue: sse.ContinueTrailingAssistant})
	}, func(t testing.TB, stream *hedgeprobe.Stream[openaigo.Chunk]) (string, []string, string, error) {
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			if chunk := stream.Current(); chunk.ID != "" && !acc.AddChunk(chunk) {
				t.Fatalf("ChatCompletionAccumulator refused chunk %q after %q", chunk.ID, acc.ID)
			}
		}
		if len(acc.Choices) == 0 {
			return "", nil, "", stream.Err()
		}
		var calls []string
		for _, c := range acc.Choices[0].Message.ToolCalls {
			calls = append(calls, c.ID+" "+c.Function.Name+c.Function.Arguments)
		}
		return acc.Choices[0].Message.Content, calls, acc.Choices[0].FinishReason, stream.Err()
	})
}

// Mistral's API refuses stream_options (422, extra_forbidden): a Mistral
// route — provider mistral_ai, or ContinuePrefixEcho — sends none, on its
// first attempt and on a resume; any other route asks for usage;
// option.WithJSONDel takes it out of any route.
func TestStreamOptions(t *testing.T) {
	up := adaptertest.CaptureBodies(t)
	client := openai.NewClient(option.WithBaseURL(up.URL), option.WithAPIKey("test"), option.WithMaxRetries(0),
		option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{})))
	p := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a story")}}
	// The params every route of a call shares, usage asked for by the
	// caller: a Mistral route sends none all the same.
	asked := p
	asked.StreamOptions.IncludeUsage = openai.Bool(true)
	for _, tc := range []struct {
		name   string
		params openai.ChatCompletionNewParams
		o      openaigo.RouteOptions
		sent   bool
	}{
		{"DeepSeek", p, openaigo.RouteOptions{Continue: sse.ContinuePrefix}, true},
		{"DeepSeek, asked", asked, openaigo.RouteOptions{Continue: sse.ContinuePrefix}, true},
		{"Mistral by continuation", p, openaigo.RouteOptions{Continue: sse.ContinuePrefixEcho}, false},
		{"Mistral by provider", p, openaigo.RouteOptions{Provider: sse.ProviderMistralAI, Continue: sse.ContinuePrefix}, false},
		{"Mistral by continuation, asked", asked, openaigo.RouteOptions{Continue: sse.ContinuePrefixEcho}, false},
		{"Mistral by provider, asked", asked, openaigo.RouteOptions{Provider: sse.ProviderMistralAI}, false},
		{"deleted", p, openaigo.RouteOptions{Continue: sse.ContinuePrefix, RequestOptions: []option.RequestOption{option.WithJSONDel("stream_options")}}, false},
	} {
		r := openaigo.Route("r", client, tc.params, tc.o)
		for _, a := range []hedgeprobe.Attempt{
			{Index: 0, Trigger: hedgeprobe.TriggerPrimary},
			{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once upon"},
		} {
			src, err := r.Open(t.Context(), a)
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Drain(t, src)
			body := up.Next(t)
			if so, sent := body["stream_options"]; sent != tc.sent {
				t.Errorf("%s, %s: stream_options %v (sent: %v), want sent: %v", tc.name, a.Trigger, so, sent, tc.sent)
			}
		}
	}
}

// TestContinuationAsksForTheRest: a resume attempt after 30 content
// chunks asks for the params' token limits less 30
// (sse.ContinuationLimit); a primary asks for them as they are, and
// params without a limit send none.
func TestContinuationAsksForTheRest(t *testing.T) {
	up := adaptertest.CaptureBodies(t)
	client := openai.NewClient(option.WithBaseURL(up.URL), option.WithAPIKey("test"), option.WithMaxRetries(0),
		option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{})))
	limited := params
	limited.MaxTokens, limited.MaxCompletionTokens = openai.Int(100), openai.Int(200)
	resume := hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once", PrefixChunks: 30}
	for _, tc := range []struct {
		name     string
		params   openai.ChatCompletionNewParams
		how      sse.Continuation
		a        hedgeprobe.Attempt
		max, mct any
	}{
		{"primary", limited, sse.ContinueTrailingAssistant, hedgeprobe.Attempt{}, 100.0, 200.0},
		{"resume", limited, sse.ContinueTrailingAssistant, resume, 70.0, 170.0},
		{"resume, no limit", params, sse.ContinueTrailingAssistant, resume, nil, nil},
		// The repeat of the prefix may count against the limit.
		{"resume, prefix repeated", limited, sse.ContinuePrefixEcho, resume, 100.0, 200.0},
	} {
		src, err := openaigo.Route("r", client, tc.params, openaigo.RouteOptions{Continue: tc.how}).Open(t.Context(), tc.a)
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.Drain(t, src)
		body := up.Next(t)
		if body["max_tokens"] != tc.max || body["max_completion_tokens"] != tc.mct {
			t.Errorf("%s: max_tokens %v, max_completion_tokens %v; want %v, %v", tc.name, body["max_tokens"], body["max_completion_tokens"], tc.max, tc.mct)
		}
	}
}
