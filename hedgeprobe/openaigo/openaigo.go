package openaigo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/bodyend"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/eventsize"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/prefill"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/streamend"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Chunk is the item type of an openai-go chat-completions stream.
type Chunk = openai.ChatCompletionChunk

// Classify is the hedgeprobe.Classifier of openai-go chunks, with the rule
// of sse.ClassifyOpenAI: non-empty content, reasoning_content / reasoning
// (read from the delta's extra fields), refusal, a tool-call (or
// function-call) name or arguments fragment, or annotations, is Content; a role, a finish reason or usage is Control;
// anything else — an empty chunk, such as a tapped keepalive — is
// Keepalive.
func Classify(c Chunk) hedgeprobe.Kind {
	return classify.Chat(c.JSON.Usage.Valid(), c.Choices, choiceParts)
}

// choiceParts describes an openai-go choice for classify.Chat.
func choiceParts(ch *openai.ChatCompletionChunkChoice) classify.ChatParts {
	d := &ch.Delta
	p := classify.ChatParts{
		Content:      d.Content != "",
		Refusal:      d.Refusal != "",
		ToolCallText: toolCallText(d.ToolCalls),
		ToolCalls:    len(d.ToolCalls) > 0,
		// The legacy single function call is deprecated in the API but
		// still streamed by older OpenAI-compatible servers: it is content.
		//lint:ignore SA1019 see above
		FunctionCall: d.FunctionCall.Name != "" || d.FunctionCall.Arguments != "",
		Role:         d.Role != "",
		FinishReason: ch.FinishReason != "",
	}
	// reasoning_content, reasoning and annotations are not fields of the
	// SDK's delta: they are read from its extra fields, as raw JSON.
	x := d.JSON.ExtraFields
	p.Reasoning = extraText(x["reasoning_content"].Raw()) || extraText(x["reasoning"].Raw())
	raw := x["annotations"].Raw()
	p.Annotations = classify.NonEmptyJSONArray(raw)
	return p
}

// toolCallText reports a tool-call fragment with a name or arguments.
func toolCallText(tcs []openai.ChatCompletionChunkChoiceDeltaToolCall) bool {
	for i := range tcs {
		if f := &tcs[i].Function; f.Name != "" || f.Arguments != "" {
			return true
		}
	}
	return false
}

// extraText reports whether raw JSON is a non-empty string.
func extraText(raw string) bool {
	return len(raw) > 2 && raw[0] == '"'
}

// Tokens is the hedgeprobe.TokenCount of openai-go chunks:
// usage.completion_tokens of the usage chunk (the request needs
// stream_options.include_usage).
func Tokens(c Chunk) (int64, bool) {
	if !c.JSON.Usage.Valid() {
		return 0, false
	}
	return c.Usage.CompletionTokens, true
}

// Items tells a hedgeprobe.Prober about openai-go chunks: Classify,
// Tokens, the response's model, id, input tokens and finish reasons, and
// Text and Relabel for resume.
var Items = hedgeprobe.Items[Chunk]{
	Classify:      Classify,
	OutputTokens:  Tokens,
	ResponseModel: func(c Chunk) (string, bool) { return c.Model, c.Model != "" },
	ResponseID:    func(c Chunk) (string, bool) { return c.ID, c.ID != "" },
	InputTokens: func(c Chunk) (int64, bool) {
		// prompt_tokens counts the cached tokens in.
		return c.Usage.PromptTokens, c.JSON.Usage.Valid()
	},
	FinishReasons: func(c Chunk, finished func(int, string)) {
		for i := range c.Choices {
			finished(int(c.Choices[i].Index), c.Choices[i].FinishReason)
		}
	},
	Text:    Text,
	Relabel: Relabel,
	Follows: Follows,
	Opening: Opening,
}

// Follows is the hedgeprobe Items.Follows of openai-go chunks: a chunk
// with a tool-call or function-call fragment begins a call that follows
// the answer's text, so that a fragment before the continuation's first
// content (the call's id alone) reaches the caller.
func Follows(c Chunk) bool {
	return classify.ChatFollows(c.Choices, func(ch *openai.ChatCompletionChunkChoice) bool {
		//lint:ignore SA1019 the legacy function call, still streamed by older servers
		return len(ch.Delta.ToolCalls) > 0 || ch.Delta.FunctionCall.Name != "" || ch.Delta.FunctionCall.Arguments != ""
	})
}

