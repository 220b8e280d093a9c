package openaigo_test

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/fakellm/fakellmtest"
)

// scale runs fakellm 100× faster: a 30 s silence lasts 300 ms.
const scale = 0.01

// newClient is an openai-go client of one fakellm profile, with the SDK's
// retries off as hedging wants, and optionally the keepalive tap.
func newClient(t *testing.T, base, profile string, tap bool) openai.Client {
	tr := sse.NewTransport(sse.TransportOptions{})
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if tap {
		rt = &sse.Tap{Base: tr}
	}
	return openai.NewClient(
		option.WithBaseURL(base+"/p/"+profile+"/v1/"),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: rt}),
	)
}

var params = openai.ChatCompletionNewParams{
	Model:    "fake-model",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
}

func newProber(t *testing.T, cfg hedgeprobe.Config) *hedgeprobe.Prober[openaigo.Chunk] {
	p, err := hedgeprobe.New(cfg, openaigo.Classify, hedgeprobe.WithTokenCount(openaigo.Tokens))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHedgeStallToSteady: the primary stalls after chunk 5; holding 10
// chunks before commit, the stall trigger hedges to the steady route, which
// wins. The caller's loop is openai-go's usual one.
func TestHedgeStallToSteady(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	p := newProber(t, hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, HedgeAfter: time.Second})
	start := time.Now()

	stream := p.Stream(t.Context(),
		openaigo.Route("stall", newClient(t, ts.URL, "stall", false), params, openaigo.RouteOptions{}),
		openaigo.Route("steady", newClient(t, ts.URL, "steady", false), params, openaigo.RouteOptions{}))
	defer stream.Close()
	text := ""
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) > 0 {
			text += chunk.Choices[0].Delta.Content
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}

	st := stream.Stats()
	if st.WinnerRoute != "steady" || st.ChunksDelivered != 40 || len(st.Attempts) != 2 || len(text) == 0 {
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

// TestTapTimesKeepalives: with the tap, the comments openai-go drops come
// out as Keepalive chunks, and they do not reset the stall watchdog.
func TestTapTimesKeepalives(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	p := newProber(t, hedgeprobe.Config{MaxAttempts: 1, StallTimeout: 100 * time.Millisecond})
	stream := p.Stream(t.Context(),
		openaigo.Route("stall", newClient(t, ts.URL, "stall", true), params, openaigo.RouteOptions{TapKeepalives: true}))
	defer stream.Close()
	keepalives := 0
	for stream.Next() {
		if openaigo.Classify(stream.Current()) == hedgeprobe.Keepalive {
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

// TestErrorsTyped: the SDK's errors reach hedgeprobe typed, and the SDK's
// own error type stays reachable.
func TestErrorsTyped(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	for _, tc := range []struct {
		profile string
		check   func(t *testing.T, err error)
	}{
		{"ratelimit", func(t *testing.T, err error) {
			var ue *sse.UpstreamError
			var apiErr *openai.Error
			if !errors.As(err, &ue) || ue.StatusCode != 429 || ue.RetryAfter() != 20*time.Millisecond || !ue.Transient() || !errors.As(err, &apiErr) {
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
			if !errors.As(err, &ue) || !ue.MidStream || ue.Type != "server_error" {
				t.Fatalf("err %v", err)
			}
		}},
		{"disconnect", func(t *testing.T, err error) {
			var ce *sse.ConnectionError
			if !errors.As(err, &ce) || !ce.Connected || !hedgeprobe.IsTransient(err) {
				t.Fatalf("err %v", err)
			}
		}},
		{"disconnect-clean", func(t *testing.T, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("err %v: a clean EOF without [DONE] passed as success", err)
			}
		}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			p := newProber(t, hedgeprobe.Config{MaxAttempts: 1})
			stream := p.Stream(t.Context(), openaigo.Route(tc.profile, newClient(t, ts.URL, tc.profile, false), params, openaigo.RouteOptions{}))
			for stream.Next() {
			}
			_ = stream.Close()
			tc.check(t, stream.Err())
		})
	}
}
