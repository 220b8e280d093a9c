package sse_test

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// The end-to-end tests run hedgeprobe over the raw-SSE routes against
// fakellm on 127.0.0.1, in real time, as adaptertest serves it: 100×
// faster (the profiles' 300 ms TTFT is 3 ms, a keepalive every 1 s one
// every 10 ms) but for the silences, 10× faster (the stall profile's 30 s
// silence lasts 3 s), so that no stalled stream recovers before the hedge
// or watchdog a test waits for, however loaded the machine.
func upstream(t *testing.T) string { return adaptertest.Start(t).URL() }

func client(t *testing.T) *http.Client {
	tr := sse.NewTransport(sse.TransportOptions{})
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func openaiRoute(t *testing.T, base, profile string) hedgeprobe.Route[sse.ChatChunk] {
	return openaiProfileRoute(t, base+"/p/"+profile, profile, sse.ContinueNone)
}

// openaiProfileRoute is the raw OpenAI route, named profile, of the
// fakellm profile at profileURL, continuing a resume in the way how.
func openaiProfileRoute(t *testing.T, profileURL, profile string, how sse.Continuation) hedgeprobe.Route[sse.ChatChunk] {
	return sse.OpenAIRoute(profile, sse.OpenAIRequest{
		BaseURL:  profileURL + "/v1",
		APIKey:   "test",
		Model:    "fake-model",
		Messages: []sse.Message{{Role: "user", Content: "hi"}},
		Client:   client(t),
		Continue: how,
	})
}

type result struct {
	content, keepalive int
	err                error
	stats              hedgeprobe.Stats
}

func run[T any](t *testing.T, p *hedgeprobe.Prober[T], classify hedgeprobe.Classifier[T], routes ...hedgeprobe.Route[T]) result {
	t.Helper()
	s := p.Stream(t.Context(), routes...)
	defer s.Close()
	var r result
	for s.Next() {
		switch classify(s.Current()) {
		case hedgeprobe.Content:
			r.content++
		case hedgeprobe.Keepalive:
			r.keepalive++
		}
	}
	r.err = s.Err()
	_ = s.Close()
	r.stats = s.Stats()
	return r
}

func newProber(t *testing.T, cfg hedgeprobe.Config) *hedgeprobe.Prober[sse.ChatChunk] {
	t.Helper()
	p, err := hedgeprobe.New(cfg, sse.OpenAIItems)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestE2EKeepalivesDoNotResetStallWatchdog: the stall profile sends a
// keepalive every 10 ms through a 3 s silence after chunk 5; with a 500 ms
// stall timeout the call must fail there, keepalives notwithstanding. A
// watchdog that keepalives reset would never fire, and chunk 6 would come
// at 3 s. The window is wide because this runs in real time: with 100 ms
// (and a 300 ms silence) a run under -race beside a busy loop saw only one
// keepalive before the watchdog fired — the server sends the ones it is
// late with at once when it catches up, but by then the call had ended.
// hedgeprobe's TestParityKeepalivesNeverReset checks the exact timing, in
// virtual time.
func TestE2EKeepalivesDoNotResetStallWatchdog(t *testing.T) {
	base := upstream(t)
	p := newProber(t, hedgeprobe.Config{MaxAttempts: 1, StallTimeout: 500 * time.Millisecond})
	r := run(t, p, sse.ClassifyOpenAI, openaiRoute(t, base, "stall"))
	var te *hedgeprobe.TimeoutError
	if !errors.As(r.err, &te) || te.Kind != hedgeprobe.TimeoutStall || !te.Truncated || te.ChunksDelivered != 5 {
		t.Fatalf("err = %v (%#v)", r.err, r.err)
	}
	if r.content != 5 || r.keepalive < 3 {
		t.Fatalf("content %d keepalives %d: want 5 and several", r.content, r.keepalive)
	}
}

// TestE2EErrorPayloadEndsCall: an error payload after chunk 3 ends the
// committed call with the typed error.
func TestE2EErrorPayloadEndsCall(t *testing.T) {
	base := upstream(t)
	p := newProber(t, hedgeprobe.Config{})
	r := run(t, p, sse.ClassifyOpenAI, openaiRoute(t, base, "error-mid"), openaiRoute(t, base, "steady"))
	var ue *sse.UpstreamError
	if !errors.As(r.err, &ue) || !ue.MidStream || ue.Message != "fakellm: scripted mid-stream error" {
		t.Fatalf("err = %v", r.err)
	}
	if r.content != 3 || r.stats.Outcome == hedgeprobe.OutcomeOK {
		t.Fatalf("content %d outcome %v", r.content, r.stats.Outcome)
	}
}

// TestE2EDisconnectIsAnError: a body cut after chunk 3, or ended cleanly
// without [DONE], is an error, never a success.
func TestE2EDisconnectIsAnError(t *testing.T) {
	base := upstream(t)
	for _, profile := range []string{"disconnect", "disconnect-clean"} {
		t.Run(profile, func(t *testing.T) {
			p := newProber(t, hedgeprobe.Config{MaxAttempts: 1})
			r := run(t, p, sse.ClassifyOpenAI, openaiRoute(t, base, profile))
			var ce *sse.ConnectionError
			if !errors.As(r.err, &ce) || !ce.Transient() || !hedgeprobe.IsTransient(r.err) {
				t.Fatalf("err = %v (%T)", r.err, r.err)
			}
			if profile == "disconnect-clean" && !errors.Is(r.err, io.ErrUnexpectedEOF) {
				t.Fatalf("err = %v, want io.ErrUnexpectedEOF", r.err)
			}
			if r.content != 3 || r.stats.Outcome == hedgeprobe.OutcomeOK {
				t.Fatalf("content %d outcome %v", r.content, r.stats.Outcome)
			}
		})
	}
}

// TestE2EHedgeFromStallToSteady: holding 10 chunks before commit, the
// stall trigger fires in the primary's silence and the steady hedge wins.
func TestE2EHedgeFromStallToSteady(t *testing.T) {
	base := upstream(t)
	p := newProber(t, hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, HedgeAfter: time.Second, MaxAttempts: 2})
	r := run(t, p, sse.ClassifyOpenAI, openaiRoute(t, base, "stall"), openaiRoute(t, base, "steady"))
	if r.err != nil || r.content != 40 || r.stats.Winner != 1 || r.stats.WinnerRoute != "steady" || len(r.stats.Attempts) != 2 {
		t.Fatalf("err %v content %d stats %+v", r.err, r.content, r.stats)
	}
	if a := r.stats.Attempts; a[1].Trigger != hedgeprobe.TriggerStall || a[0].Outcome != hedgeprobe.AttemptCanceled {
		t.Fatalf("attempts %+v", a)
	}
}

// TestE2EHedgeOnRateLimit: a 429 is transient, so the hedge launches at
// once, not after HedgeAfter, and wins.
func TestE2EHedgeOnRateLimit(t *testing.T) {
	base := upstream(t)
	p := newProber(t, hedgeprobe.Config{HedgeAfter: 10 * time.Second})
	r := run(t, p, sse.ClassifyOpenAI, openaiRoute(t, base, "ratelimit"), openaiRoute(t, base, "steady"))
	if r.err != nil || r.content != 40 || r.stats.Winner != 1 {
		t.Fatalf("err %v content %d stats %+v", r.err, r.content, r.stats)
	}
	// The hedge was launched by the 429 itself, not by the 10 s TTFT
	// delay: its trigger says so, without timing anything.
	if a := r.stats.Attempts; len(a) != 2 || a[1].Trigger != hedgeprobe.TriggerError {
		t.Fatalf("attempts %+v", a)
	}
}

// TestE2EBadRequestIsFatal: a 400 ends the call without a hedge.
func TestE2EBadRequestIsFatal(t *testing.T) {
	base := upstream(t)
	p := newProber(t, hedgeprobe.Config{})
	r := run(t, p, sse.ClassifyOpenAI, openaiRoute(t, base, "bad-request"), openaiRoute(t, base, "steady"))
	var ue *sse.UpstreamError
	if !errors.As(r.err, &ue) || ue.StatusCode != 400 || len(r.stats.Attempts) != 1 {
		t.Fatalf("err %v attempts %d", r.err, len(r.stats.Attempts))
	}
}

// TestE2EAnthropicRoute streams the Anthropic endpoint through hedgeprobe,
// pings included, and reads the output tokens.
func TestE2EAnthropicRoute(t *testing.T) {
	base := upstream(t)
	route := func(profile string) hedgeprobe.Route[sse.AnthropicEvent] {
		return sse.AnthropicRoute(profile, sse.AnthropicRequest{
			BaseURL: base + "/p/" + profile, APIKey: "k", Model: "claude-fake",
			Messages: []sse.Message{{Role: "user", Content: "hi"}}, Client: client(t),
		})
	}
	p, err := hedgeprobe.New(hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, HedgeAfter: time.Second, MaxAttempts: 2},
		sse.AnthropicItems)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, p, sse.ClassifyAnthropic, route("stall"), route("steady"))
	if r.err != nil || r.content != 40 || r.stats.WinnerRoute != "steady" {
		t.Fatalf("err %v content %d stats %+v", r.err, r.content, r.stats)
	}
}

