package anthropicgo_test

import (
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
)

// accumulateText is anthropic-sdk-go's usual loop — AsAny on the event and
// on its delta, and Message.Accumulate, which both read the event's raw
// JSON — returning the text read and the stream's error. The accumulated
// message must hold the same text.
func accumulateText(t testing.TB, stream *hedgeprobe.Stream[anthropicgo.Event]) (string, error) {
	text := ""
	message := anthropic.Message{}
	for stream.Next() {
		event := stream.Current()
		if err := message.Accumulate(event); err != nil {
			t.Fatal(err)
		}
		switch ev := event.AsAny().(type) {
		case anthropic.ContentBlockDeltaEvent:
			if d, ok := ev.Delta.AsAny().(anthropic.TextDelta); ok {
				text += d.Text
			}
		}
	}
	if stream.Err() == nil {
		acc := ""
		for _, b := range message.Content {
			acc += b.Text
		}
		if acc != text {
			t.Fatalf("Message.Accumulate has %q, the loop read %q", acc, text)
		}
	}
	return text, stream.Err()
}

// TestResume: a stream that falls silent after commit is continued on the
// next route that accepts a prefill, once, twice, past a route that
// refuses prefill; the caller reads the script byte for byte. The
// delivered text ends in a space (fakellm's chunks are words and a
// space), so every resume here trims it from the prefill and drops it
// from the continuation, which starts with it again.
func TestResume(t *testing.T) {
	adapter.CheckResumeCases(t, func(t *testing.T, up *adaptertest.Upstream, r adaptertest.RouteSpec) hedgeprobe.Route[anthropicgo.Event] {
		return anthropicgo.Route(r.Profile, newClient(t, up, r.Profile, false), params, anthropicgo.RouteOptions{Prefill: r.Continues})
	}, accumulateText)
}

// TestResumeAfterCallerPrefill: params that end in the caller's own
// assistant message are resumed with that message extended by the
// delivered text, not followed by a second assistant message.
func TestResumeAfterCallerPrefill(t *testing.T) {
	p := params
	p.Messages = append(slices.Clip(p.Messages), anthropic.NewAssistantMessage(anthropic.NewTextBlock(adaptertest.CallerPrefill)))
	adapter.CheckResumeAfterCallerPrefill(t, func(t *testing.T, up *adaptertest.Upstream, profile string) hedgeprobe.Route[anthropicgo.Event] {
		return anthropicgo.Route(profile, newClient(t, up, profile, false), p, anthropicgo.RouteOptions{Prefill: true})
	}, accumulateText)
	if got := p.Messages[1].OfAssistant.Content[0].OfText.Text; got != adaptertest.CallerPrefill {
		t.Fatalf("the caller's prefill changed: %q", got)
	}
}

// TestItemsText: text deltas and a text block's start are answer text;
// thinking is not; a tool_use block or its input cannot be continued.
func TestItemsText(t *testing.T) {
	adaptertest.CheckAnthropicText(t, anthropicgo.Items.Text)
}

// TestItemsOpening: message_start and content_block_start open an
// answer; the start of a block that is not text begins what follows it.
func TestItemsOpening(t *testing.T) {
	adaptertest.CheckOpening(t, adaptertest.AnthropicOpeningCases, anthropicgo.Items.Opening)
	adaptertest.CheckOpening(t, adaptertest.AnthropicFollowsCases, anthropicgo.Items.Follows)
}

// TestItemsResponse: the response's id, input tokens and finish reasons,
// for the attempt span.
func TestItemsResponse(t *testing.T) {
	adaptertest.CheckResponse(t, adaptertest.AnthropicResponseCases, anthropicgo.Items)
}

// TestResumeKeepsTheBlock: an answer whose text is block 1, after a
// thinking block, falls silent and is continued; the continuation's text
// comes in its own block 0, and Relabel moves it to block 1, so
// Message.Accumulate holds the thinking and the whole text each in its
// block (without it, the continuation's text would land on the thinking
// block). A continuation whose block start carries text does not start
// block 1 again (Message.Accumulate refuses that), and a space the
// prefill cut is read once.
func TestResumeKeepsTheBlock(t *testing.T) {
	adapter.CheckResumeKeepsTheBlock(t, func(t *testing.T, name, url string) hedgeprobe.Route[anthropicgo.Event] {
		client := anthropic.NewClient(option.WithBaseURL(url+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0),
			option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{})))
		return anthropicgo.Route(name, client, params, anthropicgo.RouteOptions{Prefill: true})
	}, accumulateBlocks)
}

