package goopenai_test

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/fakellm/fakellmtest"
)

// scale runs fakellm 100× faster: a 30 s silence lasts 300 ms.
const scale = 0.01

func newClient(t *testing.T, base, profile string, tap bool) *openai.Client {
	tr := sse.NewTransport(sse.TransportOptions{})
	t.Cleanup(tr.CloseIdleConnections)
	cfg := openai.DefaultConfig("test")
	cfg.BaseURL = base + "/p/" + profile + "/v1"
	cfg.HTTPClient = &http.Client{Transport: tr}
	if tap {
		cfg.HTTPClient = &http.Client{Transport: &sse.Tap{Base: tr}}
	}
	return openai.NewClientWithConfig(cfg)
}

var req = openai.ChatCompletionRequest{
	Model:    "fake-model",
	Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
}

func newProber(t *testing.T, cfg hedgeprobe.Config) *hedgeprobe.Prober[goopenai.Chunk] {
	p, err := hedgeprobe.New(cfg, goopenai.Classify, hedgeprobe.WithTokenCount(goopenai.Tokens))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHedgeStallToSteady: the stalling primary is hedged to the steady
// route, which wins; the caller's loop is go-openai's Recv loop, through
// Receiver.
func TestHedgeStallToSteady(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	p := newProber(t, hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, HedgeAfter: time.Second})
	start := time.Now()

	hs := p.Stream(t.Context(),
		goopenai.Route("stall", newClient(t, ts.URL, "stall", false), req, goopenai.RouteOptions{}),
		goopenai.Route("steady", newClient(t, ts.URL, "steady", false), req, goopenai.RouteOptions{}))
	stream := goopenai.NewReceiver(hs)
	defer stream.Close()
	text := ""
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) > 0 {
			text += resp.Choices[0].Delta.Content
		}
	}

	st := hs.Stats()
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

// TestTapTimesKeepalives: with the tap, the comments go-openai skips come
// out as Keepalive chunks, and they do not reset the stall watchdog.
func TestTapTimesKeepalives(t *testing.T) {
	ts := fakellmtest.Start(t, scale)
	p := newProber(t, hedgeprobe.Config{MaxAttempts: 1, StallTimeout: 100 * time.Millisecond})
	stream := p.Stream(t.Context(),
		goopenai.Route("stall", newClient(t, ts.URL, "stall", true), req, goopenai.RouteOptions{TapKeepalives: true}))
	defer stream.Close()
	keepalives := 0
	for stream.Next() {
		if goopenai.Classify(stream.Current()) == hedgeprobe.Keepalive {
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
			var apiErr *openai.APIError
			if !errors.As(err, &ue) || ue.StatusCode != 429 || !ue.Transient() || !errors.As(err, &apiErr) {
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
			if !errors.As(err, &ce) || !hedgeprobe.IsTransient(err) {
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
			stream := goopenai.NewReceiver(p.Stream(t.Context(), goopenai.Route(tc.profile, newClient(t, ts.URL, tc.profile, false), req, goopenai.RouteOptions{})))
			var err error
			for err == nil {
				_, err = stream.Recv()
			}
			_ = stream.Close()
			if errors.Is(err, io.EOF) {
				t.Fatalf("%s ended cleanly", tc.profile)
			}
			tc.check(t, err)
		})
	}
}