// TestE2EHeterogeneousHedge: an OpenAI-compatible primary stalls and an
// Anthropic route, converted to chat chunks, wins the hedge.
func TestE2EHeterogeneousHedge(t *testing.T) {
	base := upstream(t)
	p := newProber(t, hedgeprobe.Config{HoldChunks: 10, StallAfter: 30 * time.Millisecond, HedgeAfter: time.Second, MaxAttempts: 2})
	anthropic := sse.AnthropicChatRoute("anthropic", sse.AnthropicRequest{
		BaseURL: base + "/p/steady", APIKey: "k", Model: "claude-fake",
		Messages: []sse.Message{{Role: "user", Content: "hi"}}, Client: client(t),
	})
	r := run(t, p, sse.ClassifyOpenAI, openaiRoute(t, base, "stall"), anthropic)
	if r.err != nil || r.content != 40 || r.stats.WinnerRoute != "anthropic" || r.stats.Attempts[1].Provider != "anthropic" {
		t.Fatalf("err %v content %d stats %+v", r.err, r.content, r.stats)
	}
}

// TestE2EConnectionsReleased: losers cancelled at the upstream, callers
// leaving at any point, and no connection held afterwards, over both raw
// routes.
func TestE2EConnectionsReleased(t *testing.T) {
	t.Run("openai", func(t *testing.T) { openAIAdapter.CheckConnectionsReleased(t, openAIRouteOn) })
	t.Run("anthropic", func(t *testing.T) { anthropicAdapter.CheckConnectionsReleased(t, anthropicRouteOn) })
}

