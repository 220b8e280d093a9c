package anthropicgo_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// newClient is an anthropic-sdk-go client of one fakellm profile, with
// the SDK's retries off as hedging wants, and optionally the keepalive tap.
func newClient(t *testing.T, up *adaptertest.Upstream, profile string, tap bool) anthropic.Client {
	return clientOf(t, up.ProfileURL(profile), tap)
}

// clientOf is the client of newClient on the upstream at url.
func clientOf(t *testing.T, url string, tap bool) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(url+"/"),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{Tap: tap})),
	)
}

var params = anthropic.MessageNewParams{
	Model:     "claude-fake",
	MaxTokens: 100,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
}

var adapter = adaptertest.Adapter[anthropicgo.Event]{Items: anthropicgo.Items}

// TestResponseOnSpan: anthropic-sdk-go's events from fakellm describe the
// response on the attempt span.
func TestResponseOnSpan(t *testing.T) {
	up := adaptertest.Start(t)
	adapter.CheckResponseOnSpan(t, anthropicgo.Route("steady", newClient(t, up, "steady", false), params, anthropicgo.RouteOptions{}), "msg_", "end_turn")
}

// TestHedgeStallToSteady: the stalling primary is hedged to the steady
// route, which wins; the caller's loop is anthropic-sdk-go's usual one.
func TestHedgeStallToSteady(t *testing.T) {
	up := adaptertest.Start(t)
	p := adapter.NewProber(t, adaptertest.StallToSteadyConfig)

	stream := p.Stream(t.Context(),
		anthropicgo.Route("stall", newClient(t, up, "stall", false), params, anthropicgo.RouteOptions{}),
		anthropicgo.Route("steady", newClient(t, up, "steady", false), params, anthropicgo.RouteOptions{}))
	defer stream.Close()
	text := ""
	for stream.Next() {
		event := stream.Current()
		if event.Type == "content_block_delta" {
			text += event.Delta.Text
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}

	adaptertest.StallToSteady{Stats: stream.Stats(), Text: text}.Check(t)
}

// TestTapTimesPings: with the tap, the pings the SDK drops come out as
// Keepalive events, and they do not reset the stall watchdog.
func TestTapTimesPings(t *testing.T) {
	up := adaptertest.Start(t)
	adapter.CheckTapKeepalives(t, anthropicgo.Route("stall", newClient(t, up, "stall", true), params, anthropicgo.RouteOptions{TapKeepalives: true}))
}

// TestRepliesTyped: answers the SDK reads its own way end as the raw
// route types them; after message_stop nothing more is read (a complete
// answer was reported as stalled, or failed on a reset).
func TestRepliesTyped(t *testing.T) {
	adapter.CheckReplies(t, adaptertest.AnthropicReplyCases, func(t *testing.T, url string) hedgeprobe.Route[anthropicgo.Event] {
		return anthropicgo.Route("r", clientOf(t, url, false), params, anthropicgo.RouteOptions{})
	})
}

// TestStalledErrorBody: a 429 whose body stalls fails its attempt within
// a second, with its Retry-After (found by an outside review:
// anthropic-sdk-go reads the body whole, so the attempt waited for the
// caller's context).
func TestStalledErrorBody(t *testing.T) {
	adapter.CheckStalledErrorBody(t, func(url string) hedgeprobe.Route[anthropicgo.Event] {
		return anthropicgo.Route("r", clientOf(t, url, false), params, anthropicgo.RouteOptions{})
	}, 30*time.Second)
}

func TestErrorsTyped(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range append([]adaptertest.ErrorCase{
		adaptertest.RateLimitCase[*anthropic.Error](20 * time.Millisecond),
		{Profile: "server-error", Check: func(t testing.TB, err error) {
			var ue *sse.UpstreamError
			if !errors.As(err, &ue) || ue.StatusCode != 503 || ue.Type != "overloaded_error" || ue.RetryAfter() != 10*time.Millisecond {
				t.Fatalf("err %v", err)
			}
		}},
		adaptertest.MidStreamErrorCase("overloaded_error"),
	}, adaptertest.CommonErrorCases...) {
		t.Run(tc.Profile, func(t *testing.T) {
			p := adapter.NewProber(t, hedgeprobe.Config{MaxAttempts: 1})
			stream := p.Stream(t.Context(), anthropicgo.Route(tc.Profile, newClient(t, up, tc.Profile, false), params, anthropicgo.RouteOptions{}))
			for stream.Next() {
			}
			_ = stream.Close()
			tc.Check(t, stream.Err())
		})
	}
}

// A stream read to message_stop leaves its HTTP/1.1 connection for the
// next: the adapter ends at message_stop and closed the body before the
// chunked encoding's end, and every attempt dialled again.
func TestConnectionReused(t *testing.T) {
	adapter.CheckConnectionReused(t, "event: message_start\n"+
		`data: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-fake","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}`+"\n\n"+
		"event: content_block_start\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n"+
		"event: content_block_delta\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`+"\n\n"+
		"event: content_block_stop\n"+`data: {"type":"content_block_stop","index":0}`+"\n\n"+
		"event: message_delta\n"+`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`+"\n\n"+
		"event: message_stop\n"+`data: {"type":"message_stop"}`+"\n\n",
		func(url string) hedgeprobe.Route[anthropicgo.Event] {
			return anthropicgo.Route("r", clientOf(t, url, false), params, anthropicgo.RouteOptions{})
		})
}

// An event that never ends grew the SDK's buffer without a bound (outside
// review: 64 MiB); it now fails at the raw route's bound.
func TestEventBounded(t *testing.T) {
	adapter.CheckEventBounded(t, "event: message_start\n"+
		`data: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-fake","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}`+"\n\n"+
		"event: content_block_delta\n",
		func(url string) hedgeprobe.Route[anthropicgo.Event] {
			return anthropicgo.Route("r", clientOf(t, url, false), params, anthropicgo.RouteOptions{})
		})
}

// TestConnectionsReleased: losers cancelled at the upstream, callers
// leaving at any point, and no connection held afterwards.
func TestConnectionsReleased(t *testing.T) {
	adapter.CheckConnectionsReleased(t, routeOn)
}

// TestFrozenConnectionRescued: over HTTP/2, a stall hedge on the same
// host escapes the primary's frozen connection on sse.Lanes, and rides
// it on one transport.
func TestFrozenConnectionRescued(t *testing.T) {
	adapter.CheckFrozenConnectionRescue(t, routeOn)
}

// routeOn is the route named profile to fakellm's profile at url, its
// SDK client sending through c, with no retries of its own.
func routeOn(c *http.Client, url, profile string) hedgeprobe.Route[anthropicgo.Event] {
	client := anthropic.NewClient(option.WithBaseURL(url+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0), option.WithHTTPClient(c))
	return anthropicgo.Route(profile, client, params, anthropicgo.RouteOptions{})
}
