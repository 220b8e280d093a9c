package goopenai_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// newClient is a go-openai client of one fakellm profile, optionally with
// the keepalive tap.
func newClient(t *testing.T, up *adaptertest.Upstream, profile string, tap bool) *openai.Client {
	return clientOf(t, up.ProfileURL(profile), tap)
}

// clientOf is the client of newClient on the upstream at url.
func clientOf(t *testing.T, url string, tap bool) *openai.Client {
	cfg := openai.DefaultConfig("test")
	cfg.BaseURL = url + "/v1"
	cfg.HTTPClient = adaptertest.HTTPClient(t, adaptertest.ClientOptions{Tap: tap})
	return openai.NewClientWithConfig(cfg)
}

var req = openai.ChatCompletionRequest{
	Model:    "fake-model",
	Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
}

var adapter = adaptertest.Adapter[goopenai.Chunk]{Items: goopenai.Items}

// receive is go-openai's Recv loop: the first choice's content of each
// response up to io.EOF, and the error the loop ended with (nil at
// io.EOF). Every response must carry the first one's id, as the chunks of
// one completion do, resumed or not (Items.Relabel).
func receive(t testing.TB, stream *goopenai.Receiver) (string, error) {
	text, id := "", ""
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return text, nil
		}
		if err != nil {
			return text, err
		}
		switch {
		case id == "":
			id = resp.ID
		case resp.ID != "" && resp.ID != id: // a tapped keepalive has none
			t.Fatalf("a response of id %q after %q: one answer has one id", resp.ID, id)
		}
		if len(resp.Choices) > 0 {
			text += resp.Choices[0].Delta.Content
		}
	}
}

// recvText reads a call with receive, through a Receiver on the stream;
// closing the stream, which the Receiver's Close does, is the caller's.
func recvText(t testing.TB, hs *hedgeprobe.Stream[goopenai.Chunk]) (string, error) {
	return receive(t, goopenai.NewReceiver(hs))
}

// TestResponseOnSpan: go-openai's chunks from fakellm describe the
// response on the attempt span (the usage chunk needs include_usage,
// which the route asks for).
func TestResponseOnSpan(t *testing.T) {
	up := adaptertest.Start(t)
	adapter.CheckResponseOnSpan(t, goopenai.Route("steady", newClient(t, up, "steady", false), req, goopenai.RouteOptions{}), "chatcmpl-", "stop")
}

// TestHedgeStallToSteady: the stalling primary is hedged to the steady
// route, which wins; the caller's loop is go-openai's Recv loop, through
// Receiver.
func TestHedgeStallToSteady(t *testing.T) {
	up := adaptertest.Start(t)
	p := adapter.NewProber(t, adaptertest.StallToSteadyConfig)

	hs := p.Stream(t.Context(),
		goopenai.Route("stall", newClient(t, up, "stall", false), req, goopenai.RouteOptions{}),
		goopenai.Route("steady", newClient(t, up, "steady", false), req, goopenai.RouteOptions{}))
	stream := goopenai.NewReceiver(hs)
	defer stream.Close()
	text, err := receive(t, stream)
	if err != nil {
		t.Fatal(err)
	}

	adaptertest.StallToSteady{Stats: hs.Stats(), Text: text}.Check(t)
}

// TestTapTimesKeepalives: with the tap, the comments go-openai skips come
// out as Keepalive chunks, and they do not reset the stall watchdog.
func TestTapTimesKeepalives(t *testing.T) {
	up := adaptertest.Start(t)
	adapter.CheckTapKeepalives(t, goopenai.Route("stall", newClient(t, up, "stall", true), req, goopenai.RouteOptions{TapKeepalives: true}))
}

// TestErrorsTyped: the SDK's errors reach hedgeprobe typed, and the SDK's
// own error type stays reachable.
// TestRepliesTyped: answers the SDK reads its own way end as the raw
// route types them — a 200 that is not a stream and an undecodable error
// are not broken connections, one choice's end is not the stream's, an
// error page's message is its start.
func TestRepliesTyped(t *testing.T) {
	adapter.CheckReplies(t, adaptertest.ChatReplyCases, func(t *testing.T, url string) hedgeprobe.Route[goopenai.Chunk] {
		return goopenai.Route("r", clientOf(t, url, false), req, goopenai.RouteOptions{})
	})
}

// TestStalledErrorBody: go-openai has no middleware, so a 429 whose body
// stalls is bounded by the transport the docs ask for,
// sse.BoundErrorBodies (found by an outside review: go-openai reads the
// body whole, so the attempt waited for the caller's context). go-openai
// hands over no headers: no Retry-After.
func TestStalledErrorBody(t *testing.T) {
	adapter.CheckStalledErrorBody(t, func(url string) hedgeprobe.Route[goopenai.Chunk] {
		cfg := openai.DefaultConfig("test")
		cfg.BaseURL = url + "/v1"
		cfg.HTTPClient = &http.Client{Transport: sse.BoundErrorBodies(adaptertest.HTTPClient(t, adaptertest.ClientOptions{}).Transport)}
		return goopenai.Route("r", openai.NewClientWithConfig(cfg), req, goopenai.RouteOptions{})
	}, 0)
}

