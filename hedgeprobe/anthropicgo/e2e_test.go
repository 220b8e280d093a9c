package anthropicgo_test

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/fakellm/fakellmtest"
)

// scale runs fakellm 100× faster: a 30 s silence lasts 300 ms.
const scale = 0.01

func newClient(t *testing.T, base, profile string, tap bool) anthropic.Client {
	tr := sse.NewTransport(sse.TransportOptions{})
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if tap {
		rt = &sse.Tap{Base: tr}
	}
	return anthropic.NewClient(
		option.WithBaseURL(base+"/p/"+profile+"/"),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: rt}),
	)
}

var params = anthropic.MessageNewParams{
	Model:     "claude-fake",
	MaxTokens: 100,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
}

func newProber(t *testing.T, cfg hedgeprobe.Config) *hedgeprobe.Prober[anthropicgo.Event] {
	p, err := hedgeprobe.New(cfg, anthropicgo.Classify, hedgeprobe.WithTokenCount(anthropicgo.Tokens))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHedgeStallToSteady: the stalling primary is hedged to the steady
// route, which wins; the caller's loop is anthropic-sdk-go's usual one.
func TestHedgeStallToSteady(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	p := newProber(t, hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, HedgeAfter: time.Second})
	start := time.Now()

	stream := p.Stream(t.Context(),
		anthropicgo.Route("stall", newClient(t, ts.URL, "stall", false), params, anthropicgo.RouteOptions{}),
		anthropicgo.Route("steady", newClient(t, ts.URL, "steady", false), params, anthropicgo.RouteOptions{}))
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

	st := stream.Stats()
	if st.WinnerRoute != "steady" || st.ChunksDelivered != 40 || len(st.Attempts) != 2 || text == "" {
		t.Fatalf("stats %+v, text %q", st, text)
	}
	// The steady route was launched by the stall trigger, in the
	// primary's silence, and the primary lost.
	if a := st.Attempts; a[1].Trigger != hedgeprobe.TriggerStall || a[0].Outcome != hedgeprobe.AttemptCanceled {
		t.Fatalf("attempts %+v", a)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("call took %s", d)
	}
}

// TestTapTimesPings: with the tap, the pings the SDK drops come out as
// Keepalive events, and they do not reset the stall watchdog.
func TestTapTimesPings(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	p := newProber(t, hedgeprobe.Config{MaxAttempts: 1, StallTimeout: 100 * time.Millisecond})
	stream := p.Stream(t.Context(),
		anthropicgo.Route("stall", newClient(t, ts.URL, "stall", true), params, anthropicgo.RouteOptions{TapKeepalives: true}))
	defer stream.Close()
	keepalives := 0
	for stream.Next() {
		if anthropicgo.Classify(stream.Current()) == hedgeprobe.Keepalive {
			keepalives++
		}
	}
	var te *hedgeprobe.TimeoutError
	if !errors.As(stream.Err(), &te) || te.Kind != hedgeprobe.TimeoutStall || te.ChunksDelivered != 5 {
		t.Fatalf("err %v", stream.Err())
	}
	if keepalives < 3 {
		t.Fatalf("%d keepalives through the tap", keepalives)
	}
}

func TestErrorsTyped(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	for _, tc := range []struct {
		profile string
		check   func(t *testing.T, err error)
	}{
		{"ratelimit", func(t *testing.T, err error) {
			var ue *sse.UpstreamError
			var apiErr *anthropic.Error
			if !errors.As(err, &ue) || ue.StatusCode != 429 || ue.RetryAfter() != 20*time.Millisecond || !ue.Transient() || !errors.As(err, &apiErr) {
				t.Fatalf("err %v", err)
			}
		}},
		{"server-error", func(t *testing.T, err error) {
			var ue *sse.UpstreamError
			if !errors.As(err, &ue) || ue.StatusCode != 503 || ue.Type != "overloaded_error" || ue.RetryAfter() != 10*time.Millisecond {
				t.Fatalf("err %v", err)
			}
		}},
		{"bad-request", func(t *testing.T, err error) {
			if hedgeprobe.IsTransient(err) {
				t.Fatalf("400 transient: %v", err)
			}
		}},
		{"error-mid", func(t *testing.T, err error) {
			var ue *sse.UpstreamError
			if !errors.As(err, &ue) || !ue.MidStream || ue.Type != "overloaded_error" || !ue.Transient() {
				t.Fatalf("err %v", err)
			}
		}},
		{"disconnect", func(t *testing.T, err error) {
			var ce *sse.ConnectionError
			if !errors.As(err, &ce) || !hedgeprobe.IsTransient(err) {
				t.Fatalf("err %v", err)
			}
		}},
		{"disconnect-clean", func(t *testing.T, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("err %v: a clean EOF without message_stop passed as success", err)
			}
		}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			p := newProber(t, hedgeprobe.Config{MaxAttempts: 1})
			stream := p.Stream(t.Context(), anthropicgo.Route(tc.profile, newClient(t, ts.URL, tc.profile, false), params, anthropicgo.RouteOptions{}))
			for stream.Next() {
			}
			_ = stream.Close()
			tc.check(t, stream.Err())
		})
	}
}
