package sse_test

import (
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

var (
	openAIAdapter    = adaptertest.Adapter[sse.ChatChunk]{Items: sse.OpenAIItems}
	anthropicAdapter = adaptertest.Adapter[sse.AnthropicEvent]{Items: sse.AnthropicItems}
)

// itemsText reads a stream to its end with items.Text and returns the
// answer text and the stream's error.
func itemsText[T any](items hedgeprobe.Items[T]) adaptertest.ReadFunc[T] {
	return func(_ testing.TB, s *hedgeprobe.Stream[T]) (string, error) {
		text := ""
		for s.Next() {
			chunk, _ := items.Text(s.Current())
			text += chunk
		}
		return text, s.Err()
	}
}

// TestE2EResumeOpenAI: the raw OpenAI route resumes a stalled stream on
// the next route that continues, once, twice, past a refusal, or leaves it
// to the watchdog; the caller reads fakellm's script byte for byte.
func TestE2EResumeOpenAI(t *testing.T) {
	openAIAdapter.CheckResumeCases(t, func(t *testing.T, up *adaptertest.Upstream, r adaptertest.RouteSpec) hedgeprobe.Route[sse.ChatChunk] {
		return openAIResumeRoute(t, up, r.Profile, r.Continuation())
	}, itemsText(sse.OpenAIItems))
}

// TestE2EResumeSwitches: continue_final_message and "prefix": true reach
// the wire — fakellm's profiles that need them answer afresh without.
func TestE2EResumeSwitches(t *testing.T) {
	openAIAdapter.CheckResumeSwitches(t, openAIResumeRoute, itemsText(sse.OpenAIItems))
}

// TestE2EResumeAnthropic: the raw Anthropic route resumes with a prefill;
// the delivered text ends in a space, which the prefill loses and the
// continuation repeats, and the caller reads it once.
func TestE2EResumeAnthropic(t *testing.T) {
	anthropicAdapter.CheckResumeCases(t, func(t *testing.T, up *adaptertest.Upstream, r adaptertest.RouteSpec) hedgeprobe.Route[sse.AnthropicEvent] {
		return sse.AnthropicRoute(r.Profile, sse.AnthropicRequest{
			BaseURL:  up.ProfileURL(r.Profile),
			APIKey:   "test",
			Model:    "claude-fake",
			Messages: []sse.Message{{Role: "user", Content: "hi"}},
			Client:   client(t),
			Prefill:  r.Continues,
		})
	}, itemsText(sse.AnthropicItems))
}

// openAIResumeRoute is the raw OpenAI route of one fakellm profile that
// continues in the way how.
func openAIResumeRoute(t *testing.T, up *adaptertest.Upstream, profile string, how sse.Continuation) hedgeprobe.Route[sse.ChatChunk] {
	return openaiProfileRoute(t, up.ProfileURL(profile), profile, how)
}

// TestChatTextCases: ChatText reads the chunks every OpenAI adapter's
// Items.Text reads alike (a last text with its finish reason ends the
// answer: not resumable).
func TestChatTextCases(t *testing.T) { adaptertest.CheckChatText(t, sse.ChatText) }
