package anthropicgo

import (
	"context"
	"errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// Event is the item type of an anthropic-sdk-go Messages stream.
type Event = anthropic.MessageStreamEventUnion

// Classify is the hedgeprobe.Classifier of anthropic-sdk-go events, with
// the rule of sse.ClassifyAnthropic (sse.AnthropicEventKind):
// content_block_delta with a non-empty text_delta, thinking_delta or
// input_json_delta, or a citations_delta, is Content, and so is a
// content_block_start opening a named tool_use block or carrying text; an
// empty delta or an event without a type (a tapped keepalive; the SDK
// itself drops ping) is Keepalive; every other event is Control.
func Classify(e Event) hedgeprobe.Kind {
	d, b := &e.Delta, &e.ContentBlock
	return sse.AnthropicEventKind(sse.AnthropicEventParts{
		Type:      e.Type,
		DeltaType: d.Type, DeltaText: d.Text, DeltaThinking: d.Thinking, DeltaPartialJSON: d.PartialJSON,
		BlockType: b.Type, BlockText: b.Text, BlockThinking: b.Thinking, BlockName: b.Name,
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

// RouteOptions configures Route.
type RouteOptions struct {
	// Provider is the gen_ai.provider.name; default "anthropic".
	Provider string
	// RequestOptions are passed to every NewStreaming call, after the
	// client's own.
	RequestOptions []option.RequestOption
	// TapKeepalives yields an empty event (Keepalive) for each ping or
	// comment the client's sse.Tap saw, so hedgeprobe times the pings the
	// SDK drops. It needs the client built with
	// option.WithHTTPClient(&http.Client{Transport: &sse.Tap{}}).
	TapKeepalives bool
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
	open := func(ctx context.Context, _ hedgeprobe.Attempt) (hedgeprobe.Source[Event], error) {
		s := client.Messages.NewStreaming(ctx, params, o.RequestOptions...)
		return &sse.EndChecked[Event]{
			Source:     s,
			Provider:   o.Provider,
			MapError:   func(err error) error { return MapError(ctx, o.Provider, err) },
			Terminal:   func(e Event) bool { return e.Type == "message_stop" },
			CloseAtEnd: true,
		}, nil
	}
	r := hedgeprobe.Route[Event]{Name: name, Provider: o.Provider, Model: string(params.Model), Open: open}
	if o.TapKeepalives {
		r = sse.KeepaliveRoute(r)
	}
	return r
}

// MapError types an anthropic-sdk-go error for hedging: an
// *anthropic.Error becomes an *sse.UpstreamError (status, type, message,
// Retry-After; an "event: error" mid-stream has MidStream set), the
// context's own error stays as it is, and anything else is an
// *sse.ConnectionError. The result unwraps to err.
func MapError(ctx context.Context, provider string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return sse.HTTPError(provider, apiErr.StatusCode, h, string(apiErr.Type()), "", apiErr.Message, err)
	}
	return &sse.ConnectionError{Provider: provider, Err: err}
}