// Opening is the hedgeprobe Items.Opening of openai-go chunks: a Control
// chunk that finishes no choice opens the answer when it carries a role or
// no usage (the role chunk).
func Opening(c Chunk) bool {
	return classify.ChatOpening(c.JSON.Usage.Valid(), c.Choices, func(ch *openai.ChatCompletionChunkChoice) (bool, bool) {
		return ch.FinishReason != "", ch.Delta.Role != ""
	})
}

// RouteOptions configures Route.
type RouteOptions struct {
	// Provider is the gen_ai.provider.name; default "openai".
	Provider string
	// RequestOptions are passed to every NewStreaming call, after the
	// client's own (option.WithHeader, option.WithBaseURL…). The route
	// adds option.WithResponseInto of its own, last, to type what the SDK
	// cannot (a 200 that is not a stream, an undecodable error): one in
	// RequestOptions is not filled. It adds a middleware too, which gives
	// the body of an error response a second to arrive
	// (sse.BoundErrorBody).
	RequestOptions []option.RequestOption
	// TapKeepalives yields an empty chunk (Keepalive) for each comment the
	// client's sse.Tap saw, so hedgeprobe times keepalives the SDK drops.
	// It needs the client built with
	// option.WithHTTPClient(&http.Client{Transport: &sse.Tap{}}).
	TapKeepalives bool
	// Continue says how the upstream continues a partial answer
	// (docs/design.md §2 rule 10); with anything but sse.ContinueNone the
	// route can resume (Route.Continues). A resume attempt appends the
	// delivered text as a trailing assistant message and, for
	// sse.ContinueFinalMessage, sets "continue_final_message": true and
	// "add_generation_prompt": false in the body, or, for
	// sse.ContinuePrefix, "prefix": true on that message (both with
	// option.WithJSONSet, as the SDK has no fields for them), and for
	// sse.ContinuePrefixEcho the same, the repeat of the prefix dropped
	// from the answer. When the params' messages already end in an
	// assistant message (a prefill of your own), the delivered text is
	// appended to its content instead, so the upstream continues one
	// message (sse.ContinuePrefixEcho refuses such a request); with sse.ContinueFinalMessage
	// that takes "continue_final_message": true in the params' extra
	// fields (SetExtraFields; an option in RequestOptions is not seen), and
	// the message must hold text only. Otherwise the resume attempt fails
	// with hedgeprobe.ErrCannotContinue: the resume is skipped and the
	// call goes on. OpenAI's own API continues nothing: leave it
	// sse.ContinueNone there. Params asking for more than one choice (N,
	// or an extra field "n", above 1) never continue, whatever Continue
	// says: a continuation would carry choice 0's text into every choice.
	// An "n" set in RequestOptions (option.WithJSONSet) is not seen: set
	// it in the params.
	Continue sse.Continuation
}

// Route returns a hedgeprobe route named name that streams params with
// client. Each attempt calls client.Chat.Completions.NewStreaming with the
// attempt's context; its stream (an ssestream.Stream, a hedgeprobe.Source
// as it is) is wrapped only to type its errors for hedging — HTTP errors
// and error payloads become *sse.UpstreamError (with Retry-After), broken
// connections *sse.ConnectionError, each unwrapping to the SDK's error —
// and to turn a stream that ends before each of its choices has a
// finish_reason into an error (openai-go reports a body cut before [DONE]
// as a clean end). A 200 response that is not an event stream, and an
// error body the SDK cannot decode, are typed from the response itself.
//
// Build client with option.WithMaxRetries(0): under hedging a retry is
// another attempt, which hedgeprobe launches and budgets itself.
//
// The route asks for stream_options.include_usage (Tokens needs it)
// unless params set it. Where sse.RefusesStreamOptions says the upstream
// refuses the field (Mistral's API: provider sse.ProviderMistralAI, or
// Continue sse.ContinuePrefixEcho), which reports usage on its last chunk
// all the same, it sends none, even when params set it — params are
// often shared by every route of a call. Another server that refuses it
// is sent none with option.WithJSONDel("stream_options") in
// RequestOptions.
func Route(name string, client openai.Client, params openai.ChatCompletionNewParams, o RouteOptions) hedgeprobe.Route[Chunk] {
	if o.Provider == "" {
		o.Provider = "openai"
	}
	o.Continue = sse.ContinuationOf(o.Provider, o.Continue)
	switch {
	case sse.RefusesStreamOptions(o.Provider, o.Continue):
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	case !params.StreamOptions.IncludeUsage.Valid():
		params.StreamOptions.IncludeUsage = openai.Bool(true)
	}
	open := func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[Chunk], error) {
		params, opts := params, o.RequestOptions
		if a.Trigger == hedgeprobe.TriggerResume && o.Continue != sse.ContinueNone {
			var err error
			if params, opts, err = continuation(params, opts, o.Continue, a.Prefix); err != nil {
				return nil, fmt.Errorf("%w: route %s: %w", hedgeprobe.ErrCannotContinue, name, err)
			}
			if o.Continue != sse.ContinuePrefixEcho { // as sse.OpenAIRoute: the repeat may count too
				params.MaxTokens = continuationLimit(params.MaxTokens, a.PrefixChunks)
				params.MaxCompletionTokens = continuationLimit(params.MaxCompletionTokens, a.PrefixChunks)
			}
		}
		var resp *http.Response
		s := client.Chat.Completions.NewStreaming(ctx, params, append(slices.Clip(opts), option.WithMiddleware(boundErrorBody), option.WithResponseInto(&resp))...)
		if err := streamend.Opened(o.Provider, resp); err != nil {
			_ = s.Close()
			return nil, err
		}
		src := &streamend.Checked[Chunk]{
			Source:    s,
			Provider:  o.Provider,
			MapError:  func(err error) error { return mapError(ctx, o.Provider, err, resp) },
			Terminal:  finished(),
			Responded: resp != nil,
		}
		if a.Trigger == hedgeprobe.TriggerResume && o.Continue == sse.ContinuePrefixEcho {
			return echoDropped(src, a.Prefix), nil
		}
		return src, nil
	}
	r := hedgeprobe.Route[Chunk]{Name: name, Provider: o.Provider, Model: string(params.Model), Open: open,
		Continues: o.Continue != sse.ContinueNone && !(params.N.Valid() && params.N.Value > 1) &&
			!prefill.ManyChoices(params.ExtraFields())}
	if o.TapKeepalives {
		r = sse.KeepaliveRoute(r)
	}
	return r
}

