package openaigo_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
)

// newClient is an openai-go client of one fakellm profile, with the SDK's
// retries off as hedging wants, and optionally the keepalive tap.
func newClient(t *testing.T, up *adaptertest.Upstream, profile string, tap bool) openai.Client {
	return clientOf(t, up.ProfileURL(profile), tap)
}

// clientOf is the client of newClient on the upstream at url.
func clientOf(t *testing.T, url string, tap bool) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(url+"/v1/"),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{Tap: tap})),
	)
}

var params = openai.ChatCompletionNewParams{
	Model:    "fake-model",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
}

var adapter = adaptertest.Adapter[openaigo.Chunk]{Items: openaigo.Items}

// readText is openai-go's usual loop: the first choice's content of each
// chunk, and the stream's error at the end. The chunks also go to a
// ChatCompletionAccumulator, which must accept every one (resumed or not:
// Items.Relabel) and hold the same text, and each chunk's raw JSON — what
// a gateway relays — must say what its fields say.
func readText(t testing.TB, stream *hedgeprobe.Stream[openaigo.Chunk]) (string, error) {
	text := ""
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		chunk := stream.Current()
		checkRawJSON(t, chunk)
		if chunk.ID != "" && !acc.AddChunk(chunk) { // a tapped keepalive has no id
			t.Fatalf("ChatCompletionAccumulator refused chunk %q after %q", chunk.ID, acc.ID)
		}
		if len(chunk.Choices) > 0 {
			text += chunk.Choices[0].Delta.Content
		}
	}
	if len(acc.Choices) > 0 && acc.Choices[0].Message.Content != text {
		t.Fatalf("ChatCompletionAccumulator has %q, the loop read %q", acc.Choices[0].Message.Content, text)
	}
	return text, stream.Err()
}

// checkRawJSON fails the test when chunk's RawJSON, decoded anew, has
// another id, creation time, model or content than its fields: a
// continuation's chunk is relabelled, and a repeated prefix cut from it,
// in both (a tapped keepalive has no JSON).
func checkRawJSON(t testing.TB, chunk openaigo.Chunk) {
	t.Helper()
	if chunk.RawJSON() == "" {
		return
	}
	var raw openai.ChatCompletionChunk
	if err := raw.UnmarshalJSON([]byte(chunk.RawJSON())); err != nil {
		t.Fatalf("chunk's raw JSON %q: %v", chunk.RawJSON(), err)
	}
	content := func(c openai.ChatCompletionChunk) string {
		if len(c.Choices) == 0 {
			return ""
		}
		return c.Choices[0].Delta.Content
	}
	if raw.ID != chunk.ID || raw.Created != chunk.Created || raw.Model != chunk.Model || content(raw) != content(chunk) {
		t.Fatalf("chunk's raw JSON %q says id %q created %d model %q content %q; its fields %q %d %q %q",
			chunk.RawJSON(), raw.ID, raw.Created, raw.Model, content(raw), chunk.ID, chunk.Created, chunk.Model, content(chunk))
	}
}

// TestResponseOnSpan: openai-go's chunks from fakellm describe the
// response on the attempt span (the usage chunk needs include_usage,
// which the route asks for).
func TestResponseOnSpan(t *testing.T) {
	up := adaptertest.Start(t)
	adapter.CheckResponseOnSpan(t, openaigo.Route("steady", newClient(t, up, "steady", false), params, openaigo.RouteOptions{}), "chatcmpl-", "stop")
}

// TestHedgeStallToSteady: the primary stalls after chunk 5; holding 10
// chunks before commit, the stall trigger hedges to the steady route, which
// wins. The caller's loop is openai-go's usual one.
func TestHedgeStallToSteady(t *testing.T) {
	up := adaptertest.Start(t)
	p := adapter.NewProber(t, adaptertest.StallToSteadyConfig)

	stream := p.Stream(t.Context(),
		openaigo.Route("stall", newClient(t, up, "stall", false), params, openaigo.RouteOptions{}),
		openaigo.Route("steady", newClient(t, up, "steady", false), params, openaigo.RouteOptions{}))
	defer stream.Close()
	text, err := readText(t, stream)
	if err != nil {
		t.Fatal(err)
	}

	adaptertest.StallToSteady{Stats: stream.Stats(), Text: text}.Check(t)
}

// TestTapTimesKeepalives: with the tap, the comments openai-go drops come
// out as Keepalive chunks, and they do not reset the stall watchdog.
func TestTapTimesKeepalives(t *testing.T) {
	up := adaptertest.Start(t)
	adapter.CheckTapKeepalives(t, openaigo.Route("stall", newClient(t, up, "stall", true), params, openaigo.RouteOptions{TapKeepalives: true}))
}

// TestRepliesTyped: answers the SDK reads its own way end as the raw
// route types them — a 200 that is not a stream and an undecodable error
// are not broken connections, one choice's end is not the stream's.
func TestRepliesTyped(t *testing.T) {
	adapter.CheckReplies(t, adaptertest.ChatReplyCases, func(t *testing.T, url string) hedgeprobe.Route[openaigo.Chunk] {
		return openaigo.Route("r", clientOf(t, url, false), params, openaigo.RouteOptions{})
	})
}

// TestStalledErrorBody: a 429 whose body stalls fails its attempt within
// a second, with its Retry-After (found by an outside review: openai-go
// reads the body whole, so the attempt waited for the caller's context).
func TestStalledErrorBody(t *testing.T) {
	adapter.CheckStalledErrorBody(t, func(url string) hedgeprobe.Route[openaigo.Chunk] {
		return openaigo.Route("r", clientOf(t, url, false), params, openaigo.RouteOptions{})
	}, 30*time.Second)
}

// TestErrorsTyped: the SDK's errors reach hedgeprobe typed, and the SDK's
// own error type stays reachable.
func TestErrorsTyped(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range append([]adaptertest.ErrorCase{
		adaptertest.RateLimitCase[*openai.Error](20 * time.Millisecond),
		adaptertest.MidStreamErrorCase("server_error"),
	}, adaptertest.CommonErrorCases...) {
		t.Run(tc.Profile, func(t *testing.T) {
			p := adapter.NewProber(t, hedgeprobe.Config{MaxAttempts: 1})
			stream := p.Stream(t.Context(), openaigo.Route(tc.Profile, newClient(t, up, tc.Profile, false), params, openaigo.RouteOptions{}))
			for stream.Next() {
			}
			_ = stream.Close()
			tc.Check(t, stream.Err())
		})
	}
}

// A stream read to [DONE] leaves its HTTP/1.1 connection for the next:
// openai-go stops at [DONE] and closed the body before the chunked
// encoding's end, and every attempt dialled again.
func TestConnectionReused(t *testing.T) {
	adapter.CheckConnectionReused(t,
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
		func(url string) hedgeprobe.Route[openaigo.Chunk] {
			return openaigo.Route("r", clientOf(t, url, false), params, openaigo.RouteOptions{})
		})
}

// An event that never ends grew the SDK's buffer without a bound (outside
// review: 64 MiB); it now fails at the raw route's bound.
func TestEventBounded(t *testing.T) {
	adapter.CheckEventBounded(t, "",
		func(url string) hedgeprobe.Route[openaigo.Chunk] {
			return openaigo.Route("r", clientOf(t, url, false), params, openaigo.RouteOptions{})
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
func routeOn(c *http.Client, url, profile string) hedgeprobe.Route[openaigo.Chunk] {
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0), option.WithHTTPClient(c))
	return openaigo.Route(profile, client, params, openaigo.RouteOptions{})
}
