package anthropicgo

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/bodyend"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/classify"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/eventsize"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/prefill"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/streamend"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Event is the item type of an anthropic-sdk-go Messages stream.
type Event = anthropic.MessageStreamEventUnion

// Classify is the hedgeprobe.Classifier of anthropic-sdk-go events, with
// the rule of sse.ClassifyAnthropic: content_block_delta with a non-empty
// text_delta, thinking_delta or input_json_delta, or a citations_delta with
// a citation, is Content, and so is a content_block_start opening a named tool_use block
// or carrying text; an empty delta or an event without a type (a tapped keepalive; the SDK
// itself drops ping) is Keepalive; every other event is Control.
func Classify(e Event) hedgeprobe.Kind {
	d, b := &e.Delta, &e.ContentBlock
	return classify.Anthropic(classify.AnthropicParts{
		Type:      e.Type,
		DeltaType: d.Type, DeltaText: d.Text, DeltaThinking: d.Thinking, DeltaPartialJSON: d.PartialJSON,
		BlockType: b.Type, BlockText: b.Text, BlockThinking: b.Thinking, BlockName: b.Name,
		// Raw, not Valid: a citation of a shape the SDK does not know is
		// a citation still.
		DeltaCitation: hasCitation(d.JSON.Citation.Raw()),
	})
}

// Tokens is the hedgeprobe.TokenCount of anthropic-sdk-go events:
// usage.output_tokens of message_delta.
func Tokens(e Event) (int64, bool) {
	if e.Type != "message_delta" || !e.JSON.Usage.Valid() {
		return 0, false
	}
	return e.Usage.OutputTokens, true
}

// inputTokens reads the input tokens of message_start: input_tokens plus
// the cache's reads and writes, which Anthropic counts apart and the GenAI
// conventions count in. Those of message_delta's cumulative usage are not
// read, as in sse.AnthropicItems: the API may send them in part (null
// cache counts), and the part would replace the whole. As there too, 0 is
// not reported: no prompt has no token.
func inputTokens(e Event) (int64, bool) {
	if e.Type != "message_start" {
		return 0, false
	}
	u := &e.Message.Usage
	n := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	return n, n > 0 && e.Message.JSON.Usage.Valid()
}

// Items tells a hedgeprobe.Prober about anthropic-sdk-go events:
// Classify, Tokens, the response's model and id (message_start), its input
// tokens and stop reason, and Text and Relabel for resume.
var Items = hedgeprobe.Items[Event]{
	Classify:     Classify,
	OutputTokens: Tokens,
	ResponseModel: func(e Event) (string, bool) {
		return e.Message.Model, e.Type == "message_start" && e.Message.Model != ""
	},
	ResponseID: func(e Event) (string, bool) {
		return e.Message.ID, e.Type == "message_start" && e.Message.ID != ""
	},
	InputTokens: inputTokens,
	FinishReasons: func(e Event, finished func(int, string)) {
		if e.Type == "message_delta" {
			finished(0, string(e.Delta.StopReason))
		}
	},
	Text:         Text,
	Relabel:      Relabel,
	Follows:      Follows,
	RelabelAfter: RelabelAfter,
	Opening:      Opening,
}

// RouteOptions configures Route.
type RouteOptions struct {
	// Provider is the gen_ai.provider.name; default "anthropic".
	Provider string
	// RequestOptions are passed to every NewStreaming call, after the
	// client's own. The route adds option.WithResponseInto of its own,
	// last, to type what the SDK cannot (a 200 that is not a stream, an
	// undecodable error): one in RequestOptions is not filled. It adds a
	// middleware too, which gives the body of an error response a second
	// to arrive (sse.BoundErrorBody).
	RequestOptions []option.RequestOption
	// TapKeepalives yields an empty event (Keepalive) for each ping or
	// comment the client's sse.Tap saw, so hedgeprobe times the pings the
	// SDK drops. It needs the client built with
	// option.WithHTTPClient(&http.Client{Transport: &sse.Tap{}}).
	TapKeepalives bool
	// Prefill says the model accepts a trailing assistant message (a
	// prefill) and continues it: the route can resume (Route.Continues,
	// docs/design.md §2 rule 10). A resume attempt sends the delivered text
	// as the prefill, less its trailing whitespace (Anthropic refuses a
	// prefill that ends in whitespace), and drops that whitespace from the
	// start of the continuation where the model repeats it, so the caller
	// reads it once (as much of it as the model repeats: of "Hi \n" cut to
	// "Hi", a continuation " x" reads "x"); a delivered text of whitespace alone is sent as no
	// prefill at all, and the continuation is then a fresh answer after
	// that whitespace. Params that already end in an assistant message (the
	// caller's own prefill) are resumed with that message extended by the
	// delivered text: in its last text block, or in a block of its own
	// after a block that is not text or is marked for caching (a message
	// written as an override or with extra fields is followed by a second
	// assistant message instead, which Anthropic's API merges). Newer
	// Claude models refuse prefill with a 400: a resume there fails as
	// refused, and the route is not asked again for a while. Params that
	// turn extended thinking on (Thinking, or a "thinking" extra field,
	// other than disabled) never resume, whatever Prefill says: Anthropic
	// takes no prefill with it. RequestOptions are not looked into:
	// thinking set there needs Prefill off.
	Prefill bool
}