// TestE2EFrozenConnectionRescued: over HTTP/2, a stall hedge on the same
// host escapes the primary's frozen connection on Lanes, and rides it on
// one transport, over both raw routes.
func TestE2EFrozenConnectionRescued(t *testing.T) {
	t.Run("openai", func(t *testing.T) { openAIAdapter.CheckFrozenConnectionRescue(t, openAIRouteOn) })
	t.Run("anthropic", func(t *testing.T) { anthropicAdapter.CheckFrozenConnectionRescue(t, anthropicRouteOn) })
}

// openAIRouteOn is the raw OpenAI route named profile to fakellm's
// profile at url, sending through c.
func openAIRouteOn(c *http.Client, url, profile string) hedgeprobe.Route[sse.ChatChunk] {
	return sse.OpenAIRoute(profile, sse.OpenAIRequest{
		BaseURL: url + "/v1", APIKey: "k", Model: "fake-model",
		Messages: []sse.Message{{Role: "user", Content: "hi"}}, Client: c,
	})
}

// anthropicRouteOn is the raw Anthropic route named profile to fakellm's
// profile at url, sending through c.
func anthropicRouteOn(c *http.Client, url, profile string) hedgeprobe.Route[sse.AnthropicEvent] {
	return sse.AnthropicRoute(profile, sse.AnthropicRequest{
		BaseURL: url, APIKey: "k", Model: "claude-fake",
		Messages: []sse.Message{{Role: "user", Content: "hi"}}, Client: c,
	})
}