// finished returns the terminal test of a stream: whether every choice
// seen so far has its finish_reason (streamend.Choices), after each chunk
// — a chunk without choices (usage) leaves the answer as it was.
func finished() func(Chunk) bool {
	var choices streamend.Choices
	complete := false
	return func(c Chunk) bool {
		for _, ch := range c.Choices {
			complete = choices.Add(ch.Index, ch.FinishReason != "")
		}
		return complete
	}
}

// MapError types an openai-go error for hedging: an *openai.Error becomes
// an *sse.UpstreamError (status, type, code, message, Retry-After), an
// error payload mid-stream an *sse.UpstreamError with MidStream set, an
// item whose JSON does not parse an *sse.ProtocolError, and anything else
// an *sse.ConnectionError; once ctx is done, whatever the SDK reported, it
// is ctx's error (a cancelled request fails in many ways: a closed body, a
// reset, the context's own error, an answer that raced the cancel). Else
// the result unwraps to err. (Route's streams also type an error response
// the SDK cannot decode, from the response itself.)
func MapError(ctx context.Context, provider string, err error) error {
	return mapError(ctx, provider, err, nil)
}

// mapError is MapError with the stream's response, when known: an error
// status whose body openai-go could not decode (an "error": "text") is
// read as the raw route reads it.
func mapError(ctx context.Context, provider string, err error, resp *http.Response) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		if apiErr.Message == "" {
			// An error object without a message, or none the SDK reads:
			// the response says what it can.
			if ue, ok := streamend.Undecoded(provider, resp, err); ok {
				return ue
			}
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return sse.NewHTTPError(provider, apiErr.StatusCode, h, apiErr.Type, apiErr.Code, apiErr.Message, err)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return sse.NewPayloadError(provider, se.Event.Data, err)
	}
	if ue, ok := streamend.Undecoded(provider, resp, err); ok {
		return ue
	}
	if pe, ok := streamend.Malformed(provider, err); ok {
		return pe
	}
	return &sse.ConnectionError{Provider: provider, Err: err}
}

// boundErrorBody is the middleware that bounds the read of an error
// response's body (sse.BoundErrorBody): the SDK reads it whole before
// NewStreaming returns, and a body that stalls would hold the attempt
// past its 429 or 5xx. A stream's body has its end read when the SDK
// closes it at [DONE] (bodyend.AtDone), so that its HTTP/1.x connection
// is kept, and its events are bounded at the raw route's size
// (eventsize.Bound): the SDK's decoder bounds only a line.
func boundErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err == nil {
		sse.BoundErrorBody(resp)
		bodyend.AtDone(resp)
		eventsize.Bound(resp, sse.DefaultMaxEventSize)
	}
	return resp, err
}