// Route returns a hedgeprobe route named name that streams params with
// client. Each attempt calls client.Messages.NewStreaming with the
// attempt's context; its stream (a hedgeprobe.Source as it is) is wrapped
// only to type its errors for hedging (MapError) and to turn a stream that
// ends without message_stop into an error (the SDK reports a body cut
// short as a clean end).
//
// Build client with option.WithMaxRetries(0): under hedging a retry is
// another attempt, which hedgeprobe launches and budgets itself.
func Route(name string, client anthropic.Client, params anthropic.MessageNewParams, o RouteOptions) hedgeprobe.Route[Event] {
	if o.Provider == "" {
		o.Provider = "anthropic"
	}
	open := func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[Event], error) {
		params, cut := params, ""
		if a.Trigger == hedgeprobe.TriggerResume && o.Prefill {
			// Without text to send (the prefix is all whitespace; an
			// empty prefill is refused too) the model answers afresh,
			// and the cut whitespace is dropped from that.
			var sent string
			if sent, cut = prefill.Trim(a.Prefix); sent != "" {
				params.Messages = continuation(params.Messages, sent)
			}
			params.MaxTokens = sse.ContinuationLimit(params.MaxTokens, a.PrefixChunks)
		}
		var resp *http.Response
		s := client.Messages.NewStreaming(ctx, params, append(slices.Clip(o.RequestOptions), option.WithMiddleware(boundErrorBody), option.WithResponseInto(&resp))...)
		if err := streamend.Opened(o.Provider, resp); err != nil {
			_ = s.Close()
			return nil, err
		}
		src := &streamend.Checked[Event]{
			Source:        s,
			Provider:      o.Provider,
			MapError:      func(err error) error { return mapError(ctx, o.Provider, err, resp) },
			Terminal:      func(e Event) bool { return e.Type == "message_stop" },
			EndAtTerminal: true,
			CloseAtEnd:    true,
			Responded:     resp != nil,
			Drain:         func() { bodyend.Drain(resp) },
		}
		if a.Trigger == hedgeprobe.TriggerResume && o.Prefill {
			return &continued{Source: src, u: prefill.NewUncut(cut)}, nil
		}
		return src, nil
	}
	r := hedgeprobe.Route[Event]{Name: name, Provider: o.Provider, Model: string(params.Model), Open: open,
		Continues: o.Prefill && !prefill.Thinks(params.Thinking) && !prefill.Thinks(params.ExtraFields()["thinking"])}
	if o.TapKeepalives {
		r = sse.KeepaliveRoute(r)
	}
	return r
}

// MapError types an anthropic-sdk-go error for hedging: an
// *anthropic.Error becomes an *sse.UpstreamError (status, type, message,
// Retry-After; an "event: error" mid-stream has MidStream set), an event
// whose JSON does not parse an *sse.ProtocolError, and anything else an
// *sse.ConnectionError; once ctx is done, whatever the SDK reported, it is
// ctx's error (a cancelled request fails in many ways). Else the result
// unwraps to err. (Route's streams also type an error response
// the SDK cannot decode, from the response itself.)
func MapError(ctx context.Context, provider string, err error) error {
	return mapError(ctx, provider, err, nil)
}

// mapError is MapError with the stream's response, when known: an error
// status whose body the SDK could not decode is read as the raw route
// reads it.
func mapError(ctx context.Context, provider string, err error, resp *http.Response) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		if apiErr.Message == "" {
			// The SDK found no error object it reads ("error": "text", a
			// proxy's page): the response says what it can.
			if ue, ok := streamend.Undecoded(provider, resp, err); ok {
				return ue
			}
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return sse.NewHTTPError(provider, apiErr.StatusCode, h, string(apiErr.Type()), "", apiErr.Message, err)
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
// past its 429 or 5xx. A stream's events are bounded at the raw route's
// size (eventsize.Bound): the SDK's decoder bounds only a line.
func boundErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err == nil {
		sse.BoundErrorBody(resp)
		eventsize.Bound(resp, sse.DefaultMaxEventSize)
	}
	return resp, err
}

// hasCitation reports whether a delta's citation, as it came (raw JSON),
// is there: present and not null.
func hasCitation(raw string) bool {
	raw = strings.TrimSpace(raw)
	return raw != "" && raw != "null"
}