// TestResumeAfterFollowing: a second resume continues a following
// continuation's own text block, and a resume before commit (Buffered)
// may follow the answer too; Message.Accumulate holds every block once.
func TestResumeAfterFollowing(t *testing.T) {
	adapter.CheckResumeAfterFollowing(t, func(t *testing.T, name, url string) hedgeprobe.Route[anthropicgo.Event] {
		client := anthropic.NewClient(option.WithBaseURL(url+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0),
			option.WithHTTPClient(adaptertest.HTTPClient(t, adaptertest.ClientOptions{})))
		return anthropicgo.Route(name, client, params, anthropicgo.RouteOptions{Prefill: true})
	}, accumulateBlocks)
}

// accumulateBlocks reads a call with Message.Accumulate and returns the
// message's blocks.
func accumulateBlocks(t testing.TB, stream *hedgeprobe.Stream[anthropicgo.Event]) ([]string, error) {
	message := anthropic.Message{}
	for stream.Next() {
		if err := message.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	var blocks []string
	for _, b := range message.Content {
		blocks = append(blocks, b.Type+":"+b.Thinking+b.Text+b.Name+string(b.Input))
	}
	return blocks, stream.Err()
}

// TestThinkingDoesNotContinue: params that turn extended thinking on make
// a route that cannot resume, whatever Prefill says: Anthropic takes no
// prefill with it.
func TestThinkingDoesNotContinue(t *testing.T) {
	client := anthropic.NewClient(option.WithBaseURL("http://127.0.0.1:1"))
	for _, c := range []struct {
		name     string
		thinking anthropic.ThinkingConfigParamUnion
		want     bool
	}{
		{"unset", anthropic.ThinkingConfigParamUnion{}, true},
		{"disabled", anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}, true},
		{"enabled", anthropic.ThinkingConfigParamOfEnabled(1024), false},
		{"adaptive", anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}, false},
	} {
		params := anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Thinking: c.thinking}
		if r := anthropicgo.Route("r", client, params, anthropicgo.RouteOptions{Prefill: true}); r.Continues != c.want {
			t.Errorf("%s: Continues %v, want %v", c.name, r.Continues, c.want)
		}
	}
	// Turned on by an override or an extra field instead.
	override := anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
		Thinking: param.Override[anthropic.ThinkingConfigParamUnion](map[string]any{"type": "enabled", "budget_tokens": 1024})}
	extra := anthropic.MessageNewParams{Model: "m", MaxTokens: 10}
	extra.SetExtraFields(map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}})
	for name, params := range map[string]anthropic.MessageNewParams{"override": override, "extra field": extra} {
		if r := anthropicgo.Route("r", client, params, anthropicgo.RouteOptions{Prefill: true}); r.Continues {
			t.Errorf("%s: Continues with thinking on", name)
		}
	}
}

// TestContinuationAsksForTheRest: a resume attempt after 30 content
// chunks asks for MaxTokens less 30 (sse.ContinuationLimit), also when
// the prefix is all whitespace and no prefill is sent; a primary asks for
// MaxTokens as it is.
func TestContinuationAsksForTheRest(t *testing.T) {
	up := adaptertest.CaptureBodies(t) // its answer is no Anthropic stream: only the request counts
	r := anthropicgo.Route("claude", clientOf(t, up.URL, false), params, anthropicgo.RouteOptions{Prefill: true})
	for _, tc := range []struct {
		name string
		a    hedgeprobe.Attempt
		want float64
	}{
		{"primary", hedgeprobe.Attempt{}, 100},
		{"resume", hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "Once", PrefixChunks: 30}, 70},
		{"resume, whitespace", hedgeprobe.Attempt{Index: 1, Trigger: hedgeprobe.TriggerResume, Prefix: "\n\n", PrefixChunks: 2}, 98},
	} {
		src, err := r.Open(t.Context(), tc.a)
		if err != nil {
			t.Fatal(err)
		}
		for src.Next() {
		}
		_ = src.Close()
		if got := up.Next(t)["max_tokens"]; got != tc.want {
			t.Errorf("%s: max_tokens %v, want %v", tc.name, got, tc.want)
		}
	}
}