// TestAzureKeyStaysOnHost: go-openai sends Azure's api-key itself and
// follows a redirect to another host with it (found by an outside
// review); a client built with sse.HeadersStayOnHost, as the package doc
// asks, drops it there.
func TestAzureKeyStaysOnHost(t *testing.T) {
	seen := make(chan http.Header, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(target.Close)
	to := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(first.Close)
	cfg := openai.DefaultAzureConfig("sk-secret", first.URL)
	cfg.HTTPClient = sse.HeadersStayOnHost(adaptertest.HTTPClient(t, adaptertest.ClientOptions{}), "Api-Key")
	s := adapter.NewProber(t, hedgeprobe.Config{MaxAttempts: 1}).Stream(t.Context(), goopenai.Route("r", openai.NewClientWithConfig(cfg), req, goopenai.RouteOptions{}))
	for s.Next() {
	}
	_ = s.Close()
	h := <-seen
	if h.Get("Api-Key") != "" || h.Get("Authorization") != "" {
		t.Fatalf("the other host saw api-key %q, Authorization %q", h.Get("Api-Key"), h.Get("Authorization"))
	}
}

// TestErrorPayloadAfterComment: go-openai glues the comment lines before
// an error payload to it and cannot decode it; the adapter reports the
// payload as a transient mid-stream *sse.UpstreamError (found by an
// outside review: the call failed as a fatal ProtocolError, unhedged, with
// a healthy route beside it).
func TestErrorPayloadAfterComment(t *testing.T) {
	const first = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A\"}}]}\n\n"
	const payload = "data: {\"error\":{\"type\":\"server_error\",\"message\":\"upstream overloaded\"}}\n\n"
	serve := func(body string) string {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	for name, body := range map[string]string{
		"after a comment":     first + ": keepalive\n\n" + payload,
		"under event: error":  first + "event: error\n" + payload,
		"comment before data": ": PROCESSING\n\n" + first + payload,
	} {
		t.Run(name, func(t *testing.T) {
			s := adapter.NewProber(t, hedgeprobe.Config{MaxAttempts: 1}).Stream(t.Context(), goopenai.Route("r", clientOf(t, serve(body), false), req, goopenai.RouteOptions{}))
			text, err := recvText(t, s)
			_ = s.Close()
			var ue *sse.UpstreamError
			if text != "A" || !errors.As(err, &ue) || !ue.MidStream || !hedgeprobe.IsTransient(err) {
				t.Fatalf("text %q, err %T %v: want a transient mid-stream *sse.UpstreamError", text, err, err)
			}
		})
	}
	// Through Transport go-openai never sees the comment or event: line,
	// and reads the payload as the error it is, its type kept.
	for name, body := range map[string]string{
		"after a comment, Transport":    first + ": keepalive\n\n" + payload,
		"under event: error, Transport": first + "event: error\n" + payload,
	} {
		t.Run(name, func(t *testing.T) {
			s := adapter.NewProber(t, hedgeprobe.Config{MaxAttempts: 1}).Stream(t.Context(), goopenai.Route("r", transportClient(t, serve(body), 0), req, goopenai.RouteOptions{}))
			text, err := recvText(t, s)
			_ = s.Close()
			var ue *sse.UpstreamError
			if text != "A" || !errors.As(err, &ue) || !ue.MidStream || ue.Type != "server_error" || !hedgeprobe.IsTransient(err) {
				t.Fatalf("text %q, err %T %v: want a transient mid-stream *sse.UpstreamError of type server_error", text, err, err)
			}
		})
	}
	t.Run("hedged", func(t *testing.T) {
		bad := serve(": PROCESSING\n\n" + payload)
		good := serve(first + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		s := adapter.NewProber(t, hedgeprobe.Config{MaxAttempts: 2, HedgeAfter: time.Minute}).Stream(t.Context(),
			goopenai.Route("bad", clientOf(t, bad, false), req, goopenai.RouteOptions{}),
			goopenai.Route("good", clientOf(t, good, false), req, goopenai.RouteOptions{}))
		text, err := recvText(t, s)
		_ = s.Close()
		if err != nil || text != "A" {
			t.Fatalf("text %q, err %v: want the hedge's answer", text, err)
		}
	})
}

func TestErrorsTyped(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range append([]adaptertest.ErrorCase{
		adaptertest.RateLimitCase[*openai.APIError](0),
		adaptertest.MidStreamErrorCase("server_error"),
	}, adaptertest.CommonErrorCases...) {
		t.Run(tc.Profile, func(t *testing.T) {
			p := adapter.NewProber(t, hedgeprobe.Config{MaxAttempts: 1})
			stream := goopenai.NewReceiver(p.Stream(t.Context(), goopenai.Route(tc.Profile, newClient(t, up, tc.Profile, false), req, goopenai.RouteOptions{})))
			var err error
			for err == nil {
				_, err = stream.Recv()
			}
			_ = stream.Close()
			if errors.Is(err, io.EOF) {
				t.Fatalf("%s ended cleanly", tc.Profile)
			}
			tc.Check(t, err)
		})
	}
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
// SDK client sending through c.
func routeOn(c *http.Client, url, profile string) hedgeprobe.Route[goopenai.Chunk] {
	cfg := openai.DefaultConfig("test")
	cfg.BaseURL = url + "/v1"
	cfg.HTTPClient = c
	return goopenai.Route(profile, openai.NewClientWithConfig(cfg), req, goopenai.RouteOptions{})
}
